"""agents.yaml read against the compiled catalog: the manifest, the agents' toolsets, and every diagnostic.

`gateway.config` reads and checks the file on its own (the settings model, names that refer to each other, the
apis and tool selections against the catalog). What needs the agents' toolsets is checked here, a floor above
them: operations whose credentials are not configured, and tool counts an agent's provider would refuse. The
toolsets built for these checks are the ones served (`gateway.runtime`), so a load builds them once.
"""

from __future__ import annotations

from collections.abc import Mapping
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .catalog import Catalog, Diagnostic, Tool
from .config.checker import Checker
from .config.credentials import TokenExchangeAuth
from .config.loader import read_checked, read_text
from .config.model import Manifest
from .config.yamlnodes import KeyLines, KeyPath
from .offer.toolsearch import ToolOffer, pinned_tools, search_enabled
from .toolsets import Toolset, build_toolsets, select_tools

__all__ = ["load_configuration", "parse_configuration"]


def load_configuration(
    path: Path, *, catalog: Catalog, environ: Mapping[str, str] | None = None
) -> tuple[Manifest, dict[str, Toolset], list[Diagnostic]]:
    """`gateway.config.load_manifest` with `catalog`, and the checks of the agents' toolsets; returns the manifest,
    the toolsets (empty when the file is unreadable) and every diagnostic, sorted by line."""
    text, file, unreadable = read_text(path)
    if unreadable is not None:
        return Manifest(file=file), {}, [unreadable]
    return parse_configuration(text, catalog=catalog, file=file, environ=environ, base_dir=Path(path).parent)


def parse_configuration(
    text: str, *, catalog: Catalog, file: str = "agents.yaml", environ: Mapping[str, str] | None = None,
    base_dir: Path | None = None,
) -> tuple[Manifest, dict[str, Toolset], list[Diagnostic]]:
    """`load_configuration` on a string; relative file names in it are taken from `base_dir` (default: the
    current folder)."""
    manifest, c, readable = read_checked(text, file=file, catalog=catalog, environ=environ, base_dir=base_dir)
    toolsets: dict[str, Toolset] = {}
    if readable:
        check_security(c, manifest, catalog)
        check_servers(c, manifest, catalog)
        toolsets, toolset_diagnostics = build_toolsets(manifest, catalog)
        c.diagnostics.extend(toolset_diagnostics)
        check_tool_counts(c, manifest, toolsets)
        check_pinned(c, manifest, toolsets)
        check_approved_exchange(c, manifest, toolsets)
        check_qualified_names(c, manifest, toolsets)
    return manifest, toolsets, c.sorted()


def check_tool_counts(c: Checker, manifest: Manifest, toolsets: Mapping[str, Any]) -> None:
    """An agent whose tools its provider would refuse is worth knowing before its first chat fails."""
    # The adapters' modules are imported only for an agent whose check needs them: they import the HTTP client,
    # which a command that loads agents.yaml to list tools (`gateway mcp`) has no use for yet.
    for name, agent in manifest.agents.items():
        provider = manifest.providers.get(agent.provider)
        count = len(toolsets.get(name) or ())
        if agent.tool_search == "native" and provider is not None and provider.kind == "anthropic":
            from .providers.anthropic import MAX_DEFERRED_TOOLS

            if count > MAX_DEFERRED_TOOLS and count - len(pinned_tools(agent, toolsets[name])) > MAX_DEFERRED_TOOLS:
                c.error(("agents", name, "tools"), f"{count} tools, but Anthropic's tool search takes at most "
                        f"{MAX_DEFERRED_TOOLS} deferred ones: select fewer, pin some, or use `tool_search: on`")
        if agent.tool_search != "off":
            continue  # tool search offers a few tools at a time (gateway.offer.toolsearch)
        from .providers.openai import OPENAI_MAX_TOOLS, refuses_tool_count

        if provider is not None and refuses_tool_count(provider, count):
            c.warning(("agents", name, "tools"), f"{count} tools, but OpenAI accepts at most {OPENAI_MAX_TOOLS} in "
                      "one request: chat will be refused until `tools:` selects fewer (MCP and direct calls work)")


def check_pinned(c: Checker, manifest: Manifest, toolsets: Mapping[str, Toolset]) -> None:
    """A `pinned` entry that names none of the agent's tools pins nothing: a typo the model would pay for with
    searches."""
    for name, agent in manifest.agents.items():
        toolset = toolsets.get(name)
        if toolset is None:
            continue
        names = [n for agent_tool in toolset
                 for n in (agent_tool.name, agent_tool.tool.operation_id if agent_tool.tool else None) if n]
        for index, pattern in enumerate(agent.pinned):
            if not any(fnmatchcase(n, pattern) for n in names):
                c.warning(("agents", name, "pinned", index), f"{pattern!r} names none of the agent's tools (tool "
                          "names or operationIds, globs allowed): it pins nothing")
        if not agent.pinned or agent.tool_search not in ("auto", "on"):
            continue
        from .providers.registry import get_adapter

        provider = manifest.providers.get(agent.provider)
        measure = get_adapter(provider).definition_tokens if provider is not None else None
        if search_enabled(agent, toolset, measure):
            start, pinned = ToolOffer(agent, toolset, measure=measure), len(pinned_tools(agent, toolset))
            tokens, budget = start.tokens(), start.definitions_budget
            if tokens >= budget:
                c.warning(("agents", name, "pinned"), f"the tools a run starts with ({pinned} pinned, and "
                          f"search_tools) take about {tokens} tokens, and a request carries at most {budget} of "
                          "definitions (gateway.tool_definitions_budget): a search can load nothing; pin fewer tools "
                          "or raise the budget")


def check_approved_exchange(c: Checker, manifest: Manifest, toolsets: Mapping[str, Toolset]) -> None:
    """A call held for approval resumes after a human decides, without the access token its user signed in with
    (it is not kept), so an api that exchanges that token refuses it (`user_required`): a tool under approval
    there can never run. An admin who follows both safety.md (approve writes) and identity.md (each user's own
    credential) writes exactly this; say so before the first write waits in vain."""
    for name, toolset in toolsets.items():
        held = sorted(agent_tool.name for agent_tool in toolset if agent_tool.needs_approval and agent_tool.tool
                      is not None and any(isinstance(credential, TokenExchangeAuth)
                                          for credential in manifest.api(agent_tool.tool.api).auth))
        if not held:
            continue
        path: KeyPath = ("agents", name, "approval") if ("agents", name, "approval") in c.lines else ("agents", name)
        c.warning(path, f"{', '.join(held[:5])}{', ...' if len(held) > 5 else ''} wait(s) for approval on an api "
                        "under token_exchange, but an approved call resumes without its user's access token, so the "
                        "exchange refuses it (user_required) and it never runs: use user_oauth for that api (the "
                        "user's stored connection serves a resumed call), or approval: never for those tools")


def check_qualified_names(c: Checker, manifest: Manifest, toolsets: Mapping[str, Toolset]) -> None:
    """Tool names are unique across every spec: when two specs share an operationId both tools are qualified by
    their api (`github_listIssues`) in every agent, so adding a spec renames the tools of agents that never select
    it, under their MCP clients, direct-call URLs and scripts. Say so, with the way to keep a name."""
    for name, toolset in toolsets.items():
        # qualified in the catalog (a collision within the agent is qualified, and warned of, by its toolset)
        qualified = [(tool.name, tool.operation_id) for agent_tool in toolset if (tool := agent_tool.tool) is not None
                     and tool.operation_id and agent_tool.name == tool.name == f"{tool.api}_{tool.operation_id}"]
        if not qualified:
            continue
        shown = ", ".join(f"{named} ({operation})" for named, operation in qualified[:3])
        named, operation = qualified[0]
        c.warning(("agents", name, "tools"), f"{len(qualified)} tool(s) named with their api's prefix, {shown}"
                  f"{', ...' if len(qualified) > 3 else ''}: another spec has the same operationId, and tool names are "
                  f"unique across specs; keep a name with `override: {{{named}: {{rename: {operation}}}}}`")


def _used_apis(manifest: Manifest, catalog: Catalog) -> dict[str, tuple[KeyPath, dict[str, Tool]]]:
    """Each api some agent selects: the first selection's key path, and the tools selected of it."""
    used: dict[str, tuple[KeyPath, dict[str, Tool]]] = {}
    for agent in manifest.agents.values():
        for index, selection in enumerate(agent.tools):
            where, selected = used.setdefault(selection.api, (("agents", agent.name, "tools", index, "api"), {}))
            selected.update((tool.name, tool) for tool in select_tools(selection, catalog))
    return used


def check_servers(c: Checker, manifest: Manifest, catalog: Catalog) -> None:
    """An api an agent uses that has no absolute server to call (no `servers`, as FastAPI writes its specs, a
    relative one, a variable without a default) and no base_url: every call would fail, so say so now."""
    for api, (where, selected) in _used_apis(manifest, catalog).items():
        if manifest.api(api).base_url:
            continue
        problem = next((found for tool in selected.values() if (found := _server_problem(tool))), None)
        if problem is not None:
            path = ("apis", api) if api in manifest.apis else where
            c.warning(path, f"{problem}: no call to {api!r} can be sent; set apis.{api}.base_url")


def _server_problem(tool: Tool) -> str | None:
    if not tool.servers:
        return f"{tool.source or tool.api} declares no server"
    server = tool.servers[0]
    resolved = server.resolved()
    url = urlsplit(resolved)
    if "{" in resolved:
        return f"the server {server.url!r} of {tool.source or tool.api} has a variable without a default"
    if url.scheme not in ("http", "https") or not url.hostname:
        return f"the server {server.url!r} of {tool.source or tool.api} is relative or not http(s)"
    return None


def check_security(c: Checker, manifest: Manifest, catalog: Catalog) -> None:
    """Warn once per used api when selected operations demand credentials and none are configured."""
    for api, (where, selected) in _used_apis(manifest, catalog).items():
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
