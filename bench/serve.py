"""`gateway serve` start-up: time until /healthz answers, and resident memory then, with a cached GitHub catalog.

    python -m bench.serve [--rounds 3]

The project holds GitHub's spec (linked in place) with one agent that sees all of it; one start fills the
compiler's cache (`GATEWAY_CACHE_DIR` in a temporary folder), then each round starts a new process and
times Popen -> first 200 from /healthz; its RSS is read 2 s later, once the background work after start-up
(the MCP SDK's import) is done. The floor is a bare uvicorn app answering / in a new process.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench.support import GITHUB, Row, free_port, median, python_module, render_table, rss_mb, spawned, write_project

SETTLE_SECONDS = 2.0


def _start(folder: Path, env: dict[str, str]) -> tuple[float, float]:
    port = free_port()
    command = python_module("gateway", "serve", "--port", str(port), "--specs", str(folder / "specs"),
                            "--agents", str(folder / "agents.yaml"))
    with spawned(command, f"http://127.0.0.1:{port}/healthz", env=env) as (process, ready):
        time.sleep(SETTLE_SECONDS)  # the MCP SDK is imported in the background after start: count it
        return ready, rss_mb(process.pid)


def _start_floor() -> tuple[float, float]:
    port = free_port()
    with spawned(python_module("bench.upstream", "--port", str(port)), f"http://127.0.0.1:{port}/") as (process, ready):
        return ready, rss_mb(process.pid)


def measure(rounds: int = 3) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = write_project(Path(tmp), "http://127.0.0.1:9", github=True)
        env = {"GATEWAY_CACHE_DIR": str(folder / "cache")}
        _start(folder, env)  # fills the cache (and warms the OS's file cache)
        runs = [_start(folder, env) for _ in range(rounds)]
    floors = [_start_floor() for _ in range(rounds)]
    return {"ready_s": median([r[0] for r in runs]), "rss_mb": median([r[1] for r in runs]),
            "floor_ready_s": median([f[0] for f in floors]), "floor_rss_mb": median([f[1] for f in floors])}


def rows(figures: dict[str, float]) -> list[Row]:
    return [
        Row("`gateway serve` ready, cached GitHub catalog", "s", figures["ready_s"], figures["floor_ready_s"],
            "bare uvicorn", goal="<= 1 s", met=figures["ready_s"] <= 1.0),
        Row("`gateway serve` RSS, settled 2 s after ready", "MB", figures["rss_mb"], figures["floor_rss_mb"],
            "bare uvicorn", goal="<= 200 MB", met=figures["rss_mb"] <= 200),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if not GITHUB.exists():
        raise SystemExit(f"no spec at {GITHUB}")
    print(render_table(rows(measure(args.rounds))))


if __name__ == "__main__":
    main()
