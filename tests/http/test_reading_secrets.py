"""`shape` skips the walk over a parsed body only when no secret can be in it."""

from __future__ import annotations

import json

from gateway.http.reading import ReadBody, shape
from gateway.kernel.redaction import MARKER, Redactor

SECRET = "tok-very-secret-99"


def _shape(raw: bytes) -> object:
    read = ReadBody(data=raw, complete=True, declared_length=len(raw))
    return shape(read, "application/json", 64_000, Redactor([SECRET])).body


def test_a_body_without_secrets_comes_back_as_parsed() -> None:
    body = {"items": [{"id": i, "name": f"item {i}"} for i in range(5)]}
    assert _shape(json.dumps(body).encode()) == body


def test_a_secret_in_a_value_or_a_key_is_redacted() -> None:
    shaped = _shape(json.dumps({"echo": f"Bearer {SECRET}", SECRET: 1}).encode())
    assert shaped == {"echo": f"Bearer {MARKER}", MARKER: 1}


def test_a_secret_hidden_by_json_escapes_is_still_redacted() -> None:
    escaped = "".join(f"\\u{ord(c):04x}" for c in SECRET)
    shaped = _shape(b'{"echo": "' + escaped.encode() + b'"}')
    assert shaped == {"echo": MARKER}
