"""The README and docs/ say only what is true: their commands, flags, links, agents.yaml and code snippets are real.

The README stays short (at most 250 lines) and keeps the quick start's promise: its test command is the one CI runs.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import shlex
from pathlib import Path

import pytest
import yaml
from jsonschema.validators import Draft202012Validator
from prometheus_client import generate_latest

from gateway.catalog import Catalog
from gateway.cli.commands import build_parser, subcommand_parsers
from gateway.config.schema import agents_schema
from gateway.configuration import parse_configuration
from gateway.observe.metrics import Metrics
from gateway.openapi import compile_specs

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS, ROOT / "bench" / "README.md"]
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.M | re.S)


def _id(page: Path) -> str:
    return str(page.relative_to(ROOT))


def _blocks(page: Path, *languages: str) -> list[str]:
    return [body for language, body in FENCE.findall(page.read_text()) if language in languages]


def _prose(page: Path) -> str:
    """The page without its fenced blocks."""
    return FENCE.sub("", page.read_text())


# -- the README's promise


def test_the_readme_is_short() -> None:
    assert len(README.read_text().splitlines()) <= 250


def _readme_test_command() -> str:
    quick_start = README.read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = [line for block in FENCE.findall(quick_start) for line in block[1].splitlines() if "pytest" in line]
    assert len(commands) == 1, commands
    return commands[0].strip()


def test_ci_runs_the_readmes_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    ran = ci.split("# The README's test command:\n", 1)[1].splitlines()[0].strip()
    readme = _readme_test_command()
    # The README's command makes its venv first (a fresh machine); CI has made and activated it already.
    assert readme.endswith(ran), (readme, ran)


# -- commands and flags


SUBCOMMANDS = subcommand_parsers()


def _options(parser: argparse.ArgumentParser) -> set[str]:
    """The options a subcommand takes, as its `--help` names them."""
    return set(re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", parser.format_help()))


def _mentions(page: Path) -> list[str]:
    """Every `gateway ...` the page shows in its text and tables (its shell blocks are parsed whole, below)."""
    return [span for span in re.findall(r"`([^`\n]+)`", _prose(page)) if re.match(r"gateway [a-z]", span)]


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_every_gateway_command_shown_names_a_real_subcommand_and_its_flags(page: Path) -> None:
    problems = []
    for mention in _mentions(page):
        words = mention.split()
        if words[1] not in SUBCOMMANDS:
            problems.append(f"{mention!r}: no subcommand {words[1]!r}")
            continue
        known = _options(SUBCOMMANDS[words[1]])
        for flag in re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", mention):
            if flag not in known:
                problems.append(f"{mention!r}: {words[1]} has no {flag}")
    assert problems == []


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_every_gateway_command_line_in_a_shell_block_parses(page: Path) -> None:
    """The commands people copy are accepted as written (placeholders like AGENT stand for any word); `gateway` as
    another program's argument (`npx ... --cli gateway mcp weather`) is that program's business."""
    parser = build_parser()
    for block in _blocks(page, "sh", "bash"):
        for line in block.replace("\\\n", " ").splitlines():
            for command in re.split(r"&&|\|\||;|\|", line.split(" #", 1)[0]):
                words = shlex.split(command)
                while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
                    words.pop(0)  # VAR=value before the command
                if words[:1] != ["gateway"]:
                    continue
                words = words[:words.index(">")] if ">" in words else words
                try:
                    parser.parse_args(words[1:])
                except SystemExit as exit:
                    raise AssertionError(f"{_id(page)}: `{command.strip()}` is refused by gateway") from exit


def test_gateway_help_names_no_subset_of_the_commands() -> None:
    """`gateway --help` opens with a sentence; a list of commands there went stale (audit, approvals were missing)."""
    description = build_parser().description or ""
    named = [name for name in SUBCOMMANDS if re.search(rf"\b{name}\b", description)]
    assert named in ([], list(SUBCOMMANDS)), description


def test_the_commands_page_lists_every_subcommand_and_flag() -> None:
    page = (ROOT / "docs" / "cli.md").read_text()
    for name, parser in SUBCOMMANDS.items():
        assert f"`gateway {name}" in page, name
        missing = {o for o in _options(parser) if o.startswith("--")} - {"--help"} - set(re.findall(r"--[a-z-]+", page))
        assert missing == set(), (name, missing)


# -- links


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings (lower case, punctuation but `-` and `_` dropped, spaces as `-`)."""
    headings = re.findall(r"^#+ (.+)$", _prose(page), re.M)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_every_relative_link_reaches_a_file_and_heading(page: Path) -> None:
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", _prose(page)):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(target)
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
            broken.append(target)
    assert broken == []


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_every_file_of_the_repository_named_exists(page: Path) -> None:
    named = re.findall(r"(?<![\w/.-])((?:gateway|tests|bench|docs)/[\w/.-]*[\w/])", _prose(page))
    placeholders = re.compile(r"\b[A-Z]{3,}\b")  # bench/NAME.py
    assert [path for path in named if not (ROOT / path).exists() and not placeholders.search(path)] == []


def test_every_page_of_docs_is_linked_from_its_index() -> None:
    index = (ROOT / "docs" / "README.md").read_text()
    assert [p.name for p in DOCS if p.name != "README.md" and f"]({p.name})" not in index] == []


def test_every_picture_in_docs_is_shown() -> None:
    shown = " ".join(page.read_text() for page in PAGES)
    assert [p.name for p in sorted((ROOT / "docs").glob("*.png")) if f"({p.name})" not in shown] == []


# -- snippets


@pytest.fixture(scope="module")
def validator() -> Draft202012Validator:
    return Draft202012Validator(agents_schema())


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_every_yaml_block_is_valid_agents_yaml(page: Path, validator: Draft202012Validator) -> None:
    """Each YAML snippet is a part of agents.yaml that `gateway schema` accepts as written (no stale key)."""
    for block in _blocks(page, "yaml"):
        document = yaml.load(block, Loader=_YAML11WithoutBooleanOn)
        errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(document)]
        assert errors == [], f"{_id(page)}:\n{block}"


@pytest.fixture(scope="module")
def example_catalog() -> Catalog:
    return compile_specs(ROOT / "specs", use_cache=False)


_OUTSIDE_THE_SNIPPET = re.compile(r"no (provider|agent|spec) named|which are not installed")
"""What a snippet refers to but a part of agents.yaml need not define (an agent, a provider, a spec beside the
example's), and an optional extra this machine lacks: not the snippet's mistakes."""


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_every_yaml_block_passes_gateway_validates_loader(page: Path, example_catalog: Catalog) -> None:
    """Each YAML snippet passes the checks `gateway validate` makes beyond the schema (names that must differ, auth
    entries against the spec, what an option needs), on the example's specs, its `${VAR}`s set."""
    problems = []
    for block in _blocks(page, "yaml"):
        environ = {name: f"{name.lower()}-value" for name in re.findall(r"\$\{(\w+)\}", block)}
        manifest, _, diagnostics = parse_configuration(block, catalog=example_catalog, environ=environ, base_dir=ROOT)
        other_specs = tuple(f"apis.{api}" for api in manifest.apis if api not in example_catalog.apis)
        problems += [f"{_id(page)}: {d}" for d in diagnostics if d.level == "error"
                     and not _OUTSIDE_THE_SNIPPET.search(d.message)
                     and not (other_specs and d.pointer.startswith(other_specs))]
    assert problems == []


class _YAML11WithoutBooleanOn(yaml.SafeLoader):
    """PyYAML reads a bare `on` as true (YAML 1.1), which the hooks' `on:` key is not: only true/false are booleans."""


_YAML11WithoutBooleanOn.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_YAML11WithoutBooleanOn.add_implicit_resolver("tag:yaml.org,2002:bool",
                                              re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_every_python_block_parses(page: Path) -> None:
    for block in _blocks(page, "python"):
        ast.parse(block)


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_every_json_block_without_an_ellipsis_parses(page: Path) -> None:
    for block in _blocks(page, "json"):
        if "..." not in block:
            json.loads(block)


@pytest.fixture(scope="module")
def served_routes() -> list[tuple[str, set[str]]]:
    """(path template, methods) of every HTTP route `gateway serve` answers on the example."""
    from gateway.runtime import RuntimeHolder, load_runtime
    from gateway.server import create_app
    from gateway.server.supervision import Safety

    runtime = load_runtime(ROOT / "specs", ROOT / "agents.yaml", environ={"GATEWAY_STORE": "memory:"}, use_cache=False)
    app = create_app(RuntimeHolder(runtime), watch=False, **Safety.open(runtime).app_options())
    return [(route.path, set(getattr(route, "methods", None) or {"GET", "POST", "DELETE"})) for route in app.routes]


def _serves(routes: list[tuple[str, set[str]]], method: str, path: str) -> bool:
    parts = path.split("/")
    for template, methods in routes:
        pattern = template.split("/")
        if method in methods and len(pattern) == len(parts) and all(
                want == got or want.startswith("{") for want, got in zip(pattern, parts, strict=True)):
            return True
    return False


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_every_endpoint_named_is_served(page: Path, served_routes: list[tuple[str, set[str]]]) -> None:
    # A method and path opening a double-quoted text is a request in a user's words about an upstream API (tool
    # search's examples: "GET /api/dcim/interfaces/8812/ for its mtu"), not an endpoint of the gateway's.
    named = re.findall(r"(?<!\")\b(GET|POST|PUT|PATCH|DELETE) (/[^\s`)?]*)", page.read_text())
    assert [f"{method} {path}" for method, path in named if not _serves(served_routes, method, path)] == []


def test_the_metrics_documented_are_the_metrics_served() -> None:
    served = set(re.findall(r"^# TYPE (\S+)", generate_latest(Metrics().registry).decode(), re.M))
    page = (ROOT / "docs" / "observability.md").read_text()
    documented = set(re.findall(r"`(gateway_[a-z_]+)", page))
    assert documented == {name for name in served if name.startswith("gateway_")}
    assert "process_start_time_seconds" in served and "`process_start_time_seconds`" in page  # prometheus_client's

