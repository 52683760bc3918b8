"""Python bytecode instructions per tool call in the gateway's app: a count that does not move with the machine's load.

    python -m bench.opcodes [--door http|mcp|mcp2026] [--calls 100] [--top 30] [--functions | --stages]
                            [--log-format text|json]
    python -m bench.opcodes --door mcp --profile 2000 [--top 40]

The app is built as `gateway serve` builds it (safety layer, SQLite audit, access line) and driven in this
process over ASGI on the event loop uvicorn would pick, without uvicorn itself; the upstream (bench/upstream.py)
is a real server in its own process. After a warm-up, `sys.settrace` counts every instruction Python runs in
`--calls` calls (native code, the kernel and the upstream are not in it). It prints the count per call and, with
`--top`, the files (or, with `--functions`, the functions) that run the most. `--stages` counts by the stages of
`bench.ledger` (`bench/stage_rules.py`: a function of the standard library or of a shared helper counts to the
stage of the frame that called it; a coroutine the event loop resumes has no caller to ask, and counts as
unattributed). Wall-clock and CPU figures on a shared machine move by tens of per cent between runs; this count
moves by well under one, so it tells whether a change to the Python path of a call saves work (`bench.calls` then
says what that is worth in time).

`--profile N` runs N calls under cProfile instead (after the same warm-up) and prints the functions by their own
time and by their time with what they call, per call: which functions run, how often a call runs each (a count
that does not move with the load), and roughly where a call's time goes (times that do).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import io
import json
import logging.config
import os
import sys
import tempfile
from collections.abc import Awaitable, Callable
from contextlib import ExitStack, redirect_stderr
from pathlib import Path
from types import FrameType
from typing import Any

from bench.support import (
    CALL_ARGS,
    MCP_HEADERS,
    PROTOCOL,
    ROOT,
    STATELESS_ENVELOPE,
    STATELESS_PROTOCOL,
    free_port,
    python_module,
    spawned,
    write_project,
)

Call = Callable[[], Awaitable[None]]


def _scope(path: str, headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    return {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
            "server": ("127.0.0.1", 8080), "client": ("127.0.0.1", 50000), "scheme": "http", "method": "POST",
            "root_path": "", "path": path, "raw_path": path.encode(), "query_string": b"", "state": {},
            "headers": [(b"host", b"127.0.0.1:8080"), (b"accept-encoding", b"gzip, deflate"),
                        (b"connection", b"keep-alive"), (b"user-agent", b"bench"), *headers]}


def _poster(app: Any) -> Callable[[str, bytes, list[tuple[bytes, bytes]]], Awaitable[list[dict[str, Any]]]]:
    async def post(path: str, body: bytes, headers: list[tuple[bytes, bytes]]) -> list[dict[str, Any]]:
        sent: list[dict[str, Any]] = []
        pending = [{"type": "http.request", "body": body, "more_body": False}]

        async def receive() -> dict[str, Any]:
            if pending:
                return pending.pop()
            await asyncio.Event().wait()  # the client never leaves
            raise AssertionError

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        framing = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await app(_scope(path, [*framing, *headers]), receive, send)
        if sent[0]["status"] not in (200, 202):  # 202: a notification accepted
            raise RuntimeError(f"{path}: {sent[0]['status']} {b''.join(m.get('body', b'') for m in sent[1:])[:300]!r}")
        return sent

    return post


async def _bind(app: Any, door: str) -> Call:
    post = _poster(app)
    if door == "http":
        body = json.dumps(CALL_ARGS).encode()

        async def direct() -> None:
            await post("/agents/bench/tools/listIssues", body, [])

        return direct
    headers = [(b"accept", MCP_HEADERS["Accept"].encode())]
    ids = iter(range(1, 1 << 62))
    if door == "mcp2026":
        headers += [(b"mcp-protocol-version", STATELESS_PROTOCOL.encode()), (b"mcp-method", b"tools/call"),
                    (b"mcp-name", b"listIssues")]

        stateless_call = _numbered({"jsonrpc": "2.0", "id": 0, "method": "tools/call", "params": {
            "name": "listIssues", "arguments": CALL_ARGS, "_meta": STATELESS_ENVELOPE}})

        async def stateless() -> None:
            await post("/mcp/bench", stateless_call(next(ids)), headers)

        return stateless
    opened = await post("/mcp/bench", json.dumps({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}},
    }).encode(), headers)
    session = dict(opened[0]["headers"]).get(b"mcp-session-id")
    headers += [(b"mcp-protocol-version", PROTOCOL.encode()), *([(b"mcp-session-id", session)] if session else [])]
    await post("/mcp/bench", b'{"jsonrpc": "2.0", "method": "notifications/initialized"}', headers)

    session_call = _numbered({"jsonrpc": "2.0", "id": 0, "method": "tools/call",
                              "params": {"name": "listIssues", "arguments": CALL_ARGS}})

    async def mcp() -> None:
        await post("/mcp/bench", session_call(next(ids)), headers)

    return mcp


def _numbered(message: dict[str, Any]) -> Callable[[int], bytes]:
    """`message`'s JSON body with a given id (`message["id"]` is 0), written once: the driver's own work a call is
    then a byte join, as the direct door's driver sends one body written once (a JSON write per call would count
    ~130 instructions of the bench's to the MCP doors)."""
    head, tail = json.dumps(message).encode().split(b'"id": 0', 1)

    def body(number: int) -> bytes:
        return b"%b\"id\": %d%b" % (head, number, tail)

    return body


UNATTRIBUTED = "unattributed (the bench's driver, a coroutine the loop resumed outside the stages' files)"


def _stage_of() -> Callable[[FrameType], str]:
    """A frame's stage by `bench.stage_rules` (its caller's, up the stack, for the code the rules leave to it)."""
    from bench.stage_rules import STAGES, classify

    by_code: dict[Any, int] = {}

    def stage(frame: FrameType | None) -> str:
        while frame is not None:
            code = frame.f_code
            index = by_code.get(code)
            if index is None:
                index = by_code[code] = classify(code)
            if index >= 0:
                return STAGES[index]
            frame = frame.f_back
        return UNATTRIBUTED

    return stage


def _count(calls: int, call: Call, *, by: str = "file") -> Callable[[], Awaitable[collections.Counter[str]]]:
    async def counted() -> collections.Counter[str]:
        per_file: collections.Counter[str] = collections.Counter()
        stage_of = _stage_of() if by == "stage" else None

        def trace(frame: FrameType, event: str, arg: Any) -> Any:
            if event == "call":
                frame.f_trace_opcodes = True
                if stage_of is not None:  # one key for the frame, decided when it starts (or resumes)
                    key = stage_of(frame)

                    def local(frame: FrameType, event: str, arg: Any) -> Any:
                        if event == "opcode":
                            per_file[key] += 1
                        return local

                    return local
            elif event == "opcode":
                code = frame.f_code
                per_file[f"{code.co_filename}:{code.co_qualname}" if by == "function" else code.co_filename] += 1
            return trace

        sys.settrace(trace)
        try:
            for _ in range(calls):
                await call()
        finally:
            sys.settrace(None)
        return per_file

    return counted


def _profiled(calls: int, call: Call) -> Callable[[], Awaitable[Any]]:
    async def profiled() -> Any:
        import cProfile

        profile = cProfile.Profile()
        profile.enable()
        try:
            for _ in range(calls):
                await call()
        finally:
            profile.disable()
        return profile

    return profiled


def measure(door: str, calls: int, *, functions: bool = False, by: str = "file", profile: bool = False,
            log_format: str = "text") -> Any:
    """Instructions per file (or per function: `file:qualified name`, or per stage: `by="stage"`) over `calls`
    calls on `door`; with `profile`, the `cProfile.Profile` of those calls instead."""
    by = "function" if functions else by
    from gateway.server.run import _asyncio_declared, _build_app, log_config

    with tempfile.TemporaryDirectory() as folder, ExitStack() as stack:
        port = free_port()
        upstream = f"http://127.0.0.1:{port}"
        stack.enter_context(spawned(python_module("bench.upstream", "--port", str(port)), upstream + "/"))
        project = write_project(Path(folder), upstream, github=False)
        os.environ["GATEWAY_CACHE_DIR"] = str(Path(folder) / "cache")
        previous = os.getcwd()
        os.chdir(folder)  # the store (./.gateway/state.db) in the temporary folder
        stack.callback(os.chdir, previous)
        config = log_config(log_format)  # the access line is rendered and written, to a buffer
        for handler in config["handlers"].values():
            handler["stream"] = "ext://sys.stderr"
        lines = stack.enter_context(redirect_stderr(io.StringIO()))
        logging.config.dictConfig(config)
        built = _build_app(project / "specs", project / "agents.yaml", host="127.0.0.1", use_cache=True,
                           allow_public=False, access_log=True)
        if built is None:
            raise RuntimeError(lines.getvalue())
        app = built[0]

        async def run() -> collections.Counter[str]:
            async with app.router.lifespan_context(app):
                call = await _bind(app, door)
                for _ in range(200):  # warm: caches filled, the MCP SDK imported
                    await call()
                if profile:
                    return await _profiled(calls, call)()
                return await _count(calls, call, by=by)()

        with _asyncio_declared(), asyncio.Runner(loop_factory=_loop_factory()) as runner:
            return runner.run(run())


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop when it is installed, as `gateway serve` runs on (uvicorn picks it); asyncio's otherwise."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--door", choices=("http", "mcp", "mcp2026"), default="http")
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--top", type=int, default=0, help="also list the files that run the most instructions")
    parser.add_argument("--functions", action="store_true", help="list functions rather than files")
    parser.add_argument("--stages", action="store_true", help="list every stage (bench/stage_rules.py), not files")
    parser.add_argument("--log-format", choices=("text", "json"), default="text",
                        help="the access line's format, as `gateway serve --log-format` writes it")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="profile N calls with cProfile instead of counting instructions")
    args = parser.parse_args()
    if args.profile:
        _print_profile(args.door, args.profile, measure(args.door, args.profile, profile=True,
                                                        log_format=args.log_format), args.top or 40)
        return
    per_file = measure(args.door, args.calls, by="function" if args.functions else "stage" if args.stages else "file",
                       log_format=args.log_format)
    print(f"{args.door} door: {sum(per_file.values()) / args.calls:,.0f} Python instructions per call "
          f"({args.calls} calls)")
    prefixes = [str(ROOT) + "/", *sorted({p + "/" for p in sys.path if p and "site-packages" in p}, key=len,
                                           reverse=True), os.path.dirname(os.__file__) + "/"]
    for file, count in per_file.most_common(None if args.stages else args.top):
        short = next((file[len(p):] for p in prefixes if file.startswith(p)), file)
        print(f"  {count / args.calls:7,.0f}  {short}")


def _print_profile(door: str, calls: int, profile: Any, top: int) -> None:
    import pstats

    stats = pstats.Stats(profile)
    total = stats.total_tt  # type: ignore[attr-defined]  # (pstats' documented total, not in typeshed)
    print(f"{door} door: {total / calls * 1e6:,.0f} us of profiled time per call ({calls} calls, cProfile's own "
          f"overhead included)")
    rows = stats.stats  # type: ignore[attr-defined]  # {(file, line, name): (primitive calls, calls, own, cumulative, callers)}
    prefixes = [str(ROOT) + "/", *sorted({p + "/" for p in sys.path if p and "site-packages" in p}, key=len,
                                           reverse=True), os.path.dirname(os.__file__) + "/"]

    def name(key: tuple[str, int, str]) -> str:
        file, line, function = key
        short = next((file[len(p):] for p in prefixes if file.startswith(p)), file)
        return f"{short}:{line}({function})"

    for title, column in (("own time", 2), ("with what it calls", 3)):
        print(f"\n  by {title}: us per call, calls per call, function")
        for key, row in sorted(rows.items(), key=lambda item: item[1][column], reverse=True)[:top]:
            print(f"  {row[column] / calls * 1e6:8.1f}  {row[1] / calls:6.2f}  {name(key)}")


if __name__ == "__main__":
    main()
