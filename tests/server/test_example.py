"""The example in the repository and the annotated agents.yaml of docs/agents-yaml.md stay loadable."""

from __future__ import annotations

from pathlib import Path

from server_support import ROOT

from gateway.runtime import load_runtime


def test_example_loads_with_no_environment() -> None:
    runtime = load_runtime(ROOT / "specs", ROOT / "agents.yaml", environ={}, use_cache=False)
    assert runtime.toolset("weather").names == ["getForecast"]
    assert runtime.toolset("triage").names == ["getRepo", "listIssues", "getIssue", "createIssueComment"]
    assert [t.name for t in runtime.toolset("triage") if t.needs_approval] == ["createIssueComment"]
    assert not [d for d in runtime.diagnostics if d.level == "error"]


def test_the_examples_empty_github_token_is_told_as_it_is() -> None:
    """apis.github.auth is written, with `${GITHUB_TOKEN:-}`: the warning says the token is empty and what to set,
    not that auth is missing."""
    runtime = load_runtime(ROOT / "specs", ROOT / "agents.yaml", environ={}, use_cache=False)
    [warning] = [d for d in runtime.diagnostics if d.level == "warning"]
    assert warning.pointer == "apis.github.auth"
    assert "not configured" not in warning.message
    assert "is empty (GITHUB_TOKEN is unset or empty; set it)" in warning.message
    with_token = load_runtime(ROOT / "specs", ROOT / "agents.yaml", environ={"GITHUB_TOKEN": "t"}, use_cache=False)
    assert not [d for d in with_token.diagnostics if d.level == "warning"]


def test_an_api_without_auth_is_told_it_has_none(tmp_path: Path) -> None:
    example = (ROOT / "agents.yaml").read_text()
    (tmp_path / "agents.yaml").write_text(example.replace('    auth: {type: bearer, token: "${GITHUB_TOKEN:-}"}\n', ""))
    runtime = load_runtime(ROOT / "specs", tmp_path / "agents.yaml", environ={}, use_cache=False)
    [warning] = [d for d in runtime.diagnostics if d.level == "warning"]
    assert warning.pointer == "apis.github" and "apis.github.auth is not configured" in warning.message


def test_the_annotated_agents_yaml_in_docs_loads_cleanly(tmp_path: Path) -> None:
    page = (ROOT / "docs" / "agents-yaml.md").read_text()
    block = page.split("## An annotated example\n\n```yaml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "agents.yaml").write_text(block)
    runtime = load_runtime(ROOT / "specs", tmp_path / "agents.yaml", environ={"CI_BOT_KEY": "k"}, use_cache=False)
    assert runtime.diagnostics == []
    assert set(runtime.manifest.agents) == {"triage", "researcher"}
    assert "ask_researcher" in runtime.toolset("triage").names
