"""What a call pays for `max_concurrency` counted in Redis when nobody waits: Redis commands and wall time a call.

    python -m bench.slot_scripts [--calls 500] [--rounds 5] [--tree OTHER_TREE]

Processes, all on 127.0.0.1: Redis (Debian's redis-server), an upstream answering at once (bench/upstream.py) and
one `gateway serve` with `gateway.redis` (the api's `max_concurrency` at its default, 16, never reached: one
caller). One httpx client sends `--calls` calls one after another to the direct door, `--rounds` times; Redis's
`INFO commandstats` is read before and after each round. With `--tree`, the same again with that tree's `gateway`
(PYTHONPATH), the two taking turns. Printed per tree: the Redis commands a call (by command; medians over rounds),
the call's p50 (medians over rounds), with the load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

import httpx
import redis

from bench.support import CALL_ARGS, ROOT, free_port, python_module, spawned, write_project

sys.path.insert(0, str(ROOT / "tests"))

from shared_servers import RedisServer  # noqa: E402

PATH = "/agents/bench/tools/listIssues"


def _commands(client: redis.Redis) -> Counter[str]:
    stats = client.info("commandstats")
    return Counter({name.removeprefix("cmdstat_"): int(values["calls"]) for name, values in stats.items()})


def _round(url: str, client: redis.Redis, calls: int) -> tuple[Counter[str], float]:
    before = _commands(client)
    took = []
    with httpx.Client(base_url=url, timeout=60, trust_env=False) as http:
        for _ in range(calls):
            started = time.perf_counter()
            assert http.post(PATH, json=CALL_ARGS).status_code == 200
            took.append(time.perf_counter() - started)
    after = _commands(client)
    after.subtract(before)
    after["info"] -= 1  # the read of the stats itself
    return +after, statistics.median(took)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tree", type=Path, help="another tree's gateway to run in turns (e.g. a checkout of main)")
    args = parser.parse_args()
    trees: list[Path | None] = [None, args.tree] if args.tree else [None]
    server = RedisServer().start()
    found: dict[str, list[tuple[Counter[str], float]]] = {}
    try:
        with ExitStack() as stack, tempfile.TemporaryDirectory() as folder, \
                redis.Redis.from_url(server.url) as client:
            port = free_port()
            upstream = f"http://127.0.0.1:{port}"
            stack.enter_context(spawned(python_module("bench.upstream", "--port", str(port)), upstream + "/"))
            urls = {}
            for tree in trees:
                name = str(tree) if tree else "this tree"
                project = write_project(Path(folder) / str(len(urls)), upstream, github=False)
                with open(project / "agents.yaml", "a") as yaml:
                    yaml.write(f"gateway: {{redis: '{server.url}'}}\n")
                gateway_port = free_port()
                url = f"http://127.0.0.1:{gateway_port}"
                env = {"GATEWAY_CACHE_DIR": str(project / "cache")}
                if tree is not None:
                    env["PYTHONPATH"] = str(tree.resolve())
                stack.enter_context(spawned(
                    python_module("gateway", "serve", "--port", str(gateway_port), "--no-access-log", "--specs",
                                  str(project / "specs"), "--agents", str(project / "agents.yaml")),
                    url + "/healthz", env=env, cwd=project))
                urls[name] = url
                _round(url, client, 50)  # warm
            for _ in range(args.rounds):
                for name, url in urls.items():
                    found.setdefault(name, []).append(_round(url, client, args.calls))
    finally:
        server.stop()
    print(f"{args.calls} calls one after another, {args.rounds} rounds, no cap reached, Redis on 127.0.0.1; load "
          f"average {' '.join(f'{v:.1f}' for v in os.getloadavg())}")
    for name, rounds in found.items():
        commands = sorted({command for counts, _ in rounds for command in counts})
        per_call = ", ".join(f"{command} {statistics.median(c[command] for c, _ in rounds) / args.calls:.2f}"
                             for command in commands)
        p50 = statistics.median(p for _, p in rounds) * 1000
        print(f"{name}: Redis commands a call: {per_call}; call p50 {p50:.3f} ms")


if __name__ == "__main__":
    main()
