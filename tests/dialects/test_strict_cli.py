"""`gateway tools --strict` says on stderr why a tool cannot be strict; `gateway validate` counts them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from gateway.cli.commands import main

SPEC = {"openapi": "3.0.3", "info": {"title": "shop", "version": "1"}, "paths": {
    "/items": {"post": {"operationId": "addItem", "responses": {"201": {"description": "created"}},
                        "requestBody": {"content": {"application/json": {"schema": {
                            "type": "object", "properties": {"attributes": {"type": "object"}}}}}}}},
    "/weird": {"post": {"operationId": "weird", "responses": {"204": {"description": "ok"}},
                        "requestBody": {"content": {"application/json": {"schema": {
                            "type": "object", "properties": {
                                "a": {"allOf": [{"type": "string"}, {"type": "integer"}]}}}}}}}},
}}


@pytest.fixture
def specs(tmp_path: Path) -> Path:
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "shop.yaml").write_text(yaml.safe_dump(SPEC))
    return tmp_path / "specs"


@pytest.fixture(autouse=True)
def _no_manifest_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`validate` without `--agents` checks the specs alone when ./agents.yaml is absent (a manifest named but absent
    is an error: a mistyped path must fail a CI check), so these tests run in a folder that holds none."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GATEWAY_AGENTS", raising=False)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_tools_strict_prints_one_line_per_tool_that_cannot_be_strict(specs: Path, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "tools", "--specs", str(specs), "--agents", str(tmp_path / "none.yaml"),
                          "--format", "openai", "--strict", "--no-cache")
    assert code == 0
    assert {t["function"]["name"]: t["function"]["strict"] for t in json.loads(out)} == {"addItem": True,
                                                                                        "weird": False}
    assert "not strict: weird: root: allOf of different types" in err.splitlines()
    assert not any("addItem" in line for line in err.splitlines())
    assert "OpenAI strict mode: 1 of 2 tools sent strict, the others with strict: false" in err.splitlines()


def test_validate_counts_the_tools_that_cannot_be_strict(specs: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "validate", "--specs", str(specs), "--no-cache")
    assert code == 0
    assert "shop.yaml: ok, 2/2 operations as tools, 0 error(s), 0 warning(s), 1 not OpenAI-strict" in out
    assert "  not strict: 1 tool(s): root: allOf of different types" in out.splitlines()
    code, out, _ = _run(capsys, "validate", "--specs", str(specs), "--json", "--no-cache")
    assert json.loads(out)["specs"][0]["not_strict"] == {"root: allOf of different types": 1}
