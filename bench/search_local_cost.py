"""What the local model of tool search costs, as the gateway runs it (`gateway.offer.local_model.encode`).

    python bench/search_local_cost.py [--model all-MiniLM-L6-v2 | FOLDER] [--apis github graph] [--requests 100]

In one fresh process, for the packaged model (int8 ONNX on onnxruntime, no torch) or the folder of a
sentence-transformers model (torch): the time to import and load it (the first embedding of one text), the p50 and
p95 of embedding one request (GitHub's first `--requests` tuning requests, one at a time, wall clock and the
thread's CPU), each API's tools embedded once (their texts as tool search makes them), and the process's memory
(VmRSS after the gateway is imported, after the model is loaded, after the tools; VmHWM: the peak). Threads as the
gateway sets them (`GATEWAY_EMBED_THREADS`, default 1). Run it on a quiet machine and say the load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.search import SPECS, TUNING, _compile, load_tasks  # noqa: E402  (run as a script)


def _memory() -> dict[str, float]:
    """VmRSS and VmHWM of this process, in MiB (Linux)."""
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0]) / 1024
    return fields


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--apis", nargs="+", choices=list(SPECS), default=["github", "graph"])
    parser.add_argument("--requests", type=int, default=100)
    args = parser.parse_args(argv)
    from gateway.config.embeddings_endpoint import local_model_problem
    from gateway.offer.embeddings import embedding_text

    problem = local_model_problem(args.model)
    if problem is not None:
        print(problem, file=sys.stderr)
        return 1
    catalogs = {name: _compile(SPECS[name], index=True, cache=Path(tempfile.gettempdir()) /
                               "gateway-bench-search-cache")[1] for name in args.apis}
    requests = [task["q"] for part in TUNING for task in load_tasks("github").get(part, [])][:args.requests]
    before = _memory()
    started, used = time.perf_counter(), time.process_time()
    from gateway.offer.local_model import encode

    encode(args.model, ["load the model"])
    print(f"model {args.model}, {os.environ.get('GATEWAY_EMBED_THREADS', '1')} thread(s), load average "
          f"{os.getloadavg()[0]:.1f}")
    print(f"import and load: {time.perf_counter() - started:.2f} s (CPU {time.process_time() - used:.2f} s); "
          f"VmRSS {before['VmRSS']:.0f} -> {_memory()['VmRSS']:.0f} MiB")
    wall, cpu = [], []
    for request in requests:
        started, used = time.perf_counter(), time.thread_time()
        encode(args.model, [request])
        cpu.append((time.thread_time() - used) * 1000)
        wall.append((time.perf_counter() - started) * 1000)
    wall.sort()
    cpu.sort()
    print(f"one request ({len(requests)}): p50 {statistics.median(wall):.1f} ms, p95 {wall[int(len(wall) * .95)]:.1f} "
          f"ms (CPU p50 {statistics.median(cpu):.1f} ms, p95 {cpu[int(len(cpu) * .95)]:.1f} ms)")
    for name, catalog in catalogs.items():
        api = next(iter(catalog.apis))
        texts = [embedding_text(tool) for tool in catalog.for_api(api)]
        started, used = time.perf_counter(), time.process_time()
        encode(args.model, texts)
        print(f"{name}: {len(texts)} tools in {time.perf_counter() - started:.1f} s (CPU "
              f"{time.process_time() - used:.1f} s); load average {os.getloadavg()[0]:.1f}")
    memory = _memory()
    print(f"VmRSS at the end {memory['VmRSS']:.0f} MiB, peak (VmHWM) {memory['VmHWM']:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
