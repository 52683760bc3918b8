"""What the definitions budget charges for a tool, against what each door sends of it.

    python bench/definitions_budget.py [--per-tool] [--per-call]

An agent with all of GitHub's spec (tool search on by `auto`) and `pinned: [users/get-authenticated, "issues/list*"]`
(20 tools). For each provider kind: the JSON bytes and estimated tokens (`CHARS_PER_TOKEN` characters a token, the
estimate the budget uses; no tokenizer's files can be fetched here) of the first request's `tools` as the adapter
renders them; the same for the MCP door's `tools/list` entries; what the budget charged each definition before
(its largest rendering, `ToolView.tokens`) and charges now (the provider's rendering, the MCP listing's for MCP);
and how many tools a run loads under the default budget from searches that find 20 tools each.

--per-call: docs/tool-search.md's "What it saves": an agent with all of GitHub pinning one tool
(`users/get-authenticated`), the tool-definition tokens each model call carries, as the budget counts them (the
same estimate, each definition as its door sends it: `ToolOffer.tokens` with the provider's `definition_tokens`;
MCP: a session's `tools/list`, `call_tool` included), at the start, after one search and after five (the searches
above, at `search_tools`' default limit), with how many tools were loaded; and every tool's exact definition.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.support import GITHUB  # noqa: E402

AGENTS = """\
providers:
  llm: {{kind: {kind}, api_key: unused{strict}}}
agents:
  dev: {{model: llm/some-model, tools: [{{api: github}}], pinned: [users/get-authenticated, "issues/list*"]}}
"""
KINDS = (("openai", ""), ("openai", ", strict: true"), ("anthropic", ""), ("gemini", ""), ("ollama", ""),
         ("openai-responses", ""))
QUERIES = ("list pull requests", "create a release", "add a label to an issue", "list workflow runs",
           "star a repository")
"""Searches of a run, each for 20 tools (`search_tools`' largest limit)."""


def _size(value: Any) -> int:
    from gateway.jsonwire import dumps

    return len(dumps(value))


def _loaded(offer: Any) -> int:
    for query in QUERIES:
        offer.answer("search_tools", {"query": query, "limit": 20})
    return len(offer.loaded)


def _agents(template: str) -> Iterator[tuple[str, Any, Any, Any]]:
    """For each provider kind of `KINDS`: its label, and the agent `dev`'s config, toolset and provider adapter
    over all of GitHub with `template` as agents.yaml (a runtime each, in a temporary folder)."""
    from gateway.providers import get_adapter
    from gateway.runtime import load_runtime

    with tempfile.TemporaryDirectory() as folder:
        specs = Path(folder) / "specs"
        specs.mkdir()
        (specs / "github.json").symlink_to(GITHUB)
        for kind, strict in KINDS:
            agents = Path(folder) / "agents.yaml"
            agents.write_text(template.format(kind=kind, strict=strict))
            runtime = load_runtime(specs, agents, cache_dir=Path(folder) / "cache")
            adapter = get_adapter(runtime.manifest.providers["llm"])
            yield f"{kind}{' strict' if strict else ''}", runtime.agent("dev"), runtime.toolset("dev"), adapter


def measure(per_tool: bool) -> None:
    from gateway.dialects.brevity import estimate_tokens
    from gateway.offer.toolsearch import ToolOffer, pinned_tools
    from gateway.offer.views import model_view
    from gateway.server.mcp.listing import _item
    from gateway.server.mcp.search import listed_tokens

    print(f"{'door':24} {'pinned':>6} {'bytes':>8} {'tokens':>7} {'charged before':>15} {'now':>7} "
          f"{'loaded before':>14} {'now':>5}")
    for label, agent, toolset, adapter in _agents(AGENTS):
        offer = ToolOffer(agent, toolset)
        pins = [model_view(t, offer.budget) for t in pinned_tools(agent, toolset)]
        rendered = adapter.render_tools(pins)
        after = ToolOffer(agent, toolset, measure=adapter.definition_tokens)
        print(f"{label:24} {len(pins):6d} {_size(rendered):8,d} {sum(map(adapter.definition_tokens, pins)):7,d} "
              f"{offer.tokens():15,d} {after.tokens():7,d} {_loaded(offer):14d} {_loaded(after):5d}")
        if label == "openai":
            listed = [_item(view, "legacy")[0] for view in pins]
            mcp_after = ToolOffer(agent, toolset, measure=listed_tokens)
            print(f"{'mcp tools/list':24} {len(pins):6d} {_size(listed):8,d} "
                  f"{sum(estimate_tokens(item) for item in listed):7,d} {ToolOffer(agent, toolset).tokens():15,d} "
                  f"{mcp_after.tokens():7,d} {_loaded(ToolOffer(agent, toolset)):14d} {_loaded(mcp_after):5d}")
            if per_tool:
                rows = [(view.name, view.tokens, _size(one), adapter.definition_tokens(view),
                         _size(_item(view, "legacy")[0]), listed_tokens(view))
                        for view, one in zip(pins, rendered, strict=True)]
    if per_tool:
        print(f"\n{'tool':42} {'charged before':>14} {'openai bytes':>12} {'tokens':>7} {'mcp bytes':>10} "
              f"{'tokens':>7}")
        for name, charged, size, tokens, mcp_size, mcp_tokens in rows:
            print(f"{name:42} {charged:14,d} {size:12,d} {tokens:7,d} {mcp_size:10,d} {mcp_tokens:7,d}")


ONE_PINNED = """\
providers:
  llm: {{kind: {kind}, api_key: unused{strict}}}
agents:
  dev: {{model: llm/some-model, tools: [{{api: github}}], pinned: [users/get-authenticated]}}
"""


def per_call() -> None:
    import asyncio

    from gateway.offer.toolsearch import ToolOffer
    from gateway.offer.views import model_view
    from gateway.server.mcp import search

    async def no_call(name: str, arguments: dict[str, Any]) -> None:
        raise AssertionError("search_tools calls no tool")

    def mcp_row(agent: Any, toolset: Any) -> list[tuple[int, int]]:
        found: list[str] = []

        def listed() -> tuple[int, int]:
            views = [*search.listing(agent, toolset), *(model_view(toolset.tools[n]) for n in found)]
            return sum(search.listed_tokens(v) for v in views), len(found)

        rows = [listed()]
        for query in QUERIES:
            asyncio.run(search.answer_meta(agent, toolset, "search_tools", {"query": query}, no_call, found))
            rows.append(listed())
        return rows

    print(f"{'door':24} {'start':>7} {'1 search':>14} {'5 searches':>14} {'all exact':>10}")
    for label, agent, toolset, adapter in _agents(ONE_PINNED):
        offer = ToolOffer(agent, toolset, measure=adapter.definition_tokens)
        rows = [(offer.tokens(), 0)]
        for query in QUERIES:
            offer.answer("search_tools", {"query": query})
            rows.append((offer.tokens(), len(offer.loaded)))
        exact = sum(adapter.definition_tokens(t) for t in toolset)
        print(f"{label:24} {rows[0][0]:7,d} {rows[1][0]:7,d} ({rows[1][1]:2d}) {rows[5][0]:7,d} ({rows[5][1]:2d}) "
              f"{exact:10,d}")
        if label == "openai":
            mcp = mcp_row(agent, toolset)
            exact = sum(search.listed_tokens(t) for t in toolset)
            print(f"{'mcp session tools/list':24} {mcp[0][0]:7,d} {mcp[1][0]:7,d} ({mcp[1][1]:2d}) "
                  f"{mcp[5][0]:7,d} ({mcp[5][1]:2d}) {exact:10,d}")
    print(f"({len(toolset)} tools; tokens estimated as the budget does; in brackets: tools loaded)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-tool", action="store_true", help="each pinned tool's figures (OpenAI and MCP)")
    parser.add_argument("--per-call", action="store_true",
                        help="only the tokens each call carries for the agent pinning one tool (docs/tool-search.md)")
    args = parser.parse_args()
    if args.per_call:
        per_call()
    else:
        measure(args.per_tool)
    return 0


if __name__ == "__main__":
    sys.exit(main())
