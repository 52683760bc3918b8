"""A spec's text printed on the operator's terminal (redteam46): `gateway validate` and `gateway tools` quote a
spec's names, `$ref`s, descriptions and server URLs, which an API owner or a vendor wrote. A terminal acts on
what it is sent (OSC 52 sets the clipboard, CSI clears the screen, a C1 CSI or a bidi override too), so each is
printed as its escape, and JSON stays the same JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.cli.commands import main

CODES = "\x1b]52;c;ZXZpbA==\x07\x1b[2J\x9b31m\u202e"
SPEC = {
    "openapi": "3.0.3", "info": {"title": "shop", "version": "1"}, "servers": [{"url": "http://127.0.0.1:9"}],
    "paths": {"/items": {"get": {
        "operationId": "listItems", "summary": "List" + CODES,
        "responses": {"200": {"description": "ok", "content": {"application/json": {
            "schema": {"$ref": "#/components/schemas/Item" + CODES + "\n  ok: forged line"}}}}}}}},
}


def _project(tmp_path: Path) -> list[str]:
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "shop.json").write_text(json.dumps(SPEC))
    return ["--specs", str(tmp_path / "specs"), "--agents", str(tmp_path / "none.yaml"), "--no-cache"]


def _raw_codes(text: str) -> list[str]:
    return [c for c in text if c in "\x1b\x07\x9b\u202e"]


@pytest.mark.parametrize("command", [["validate"], ["validate", "--json"], ["tools"]])
def test_a_specs_control_characters_reach_the_terminal_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                               command: list[str]) -> None:
    main([*command, *_project(tmp_path)])
    printed = capsys.readouterr()
    assert "Item" in printed.out + printed.err  # the $ref's diagnostic was printed
    assert _raw_codes(printed.out) == [] and _raw_codes(printed.err) == []
    assert "\\u001b]52" in printed.out + printed.err
    assert not any(line.startswith("  ok: forged") for line in (printed.out + printed.err).splitlines())
    if command != ["validate"]:  # still JSON, of the same text
        value = json.loads(printed.out)
        shown = value[0]["description"] if command == ["tools"] else json.dumps(value)
        assert ("List" + CODES if command == ["tools"] else "\\u001b]52") in shown
