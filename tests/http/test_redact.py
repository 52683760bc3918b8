from __future__ import annotations

import base64
from urllib.parse import quote

import pytest

from gateway.kernel.redaction import MARKER, Redactor


def test_text_and_encoded_forms_are_redacted() -> None:
    secret = "s3cr3t/key+value="
    redactor = Redactor([secret])
    for form in (secret, quote(secret, safe=""), base64.b64encode(secret.encode()).decode()):
        assert redactor.text(f"echo: {form}!") == f"echo: {MARKER}!"


def test_value_recurses_and_leaves_other_data() -> None:
    redactor = Redactor(["tok-123456"])
    value = {"tok-123456": ["a tok-123456 b", 5, None], "n": 1.5}
    assert redactor.value(value) == {MARKER: [f"a {MARKER} b", 5, None], "n": 1.5}


def test_basic_credential_and_learned_tokens() -> None:
    redactor = Redactor()
    redactor.add_basic("alice", "wonderland")
    redactor.add("late-token-xyz")
    encoded = base64.b64encode(b"alice:wonderland").decode()
    assert MARKER in redactor.text(f"Basic {encoded}")
    assert redactor.text("late-token-xyz and wonderland") == f"{MARKER} and {MARKER}"


def test_short_and_empty_secrets_are_ignored() -> None:
    redactor = Redactor(["", None, "ab"])
    assert not redactor
    assert redactor.text("ab cd") == "ab cd"


def test_a_value_without_a_secret_is_returned_as_it_is() -> None:
    redactor = Redactor(["tok-123456"])
    value = {"items": [{"title": "tok-12345 is not it", "n": 1}], "more": None}
    assert redactor.value(value) is value


def test_a_secret_json_would_escape_is_still_found_in_a_nested_value() -> None:
    secret = 'pa"ss\\word'  # its JSON text is escaped, so the JSON prescan cannot see it: the walk must
    redactor = Redactor([secret])
    assert redactor.value([{"echo": f"got {secret}"}]) == [{"echo": f"got {MARKER}"}]


def test_a_value_json_cannot_write_is_walked() -> None:
    redactor = Redactor(["tok-123456"])
    assert redactor.value({1: "tok-123456", "k": ("tok-123456", object)}) == {1: MARKER, "k": [MARKER, object]}


def test_a_token_learned_later_is_found_by_the_prescan() -> None:
    redactor = Redactor(["tok-123456"])
    redactor.add("late-token-xyz")
    assert redactor.value({"a": ["late-token-xyz"]}) == {"a": [MARKER]}


@pytest.mark.parametrize("others", [0, 4], ids=["form by form", "one pattern"])
def test_found_in_finds_a_secret_in_any_form_anywhere_in_a_value_and_nothing_else(others: int) -> None:
    """`found_in` (what a call's arguments may not carry): every form, at any depth, in a key too; a number whose
    digits spell a secret is no secret (the JSON text's hit is confirmed on the value's strings). With more secrets
    than a few the forms are searched as one pattern (`PATTERN_FROM`): the same answers."""
    from gateway.kernel.redaction import PATTERN_FROM

    secret, digits = "tok-0123456789abcdef", "31415926"
    redactor = Redactor([secret, digits, *(f"other-secret-{n:04}" for n in range(others))])
    assert (redactor._json_pattern is not None) == (len(redactor._json_variants) > PATTERN_FROM)
    payload = base64.b64encode(f'{{"a": 1, "key": "{secret}"}}'.encode()).decode()
    for carrying in ({"q": secret}, {"deep": [{"x": f"see {quote(secret, safe='')}"}]}, {secret: 1},
                     {"blob": payload}, {"q": f'say "{secret}"'}, f"plain {secret}"):
        assert redactor.found_in(carrying), carrying
    for clean in ({"q": "tok-0123"}, {"n": 31415926}, {"n": [31415926.5]}, None, 7, {"q": "fine"}):
        assert not redactor.found_in(clean), clean
    assert not Redactor().found_in({"q": secret})
