"""Alias bombs and oversized documents are refused when specs and agents.yaml are loaded."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gateway.cli.commands import main
from gateway.config.loader import parse_manifest
from gateway.openapi import compile_specs
from gateway.yamlbounds import DocumentTooLarge, check_size, load_bounded, node_counts


def _bomb(levels: int = 9, key: str = "x-bomb") -> str:
    """`levels` nested lists of nine aliases each: under 1 KB written, 9**levels strings expanded."""
    lines = ['x-a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    previous = "a"
    for index in range(levels - 1):
        name = f"l{index}"
        lines.append(f"x-{name}: &{name} [" + ", ".join([f"*{previous}"] * 9) + "]")
        previous = name
    lines.append(f"{key}: *{previous}")
    return "\n".join(lines) + "\n"


SPEC = 'openapi: 3.0.3\ninfo: {title: t, version: "1"}\n'
GOOD_PATHS = "paths:\n  /items:\n    get:\n      operationId: listItems\n      responses: {'200': {description: ok}}\n"


def test_node_counts_counts_each_alias_as_the_subtree_it_repeats() -> None:
    node = yaml.compose("a: &x [1, 2, 3]\nb: *x\nc: [*x, *x]\n", Loader=yaml.SafeLoader)
    written, expanded = node_counts(node)
    # written: the root, 3 keys, the list and its 3 items, c's list; expanded adds three more copies of the list.
    assert (written, expanded) == (9, 9 + 3 * 4)


def test_a_recursive_document_is_refused() -> None:
    with pytest.raises(DocumentTooLarge, match="never ends"):
        load_bounded("a: &x [1, *x]\n", yaml.SafeLoader)


def test_ordinary_anchors_and_merge_keys_still_load() -> None:
    text = "base: &base {timeout: 5, retries: 2}\none: {<<: *base, timeout: 9}\ntwo: *base\n"
    assert load_bounded(text, yaml.SafeLoader) == {
        "base": {"timeout": 5, "retries": 2}, "one": {"timeout": 9, "retries": 2}, "two": {"timeout": 5, "retries": 2}}


def test_the_byte_cap() -> None:
    check_size(10, limit=10)
    with pytest.raises(DocumentTooLarge, match="11 bytes"):
        check_size(11, limit=10)


def test_an_alias_bomb_spec_is_refused_and_the_other_specs_still_load(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    bomb = SPEC + _bomb() + (
        "paths:\n  /x:\n    get:\n      operationId: boom\n      parameters:\n"
        "        - {name: q, in: query, schema: {type: array, example: *l7}}\n"
        "      responses: {'200': {description: ok}}\n")
    assert len(bomb) < 1500
    (specs / "bomb.yaml").write_text(bomb)
    (specs / "shop.yaml").write_text(SPEC + GOOD_PATHS)
    catalog = compile_specs(specs, use_cache=False)
    assert [tool.name for tool in catalog] == ["listItems"]
    [problem] = [d for d in catalog.diagnostics if d.file == "bomb.yaml"]
    assert problem.level == "error" and "alias bomb" in problem.message and "expand" in problem.message
    # The CLI: `gateway tools` still prints the other spec's tool, `gateway validate` says the bomb is unusable.
    code = main(["tools", "--specs", str(specs), "--agents", str(tmp_path / "none.yaml"), "--no-cache"])
    out, err = capsys.readouterr()
    assert code == 0 and '"listItems"' in out and "bomb.yaml" in err
    code = main(["validate", "--specs", str(specs), "--agents", str(tmp_path / "none.yaml"), "--no-cache"])
    out, _ = capsys.readouterr()
    assert code == 1 and "bomb.yaml: UNUSABLE" in out and "alias bomb" in out


def test_an_alias_bomb_in_agents_yaml_is_an_error_naming_the_file() -> None:
    text = _bomb(key="x-extra") + "agents: {}\n"
    manifest, diagnostics = parse_manifest(text, file="agents.yaml", environ={})
    assert manifest.agents == {}
    [problem] = diagnostics
    assert problem.level == "error" and problem.file == "agents.yaml" and "alias bomb" in problem.message
    assert "agents.yaml" in str(problem)
