"""The audit's two stages alone, per call: machine instructions (valgrind's callgrind) and Python instructions.

    python -m bench.audit_stages [--tree /path/to/other/tree ...] [--calls 2000]

`bench.ledger` puts the audit among the largest rows of a call; this measures that row on its own, so a change to it
is told apart from the rest of the call's run-to-run spread. One call is what the pipeline runs of the audit:
`RecordCall` around `RecordBeforeSend` (linked by the tree's own `Pipeline`, as it links them for a tool) around
an answer that is already there, the arguments redacted by a redactor that knows a secret, the row written to a
SQLite store in a temporary folder before the "send" and its outcome after. Each tree (this one, and every
`--tree`, through `PYTHONPATH`; this file is run by its path, so the tree's own `gateway` is imported) runs twice
under callgrind, with no calls and with `--calls`; the difference on the main thread, divided by the calls, is
printed, then the Python instructions per call counted with `sys.settrace`, then the main thread's CPU time per call
(natively, 20,000 calls) with the share of it the kernel sampled in system mode: SQLite's file locks (`fcntl`) and
WAL writes (`pwrite`), which an instruction count does not see. Needs `valgrind`; about a minute per tree.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any


async def _calls(count: int, trace: bool, cpu: bool = False) -> None:
    from gateway.catalog import AgentTool, Tool
    from gateway.execution.pipeline import Pipeline
    from gateway.kernel.caller import bind_caller
    from gateway.kernel.calls import Invocation
    from gateway.kernel.redaction import Redactor
    from gateway.messages import ToolCall, ToolResult
    from gateway.safety.audit import AuditLog, RecordCall
    from gateway.store.sqlite import SQLiteStore

    tool = Tool(name="listIssues", api="bench", operation_id="listIssues", method="GET",
                path="/repos/{owner}/{repo}/issues", description="", input_schema={})
    agent_tool = AgentTool(name=tool.name, description="", input_schema={}, tool=tool)
    arguments = {"owner": "octo", "repo": "hello world", "state": "open", "per_page": 5}
    redactor = Redactor(["sk-bench-secret-0123456789"])
    result = ToolResult(ok=True, status=200, bytes=120, duration_ms=1.5)

    async def send(_: Invocation) -> ToolResult:
        return result

    with tempfile.TemporaryDirectory() as folder:
        store = SQLiteStore(Path(folder) / "audit.db")
        record = RecordCall(AuditLog(store, redactor), redactor)
        chain = Pipeline([record, record.before_send()], send).chain(agent_tool)

        def invocation() -> Invocation:
            return Invocation(agent="bench", agent_tool=agent_tool, tool=tool,
                              call=ToolCall(id="c", name=tool.name, arguments=arguments), arguments=arguments)

        with bind_caller(agent="bench"):
            for _ in range(200):  # warm-up: statements prepared, the retention sweep done
                await chain(invocation())
            invocations = [invocation() for _ in range(count)]
            steps: collections.Counter[str] = collections.Counter()

            def tracer(frame: Any, event: str, _: Any) -> Any:
                frame.f_trace_opcodes = True
                if event == "opcode":
                    steps[frame.f_code.co_qualname] += 1
                return tracer

            if trace:
                sys.settrace(tracer)
            ticks, started = _main_thread_ticks(), time.thread_time_ns()
            for each in invocations:
                await chain(each)
            spent, ticked = time.thread_time_ns() - started, _main_thread_ticks()
            sys.settrace(None)
        await store.aclose()
    if trace:
        print(f"  {sum(steps.values()) / count:,.0f} Python instructions per call; the most:", ", ".join(
            f"{name} {value / count:.0f}" for name, value in steps.most_common(8)))
    if cpu:
        user, system = (after - before for after, before in zip(ticked, ticks, strict=True))
        share = system / (user + system) if user + system else float("nan")
        print(f"  {spent / count / 1e3:.1f} µs of CPU per call on the main thread, {share:.0%} of it in the kernel "
              f"({user + system} ticks sampled)")


def _main_thread_ticks() -> tuple[int, int]:
    """This thread's user and system CPU so far in clock ticks (its `/proc/self/task/TID/stat`)."""
    fields = Path(f"/proc/self/task/{threading.get_native_id()}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]), int(fields[12])


def _main_thread_total(path: Path) -> int:
    match = re.search(r"^summary: (\d+)", path.read_text(errors="replace"), re.M)
    assert match is not None, path
    return int(match.group(1))


def measure(tree: Path, calls: int) -> None:
    env = {**os.environ, "PYTHONPATH": str(tree.resolve())}
    totals = []
    with tempfile.TemporaryDirectory() as folder:
        for count in (0, calls):
            out = Path(folder) / f"callgrind.{count}"
            subprocess.run(["valgrind", "--tool=callgrind", "--separate-threads=yes", f"--callgrind-out-file={out}",
                            sys.executable, __file__, "--run", str(count)],
                           env=env, cwd=tree, check=True, capture_output=True)
            totals.append(_main_thread_total(Path(f"{out}-01")))
    print(f"{tree}: {(totals[1] - totals[0]) / calls:,.0f} machine instructions per call (main thread, {calls} calls)")
    subprocess.run([sys.executable, __file__, "--run", "1000", "--trace"], env=env, cwd=tree, check=True)
    subprocess.run([sys.executable, __file__, "--run", "20000", "--cpu"], env=env, cwd=tree, check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", type=Path, action="append", default=[], help="another source tree to compare")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--run", type=int, help=argparse.SUPPRESS)  # one measured process: this many calls
    parser.add_argument("--trace", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--cpu", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run is not None:
        asyncio.run(_calls(args.run, args.trace, args.cpu))
        return
    for tree in [Path("."), *args.tree]:
        measure(tree, args.calls)


if __name__ == "__main__":
    main()
