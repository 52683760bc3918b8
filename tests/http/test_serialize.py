"""Parameter styles against the examples of the OpenAPI 3 style table (`color` = blue / array / object)."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from gateway.catalog import Argument
from gateway.errors import ArgumentError
from gateway.http.serialize import (
    encode,
    serialize_cookie,
    serialize_header,
    serialize_path,
    serialize_query,
    to_text,
)

PRIMITIVE = "blue"
ARRAY = ["blue", "black", "brown"]
OBJECT = {"R": 100, "G": 200, "B": 150}


def _arg(location: str, style: str, explode: bool, **kw: object) -> Argument:
    return Argument(name="color", location=location, wire_name="color", style=style, explode=explode, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("style", "explode", "value", "expected"),
    [
        ("simple", False, PRIMITIVE, "blue"),
        ("simple", False, ARRAY, "blue,black,brown"),
        ("simple", True, ARRAY, "blue,black,brown"),
        ("simple", False, OBJECT, "R,100,G,200,B,150"),
        ("simple", True, OBJECT, "R=100,G=200,B=150"),
        ("label", False, PRIMITIVE, ".blue"),
        ("label", False, ARRAY, ".blue,black,brown"),
        ("label", True, ARRAY, ".blue.black.brown"),
        ("label", False, OBJECT, ".R,100,G,200,B,150"),
        ("label", True, OBJECT, ".R=100.G=200.B=150"),
        ("matrix", False, PRIMITIVE, ";color=blue"),
        ("matrix", False, ARRAY, ";color=blue,black,brown"),
        ("matrix", True, ARRAY, ";color=blue;color=black;color=brown"),
        ("matrix", False, OBJECT, ";color=R,100,G,200,B,150"),
        ("matrix", True, OBJECT, ";R=100;G=200;B=150"),
        ("matrix", False, "", ";color"),
    ],
)
def test_path_styles(style: str, explode: bool, value: object, expected: str) -> None:
    assert serialize_path(_arg("path", style, explode), value) == expected


@pytest.mark.parametrize("value", ["a/b", "a?b", "a#b", "a%2Fb", "../x", "a b", "ä"])
def test_path_values_cannot_add_segments_query_or_fragment(value: str) -> None:
    encoded = serialize_path(_arg("path", "simple", False), value)
    assert not any(c in encoded for c in "/?# ")
    assert encoded.count("%") >= 1


def test_empty_simple_path_value_is_refused() -> None:
    with pytest.raises(ArgumentError, match="color"):
        serialize_path(_arg("path", "simple", False), "")


@pytest.mark.parametrize(
    ("style", "explode", "value", "expected"),
    [
        ("form", True, PRIMITIVE, ["color=blue"]),
        ("form", False, ARRAY, ["color=blue,black,brown"]),
        ("form", True, ARRAY, ["color=blue", "color=black", "color=brown"]),
        ("form", False, OBJECT, ["color=R,100,G,200,B,150"]),
        ("form", True, OBJECT, ["R=100", "G=200", "B=150"]),
        ("spaceDelimited", False, ARRAY, ["color=blue%20black%20brown"]),
        ("pipeDelimited", False, ARRAY, ["color=blue|black|brown"]),
        ("spaceDelimited", True, ARRAY, ["color=blue", "color=black", "color=brown"]),
        ("deepObject", True, OBJECT, ["color%5BR%5D=100", "color%5BG%5D=200", "color%5BB%5D=150"]),
    ],
)
def test_query_styles(style: str, explode: bool, value: object, expected: list[str]) -> None:
    assert serialize_query(_arg("query", style, explode), value) == expected


def test_deep_object_nests_objects_and_indexes_arrays() -> None:
    items = serialize_query(_arg("query", "deepObject", True), {"a": {"b": 1}, "c": ["x", "y"]})
    assert items == ["color%5Ba%5D%5Bb%5D=1", "color%5Bc%5D%5B0%5D=x", "color%5Bc%5D%5B1%5D=y"]


@pytest.mark.parametrize("value", [0, False, ""])
def test_falsy_values_are_sent(value: object) -> None:
    assert serialize_query(_arg("query", "form", True), value) == [f"color={to_text(value)}"]


def test_query_values_cannot_add_parameters() -> None:
    (item,) = serialize_query(_arg("query", "form", True), "x&api_key=stolen#frag")
    assert item == "color=x%26api_key%3Dstolen%23frag"


def test_allow_reserved_keeps_reserved_characters_but_not_structure() -> None:
    (item,) = serialize_query(_arg("query", "form", True, allow_reserved=True), "/a:b?c=d&e#f+g")
    assert item == "color=/a:b?c=d%26e%23f%2Bg"


def test_content_parameter_is_serialized_as_json() -> None:
    argument = _arg("query", "form", True, content_type="application/json")
    assert serialize_query(argument, {"a": [1, True]}) == ["color=%7B%22a%22%3A%5B1%2Ctrue%5D%7D"]


def test_header_simple_and_crlf_refused() -> None:
    assert serialize_header(_arg("header", "simple", False), ARRAY) == "blue,black,brown"
    assert serialize_header(_arg("header", "simple", True), OBJECT) == "R=100,G=200,B=150"
    with pytest.raises(ArgumentError, match="CR"):
        serialize_header(_arg("header", "simple", False), "x\r\nX-Evil: 1")


def test_cookie_form() -> None:
    assert serialize_cookie(_arg("cookie", "form", True), "a b;c") == [("color", "a%20b%3Bc")]
    assert serialize_cookie(_arg("cookie", "form", False), ARRAY) == [("color", "blue,black,brown")]
    assert serialize_cookie(_arg("cookie", "form", True), ARRAY) == [("color", v) for v in ARRAY]


def test_to_text_spells_json_primitives() -> None:
    assert [to_text(v) for v in (True, False, 0, 1.5, None, "x")] == ["true", "false", "0", "1.5", "", "x"]


@pytest.mark.parametrize("text", ["".join(map(chr, range(128))), "hello world", "a/b?c#d&e=f+g%h", "",
                                  "caf\u00e9 \u4e2d\U0001f600", "~-._AZaz09"])
def test_encode_is_quote_byte_for_byte(text: str) -> None:
    # ASCII texts are encoded by str.translate, the rest by quote: both must spell every character as quote does.
    assert encode(text) == quote(text, safe="")
    assert encode(text, allow_reserved=True) == quote(text, safe=":/?[]@!$'()*,=")
    for character in text:
        assert encode(character) == quote(character, safe="")
