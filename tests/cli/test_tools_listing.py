"""`gateway tools` writes its listing one tool at a time: a catalog whose listing is tens of megabytes is never held
whole (neither the rendered list nor its JSON text), and the bytes are those of the whole array written at once."""

from __future__ import annotations

import io
import json
import os
import sys
import tracemalloc
from pathlib import Path

import orjson
import pytest

from gateway.cli.commands import main

WORDS = [f"value-number-{i:05d}-of-the-enum" for i in range(2000)]


def _project(tmp_path: Path, operations: int) -> list[str]:
    specs = tmp_path / "specs"
    specs.mkdir()
    paths = {f"/things{i}": {"post": {
        "operationId": f"make{i}", "description": "Makes a thing.\u202e (a bidi control, escaped on the way out)",
        "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Big"}}}},
        "responses": {"200": {"description": "ok"}}}} for i in range(operations)}
    spec = {"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "servers": [{"url": "http://127.0.0.1:9"}],
            "paths": paths,
            "components": {"schemas": {"Big": {"type": "object", "properties": {"kind": {"enum": WORDS}}}}}}
    (specs / "big.json").write_text(json.dumps(spec))
    return ["tools", "--specs", str(specs), "--agents", str(tmp_path / "none.yaml"), "--exact"]


def test_a_big_listing_is_written_without_holding_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATEWAY_CACHE_DIR", str(tmp_path / "cache"))
    argv = _project(tmp_path, 200)
    with open(os.devnull, "w") as sink:
        monkeypatch.setattr(sys, "stdout", sink)
        assert main(argv) == 0  # compiled and cached: the next run reads the catalog from the cache
        tracemalloc.start()
        try:
            assert main(argv) == 0
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    written = _listing(argv, monkeypatch)
    assert len(written) > 15_000_000  # 200 tools of about 90 KB each
    assert peak < len(written) / 4  # written whole, it took more than twice its size (the list, the bytes, the text)


def test_the_bytes_are_those_of_the_whole_array(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    argv = [*_project(tmp_path, 3), "--no-cache"]
    written = _listing(argv, monkeypatch)
    tools = json.loads(written)
    whole = orjson.dumps(tools, option=orjson.OPT_INDENT_2).decode().replace("\u202e", "\\u202e").encode() + b"\n"
    assert written == whole
    assert [tool["name"] for tool in tools] == ["make0", "make1", "make2"]
    assert "\u202e" in tools[0]["description"]  # as the spec says it, escaped on the terminal only


def test_no_tools_are_an_empty_array(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _listing([*_project(tmp_path, 0), "--no-cache"], monkeypatch) == b"[]\n"


def _listing(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> bytes:
    out = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(out, encoding="utf-8"))
    assert main(argv) == 0
    sys.stdout.flush()
    return out.getvalue()
