"""What a model sees of a tool: a *view* of its exact schema that fits a token budget in every provider format.

The catalog keeps each tool's exact schema; the executor validates against it. A prompt cannot hold it for big
APIs (one Graph tool is hundreds of KB), so `model_view(tool, budget)` applies reduction steps, in this order,
and stops at the first that fits (measured over the OpenAI, OpenAI strict, Anthropic, Gemini and MCP renderings):

1. `read_only`: readOnly properties out of the input (the spec says they are not sent), writeOnly out of the output;
2. `defs`: small leaf `$defs` inlined, unused ones dropped;
3. `annotations`: examples, `x-` extensions, `$comment` and titles out;
4. `descriptions`: every description shortened to its first sentence;
5. `depth:N` (N = 6, 4, 3, 2, 1): the output schema out, references inlined down to depth N, and everything deeper
   replaced by a stub that keeps the JSON type and says how to read its shape (`describe_tool` with a pointer);
6. `enums`: enums of more than 16 values summarized in the description (a few values named);
7. `required_only`: only required properties, as stubs (the last resort; it always fits).

Every step only *widens* what the schema accepts (keywords out, subschemas replaced by open ones, a closed
object opened when one of its properties goes), so the view never refuses arguments the exact schema accepts;
what it leaves out comes back from validation as the usual corrective error. `describe(tool, pointer)` answers
the exact schema of a tool or of one part of it (the `describe_tool` tool of the loop and the MCP door). The
schema edits themselves are in `gateway.offer.reductions`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from ..dialects.brevity import CHARS_PER_TOKEN, definition_tokens, estimate_tokens, first_sentences
from ..dialects.tool import ToolLike
from .reductions import (
    DESCRIBE_TOOL,
    Cutter,
    TooBig,
    def_facts,
    drop_flagged,
    inline_small_defs,
    keep_required,
    map_nodes,
    refs,
    resolve,
    shorten_description,
    strip_annotations,
    summarize_enum,
)

__all__ = ["CHARS_PER_TOKEN", "DEFAULT_TOOL_BUDGET", "DESCRIBE_SCHEMA", "DESCRIBE_TOOL", "ToolLike", "ToolView",
           "definition_tokens", "describe", "estimate_tokens", "first_sentences", "model_view"]

DEFAULT_TOOL_BUDGET = 4000
"""Tokens (estimated) one tool's definition may take in any format; `gateway.tool_budget`."""
_DEPTHS = (6, 4, 3, 2, 1)


@dataclass(slots=True, kw_only=True)
class ToolView:
    """One tool as a model is shown it; `source` is the tool it views (its exact schema is there)."""

    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    source: Any
    steps: tuple[str, ...] = ()
    """The reduction steps applied (empty: the exact schema fit)."""
    tokens: int = 0
    """The estimated tokens of the largest rendering of this view."""

    @property
    def stubbed(self) -> bool:
        """Whether parts of the input are only named (the model may need `describe_tool` for them)."""
        return any(step.startswith(("depth", "required_only")) for step in self.steps)

    @property
    def tool(self) -> Any:
        """The catalog tool behind the view (dialects read its method for MCP annotations)."""
        return getattr(self.source, "tool", None) or self.source


_VIEWS: dict[tuple[int, int], tuple[Any, dict[str, Any], ToolView]] = {}


def model_view(tool: ToolLike, budget: int = DEFAULT_TOOL_BUDGET) -> ToolView:
    """The view of `tool` that fits `budget` tokens in every format (memoized per tool object and budget)."""
    key = (id(tool), budget)
    hit = _VIEWS.get(key)
    if hit is not None and hit[0] is tool and hit[1] is tool.input_schema:
        return hit[2]
    view = _reduce(tool, budget)
    if len(_VIEWS) > 65536:
        _VIEWS.clear()
    _VIEWS[key] = (tool, tool.input_schema, view)
    return view


def _reduce(tool: ToolLike, budget: int) -> ToolView:
    view = ToolView(name=tool.name, description=tool.description, input_schema=tool.input_schema,
                    output_schema=tool.output_schema, source=tool)
    cheap = (len(tool.description) + _size(tool.input_schema) + _size(tool.output_schema)) // CHARS_PER_TOKEN
    if cheap * 2 < budget:  # the strict rendering at most doubles a schema: fits without measuring
        view.tokens = cheap * 2
        return view
    steps: list[str] = []
    for name, step in _steps(tool.name, budget):
        try:
            step(view)
        except TooBig:
            continue
        steps.append(name)
        view.steps = tuple(steps)
        plain = (len(view.description) + _size(view.input_schema) + _size(view.output_schema)) // CHARS_PER_TOKEN
        if plain > budget:
            view.tokens = plain  # every rendering carries at least this much: no need to render it
            continue
        view.tokens = definition_tokens(view)
        if view.tokens <= budget:
            return view
    return view  # `required_only` with a cut description: as small as a view gets


def _size(schema: dict[str, Any] | None) -> int:
    """Characters of a schema's JSON, its `$defs` entries measured once per definition object."""
    if schema is None:
        return 4
    defs = schema.get("$defs")
    if not isinstance(defs, dict):
        return len(orjson.dumps(schema))
    body = len(orjson.dumps({k: v for k, v in schema.items() if k != "$defs"}))
    return body + sum(len(name) + 4 + def_facts(value)[1] for name, value in defs.items())


def _steps(name: str, budget: int) -> Iterator[tuple[str, Callable[[ToolView], None]]]:
    def read_only(view: ToolView) -> None:
        view.input_schema = drop_flagged(view.input_schema, "readOnly")
        if view.output_schema is not None:
            view.output_schema = drop_flagged(view.output_schema, "writeOnly")

    def defs(view: ToolView) -> None:
        view.input_schema = inline_small_defs(view.input_schema)
        if view.output_schema is not None:
            view.output_schema = inline_small_defs(view.output_schema)

    def annotations(view: ToolView) -> None:
        view.input_schema = map_nodes(view.input_schema, strip_annotations, "annotations")
        if view.output_schema is not None:
            view.output_schema = map_nodes(view.output_schema, strip_annotations, "annotations")

    def descriptions(view: ToolView) -> None:
        view.description = first_sentences(view.description, 400)
        view.input_schema = map_nodes(view.input_schema, shorten_description, "descriptions")
        if view.output_schema is not None:
            view.output_schema = map_nodes(view.output_schema, shorten_description, "descriptions")

    yield "read_only", read_only
    yield "defs", defs
    yield "annotations", annotations
    yield "descriptions", descriptions
    shallow: dict[str, Any] = {}
    for depth in _DEPTHS:
        def cut(view: ToolView, depth: int = depth) -> None:
            if not shallow:
                shallow.update(view.input_schema)
            view.output_schema = None
            view.input_schema = Cutter(name, shallow, depth, budget * CHARS_PER_TOKEN * 2).root()
        yield f"depth:{depth}", cut

    def enums(view: ToolView) -> None:
        view.input_schema = map_nodes(view.input_schema, summarize_enum, "enums")

    def required_only(view: ToolView) -> None:
        view.description = first_sentences(view.description, 200)
        view.input_schema = keep_required(name, shallow or view.input_schema)

    yield "enums", enums
    yield "required_only", required_only


# -- the exact schema on demand ---------------------------------------------------------------------


def describe(tool: ToolLike, pointer: str = "", *, limit: int = 60_000) -> dict[str, Any]:
    """The exact input schema of `tool`, or its part at `pointer` (a JSON pointer that follows `$ref`s), with
    the names of the `$defs` it refers to (ask for `/$defs/<name>` next). Raises KeyError for a bad pointer."""
    schema = tool.input_schema
    defs = schema.get("$defs") or {}
    node: Any = schema
    walked = ""
    for raw in [part for part in pointer.split("/") if part] if pointer else []:
        part = raw.replace("~1", "/").replace("~0", "~")
        node = resolve(node, defs) if part != "$defs" or walked else node
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise KeyError(f"{tool.name} has no part {pointer!r} (stopped at {walked or '/'!r} before {part!r})")
        walked += "/" + raw
    node = resolve(node, defs)
    if node is schema and "$defs" in schema:
        node = {k: v for k, v in schema.items() if k != "$defs"}
    answer: dict[str, Any] = {"name": tool.name, "pointer": pointer or "", "schema": node}
    referenced = sorted(set(refs(node)))
    if referenced:
        answer["refs"] = [f"/$defs/{name}" for name in referenced]
    if len(orjson.dumps(answer)) > limit:
        answer["schema"] = Cutter(tool.name, {**(node if isinstance(node, dict) else {}), "$defs": defs},
                                   2, 10**9).root() if isinstance(node, dict) else node
        answer["note"] = "large: deeper parts are stubs; ask for their pointers"
    return answer


DESCRIBE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "The tool's name."},
        "pointer": {"type": "string", "description": "A JSON pointer into its input schema, e.g. "
                                                     "/properties/body; empty for the whole schema."},
    },
    "required": ["name"],
}
