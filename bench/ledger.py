"""Where the event loop's machine instructions go in one direct call, by stage (valgrind's callgrind).

    python -m bench.ledger [--tree /path/to/tree] [--calls 20] [--door http|mcp|mcp2026|floor]

`bench.machine_instructions` counts the event loop thread's machine instructions per call; this says which part of
the app runs them. `gateway serve` (from `--tree`, as `bench.machine_instructions` runs it) is started under
callgrind with a frame-evaluation hook (bench/stage_marks.c, compiled here with gcc against the interpreter's
headers) that puts every Python code object in a stage (`STAGES`, by file and function; helpers such as the
standard library's count to the stage that called them) and asks callgrind to dump its counters whenever the loop's
thread changes stage. Each dump is one stage's exclusive share, whatever native code ran under its frames included
(SQLite under the audit, orjson under the door, pyreqwest under the send); stage 0 is the loop's native code
outside any Python frame (uvloop, httptools). Each stage is also split by where its instructions ran: the
interpreter (the eval loop; allocating and freeing objects and frames) or a library. The hook makes CPython stop
inlining Python-to-Python calls, so the marked total is above the unmarked count: the same server is then run
without the hook (`--plain` alone: only that), and the difference is taken off each stage by its frames. The idle
server's periodic work (the reload watcher, uvicorn's tick) is counted apart: a call pays it by its duration. Needs
`valgrind` and `gcc`; about six minutes.

Each stage is also split by when it ran: before the answer (from the request's bytes arriving, uvicorn's
`data_received`, to the answer's last byte handed to the socket, the `send` after which uvicorn's cycle says
`response_complete`), what the caller waits for; or after it (what the loop's thread does for the request once the
answer is on the wire: the app's frames unwinding, the envelope's count, the access line, uvicorn's bookkeeping),
which a sequential caller does not wait for unless its next request arrives before it is done. The native code of
a request's first read (uvloop's, before `data_received`'s frame) counts to the previous request's after, and
uvicorn's bookkeeping inside the `send` that wrote the last byte to its before. The client waits `PAUSE` after each
answer. Work the loop runs on its next turn after an answer (the access line, the tool's metrics: `call_soon`) counts
to the answer's after only if the marked server has done it before the next request arrives: under callgrind, with a
dump at every change of stage, the after-answer frames take longer than 0.3 s, so with the default pause that work is
counted to the next request's before (natively it comes first: the ninth round's print-marks build). `--pause 2`
gives the marked run the time (the access line's 40,000 then count after, as natively); the loop's idle native work
between calls then falls in its stage, so the hook's cost a frame is not estimated from that run but taken as given
(`--hook-cost`, the default run's figure). bench/README.md (the ninth and twelfth rounds) has both splits.

`--door mcp` makes the same calls as MCP `tools/call`s of one 2025-06-18 session (opened during the warm-up, so
its handshake is not counted), each one POST, as `bench.calls` makes them; `--door mcp2026` as stateless 2026-07-28
requests (no session: the envelope and the routing headers on each), as the official client sends them by default.
`--door floor` makes the direct calls to the floor of the promises (bench/promise_floor.py, every promise kept) in
place of `gateway serve`: its methods are put in the same stages (`bench.stage_rules`), so the two ledgers compare
stage by stage.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import re
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx

from bench.machine_instructions import _calls, _settle
from bench.promise_floor import FLOOR_KEY
from bench.stage_rules import STAGES
from bench.support import (
    CALL_ARGS,
    DOOR,
    ROOT,
    free_port,
    mcp_call,
    mcp_open,
    mcp_stateless_call,
    python_module,
    spawned,
    write_project,
)

BOOT = """\
import signal, sys
sys.path.insert(0, {folder!r})
import stage_marks, importlib.util
spec = importlib.util.spec_from_file_location("stage_rules", {rules!r})
rules = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rules)
stage_marks.install(list(rules.STAGES), rules.classify)
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle
begins = [HttpToolsProtocol.data_received.__code__]
try:
    from gateway.server.bounded_head import BoundedHeadProtocol
    begins.append(BoundedHeadProtocol.data_received.__code__)
except ImportError:  # a tree from before the head's bound
    pass
stage_marks.phases(tuple(begins), RequestResponseCycle.send.__code__, "response_complete")
signal.signal(signal.SIGUSR1, lambda *_: stage_marks.start())
def stop(*_):
    stage_marks.stop()
    with open({folder!r} + "/frames.txt", "w") as out:
        out.write(repr(stage_marks.counts()))
signal.signal(signal.SIGUSR2, stop)
{main}
"""
GATEWAY_MAIN = """\
from gateway.cli.commands import main
sys.argv = ["gateway", *{argv!r}]
sys.exit(main())"""
FLOOR_MAIN = """\
from bench.promise_floor import main
sys.argv = ["promise_floor", *{argv!r}]
main()"""


def build_marks(folder: Path) -> None:
    paths = sysconfig.get_paths()
    target = folder / f"stage_marks{sysconfig.get_config_var('EXT_SUFFIX')}"
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", f"-I{paths['include']}", "-o", str(target),
                    str(ROOT / "bench" / "stage_marks.c")], check=True)


IDLE = 10.0  # seconds of the idle server counted after the calls
PLAIN_CALLS = 100  # the unmarked run's calls (no dumps: cheap)
PAUSE = 0.3  # seconds between an answer and the next request, in both runs (see the docstring)

# Where an instruction ran, by the function callgrind names (in the interpreter's own binary).
_FREEING = re.compile(r"dealloc|_Py_Dealloc|_PyObject_Free|PyObject_Free|_PyMem_|pymalloc|free_|_Py_DECREF|"
                      r"frame_dealloc|clear_frame|_PyFrame_Clear|_PyObject_GC_Del|PyObject_GC_Del")
_ALLOCATING = re.compile(r"Malloc|_PyObject_GC_New|_PyObject_New|alloc|_Py_NewReference|PyTuple_New|"
                         r"_PyFrame_Push|_PyThreadState_PushFrame|new_|_New\b")
_GC = re.compile(r"gc_collect|collect\b|subtract_refs|update_refs|move_unreachable|visit_|deduce_unreachable")


def where(obj: str, function: str) -> str:
    name = os.path.basename(obj)
    if name.startswith("python3") or "libpython" in name or name == "???" and function.startswith("_Py"):
        if _GC.search(function):
            return "interpreter: cyclic garbage collection"
        if _FREEING.search(function):
            return "interpreter: freeing objects and frames"
        if _ALLOCATING.search(function):
            return "interpreter: allocating objects and frames"
        return "interpreter: the eval loop and the builtins"
    for library, label in (("sqlite", "SQLite (with the sqlite3 module)"), ("orjson", "orjson"),
                           ("jsonschema_rs", "jsonschema_rs"), ("httptools", "httptools"), ("uvloop", "uvloop"),
                           ("pyreqwest", "pyreqwest (Rust)"), ("libc", "libc"), ("_asyncio", "asyncio (C)"),
                           ("ld-linux", "the dynamic loader")):
        if library in name:
            return label
    return f"other: {name}"


# What a call makes and frees, counted by the calls into these functions of the interpreter and libc (callgrind's
# call counts): every object made takes `_Py_NewReference` (a free list's reused one too); every block of the
# interpreter's allocator is taken by `_PyObject_Malloc` (or `_Calloc`) and given back by `_PyObject_Free`, reached
# through a pointer (so never inlined, where `_Py_Dealloc` is, in parts of the interpreter); a Python-to-Python call
# inlined by the eval loop pushes its frame through `_PyEvalFramePushAndInit`; native libraries (SQLite, orjson,
# pyreqwest) allocate through libc's `malloc`.
COUNTED = {"_Py_NewReference": "made", "_PyObject_Malloc": "blocks", "_PyObject_Calloc": "blocks",
           "_PyObject_Free": "freed", "_PyEvalFramePushAndInit": "frames", "malloc": "malloc"}


def parse_dump(path: Path, counted: collections.Counter[str] | None = None,
               makers: collections.Counter[str] | None = None) -> tuple[str, int, collections.Counter[tuple[str, str]]]:
    """A dump's trigger, its total and its self cost by (object file, function); with `counted`, the calls into
    `COUNTED`'s functions are added to it by kind, and with `makers` the functions that made objects by name."""
    trigger, total = "", 0
    names: dict[str, str] = {}
    selfcost: collections.Counter[tuple[str, str]] = collections.Counter()
    obj = fn = callee = ""
    skip_next = False

    def named(value: str) -> str:
        match = re.match(r"\((\d+)\)(?: (.*))?", value)
        if match is None:
            return value
        key, text = match.group(1), match.group(2)
        if text is not None:
            names[key] = text
        return names.get(key, value)

    obnames: dict[str, str] = {}
    for line in path.read_text(errors="replace").splitlines():
        if not line:
            continue
        head = line[0]
        if head.isdigit() or head in "+-*":
            if skip_next:
                skip_next = False
                continue
            parts = line.split()
            if len(parts) > 1:
                selfcost[(obj, fn)] += int(parts[1])
        elif line.startswith("fn="):
            fn = named(line[3:])
        elif line.startswith("ob="):
            match = re.match(r"\((\d+)\)(?: (.*))?", line[3:])
            if match and match.group(2) is not None:
                obnames[match.group(1)] = match.group(2)
            obj = obnames.get(match.group(1), line[3:]) if match else line[3:]
        elif line.startswith(("cfn=", "cfi=", "cfl=")):
            if line.startswith("cfn="):
                callee = named(line[4:])
        elif line.startswith("cob="):
            match = re.match(r"\((\d+)\)(?: (.*))?", line[4:])
            if match and match.group(2) is not None:
                obnames[match.group(1)] = match.group(2)
        elif line.startswith("calls="):
            skip_next = True
            kind = COUNTED.get(callee)
            if kind is not None and counted is not None:
                count = int(line[6:].split()[0])
                counted[kind] += count
                if makers is not None and kind == "made":
                    makers[fn] += count
        elif line.startswith("desc: Trigger:"):
            trigger = line.split(":", 2)[2].strip()
        elif line.startswith("summary:"):  # the events of the dump's time range ("totals:" can hold stale ones)
            total = int(line.split()[1])
    return trigger, total, selfcost


Calls = Callable[[int, float], None]
"""Make that many calls one after another, pausing that many seconds after each answer."""


def door_calls(door: str, url: str) -> Calls:
    """The calls of `door` on the server at `url`: direct POSTs (to the floor of the promises with its key),
    `tools/call`s of one MCP session, or stateless 2026-07-28 `tools/call`s."""
    if door in ("http", "floor"):
        headers = {"Authorization": f"Bearer {FLOOR_KEY}"} if door == "floor" else None
        return lambda count, pause: asyncio.run(_calls(url, DOOR, count, post=True, pause=pause, headers=headers))
    mcp = f"{url}/mcp/bench"
    if door == "mcp2026":
        async def stateless(count: int, pause: float) -> None:
            async with httpx.AsyncClient(timeout=300, trust_env=False) as client:
                for _ in range(count):
                    await mcp_stateless_call(client, mcp, "listIssues", CALL_ARGS)
                    if pause:
                        await asyncio.sleep(pause)

        return lambda count, pause: asyncio.run(stateless(count, pause))

    async def opening() -> dict[str, str]:
        async with httpx.AsyncClient(timeout=300, trust_env=False) as client:
            return await mcp_open(client, mcp)

    headers = asyncio.run(opening())

    async def calling(count: int, pause: float) -> None:
        async with httpx.AsyncClient(timeout=300, trust_env=False) as client:
            for _ in range(count):
                await mcp_call(client, mcp, headers, "listIssues", CALL_ARGS)
                if pause:
                    await asyncio.sleep(pause)

    return lambda count, pause: asyncio.run(calling(count, pause))


def run(tree: Path, calls: int, keep: Path | None, *, plain: bool, door: str = "http", detail: int = 0,
        pause: float = PAUSE) -> Any:
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        folder = keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        build_marks(folder)
        upstream_port = free_port()
        upstream = f"http://127.0.0.1:{upstream_port}"
        stack.enter_context(spawned(python_module("bench.upstream", "--port", str(upstream_port)), upstream))
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        project = write_project(folder / "project", upstream, github=False)
        if door == "floor":  # the floor of the promises (bench/promise_floor.py), every promise kept
            argv, module, main = ["--port", str(port), "--upstream", upstream], "bench.promise_floor", FLOOR_MAIN
        else:
            argv = ["serve", "--port", str(port), "--specs", str(project / "specs"), "--agents",
                    str(project / "agents.yaml")]
            module, main = "gateway", GATEWAY_MAIN
        boot = BOOT.format(folder=str(folder), argv=argv, rules=str(ROOT / "bench" / "stage_rules.py"),
                           main=main.format(argv=argv))
        out = folder / "callgrind.out"
        server = python_module(module, *argv) if plain else [sys.executable, "-c", boot]
        command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--separate-threads=yes",
                   "--dump-instr=no", *server]
        env = {"PYTHONPATH": str(tree.resolve()),
               "GATEWAY_CACHE_DIR": os.environ.get("GATEWAY_CACHE_DIR") or str(folder / "cache"),
               "STAGE_UNSORTED": str(folder / "unsorted.txt")}
        # Under valgrind, on a busy machine, the server's start-up alone can take minutes.
        with spawned(command, f"{url}/healthz", env=env, cwd=tree.resolve(), ready_within=900) as (process, _):
            call = door_calls(door, url)
            call(30, 0.0)
            _settle(process.pid)
            call(20, 0.0)
            if plain:
                # A dump, not `-z`: callgrind's zeroing on request leaves some earlier costs in the next dump's
                # functions (its summary is right, its per-function lines are not); a dump zeroes them all.
                subprocess.run(["callgrind_control", "-d", str(process.pid)], check=True, capture_output=True)
                started = time.monotonic()
                call(calls, PAUSE)
                subprocess.run(["callgrind_control", "-d", str(process.pid)], check=True, capture_output=True)
                seconds = time.monotonic() - started
                time.sleep(IDLE)
                subprocess.run(["callgrind_control", "-d", str(process.pid)], check=True, capture_output=True)
            else:
                os.kill(process.pid, signal.SIGUSR1)
                time.sleep(0.5)  # the handler runs on the loop's next Python step (uvicorn's tick: every 0.1 s)
                call(calls, pause)
                os.kill(process.pid, signal.SIGUSR2)
                time.sleep(2)
        if plain:
            return report_plain(folder, out.name, calls, seconds)
        return report(folder, out.name, calls, detail)


Marked = dict[tuple[int, int], tuple[float, float]]
"""(phase, stage) -> (instructions, frames) a call; phase 0 before the answer, 1 after it."""
PHASES = ("before the answer", "after the answer")


def report(folder: Path, name: str, calls: int, detail: int = 0) -> Marked:
    """The marked run: each stage's instructions and frames per call, by phase (printed, and returned)."""
    per_stage: collections.Counter[int] = collections.Counter()
    per_phase: collections.Counter[tuple[int, int]] = collections.Counter()
    per_place: dict[int, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    per_function: dict[int, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    per_count: dict[tuple[int, int], collections.Counter[str]] = collections.defaultdict(collections.Counter)
    per_maker: dict[int, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    dumps = 0
    for dump in folder.glob(name + ".*"):
        if not dump.name.endswith("-01"):
            continue
        tally: collections.Counter[str] = collections.Counter()
        makers: collections.Counter[str] = collections.Counter()
        trigger, total, selfcost = parse_dump(dump, tally, makers)
        match = re.search(r"stage (\d+)(?: phase (\d))?", trigger)
        if match is None:
            continue
        dumps += 1
        stage = int(match.group(1))
        per_stage[stage] += total
        per_phase[(int(match.group(2) or 0), stage)] += total
        per_count[(int(match.group(2) or 0), stage)].update(tally)
        per_maker[stage].update(makers)
        for (obj, function), cost in selfcost.items():
            per_place[stage][where(obj, function)] += cost
            per_function[stage][f"{function} ({os.path.basename(obj)})"] += cost
    whole = sum(per_stage.values())
    frames_file = folder / "frames.txt"
    counted = eval(frames_file.read_text()) if frames_file.exists() else []  # noqa: S307 - our own list
    if len(counted) != 2 * len(STAGES):  # a tree whose marks had no phases: all before
        counted = [*counted, *[0] * (2 * len(STAGES) - len(counted))]
    phase_frames = {(phase, stage): counted[phase * len(STAGES) + stage]
                    for phase in (0, 1) for stage in range(len(STAGES))}
    frames = [phase_frames[(0, stage)] + phase_frames[(1, stage)] for stage in range(len(STAGES))]
    print(f"{whole / calls:,.0f} machine instructions per call on the loop's thread, marked ({calls} calls, "
          f"{dumps} stage changes, {sum(frames) / calls:,.0f} frames a call)")
    places: collections.Counter[str] = collections.Counter()
    for stage, cost in per_stage.most_common():
        split = per_place[stage]
        places.update(split)
        top = ", ".join(f"{place} {value / calls:,.0f}" for place, value in split.most_common(4))
        print(f"  {cost / calls:9,.0f} {100 * cost / whole:5.1f}% {frames[stage] / calls:6,.0f} frames  "
              f"{STAGES[stage]}  [{top}]")
    print("by where it ran:")
    for place, cost in places.most_common():
        print(f"  {cost / calls:9,.0f} {100 * cost / whole:5.1f}%  {place}")
    for stage, _ in per_stage.most_common() if detail else ():
        print(f"{STAGES[stage]}: " + ", ".join(f"{function} {cost / calls:,.0f}"
                                                for function, cost in per_function[stage].most_common(detail)))
    print_counts(per_count, per_maker, calls)
    return {key: (per_phase[key] / calls, phase_frames[key] / calls) for key in phase_frames
            if per_phase[key] or phase_frames[key]}


def print_counts(per_count: dict[tuple[int, int], collections.Counter[str]],
                 per_maker: dict[int, collections.Counter[str]], calls: int, top: int = 6) -> None:
    """Objects made and freed, frames pushed and native allocations a call, by stage and phase (`COUNTED`), with the
    functions that made the most objects in each stage (the hook adds no objects: its frames are counted apart)."""
    kinds = ("made", "blocks", "freed", "frames", "malloc")
    for phase, phase_name in enumerate(PHASES):
        rows = {stage: counts for (p, stage), counts in per_count.items() if p == phase and counts.total()}
        whole: collections.Counter[str] = collections.Counter()
        for counts in rows.values():
            whole.update(counts)
        print(f"{phase_name}, a call: " + ", ".join(f"{whole[kind] / calls:,.0f} {kind}" for kind in kinds)
              + " (objects made, allocator blocks taken and freed, Python frames pushed inline, native mallocs)")
        for stage, counts in sorted(rows.items(), key=lambda item: -item[1]["made"]):
            print(f"  {' '.join(f'{counts[kind] / calls:7,.1f}' for kind in kinds)}  {STAGES[stage]}")
    print("who made the objects, by stage (a call, both phases):")
    for stage, makers in sorted(per_maker.items(), key=lambda item: -item[1].total()):
        if makers.total() >= calls:
            print(f"  {STAGES[stage]}: " + ", ".join(f"{fn} {count / calls:,.1f}"
                                                   for fn, count in makers.most_common(top)))


def report_plain(folder: Path, name: str, calls: int, seconds: float, top: int = 40) -> tuple[float, float]:
    """The unmarked count: the loop thread's instructions per call by where they ran, and the costliest functions;
    and the idle server's rate (the reload watcher's poll, uvicorn's tick), which a call pays by its duration."""
    dumps = sorted((path for path in folder.glob(name + ".*") if path.name.endswith("-01")),
                   key=lambda path: int(path.name.rsplit(".", 1)[1].split("-")[0]))
    counted: collections.Counter[str] = collections.Counter()
    _, total, selfcost = parse_dump(dumps[-2], counted)
    idle = parse_dump(dumps[-1])[1] / IDLE
    kinds = ("made", "blocks", "freed", "frames", "malloc")
    print("a call, unmarked (idle work included): "
          + ", ".join(f"{counted[kind] / calls:,.0f} {kind}" for kind in kinds))
    print(f"{total / calls:,.0f} machine instructions per call on the loop's thread, unmarked ({calls} calls in "
          f"{seconds:.1f} s); the idle server runs {idle:,.0f} a second, {idle * seconds / calls:,.0f} a call "
          f"at this pace")
    places: collections.Counter[str] = collections.Counter()
    for (obj, function), cost in selfcost.items():
        places[where(obj, function)] += cost
    for place, cost in places.most_common():
        print(f"  {cost / calls:9,.0f} {100 * cost / total:5.1f}%  {place}")
    print("the costliest functions (self):")
    for (obj, function), cost in selfcost.most_common(top):
        print(f"  {cost / calls:9,.0f} {100 * cost / total:5.1f}%  {function} ({os.path.basename(obj)})")
    return total / calls, idle * seconds / calls


def corrected(marked: Marked, plain: float, idle: float, hook_cost: float | None = None) -> None:
    """The stages at the unmarked count: the hook's cost (the marked total above the unmarked, periodic work apart,
    or `hook_cost` a frame when given) taken off each stage in proportion to its frames; then the same split by phase
    (before and after the answer)."""
    periodic = STAGES.index("periodic work (the reload watcher, uvicorn's tick)")
    parts = {key: value for key, value in marked.items() if key[1] != periodic}
    frames = sum(count for _, count in parts.values())
    per_frame = hook_cost if hook_cost is not None else \
        (sum(cost for cost, _ in parts.values()) - (plain - idle)) / frames
    stages: dict[int, float] = collections.defaultdict(float)
    phases: dict[int, dict[int, float]] = {0: collections.defaultdict(float), 1: collections.defaultdict(float)}
    for (phase, stage), (cost, count) in parts.items():
        stages[stage] += cost - count * per_frame
        phases[phase][stage] += cost - count * per_frame
    print(f"the stages at the unmarked count ({plain - idle:,.0f} a call without the idle server's periodic work; "
          f"the hook's {per_frame:,.0f} a frame taken off):")
    for stage, cost in sorted(stages.items(), key=lambda item: -item[1]):
        print(f"  {cost:9,.0f} {100 * cost / plain:5.1f}%  {STAGES[stage]}")
    print(f"  {idle:9,.0f} {100 * idle / plain:5.1f}%  the idle server's periodic work at this pace")
    if hook_cost is not None:
        print("(the hook's cost given: the stages add up to more than the unmarked count by the loop's idle native work"
              " during the marked run's pauses, counted after the answer in the loop's native stage)")
    for phase, name in enumerate(PHASES):
        total = sum(phases[phase].values())
        print(f"{name}: {total:,.0f} a call ({100 * total / (plain - idle):.1f}%)")
        for stage, cost in sorted(phases[phase].items(), key=lambda item: -item[1]):
            if abs(cost) >= 50:
                print(f"  {cost:9,.0f}  {STAGES[stage]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", type=Path, default=Path("."))
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--plain", action="store_true",
                        help="no stage marks: the loop thread's count by where it ran, as bench.machine_instructions")
    parser.add_argument("--keep", type=Path, help="a folder to keep the dumps in (default: a temporary one)")
    parser.add_argument("--detail", type=int, default=0, help="also list each stage's costliest functions (self)")
    parser.add_argument("--door", choices=("http", "mcp", "mcp2026", "floor"), default="http",
                        help="direct POSTs, tools/calls of one MCP session (2025-06-18), or stateless (2026-07-28); "
                             "floor: direct POSTs to the floor of the promises (bench/promise_floor.py)")
    parser.add_argument("--pause", type=float, default=PAUSE,
                        help="seconds between an answer and the next request in the marked run (see the docstring)")
    parser.add_argument("--hook-cost", type=float,
                        help="the hook's cost a frame to take off (default: estimated from the two runs)")
    args = parser.parse_args()
    if args.plain:
        run(args.tree, args.calls, args.keep, plain=True, door=args.door)
        return
    marked = run(args.tree, args.calls, args.keep, plain=False, door=args.door, detail=args.detail, pause=args.pause)
    plain, idle = run(args.tree, PLAIN_CALLS, args.keep and args.keep / "plain", plain=True, door=args.door)
    corrected(marked, plain, idle, args.hook_cost)


if __name__ == "__main__":
    main()
