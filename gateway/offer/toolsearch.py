"""What a model is offered of an agent's tools: views within the budget, and tool search for large tool sets.

Every offered tool is its model view (`gateway.offer.views`) within `gateway.tool_budget` tokens. With tool
search on (per agent `tool_search: auto | on | off`; auto: on above 64 tools or above the definitions budget as
the door counts it), a run starts with the agent's `pinned` tools, its delegation tools, `search_tools`
(`{"query", "limit"?}`) and `describe_tool` (`{"name", "pointer"?}`: the exact schema of one tool or one part
of it). What a search finds is loaded for the rest of the run: appended after the tools already offered, never
reordered (prompt caches keep working), as long as a request stays within 128 tools and
`gateway.tool_definitions_budget` tokens of definitions; a tool that no longer fits is named in the search's
answer as not loaded. The budget counts the definitions as the door sends them (`ToolOffer`'s `measure`: the
loop, in its provider's format, which the provider's request carries; the MCP door, as its listing's entries), not
each tool's largest rendering: the budget is there to keep what one request carries within what the model takes;
`auto` counts every tool the same way to decide whether a door searches at all.

`tool_search: native` hands the search to the provider where it has its own (Anthropic, OpenAI Responses): every
tool goes out marked for deferred loading except the pinned and delegation tools, beside the provider's
search tool (`gateway.providers.deferred`); the gateway loads nothing itself. A door without a native search
(MCP) treats `native` as `on`.

Code mode (per agent `code_mode`, `gateway.codemode`): `on` appends `run_code` to what is offered; `only` offers
`run_code`, `search_tools` and `describe_tool` alone (a search then loads nothing: its answer shows each found
tool's signature as a function of the script). `run_code`'s description documents the functions of the tools
a run starts with (a large agent's pinned tools) within the tool budget.

`find(...)` is the one search every door uses: the loop's `search_tools`, `GET /agents/{agent}/tools/search`,
`gateway tools --search`, the console and the MCP door; it answers the tools found (`search(...)`'s answer) and,
where it can tell, whether the best of them is close to the request at all (`gateway.offer.closeness`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from ..catalog import AgentTool, Catalog, Tool
from ..config.model import AgentConfig
from ..config.settings import GatewaySettings
from ..toolsets import SearchScope, Toolset
from .copies import addresses, fold
from .views import (
    DEFAULT_TOOL_BUDGET,
    DESCRIBE_SCHEMA,
    DESCRIBE_TOOL,
    ToolLike,
    ToolView,
    describe,
    first_sentences,
    model_view,
)

if TYPE_CHECKING:
    from ..codemode import FunctionNames
    from .closeness import Match
    from .embeddings import Computation
    from .index import ToolIndex

SEARCH_TOOL = "search_tools"
AUTO_MAX_TOOLS = 64
"""`tool_search: auto` turns search on above this many tools."""
MAX_TOOLS_PER_REQUEST = 128
"""OpenAI refuses more tools in one request; no request the loop makes carries more."""
DEFAULT_DEFINITIONS_BUDGET = 20_000
"""Tokens of tool definitions one request may carry (`gateway.tool_definitions_budget`)."""
DEFAULT_LIMIT = 5
RECENT_SEARCHES = 256
"""BM25's rankings kept per toolset (`SearchScope.ranked`), the size of a scope made from then on: an agent often asks
the same words again in a run."""
MAX_LIMIT = 20

SEARCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "What you want to do, in a few words (e.g. 'close an issue')."},
        "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT,
                  "description": f"How many tools to find (default {DEFAULT_LIMIT})."},
    },
    "required": ["query"],
}


def tool_budget(settings: GatewaySettings) -> int:
    """`gateway.tool_budget`: tokens one tool's view may take."""
    return settings.tool_budget or DEFAULT_TOOL_BUDGET


def definitions_budget(settings: GatewaySettings) -> int:
    """`gateway.tool_definitions_budget`: tokens of definitions one request may carry."""
    return settings.tool_definitions_budget or DEFAULT_DEFINITIONS_BUDGET


def search_enabled(agent: AgentConfig, toolset: Toolset, measure: Callable[[ToolLike], int] | None = None) -> bool:
    """Whether the agent's model starts from `search_tools` instead of every tool (`native`: where the
    provider has no search of its own). `auto`: above `AUTO_MAX_TOOLS` tools, or when every tool's definition
    passes the definitions budget, counted as the budget counts them (`measure`: as the door sends them, the
    `ToolOffer`'s; None: each one's largest rendering), so a door searches exactly when its own request or listing
    of every tool would not fit."""
    if agent.tool_search != "auto":
        return agent.tool_search in ("on", "native")
    if len(toolset) > AUTO_MAX_TOOLS:
        return True
    return all_definitions(toolset, measure) > definitions_budget(toolset.settings)


def all_definitions(toolset: Toolset, measure: Callable[[ToolLike], int] | None = None) -> int:
    """The tokens of every tool's definition, counted as `measure` counts one (None: its largest rendering). The
    same for the toolset's life, and a door asks at every meta-tool call (hundreds of µs for 60 tools): kept on the
    toolset per count, a handful at most (an adapter made per run brings a count of its own)."""
    totals = toolset.definition_totals
    kept = totals.get(measure)
    if kept is not None and kept[0] == len(toolset.tools):
        return kept[1]
    budget = tool_budget(toolset.settings)
    total = sum(max(measure(view) if measure else view.tokens, 1) for view in (model_view(t, budget) for t in toolset))
    if len(totals) >= 8:
        totals.clear()
    totals[measure] = (len(toolset.tools), total)
    return total


def catalog_of(toolset: Toolset) -> Catalog:
    """The catalog behind a toolset (one made of its tools when it was built without one)."""
    if toolset.catalog is None:
        toolset.catalog = Catalog(list({t.tool.name: t.tool for t in toolset if t.tool is not None}.values()))
    return toolset.catalog


@dataclass(slots=True, frozen=True)
class Found:
    """What one search answers (`find`)."""

    items: list[dict[str, Any]]
    """The tools found, best first (`search`'s answer)."""
    match: Match | None = None
    """`weak` when nothing found is close to the request (its items are the closest), `close` when the best is; None
    where no absolute measure holds (BM25 alone, an embeddings endpoint, fewer tools searched than any API measured)
    or nothing was found (`gateway.offer.closeness`)."""


WEAK_NOTE = ("Nothing close to this request was found: these are the closest tools; try other words, or say that "
             "these tools cannot do it.")
"""What `search_tools` tells the model when the answer is weak."""


def search(catalog: Catalog | None, toolset: Toolset, query: str, limit: int = 10) -> list[dict[str, Any]]:
    """The agent's tools that best match `query`, best first: `{name, api, operation_id, summary, score}`; a tool
    scored 0 (nothing of the query in it) is not one of them. One operation answered at several addresses (Graph's
    `/me/...` and `/users/{id}/...`) takes one place, its best copy's, and names the others in `copies`
    (`gateway.offer.copies`).

    With `gateway.search_embeddings`, BM25's ranking is fused with the embeddings' (`gateway.offer.embeddings`):
    the score is then the fused one."""
    return find(catalog, toolset, query, limit).items


def find(catalog: Catalog | None, toolset: Toolset, query: str, limit: int = 10) -> Found:
    """`search(...)`'s tools, and whether the best of them is close to the request (`Found.match`): what every door
    answers."""
    # The index and the embeddings are imported by the first search, not by whoever lists an agent's tools
    # (`gateway mcp` lists before anyone searches).
    from .closeness import closeness
    from .embeddings import FUSION_DEPTH, hybrid_with_similar

    catalog = catalog or catalog_of(toolset)
    scope = _scope_of(catalog, toolset)
    by_catalog_name, apis = scope.by_catalog_name, scope.apis
    allowed = None if scope.everything else (lambda tool: tool.name in by_catalog_name)
    embeddings = toolset.embeddings
    limit = max(1, min(limit, 100))
    # deeper than `limit`: the places a copy of an operation above would take go to the next operations
    ranked = scope.ranked(query, max(limit, FUSION_DEPTH))
    similar = None
    if embeddings is not None:
        ranked, similar = hybrid_with_similar(embeddings, catalog, apis, allowed, query, ranked)
    found = []
    kept = [(tool, score) for tool, score in ranked if tool.name in by_catalog_name and score > 0]
    for tool, score, copies in fold(kept, limit, addresses(catalog)):
        item: dict[str, Any] = {"name": by_catalog_name[tool.name].name, "api": tool.api,
                                "operation_id": tool.operation_id, "summary": _summary(tool), "score": score}
        if copies:
            item["copies"] = [by_catalog_name[copy.name].name for copy in copies]
        found.append(item)
    # read from the cosines the fusion already had: the ranking and its scores are the same, marked or not
    return Found(found, closeness(embeddings, similar, len(by_catalog_name)) if found else None)


def _scope_of(catalog: Catalog, toolset: Toolset) -> SearchScope:
    scope = toolset.search_scope
    if scope is None or scope.catalog is not catalog or scope.count != len(toolset.tools):
        from .index import index_of

        by_catalog_name = {t.tool.name: t for t in toolset if t.tool is not None}
        apis = list(dict.fromkeys(t.api for t in (a.tool for a in toolset) if t is not None))
        everything = len(by_catalog_name) == sum(len(catalog.for_api(api)) for api in apis)
        allowed = None if everything else (lambda tool: tool.name in by_catalog_name)
        ranked = functools.lru_cache(maxsize=RECENT_SEARCHES)(functools.partial(_bm25, index_of(catalog), apis,
                                                                                allowed))
        scope = toolset.search_scope = SearchScope(catalog, len(toolset.tools), by_catalog_name, apis, everything,
                                                   ranked)
    return scope


def _bm25(index: ToolIndex, apis: list[str], allowed: Callable[[Tool], bool] | None, query: str,
          depth: int) -> list[tuple[Tool, float]]:
    """BM25's best `depth` tools of `apis` (those `allowed`) for `query`."""
    return [(hit.tool, hit.score) for hit in index.search(query, limit=depth, apis=apis, allowed=allowed)]


def marked(body: dict[str, Any], match: Match | None) -> dict[str, Any]:
    """A `search_tools` answer with its closeness (`Found.match`): `match` beside the tools, and when weak, the
    note for the model begins by saying so (`WEAK_NOTE`)."""
    if match is None:
        return body
    body["match"] = match
    body["note"] = note_for(match, body["note"])
    return body


def note_for(match: Match | None, note: str) -> str:
    """`note` for the model, led by `WEAK_NOTE` when the search's best is weak: every door's `search_tools` words it
    so, whatever note it gives."""
    return f"{WEAK_NOTE} {note}" if match == "weak" else note


def prepare_search(catalog: Catalog, agents: Iterable[tuple[AgentConfig, Toolset]]) -> None:
    """With `gateway.search_embeddings`, start computing (or reading from disk) the embeddings of every api an
    agent searches, off the caller's thread: the first search then finds them ready, or answers BM25 alone while
    they are not (a local model takes minutes over Graph the first time)."""
    for agent, toolset in agents:
        if search_enabled(agent, toolset):
            prepare_toolset(catalog, toolset)


def prepare_toolset(catalog: Catalog, toolset: Toolset) -> list[Computation]:
    """Start the embeddings of a toolset's apis (with `gateway.search_embeddings`): those still being computed."""
    if toolset.embeddings is None:
        return []
    from .embeddings import Computation, prepare

    apis = dict.fromkeys(t.api for t in (a.tool for a in toolset) if t is not None)
    return [pending for pending in prepare(toolset.embeddings, catalog, list(apis))
            if isinstance(pending, Computation)]


def _summary(tool: Tool) -> str:
    return first_sentences(tool.summary or tool.description.split("\n", 1)[0], 160)


def meta_tools() -> list[AgentTool]:
    """`search_tools` and `describe_tool` as tools a model can call (the loop and MCP answer them)."""
    return [
        AgentTool(name=SEARCH_TOOL, input_schema=SEARCH_SCHEMA,
                  description="Find the tools for a task among this agent's tools. Answers the best matches; "
                              "they are loaded, so you can call them next."),
        AgentTool(name=DESCRIBE_TOOL, input_schema=DESCRIBE_SCHEMA,
                  description="Read the exact input schema of a tool, or of one part of it (a JSON pointer), "
                              "when its definition says a part's shape is not shown."),
    ]


def pinned_tools(agent: AgentConfig, toolset: Toolset) -> list[AgentTool]:
    """The agent's `pinned` tools and its delegation tools, in toolset order."""
    patterns = agent.pinned
    chosen = []
    for agent_tool in toolset:
        names = [agent_tool.name, *(filter(None, [agent_tool.tool.operation_id] if agent_tool.tool else []))]
        if agent_tool.delegate is not None or any(fnmatchcase(n, p) for p in patterns for n in names):
            chosen.append(agent_tool)
    return chosen


class ToolOffer:
    """The tools one run offers its model: all of them (search off), pinned + meta + what was found (search
    on), or all of them deferred to the provider's own search (`native`)."""

    def __init__(self, agent: AgentConfig, toolset: Toolset, loaded: Iterable[str] = (), *,
                 native: bool = False, measure: Callable[[ToolLike], int] | None = None,
                 beside: Sequence[ToolLike] = ()) -> None:
        """Parameters: loaded: names a paused run had loaded; native: the provider has a search of its own
        (`ProviderAdapter.native_tool_search`), used when the agent says `tool_search: native`; measure: the
        tokens of one definition in the format the door sends it in (the loop: its provider's,
        `ProviderAdapter.definition_tokens`), what the definitions budget charges; None: its largest rendering
        (`ToolView.tokens`), for a door whose format is not known; beside: definitions the door sends beside the
        offer (the MCP listing's `call_tool`), counted in the definitions budget and the tool cap."""
        self.agent = agent
        self._measure = measure
        self.beside = list(beside)
        self._costs: dict[str, int] = {}
        """What each definition offered or loaded costs, by name (a view is the same in every request of a run)."""
        self.toolset = toolset
        self.budget = tool_budget(toolset.settings)
        self.definitions_budget = definitions_budget(toolset.settings)
        self.code_only = agent.code_mode == "only"
        """The tools are functions of `run_code` scripts only: none is offered (or callable) on its own."""
        self.native = native and agent.tool_search == "native" and not self.code_only
        large = search_enabled(agent, toolset, measure) and not self.native
        self.searching = large or self.code_only
        self.meta = {t.name: t for t in meta_tools()} if self.searching else {}
        self.code: AgentTool | None = None
        """`run_code`, in code mode."""
        self.functions: FunctionNames | None = None
        """In code mode: the script's function names of the agent's tools."""
        self.offered: list[AgentTool] = []
        self._kept: set[str] = set()
        """Native search: the tools sent without deferral (pinned and delegation tools, `describe_tool`)."""
        self._native_views: list[Any] | None = None
        if self.native:
            self.offered = list(toolset)
            self._kept = {t.name for t in pinned_tools(agent, toolset)}
            if any(model_view(t, self.budget).stubbed for t in self.offered):
                self.meta = {DESCRIBE_TOOL: meta_tools()[1]}
                self.offered.insert(0, self.meta[DESCRIBE_TOOL])
                self._kept.add(DESCRIBE_TOOL)
        elif self.code_only:
            self.offered = list(self.meta.values())
        elif self.searching:
            room = MAX_TOOLS_PER_REQUEST - len(self.meta) - (agent.code_mode != "off")
            self.offered = [*pinned_tools(agent, toolset)[:room], *self.meta.values()]
        else:
            self.offered = list(toolset)
            if any(model_view(t, self.budget).stubbed for t in self.offered):
                self.meta = {DESCRIBE_TOOL: meta_tools()[1]}
                self.offered.append(self.meta[DESCRIBE_TOOL])
        if agent.code_mode != "off":
            self._offer_code(large or self.native)
        for name in loaded:
            self.load(name)

    def _offer_code(self, large: bool) -> None:
        """`run_code` first (`only`) or after the tools (`on`), documenting the tools the run starts with."""
        from ..codemode import FunctionNames, Limits, run_code_tool

        self.functions = FunctionNames(self.toolset.names)
        documented = pinned_tools(self.agent, self.toolset) if large else list(self.toolset)
        self.code = run_code_tool(documented, self.functions, total=len(self.toolset), budget=self.budget,
                                  searching=self.searching, limits=Limits.of(self.agent.code_limits))
        if self.code_only:
            self.offered.insert(0, self.code)
        else:
            self.offered.append(self.code)
            self._kept.add(self.code.name)

    @property
    def loaded(self) -> list[str]:
        """The names loaded by searches, in order (a paused run's state keeps them)."""
        if self.native or self.code_only:
            return []  # the provider's search loads them, in the conversation it is sent back; or nothing does
        pinned = {t.name for t in pinned_tools(self.agent, self.toolset)}
        return [t.name for t in self.offered if t.name not in self.meta and t.name not in pinned
                and t is not self.code]

    def views(self) -> list[Any]:
        """The definitions of the next request: each offered tool's view, in offer order (native search: the
        views deferred but the kept ones, and the provider's search tool last)."""
        if self.native:  # the list never changes in a run (the provider loads what it finds): made once
            if self._native_views is None:
                # Imported for the first native offer only: no MCP listing or direct call defers anything.
                from ..providers.deferred import SERVER_SEARCH, deferred

                self._native_views = [*(v if v.name in self._kept else deferred(v, *self._group_of(v))
                                        for v in self._views()), SERVER_SEARCH]
            return self._native_views
        return self._views()

    def _views(self) -> list[Any]:
        return [t if t.name in self.meta or t is self.code else model_view(t, self.budget) for t in self.offered]

    def _group_of(self, view: Any) -> tuple[str, str]:
        """The api of a view's tool and that api's title (`DeferredTool.group`)."""
        api = getattr(view.tool, "api", "") or ""
        spec = self.toolset.catalog.apis.get(api) if self.toolset.catalog is not None and api else None
        return api, spec.title if spec is not None else ""

    def tokens(self) -> int:
        """The tokens the next request's definitions take (the door's `beside` included), as the budget counts them."""
        return sum(self._cost(v) for v in (*self.views(), *self.beside))

    def _cost(self, view: Any) -> int:
        cost = self._costs.get(view.name)
        if cost is None:
            if self._measure is not None:
                cost = self._measure(view)
            else:
                cost = view.tokens if isinstance(view, ToolView) else model_view(view, self.budget).tokens
            cost = self._costs[view.name] = max(cost, 1)
        return cost

    def load(self, name: str) -> str | None:
        """Offer `name` from the next request on; the reason when it cannot be (None: loaded or already there)."""
        if any(t.name == name for t in self.offered):
            return None
        if self.code_only:
            return "not loaded: in code mode only, every tool is a function of run_code scripts"
        agent_tool = self.toolset.get(name)
        if agent_tool is None:
            return "not a tool of this agent"
        if len(self.offered) + len(self.beside) >= MAX_TOOLS_PER_REQUEST:
            return f"not loaded: a request carries at most {MAX_TOOLS_PER_REQUEST} tools"
        cost = self._cost(model_view(agent_tool, self.budget))
        if self.tokens() + cost > self.definitions_budget:
            return f"not loaded: the definitions would pass {self.definitions_budget} tokens"
        self.offered.append(agent_tool)
        return None

    def is_meta(self, name: str) -> bool:
        return name in self.meta

    def _found_functions(self, found: list[dict[str, Any]]) -> dict[str, Any]:
        for item in found:
            self._sign(item)
            if self.functions is not None and "copies" in item:  # a script calls them by their functions' names
                item["copies"] = [self.functions.function(copy) for copy in item["copies"]]
        if not found:
            return {"tools": [], "note": "nothing matched; try other words"}
        return {"tools": found, "note": "call these as functions in a run_code script"}

    def _sign(self, item: dict[str, Any]) -> None:
        """In code mode: the found tool's signature as a function of run_code scripts."""
        agent_tool = self.toolset.get(item["name"])
        if self.functions is None or agent_tool is None:
            return
        from ..codemode import signature

        item["function"] = self.functions.function(agent_tool.name)
        item["signature"] = signature(agent_tool, item["function"], summary=False)

    def answer(self, name: str, arguments: dict[str, Any]) -> tuple[bool, Any]:
        """Run a meta tool: (ok, the result body)."""
        if name == SEARCH_TOOL:
            query = arguments.get("query")
            if not isinstance(query, str) or not query.strip():
                return False, "`query` must be a non-empty string: what you want to do, in a few words"
            limit = arguments.get("limit", DEFAULT_LIMIT)
            if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
                return False, f"`limit` must be an integer from 1 to {MAX_LIMIT}"
            answered = find(None, self.toolset, query, limit)
            found = answered.items
            if self.code_only:
                return True, marked(self._found_functions(found), answered.match)
            for item in found:
                refusal = self.load(item["name"])
                item["loaded"] = refusal is None
                if refusal is not None:
                    item["note"] = refusal
                self._sign(item)
            for item in found:  # after every operation found: a copy is one more address of one already loaded
                refused = [copy for copy in item.get("copies", ()) if self.load(copy) is not None]
                if refused and "note" not in item:
                    item["note"] = f"copies not loaded (the request's tool cap or definitions budget): {refused}"
            if not found:
                return True, {"tools": [], "note": "nothing matched; try other words"}
            return True, marked({"tools": found, "note": "the tools marked loaded can be called from now on"},
                                answered.match)
        tool_name = arguments.get("name")
        agent_tool = self.toolset.get(tool_name) if isinstance(tool_name, str) else None
        if agent_tool is None:
            return False, f"there is no tool named {tool_name!r}; search_tools finds tools"
        pointer = arguments.get("pointer") or ""
        if not isinstance(pointer, str):
            return False, "`pointer` must be a string (a JSON pointer such as /properties/body)"
        try:
            return True, describe(agent_tool, pointer)
        except KeyError as exc:
            return False, str(exc.args[0])

