"""The whole benchmark suite in one run, printed as one table of medians beside floors measured in the same run.

    python -m bench [--rounds 5] [--no-peer] [--only compile,graph,calls,loop,serve]

Parts (each is also runnable alone: bench/compile.py, bench/calls.py, bench/loop.py, bench/serve.py):
- compile: GitHub's and Stripe's specs, our compiler cold and from its cache vs `json.load` (the floor) and
  FastMCP's `from_openapi` (the peer), each in a fresh subprocess (time, peak RSS);
- graph: Microsoft Graph v1.0 compiled cold (time, peak RSS);
- calls: a proxied call over HTTP and over MCP through `gateway serve`, sequential and 32 concurrent callers,
  vs direct httpx to the same 127.0.0.1 upstream (the floor) and the peer; a new MCP session's first call;
- loop: the tool loop's own cost per iteration with an instant scripted LLM (each provider's wire format);
- serve: `gateway serve` ready time and RSS with a cached GitHub catalog.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python bench/run.py`: make `bench` importable as a package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import calls as calls_bench  # noqa: E402
from bench import serve as serve_bench  # noqa: E402
from bench.support import GITHUB, GRAPH, STRIPE, Row, peer_installed, render_table  # noqa: E402

PARTS = ("compile", "graph", "calls", "loop", "serve")


def _compile_rows(spec: Path, label: str, rounds: int, peer: bool, goal_s: float, goal_mb: float | None) -> list[Row]:
    from bench.compile import _measure

    floor = _measure("json.load", spec, rounds)
    cold = _measure("cold", spec, rounds)
    cached = _measure("cached", spec, rounds)
    theirs: dict[str, float] | str = _measure("fastmcp", spec, 1) if peer else "not run"
    for name, result in (("json.load", floor), ("cold", cold), ("cached", cached)):
        if isinstance(result, str):
            raise RuntimeError(f"compile {label} ({name}) failed: {result}")
    assert isinstance(floor, dict) and isinstance(cold, dict) and isinstance(cached, dict)
    peer_s = theirs if isinstance(theirs, str) else theirs["median_s"]
    peer_mb = theirs if isinstance(theirs, str) else theirs["peak_rss_mb"]
    rows = [Row(f"compile {label}, cold", "s", cold["median_s"], floor["median_s"], "json.load", peer=peer_s,
                goal=f"<= {goal_s:g} s", met=cold["median_s"] <= goal_s)]
    if goal_mb is not None:
        rows.append(Row(f"compile {label}, cold: peak RSS", "MB", cold["peak_rss_mb"], floor["peak_rss_mb"],
                        "json.load", peer=peer_mb, goal=f"<= {goal_mb:g} MB", met=cold["peak_rss_mb"] <= goal_mb))
    rows.append(Row(f"compile {label}, cached catalog load", "s", cached["median_s"], floor["median_s"], "json.load",
                    goal="<= json.load", met=cached["median_s"] <= floor["median_s"]))
    return rows


def _graph_rows() -> list[Row]:
    from bench.compile import _measure

    floor = _measure("json.load", GRAPH, 1)
    cold = _measure("cold", GRAPH, 1)
    if isinstance(cold, str) or isinstance(floor, str):
        raise RuntimeError(f"compile Graph failed: {cold if isinstance(cold, str) else floor}")
    return [
        Row("compile Microsoft Graph v1.0, cold", "s", cold["median_s"], floor["median_s"], "json.load",
            peer="not run (> 20 s)", goal="<= 8 s", met=cold["median_s"] <= 8),
        Row("compile Microsoft Graph v1.0, cold: peak RSS", "MB", cold["peak_rss_mb"], floor["peak_rss_mb"],
            "json.load", goal="<= 1024 MB", met=cold["peak_rss_mb"] <= 1024),
    ]


def _loop_rows(rounds: int) -> list[Row]:
    import anyio

    from bench.loop import _bench

    options = argparse.Namespace(iterations=20, repeats=max(3, rounds * 2), tools=20, http=False)
    medians: dict[str, float] = anyio.run(_bench, options)
    return [Row(f"loop overhead per iteration, {kind}", "ms", value, goal="<= 1 ms", met=value <= 1)
            for kind, value in medians.items()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds per figure after the warm-up (default 5)")
    parser.add_argument("--no-peer", action="store_true", help="skip FastMCP even when installed")
    parser.add_argument("--only", default=",".join(PARTS), help=f"comma-separated parts: {', '.join(PARTS)}")
    args = parser.parse_args()
    parts = [p.strip() for p in args.only.split(",") if p.strip()]
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        parser.error(f"unknown part(s): {', '.join(unknown)}")
    peer = not args.no_peer and peer_installed()
    print(f"python {platform.python_version()} on {platform.machine()}, rounds {args.rounds}; peer: "
          + ("FastMCP" if peer else "not installed (pip install -e '.[bench]')" if not args.no_peer else "skipped"),
          file=sys.stderr)
    rows: list[Row] = []
    timings: dict[str, Any] = {}
    for part in parts:
        started = time.perf_counter()
        print(f"bench: {part} ...", file=sys.stderr, flush=True)
        try:
            found = _part(part, args.rounds, peer)
        except Exception as error:  # one broken part must not lose the others' figures
            found = [Row(f"{part}: failed", "", None, note=f"{type(error).__name__}: {str(error)[:300]}")]
        timings[part] = time.perf_counter() - started
        print(render_table(found), file=sys.stderr, flush=True)
        rows += found
    print(render_table(rows))
    print("\n(" + ", ".join(f"{part} {seconds:.0f} s" for part, seconds in timings.items()) + ")")
    return 0


def _part(part: str, rounds: int, peer: bool) -> list[Row]:
    rows: list[Row] = []
    if part == "compile":
        for spec, label, goal_s, goal_mb in ((GITHUB, "GitHub (1,223 ops)", 0.5, 150.0),
                                             (STRIPE, "Stripe (452 ops)", 0.3, None)):
            if spec.exists():
                rows += _compile_rows(spec, label, rounds, peer, goal_s, goal_mb)
            else:
                rows.append(Row(f"compile {label}", "s", None, note=f"spec not found at {spec}"))
    elif part == "graph":
        rows += _graph_rows() if GRAPH.exists() else [Row("compile Graph", "s", None, note=f"no {GRAPH}")]
    elif part == "calls":
        rows += calls_bench.rows(calls_bench.measure(rounds, peer=peer))
    elif part == "loop":
        rows += _loop_rows(rounds)
    elif part == "serve":
        rows += serve_bench.rows(serve_bench.measure(max(3, rounds // 2))) if GITHUB.exists() else []
    return rows


if __name__ == "__main__":
    sys.exit(main())
