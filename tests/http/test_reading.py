from __future__ import annotations

import json

from gateway.http.reading import ReadBody, shape
from gateway.kernel.redaction import Redactor
from gateway.truncation import cut_text_at_boundary, shrink_json


def test_shrink_json_keeps_whole_items_and_says_what_was_left_out() -> None:
    value = [{"n": i, "text": "x" * 20} for i in range(500)]
    cut, truncated = shrink_json(value, 1000)
    assert truncated
    assert cut[:-1] == value[: len(cut) - 1]
    assert cut[-1].startswith(f"[… truncated: {500 - (len(cut) - 1)} more items")
    assert len(json.dumps(cut)) <= 1100


def test_shrink_json_descends_into_the_field_that_does_not_fit() -> None:
    value = {"total": 3, "items": list(range(5000)), "next": "cursor"}
    cut, truncated = shrink_json(value, 1500)
    assert truncated and cut["total"] == 3
    assert cut["items"][:10] == list(range(10))
    assert "1 more fields" in cut["_truncated"]


def test_small_json_is_untouched() -> None:
    value = {"a": [1, 2, 3]}
    assert shrink_json(value, 1000) == (value, False)


def test_text_is_cut_at_a_line_boundary_with_a_marker() -> None:
    text = "\n".join(f"line {i:04d}" for i in range(1000))
    cut, truncated = cut_text_at_boundary(text, 500, len(text))
    head, marker = cut.rsplit("\n[", 1)
    assert truncated and text.startswith(head) and head.endswith(tuple("0123456789"))
    assert marker.startswith(f"… truncated: {len(text) - len(head)} of {len(text)} bytes left out")


def test_multibyte_text_is_never_cut_inside_a_character() -> None:
    cut, _ = cut_text_at_boundary("é" * 1000, 300, 2000)
    cut.encode("utf-8")
    assert cut.startswith("é" * 50)


def test_shape_redacts_before_cutting_and_reports_media_type() -> None:
    read = ReadBody(data=json.dumps({"token": "secret-abcdef"}).encode(), complete=True, declared_length=None)
    shaped = shape(read, "application/problem+json; charset=utf-8", 1000, Redactor(["secret-abcdef"]))
    assert shaped.media_type == "application/problem+json"
    assert shaped.body == {"token": "[REDACTED]"}


def test_shape_of_an_incomplete_body_says_at_least() -> None:
    read = ReadBody(data=b"a" * 5000, complete=False, declared_length=None)
    shaped = shape(read, "text/plain", 100, Redactor())
    assert shaped.truncated and "at least" in shaped.body
