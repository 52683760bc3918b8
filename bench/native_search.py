"""Native tool search (Anthropic) against the gateway's own: what one request to the model carries.

    python bench/native_search.py [--rounds 20]

For an agent with all of GitHub, then all of Stripe, on an Anthropic provider: the first request's tool
definitions with `tool_search: on` (pinned + search_tools + describe_tool) and with `native` (every view
deferred beside the tool_search_tool_bm25 server tool). Figures: the JSON bytes of `tools`, its estimated tokens,
the tokens of the definitions the model is shown up front (deferred ones excluded, as Anthropic keeps them out of
the context until a search finds them), and the median time to render and serialize `tools` for one request
once the views are built. Microsoft Graph (11 k operations) is past Anthropic's 10,000 and only counted.
Anthropic's own search cannot be measured here (it runs on their side); the gateway's recall is bench/search.py.
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
  claude: {{kind: anthropic, api_key: unused}}
agents:
  dev: {{model: claude/claude-sonnet-4-5, tools: [{{api: {api}}}], tool_search: '{mode}'}}
"""


def measure(spec: Path, rounds: int) -> list[tuple[str, str, int, int, int, float]]:
    from gateway.jsonwire import dumps
    from gateway.openapi.views import estimate_tokens
    from gateway.providers import get_adapter
    from gateway.runtime import load_runtime
    from gateway.toolsearch import ToolOffer

    rows = []
    with tempfile.TemporaryDirectory() as folder:
        specs = Path(folder) / "specs"
        specs.mkdir()
        (specs / spec.name).symlink_to(spec)
        api = spec.stem
        for mode in ("on", "native"):
            agents = Path(folder) / f"agents-{mode}.yaml"
            agents.write_text(AGENTS.format(api=api, mode=mode))
            runtime = load_runtime(specs, agents, cache_dir=Path(folder) / "cache")
            toolset = runtime.toolset("dev")
            adapter = get_adapter(runtime.manifest.providers["claude"])
            offer = ToolOffer(runtime.manifest.agents["dev"], toolset, native=adapter.native_tool_search)
            views = offer.views()
            rendered = adapter.render_tools(views)
            shown = [t for t in rendered if not t.get("defer_loading")]
            times = []
            for _ in range(rounds):
                started = time.perf_counter()
                dumps(adapter.render_tools(offer.views()))
                times.append(time.perf_counter() - started)
            rows.append((api, mode, len(toolset), len(dumps(rendered)), estimate_tokens(shown),
                         statistics.median(times) * 1000))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    print(f"{'api':8} {'mode':7} {'tools':>6} {'tools bytes':>12} {'tokens shown':>13} {'render ms':>10}")
    for spec in (GITHUB, STRIPE):
        for api, mode, count, size, shown, ms in measure(spec, args.rounds):
            print(f"{api:8} {mode:7} {count:6d} {size:12,d} {shown:13,d} {ms:10.3f}")
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
