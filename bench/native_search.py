"""Native tool search (Anthropic, OpenAI Responses) against the gateway's own: what one request carries.

    python bench/native_search.py [--rounds 20]

For an agent with all of GitHub, then all of Stripe, on an `anthropic` and an `openai-responses` provider: the
first request's tool definitions with `tool_search: on` (pinned + search_tools + describe_tool) and with
`native` (every view deferred beside the provider's search tool). Figures: the JSON bytes of `tools`, the
estimated tokens of what the model is shown up front (Anthropic keeps deferred definitions out of the context
until a search finds them; OpenAI shows a namespace's name and description, the gateway's one per api, but a
deferred function's own outside a namespace), and the median time
to render and serialize `tools` for one request once the views are built. Microsoft Graph (11 k operations) is
past Anthropic's 10,000 and only counted. The providers' own searches cannot be measured here (they run on their
side); the gateway's recall is bench/search.py.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.support import GITHUB, GRAPH, STRIPE  # noqa: E402

AGENTS = """\
providers:
  llm: {{kind: {kind}, api_key: unused}}
agents:
  dev: {{model: llm/some-model, tools: [{{api: {api}}}], tool_search: '{mode}'}}
"""


def _shown(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the model is shown of the rendered tools before any search."""
    shown = []
    for tool in tools:
        if tool.get("type") == "namespace":  # OpenAI: a namespace's name and description, not its functions
            shown.append({"name": tool["name"], "description": tool["description"]})
        elif tool.get("defer_loading") and tool.get("type") == "function":  # OpenAI: name and description
            shown.append({"name": tool["name"], "description": tool.get("description")})
        elif not tool.get("defer_loading"):  # Anthropic: deferred definitions stay out of the context
            shown.append(tool)
    return shown


def measure(spec: Path, rounds: int) -> list[tuple[str, str, str, int, int, int, float]]:
    from gateway.jsonwire import dumps
    from gateway.offer.toolsearch import ToolOffer
    from gateway.offer.views import estimate_tokens
    from gateway.providers import get_adapter
    from gateway.runtime import load_runtime

    rows = []
    with tempfile.TemporaryDirectory() as folder:
        specs = Path(folder) / "specs"
        specs.mkdir()
        (specs / spec.name).symlink_to(spec)
        api = spec.stem
        for kind, mode in (("anthropic", "on"), ("anthropic", "native"), ("openai-responses", "native")):
            agents = Path(folder) / f"agents-{kind}-{mode}.yaml"
            agents.write_text(AGENTS.format(kind=kind, api=api, mode=mode))
            runtime = load_runtime(specs, agents, cache_dir=Path(folder) / "cache")
            toolset = runtime.toolset("dev")
            adapter = get_adapter(runtime.manifest.providers["llm"])
            offer = ToolOffer(runtime.manifest.agents["dev"], toolset, native=adapter.native_tool_search)
            views = offer.views()
            rendered = adapter.render_tools(views)
            shown = _shown(rendered)
            times = []
            for _ in range(rounds):
                started = time.perf_counter()
                dumps(adapter.render_tools(offer.views()))
                times.append(time.perf_counter() - started)
            rows.append((api, kind, mode, len(toolset), len(dumps(rendered)), estimate_tokens(shown),
                         statistics.median(times) * 1000))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    print(f"{'api':15} {'provider':17} {'mode':7} {'tools':>6} {'tools bytes':>12} {'tokens shown':>13} "
          f"{'render ms':>10}")
    for spec in (GITHUB, STRIPE):
        for api, kind, mode, count, size, shown, ms in measure(spec, args.rounds):
            print(f"{api:15} {kind:17} {mode:7} {count:6d} {size:12,d} {shown:13,d} {ms:10.3f}")
    graph = _operations(GRAPH)
    print(f"graph: {graph:,} operations: `tool_search: native` is refused past Anthropic's 10,000 deferred tools")
    return 0


def _operations(spec: Path) -> Any:
    import json

    methods = {"get", "put", "post", "delete", "patch", "head", "options", "trace"}
    paths = json.loads(spec.read_text())["paths"]
    return sum(1 for item in paths.values() for key in item if key in methods)


if __name__ == "__main__":
    sys.exit(main())
