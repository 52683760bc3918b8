"""Load agents.yaml into a `Manifest`, reporting every mistake at once with file:line and key path.

    agents.yaml:9: agents.reader.tools[1].api: no spec named 'nosuchapi' (known: github, shop)

One reading serves every command: `gateway validate` prints what `gateway serve`, `mcp`, `chat` and `call`
would refuse, and they refuse it with the same lines. The steps:

1. the YAML, with each key path's line and `${VAR}` / `${VAR:-default}` read from the environment
   (`gateway.config.yamlnodes`; a missing variable without a default is an error naming it and the key);
2. the settings model (`gateway.config.model` and its sections), every key typed, unknown keys refused with a
   did-you-mean (`gateway.config.reading`);
3. what the model cannot see alone: names that refer to each other, certificate files, provider URLs
   (`gateway.config.checks`), delegation (`gateway.config.delegation`);
4. with a `catalog`: the apis and every tool selection against the compiled specs, and the agents' toolsets,
   built once here for the checks and for serving.

A credential whose secrets all come out empty (`token: ${TOKEN:-}`) counts as not configured. Diagnostics come
sorted by line.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..catalog import Catalog, Diagnostic, Tool
from .checker import Checker
from .checks import check_manifest
from .delegation import check_delegation
from .model import DEFAULT_BASE_URLS, Manifest
from .reading import read_manifest
from .yamlnodes import KeyLines, KeyPath, load_yaml

if TYPE_CHECKING:
    from ..toolsets import Toolset

__all__ = ["DEFAULT_BASE_URLS", "load_configuration", "load_manifest", "parse_manifest"]


def load_manifest(
    path: Path, *, catalog: Catalog | None = None, environ: Mapping[str, str] | None = None
) -> tuple[Manifest, list[Diagnostic]]:
    """Read and validate `path`; never raises for bad content.

    Returns the manifest (the usable parts of it) and every diagnostic, sorted by line. The manifest is
    unusable when any diagnostic is an error. With `catalog`, apis and tool selections are checked
    against the compiled specs (including the warnings of `gateway.toolsets.build_toolsets`).
    """
    manifest, _, diagnostics = load_configuration(path, catalog=catalog, environ=environ)
    return manifest, diagnostics


def load_configuration(
    path: Path, *, catalog: Catalog | None = None, environ: Mapping[str, str] | None = None
) -> tuple[Manifest, dict[str, Toolset], list[Diagnostic]]:
    """`load_manifest`, and the agents' toolsets its checks built (empty without `catalog`): a load builds them
    once, for the checks and for serving."""
    path = Path(path)
    file = path.name
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return Manifest(file=file), {}, [Diagnostic(level="error", file=file, message=f"cannot read: {exc}")]
    return _parse(text, file=file, catalog=catalog, environ=environ, base_dir=path.parent)


def parse_manifest(
    text: str, *, file: str = "agents.yaml", catalog: Catalog | None = None, environ: Mapping[str, str] | None = None,
    base_dir: Path | None = None,
) -> tuple[Manifest, list[Diagnostic]]:
    """`load_manifest` on a string; relative file names in it are taken from `base_dir` (default: the current
    folder)."""
    manifest, _, diagnostics = _parse(text, file=file, catalog=catalog, environ=environ, base_dir=base_dir)
    return manifest, diagnostics


def _parse(
    text: str, *, file: str, catalog: Catalog | None, environ: Mapping[str, str] | None, base_dir: Path | None,
) -> tuple[Manifest, dict[str, Toolset], list[Diagnostic]]:
    data, lines, diagnostics = load_yaml(text, file=file, environ=os.environ if environ is None else environ)
    toolsets: dict[str, Toolset] = {}
    if data is None:
        return Manifest(file=file), toolsets, diagnostics
    c = Checker(file, lines)
    c.diagnostics.extend(diagnostics)
    manifest = read_manifest(data, c)
    manifest.file = file
    check_manifest(c, manifest, catalog, base_dir or Path.cwd())
    check_delegation(c, manifest)
    if catalog is not None:
        _check_security(c, manifest, catalog)
        from ..toolsets import build_toolsets

        toolsets, toolset_diagnostics = build_toolsets(manifest, catalog)
        c.diagnostics.extend(toolset_diagnostics)
        _check_tool_counts(c, manifest, toolsets)
    c.diagnostics.sort(key=lambda d: d.line or 0)
    return manifest, toolsets, c.diagnostics


def _check_tool_counts(c: Checker, manifest: Manifest, toolsets: Mapping[str, Any]) -> None:
    """An agent whose tools its provider would refuse is worth knowing before its first chat fails."""
    from ..offer.toolsearch import pinned_tools
    from ..providers.anthropic import MAX_DEFERRED_TOOLS
    from ..providers.openai import OPENAI_MAX_TOOLS, refuses_tool_count

    for name, agent in manifest.agents.items():
        provider = manifest.providers.get(agent.provider)
        count = len(toolsets.get(name) or ())
        if agent.tool_search == "native" and provider is not None and provider.kind == "anthropic" and \
                count > MAX_DEFERRED_TOOLS and count - len(pinned_tools(agent, toolsets[name])) > MAX_DEFERRED_TOOLS:
            c.error(("agents", name, "tools"), f"{count} tools, but Anthropic's tool search takes at most "
                    f"{MAX_DEFERRED_TOOLS} deferred ones: select fewer, pin some, or use `tool_search: on`")
        if agent.tool_search != "off":
            continue  # tool search offers a few tools at a time (gateway.offer.toolsearch)
        if provider is not None and refuses_tool_count(provider, count):
            c.warning(("agents", name, "tools"), f"{count} tools, but OpenAI accepts at most {OPENAI_MAX_TOOLS} in "
                      "one request: chat will be refused until `tools:` selects fewer (MCP and direct calls work)")


def _check_security(c: Checker, manifest: Manifest, catalog: Catalog) -> None:
    """Warn once per used api when selected operations demand credentials and none are configured."""
    from ..toolsets import select_tools

    used: dict[str, tuple[KeyPath, dict[str, Tool]]] = {}
    for agent in manifest.agents.values():
        for index, selection in enumerate(agent.tools):
            where, selected = used.setdefault(selection.api, (("agents", agent.name, "tools", index, "api"), {}))
            selected.update((tool.name, tool) for tool in select_tools(selection, catalog))
    for api, (where, selected) in used.items():
        if manifest.api(api).auth:
            continue
        # Security alternatives: one empty alternative means anonymous access is allowed too.
        needing = [tool for tool in selected.values() if tool.security and all(tool.security)]
        if not needing:
            continue
        schemes = sorted({name for tool in needing for alternative in tool.security for name in alternative})
        names = ", ".join(tool.name for tool in needing[:5]) + (", ..." if len(needing) > 5 else "")
        path = ("apis", api) if api in manifest.apis else where
        needs = f"{len(needing)} selected operation(s) of {api!r} require credentials ({', '.join(schemes)}: {names})"
        if ("apis", api, "auth") in c.lines:  # written, but every secret in it came out empty
            c.warning(("apis", api, "auth"), f"{needs}, but the credential in apis.{api}.auth is empty"
                                             f"{_unset(c, api)}: none is sent, and those calls will likely be refused")
        else:
            c.warning(path, f"{needs} but apis.{api}.auth is not configured; those calls will likely be refused")


def _unset(c: Checker, api: str) -> str:
    """What to set so an empty credential gets its value: the variables it reads."""
    variables = c.lines.variables_under(("apis", api, "auth")) if isinstance(c.lines, KeyLines) else []
    if not variables:
        return ""
    if len(variables) == 1:
        return f" ({variables[0]} is unset or empty; set it)"
    return f" ({', '.join(variables)} are unset or empty; set them)"
