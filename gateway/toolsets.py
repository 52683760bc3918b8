"""Which agent sees what: the catalog's tools filtered, renamed and narrowed per agent.

`build_toolsets(manifest, catalog)` turns each agent's `tools:` entries into a `Toolset`:

- An entry selects the operations of one api that pass every criterion it gives: `operations`
  (operationIds or catalog tool names, fnmatch globs, case-sensitive), `tags` (any of them), `methods`,
  `paths` (globs over the path template), minus `exclude`. The agent's set is the union of its entries,
  in catalog order per entry; a tool selected twice keeps the first entry's settings.
- Fixed `args` are removed from the schema the model sees (`properties` and `required`) and kept in
  `AgentTool.fixed_args`; the executor sends them with every call. A key may name the input property or
  the argument's wire name.
- Per-tool `override`: `rename`, `description`, `approval`, `timeout`, `max_result_bytes`, `output_check` (default:
  the api's `output_check`).
- Each delegate becomes `ask_<agent>` with input `{task: string}` and `AgentTool.delegate` set. It needs
  approval only under `approval: always`: the sub-agent's own policy gates its own calls.
- Names are unique per agent. The catalog's names are unique already (two specs with `getUser` are
  `github_getUser` and `shop_getUser` there); when a rename or a delegation tool collides, every colliding
  operation is qualified by its api, then by a stable hash, and a warning says so. The binding (`AgentTool.tool`)
  always keeps the real catalog `Tool`.

Entries naming an api the catalog lacks are skipped here; `gateway.configuration.load_configuration` reports them.
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from .catalog import AgentTool, Catalog, Diagnostic, JSONSchema, Level, Tool
from .config.checker import suggest
from .config.embeddings_endpoint import SearchEmbeddings
from .config.model import AgentConfig, Manifest, ToolOverride, ToolSelection
from .config.settings import GatewaySettings

_GLOB = re.compile(r"[*?\[]")


@dataclass(frozen=True, slots=True)
class SearchScope:
    """A toolset as tool search reads it over one catalog: walking 11,000 tools for it at each search would cost
    more than the search."""

    catalog: Catalog
    count: int
    """How many tools the toolset had: one added or removed since is a new scope."""
    by_catalog_name: dict[str, AgentTool]
    apis: list[str]
    everything: bool
    """Whether the toolset holds every tool of its apis (the search then filters nothing)."""
    ranked: Callable[[str, int], list[tuple[Tool, float]]]
    """BM25's ranking of a request to a depth over these tools, the index's, the last requests' kept
    (`gateway.offer.toolsearch`, a `functools.lru_cache` of its own): an agent that asks again is answered without
    searching the index again. A new scope starts empty, so a toolset or catalog that changed is searched again."""


@dataclass(slots=True, kw_only=True)
class Toolset:
    """One agent's tools, by name, in a stable order."""

    agent: str
    tools: dict[str, AgentTool] = field(default_factory=dict)
    catalog: Catalog | None = None
    """The catalog the tools come from (tool search reads its index)."""
    settings: GatewaySettings = field(default_factory=GatewaySettings.model_construct)
    """The manifest's `gateway:` settings (`tool_budget`, `tool_definitions_budget`)."""
    embeddings: SearchEmbeddings | None = None
    """`gateway.search_embeddings`, parsed once with the manifest: tool search blends it with BM25."""
    search_scope: SearchScope | None = field(default=None, repr=False, compare=False)
    """What tool search reads of these tools at every search, made at the first (`gateway.offer.toolsearch`)."""
    definition_totals: dict[Any, tuple[int, int]] = field(default_factory=dict, repr=False, compare=False)
    """Every tool's definition summed as one door counts them, by that count (`gateway.offer.toolsearch.
    search_enabled`, with the number of tools it was made for): made at the first ask, not at each meta-tool call."""

    def __iter__(self) -> Iterator[AgentTool]:
        return iter(self.tools.values())

    def __len__(self) -> int:
        return len(self.tools)

    def get(self, name: str) -> AgentTool | None:
        return self.tools.get(name)

    @property
    def names(self) -> list[str]:
        return list(self.tools)


def build_toolsets(manifest: Manifest, catalog: Catalog) -> tuple[dict[str, Toolset], list[Diagnostic]]:
    """Every agent's `Toolset`, and the diagnostics of the selections (empty ones, unknown names, bad args)."""
    diagnostics: list[Diagnostic] = []
    toolsets = {name: _build_toolset(agent, manifest, catalog, diagnostics) for name, agent in manifest.agents.items()}
    return toolsets, diagnostics


def select_tools(selection: ToolSelection, catalog: Catalog) -> list[Tool]:
    """The catalog tools one `tools:` entry selects, in catalog order."""
    return [tool for tool in catalog.for_api(selection.api) if _matches(selection, tool)]


def _names_of(tool: Tool) -> tuple[str, ...]:
    return (tool.name, tool.operation_id) if tool.operation_id else (tool.name,)


def _any_glob(patterns: list[str], values: tuple[str, ...]) -> bool:
    return any(fnmatchcase(value, pattern) for pattern in patterns for value in values)


def _matches(selection: ToolSelection, tool: Tool) -> bool:
    if selection.operations is not None and not _any_glob(selection.operations, _names_of(tool)):
        return False
    if selection.tags is not None and not _any_glob(selection.tags, tool.tags):
        return False
    if selection.methods is not None and tool.method not in selection.methods:
        return False
    if selection.paths is not None and not _any_glob(selection.paths, (tool.path,)):
        return False
    return not (selection.exclude and _any_glob(selection.exclude, _names_of(tool)))


class _Reporter:
    def __init__(self, manifest: Manifest, selection: ToolSelection, diagnostics: list[Diagnostic]) -> None:
        self.file = manifest.file
        self.selection = selection
        self.diagnostics = diagnostics

    def __call__(self, level: Level, key: str, message: str) -> None:
        pointer = self.selection.pointer + (("." if not key.startswith("[") else "") + key if key else "")
        line = self.selection.key_lines.get(key, self.selection.line)
        self.diagnostics.append(Diagnostic(level=level, file=self.file, pointer=pointer, line=line, message=message))


def _build_toolset(agent: AgentConfig, manifest: Manifest, catalog: Catalog, diagnostics: list[Diagnostic]) -> Toolset:
    chosen: dict[str, tuple[AgentTool, ToolSelection]] = {}  # by catalog tool name
    for selection in agent.tools:
        if selection.api not in catalog.apis and not catalog.for_api(selection.api):
            continue  # an unknown api: load_manifest reports it
        report = _Reporter(manifest, selection, diagnostics)
        make = _tool_maker(selection, agent, manifest)
        tools = select_tools(selection, catalog)
        _check_selection(selection, tools, catalog, report)
        for tool in tools:
            if tool.name in chosen:
                first = chosen[tool.name][1]
                if selection.args != first.args or _override_for(selection, tool) is not None:
                    report("warning", "", f"{tool.name!r} is already selected by {first.pointer}; that entry's "
                                          "args and overrides apply")
                continue
            chosen[tool.name] = (make(tool), selection)
    selected = [agent_tool for agent_tool, _ in chosen.values()]
    entries = {agent_tool.tool.name: selection for agent_tool, selection in chosen.values() if agent_tool.tool}
    subs = [name for name in dict.fromkeys(agent.delegates) if name in manifest.agents]
    delegation = [_delegation_tool(name, manifest) for name in subs]
    for agent_tool in delegation:
        agent_tool.approval = "always" if agent.policy.approval == "always" else "never"
    named = _unique_names(selected, delegation, entries, manifest, diagnostics)
    return Toolset(agent=agent.name, tools={agent_tool.name: agent_tool for agent_tool in named}, catalog=catalog,
                   settings=manifest.gateway, embeddings=manifest.gateway.search_embeddings)


def _override_for(selection: ToolSelection, tool: Tool) -> ToolOverride | None:
    for key in _names_of(tool):
        if key in selection.overrides:
            return selection.overrides[key]
    return None


_NO_OVERRIDE = ToolOverride.model_construct()
"""What a tool without an `override` entry takes (read only): one made per tool was validated per tool, a
thousand times for a big api, and built the model's validator at the first."""


def _tool_maker(selection: ToolSelection, agent: AgentConfig, manifest: Manifest) -> Callable[[Tool], AgentTool]:
    """Each tool `selection` selects as the agent sees it. What the entry, the agent and the api decide is read once
    per entry, not per tool (GitHub's spec: 1,223 tools through one entry at every start)."""
    policy = agent.policy
    api_check = manifest.api(selection.api).output_check  # `select_tools` takes every tool from this api
    overrides, args = selection.overrides, selection.args

    def make(tool: Tool) -> AgentTool:
        override = (_override_for(selection, tool) if overrides else None) or _NO_OVERRIDE
        fixed = {name: value for key, value in args.items() if (name := _property_for(tool, key)) is not None} \
            if args else {}
        return AgentTool(
            name=override.rename or tool.name,
            description=override.description if override.description is not None else tool.description,
            input_schema=_without(tool.input_schema, fixed), output_schema=tool.output_schema, tool=tool,
            fixed_args=fixed, approval=override.approval or policy.approval,
            timeout=override.timeout if override.timeout is not None else policy.tool_timeout,
            max_result_bytes=override.max_result_bytes or policy.max_result_bytes,
            output_check=override.output_check or api_check,
        )

    return make


def _property_for(tool: Tool, key: str) -> str | None:
    """The input property a fixed-args key names: the property itself, or an argument's wire name."""
    if key in (tool.input_schema.get("properties") or {}):
        return key
    owners = [argument.name for argument in tool.arguments if argument.wire_name == key]
    return owners[0] if len(owners) == 1 else None


def _without(schema: JSONSchema, fixed: dict[str, Any]) -> JSONSchema:
    if not fixed:
        return schema
    narrowed = copy.deepcopy(schema)
    properties = narrowed.get("properties") or {}
    for name in fixed:
        properties.pop(name, None)
    if "required" in narrowed:
        narrowed["required"] = [name for name in narrowed["required"] if name not in fixed]
        if not narrowed["required"]:
            del narrowed["required"]
    return narrowed


def _check_selection(selection: ToolSelection, tools: list[Tool], catalog: Catalog, report: _Reporter) -> None:
    api_tools = catalog.for_api(selection.api)
    # The names of the api's tools are needed only for names to check (an entry that takes a whole api has none).
    named = bool(selection.operations or selection.exclude or selection.overrides)
    names = {name for tool in api_tools for name in _names_of(tool)} if named else set()
    if named:
        _check_ambiguous(selection, api_tools, report)
    if not tools:
        report("warning", "", f"selects no operation of {selection.api!r} ({len(api_tools)} operations; "
                              "check operations, tags, methods, paths and exclude)")
    for key, patterns in (("operations", selection.operations or []), ("exclude", selection.exclude)):
        for index, pattern in enumerate(patterns):
            if not _GLOB.search(pattern) and pattern not in names:
                report("warning", f"{key}[{index}]", _no_operation(selection.api, pattern, names, catalog))
            elif _GLOB.search(pattern) and not any(fnmatchcase(name, pattern) for name in names):
                report("warning", f"{key}[{index}]", f"{pattern!r} matches no operation of {selection.api!r}")
    selected = {name for tool in tools for name in _names_of(tool)} if selection.overrides else set()
    for key in selection.overrides:
        if key not in names:
            report("error", f"override.{key}", _no_operation(selection.api, key, names, catalog))
        elif key not in selected:
            report("warning", f"override.{key}", f"{key!r} is not selected by this entry; the override has no effect")
    for key, value in selection.args.items():
        takers = [tool for tool in tools if _property_for(tool, key) is not None]
        if tools and not takers:
            report("error", f"args.{key}", f"no selected operation takes an argument {key!r}")
        for tool in takers:
            problem = _invalid_value(tool, _property_for(tool, key) or key, value)
            if problem:
                report("error", f"args.{key}", f"{value!r} is not a valid value for {tool.name}: {problem}")
                break


def _no_operation(api: str, name: str, names: set[str], catalog: Catalog) -> str:
    """Why `api` has no operation `name`: the compiler skipped it (with its reason and place), or a likely typo."""
    spec = catalog.apis.get(api)
    skipped = spec.skipped.get(name) if spec is not None else None
    if skipped is not None:
        reason = skipped.message.removeprefix("operation skipped: ")
        where = f"{skipped.file}:{skipped.line}" if skipped.line is not None else f"{skipped.file}#{skipped.pointer}"
        return f"operation {name!r} of {api!r} was skipped when its spec was compiled ({where}): {reason}"
    return f"{api!r} has no operation {name!r}" + suggest(name, names)


def _check_ambiguous(selection: ToolSelection, api_tools: Sequence[Tool], report: _Reporter) -> None:
    """A plain name (no glob) that names several operations: an error for `operations` and `override`.

    Duplicate operationIds are common (a GET and a DELETE both `get_item`): the catalog keeps the first
    as `get_item` and calls the other `get_item_<hash>`, so `get_item` is both a tool name and two
    operationIds. Selecting by it would silently take a write; `methods` or `paths` narrow it, or the
    tool names the message lists name each one. `exclude` takes every match (excluding more is safe),
    with a warning.
    """
    narrowed = [tool for tool in api_tools if _passes_filters(selection, tool)]
    keyed: list[tuple[str, Level, list[str]]] = [
        ("operations", "error", selection.operations or []), ("exclude", "warning", selection.exclude)]
    for key, level, patterns in keyed:
        for index, pattern in enumerate(patterns):
            if not _GLOB.search(pattern):
                _report_ambiguous(pattern, narrowed, f"{key}[{index}]", level, report)
    for name in selection.overrides:
        _report_ambiguous(name, narrowed, f"override.{name}", "error", report)


def _passes_filters(selection: ToolSelection, tool: Tool) -> bool:
    """The entry's criteria other than names: what a name is resolved among."""
    if selection.tags is not None and not _any_glob(selection.tags, tool.tags):
        return False
    if selection.methods is not None and tool.method not in selection.methods:
        return False
    return selection.paths is None or _any_glob(selection.paths, (tool.path,))


def _report_ambiguous(name: str, tools: list[Tool], key: str, level: Level, report: _Reporter) -> None:
    matches = [tool for tool in tools if name in _names_of(tool)]
    if len(matches) < 2:
        return
    listing = ", ".join(f"{tool.name} ({tool.method} {tool.path})" for tool in matches)
    if level == "error":
        report(level, key, f"{name!r} names {len(matches)} operations: {listing}; write the tool name of the one "
                           "you mean, or narrow the entry with methods or paths")
    else:
        report(level, key, f"{name!r} names {len(matches)} operations: {listing}; all of them are excluded")


def _invalid_value(tool: Tool, name: str, value: Any) -> str | None:
    import jsonschema  # only when a manifest has fixed args: keeps `import gateway` light

    schema = dict((tool.input_schema.get("properties") or {}).get(name) or {})
    if "$defs" in tool.input_schema:
        schema["$defs"] = tool.input_schema["$defs"]
    try:
        error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(value))
    except Exception:  # noqa: BLE001 - a schema the validator cannot read is the compiler's diagnostic, not ours
        return None
    return error.message if error is not None else None


def _delegation_tool(name: str, manifest: Manifest) -> AgentTool:
    sub = manifest.agents[name]
    about = sub.description or (sub.instructions.strip().splitlines() or [""])[0]
    description = f"Delegate a task to the {name!r} agent, which works on it with its own tools and answers."
    if about:
        description += f" About it: {about}"
    return AgentTool(
        name=f"ask_{name}", description=description, delegate=name,
        input_schema={
            "type": "object",
            "properties": {"task": {"type": "string", "description": "What the agent should do, with every detail "
                                                                     "it needs: it does not see this conversation."}},
            "required": ["task"],
            "additionalProperties": False,
        },
    )


def _unique_names(
    tools: list[AgentTool], delegation: list[AgentTool], entries: dict[str, ToolSelection], manifest: Manifest,
    diagnostics: list[Diagnostic],
) -> list[AgentTool]:
    everything = [*delegation, *tools]
    counts: dict[str, int] = {}
    for agent_tool in everything:
        counts[agent_tool.name] = counts.get(agent_tool.name, 0) + 1
    taken = {name for name, count in counts.items() if count == 1}
    taken.update(t.name for t in delegation)  # `ask_<agent>` is fixed; operations move out of its way
    for agent_tool in tools:
        if counts[agent_tool.name] == 1 or agent_tool.tool is None:
            continue
        original = agent_tool.name
        api = re.sub(r"[^A-Za-z0-9_-]+", "_", agent_tool.tool.api).strip("_")
        candidate = _shorten(f"{api}_{original}")
        if candidate in taken:
            candidate = _shorten(f"{original}_{_digest(agent_tool.tool.api + agent_tool.tool.name)}")
        agent_tool.name = candidate
        taken.add(candidate)
        _Reporter(manifest, entries[agent_tool.tool.name], diagnostics)(
            "warning", "", f"two tools of this agent would be called {original!r}; {agent_tool.tool.name!r} "
                           f"({agent_tool.tool.api}) is called {candidate!r}",
        )
    return [*tools, *delegation]


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:8]


def _shorten(name: str) -> str:
    return name if len(name) <= 64 else name[:55].rstrip("_-") + "_" + _digest(name)
