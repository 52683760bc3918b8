"""The console's pages over GitHub's whole spec (one agent, ~1000 tools): median time and size of each page.

    python -m bench.console [--rounds 15]

`gateway serve` runs in its own process (no `clients`, so the console is open) over the bench project with
GitHub's spec linked in place; each round fetches every page once, in turn, so a busy machine slows them
alike. The floor is `GET /healthz` on the same server (the round trip with no page to build).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import httpx

from bench.support import GITHUB, Row, free_port, median, python_module, render_table, spawned, write_project

PAGES = {
    "agents": "/console/agents",
    "agent (all tools)": "/console/agents/github",
    "agent, filtered": "/console/agents/github?q=create%20issue",
    "search every agent": "/console/agents?q=create%20issue",
    "one tool (form + schemas)": "/console/agents/github/tools/issues_create",
    "health": "/console/health",
}
FLOOR = "/healthz"


def measure(rounds: int = 15) -> dict[str, tuple[float, int]]:
    """Page -> (median ms, bytes)."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = write_project(Path(tmp), "http://127.0.0.1:9", github=True)
        port = free_port()
        command = python_module("gateway", "serve", "--port", str(port), "--specs", str(folder / "specs"),
                                "--agents", str(folder / "agents.yaml"))
        env = {"GATEWAY_CACHE_DIR": str(folder / "cache")}
        base = f"http://127.0.0.1:{port}"
        with spawned(command, f"{base}/healthz", env=env), httpx.Client(base_url=base, timeout=60) as client:
            paths = {**PAGES, "floor": FLOOR}
            times: dict[str, list[float]] = {name: [] for name in paths}
            sizes: dict[str, int] = {}
            for path in paths.values():  # warm: templates compiled, memos filled
                client.get(path).raise_for_status()
            for _ in range(rounds):
                for name, path in paths.items():
                    started = time.perf_counter()
                    response = client.get(path)
                    times[name].append((time.perf_counter() - started) * 1000)
                    response.raise_for_status()
                    sizes[name] = len(response.content)
    return {name: (median(values), sizes[name]) for name, values in times.items()}


def rows(figures: dict[str, tuple[float, int]]) -> list[Row]:
    floor = figures["floor"][0]
    return [Row(f"console: {name} ({figures[name][1] / 1024:.0f} KiB)", "ms", figures[name][0], floor,
                "GET /healthz") for name in PAGES]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    if not GITHUB.exists():
        raise SystemExit(f"no spec at {GITHUB}")
    print(render_table(rows(measure(args.rounds))))


if __name__ == "__main__":
    main()
