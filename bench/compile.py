"""Time and peak memory of compiling GitHub's and Stripe's specs, beside json.load and FastMCP.

    python bench/compile.py [--rounds 5] [--spec PATH ...]

Each figure is measured in a fresh subprocess: the median wall time of `--rounds` runs after one
warm-up run, and that subprocess's peak RSS (the interpreter's own baseline is printed too).
Cases: `json.load` of the file, our compiler cold (`use_cache=False`), our compiler from its cache,
and the peer `FastMCP.from_openapi` (install the `bench` extra; "peer not installed" otherwise).
Nothing is copied into the repo: the spec is linked into a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CORPUS = Path(__file__).resolve().parent.parent.parent / "shared" / "corpus"
DEFAULT_SPECS = [CORPUS / "github" / "api.github.com.json", CORPUS / "apis-guru" / "stripe.com.json"]


def _run_case(case: str, spec: Path, rounds: int) -> dict[str, float]:
    """Runs inside the subprocess: time `case` and report the median."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "specs"
        folder.mkdir()
        (folder / spec.name).symlink_to(spec)
        cache = Path(tmp) / "cache"
        if case == "json.load":
            def work() -> object:
                with open(spec, "rb") as handle:
                    return json.load(handle)
        elif case in ("cold", "cached"):
            from gateway.openapi import compile_specs

            if case == "cached":
                compile_specs(folder, cache_dir=cache)

            def work() -> object:
                catalog = compile_specs(folder, cache_dir=cache, use_cache=case == "cached")
                assert len(catalog) > 0, catalog.diagnostics[:3]
                return catalog
        elif case == "fastmcp":
            import httpx
            from fastmcp import FastMCP

            def work() -> object:
                with open(spec, "rb") as handle:
                    document = json.load(handle)
                return FastMCP.from_openapi(openapi_spec=document, client=httpx.AsyncClient())
        else:
            raise SystemExit(f"unknown case {case}")
        work()  # warm-up (imports, caches of the OS)
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            work()
            times.append(time.perf_counter() - start)
    return {"median_s": statistics.median(times), "min_s": min(times)}


def _measure(case: str, spec: Path, rounds: int) -> dict[str, float] | str:
    command = [sys.executable, __file__, "--child", case, "--rounds", str(rounds), "--spec", str(spec)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    out = process.stdout.read().decode() if process.stdout else ""
    err = process.stderr.read().decode() if process.stderr else ""
    if status != 0:
        return err.strip().splitlines()[-1] if err.strip() else f"exit status {status}"
    result = json.loads(out.strip().splitlines()[-1])
    result["peak_rss_mb"] = usage.ru_maxrss / 1024  # Linux reports KiB
    return result


def _peer_installed() -> bool:
    probe = subprocess.run([sys.executable, "-c", "import fastmcp"], capture_output=True)
    return probe.returncode == 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--spec", type=Path, action="append")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--no-peer", action="store_true", help="skip FastMCP (it takes a long time on Stripe)")
    args = parser.parse_args()
    specs = args.spec or DEFAULT_SPECS
    if args.child:
        print(json.dumps(_run_case(args.child, specs[0], args.rounds)))
        return 0
    missing = [s for s in specs if not s.exists()]
    if missing:
        print(f"spec(s) not found: {', '.join(map(str, missing))} (the corpus lives in ../shared/corpus)")
        return 1
    baseline = subprocess.Popen([sys.executable, "-c", "pass"])
    _, _, usage = os.wait4(baseline.pid, 0)
    print(f"python baseline peak RSS: {usage.ru_maxrss / 1024:.0f} MB; rounds: {args.rounds} (median after warm-up)")
    peer = _peer_installed() and not args.no_peer
    for spec in specs:
        print(f"\n{spec.name} ({spec.stat().st_size / 1e6:.1f} MB)")
        for case in ("json.load", "cold", "cached", "fastmcp"):
            if case == "fastmcp" and not peer:
                print(f"  {case:10} peer not installed (pip install -e '.[bench]')" if not args.no_peer
                      else f"  {case:10} skipped (--no-peer)")
                continue
            rounds = min(args.rounds, 2) if case == "fastmcp" else args.rounds
            result = _measure(case, spec, rounds)
            if isinstance(result, str):
                print(f"  {case:10} failed: {result}")
            else:
                print(f"  {case:10} {result['median_s']:7.3f} s median  {result['peak_rss_mb']:7.0f} MB peak RSS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
