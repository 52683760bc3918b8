from __future__ import annotations

import json

from gateway.jsonwire import dumps, dumps_text


def test_compact_utf8_as_json_would_write_it() -> None:
    value = {"a": [1, 2.5, None, True], "grüß": "dich", 3: "int key"}
    assert dumps(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def test_what_orjson_refuses_is_still_written() -> None:
    big = {"id": 2**70, "nested": [2**65]}
    assert json.loads(dumps(big)) == big
    assert dumps_text(big) == '{"id":1180591620717411303424,"nested":[36893488147419103232]}'


class Opaque:
    def __str__(self) -> str:
        return "opaque"


def test_default_turns_unknown_values_into_json() -> None:
    assert dumps_text({"x": Opaque()}, default=str) == '{"x":"opaque"}'
    with_big = dumps_text({"x": Opaque(), "big": 2**70}, default=str)  # the json.dumps path takes `default` too
    assert with_big == '{"x":"opaque","big":1180591620717411303424}'
