"""The stages of `bench.ledger`: which part of the app a Python code object belongs to (by file and function).

Loaded by file path into the measured server (whose `bench` package may be another tree's), so it imports nothing.
"""

from __future__ import annotations

import os

_UNSORTED = os.environ.get("STAGE_UNSORTED")  # a file to list the gateway code put in no stage

STAGES = [
    "the loop's native code outside Python (uvloop, httptools)",
    "uvicorn (its protocol's Python, with the gateway's head limit)",
    "Starlette (middleware stack, router)",
    "envelope (host policy, limits, status watch)",
    "auth",
    "disconnect watch",
    "direct door (body, plan, generation hold, answer)",
    "caller binding",
    "executor and stage links",
    "breaker and concurrency guard",
    "argument validation",
    "building the request",
    "credentials",
    "sending (gateway/http, pyreqwest)",
    "reading the answer",
    "output check",
    "redaction",
    "audit (with its SQLite statements)",
    "metrics (observe stage, prometheus)",
    "access line (logging, log-record redaction, formatter)",
    "MCP door (endpoint, inline path, handlers, result shaping)",
    "MCP SDK (kernel, its models' validation and dump, transport checks)",
    "other gateway code",
    "periodic work (the reload watcher, uvicorn's tick)",
]
_STAGE = {name.split(" (")[0]: index for index, name in enumerate(STAGES)}

# (a piece of the file's path, a qualified-name prefix or "", stage): the first that matches decides.
# bench/promise_floor.py (`bench.ledger --door floor`): each method in the gateway's stage of the same work; the rest
# of the file (its redaction, `_text`) counts to its caller's.
_FLOOR = "bench/promise_floor.py"
RULES: list[tuple[str, str, str]] = [
    (_FLOOR, "Floor._envelope", "envelope"),
    (_FLOOR, "Floor._client", "auth"),
    (_FLOOR, "Bucket", "auth"),
    (_FLOOR, "Watch", "disconnect watch"),
    (_FLOOR, "Floor._valid", "argument validation"),
    (_FLOOR, "Floor._problems", "argument validation"),
    (_FLOOR, "Plan", "building the request"),
    (_FLOOR, "_encoded", "building the request"),
    (_FLOOR, "Floor._enter_breaker", "breaker and concurrency guard"),
    (_FLOOR, "Floor._take_slot", "breaker and concurrency guard"),
    (_FLOOR, "Breaker", "breaker and concurrency guard"),
    (_FLOOR, "Audit", "audit"),
    (_FLOOR, "Floor._send", "sending"),
    (_FLOOR, "Floor._read", "reading the answer"),
    (_FLOOR, "Floor._parse", "reading the answer"),
    (_FLOOR, "Floor._output_holds", "output check"),
    (_FLOOR, "Floor._count", "metrics"),
    (_FLOOR, "Floor._access_line", "access line"),
    (_FLOOR, "Floor", "direct door"),
    ("/uvicorn/server.py", "", "periodic work"),
    ("/anyio/", "", "periodic work"),
    ("gateway/runtime.py", "", "periodic work"),
    ("/uvicorn/", "", "uvicorn"),
    ("gateway/server/bounded_head.py", "", "uvicorn"),
    ("/starlette/", "", "Starlette"),
    ("/prometheus_client/", "", "metrics"),
    ("/logging/", "", "access line"),
    ("/pythonjsonlogger/", "", "access line"),  # `--log-format json`'s formatter
    ("/pyreqwest/", "", "sending"),
    ("gateway/server/accesslog.py", "", "access line"),
    ("gateway/server/loglines.py", "", "access line"),  # the handler's emit, the time's formatter
    ("gateway/server/envelope.py", "", "envelope"),
    ("gateway/asgi.py", "", "envelope"),
    ("gateway/server/hosts.py", "", "envelope"),
    ("gateway/server/limits.py", "", "envelope"),
    ("gateway/server/auth.py", "", "auth"),
    ("gateway/server/disconnect.py", "", "disconnect watch"),
    ("gateway/server/mcp/", "", "MCP door"),
    ("gateway/dialects/mcp.py", "", "MCP door"),
    ("/site-packages/mcp/", "", "MCP SDK"),
    ("/site-packages/mcp_types/", "", "MCP SDK"),
    ("gateway/server/direct_call.py", "", "direct door"),
    ("gateway/server/routes.py", "", "direct door"),
    ("gateway/server/api_errors.py", "", "direct door"),
    ("gateway/assembly/", "", "direct door"),
    ("gateway/execution/runner.py", "", "direct door"),
    ("gateway/kernel/caller.py", "", "caller binding"),
    ("gateway/execution/stages.py", "ValidateToolArguments", "argument validation"),
    ("gateway/execution/stages.py", "CheckToolOutput", "output check"),
    ("gateway/execution/stages.py", "_is_json", "output check"),
    ("gateway/execution/stages.py", "RedactResult", "redaction"),
    ("gateway/execution/fastschema.py", "", "argument validation"),
    ("gateway/execution/arguments.py", "", "argument validation"),
    ("gateway/execution/executor.py", "_Api.request_plan", "building the request"),
    ("gateway/execution/", "", "executor and stage links"),
    ("gateway/safety/breaker.py", "", "breaker and concurrency guard"),
    ("gateway/safety/guards.py", "", "breaker and concurrency guard"),
    ("gateway/safety/audit.py", "", "audit"),
    ("gateway/store/", "", "audit"),
    ("gateway/observe/", "", "metrics"),
    ("gateway/http/request.py", "", "building the request"),
    ("gateway/http/serialize.py", "", "building the request"),
    ("gateway/http/body.py", "", "building the request"),
    ("gateway/http/auth.py", "", "credentials"),
    ("gateway/http/client.py", "_with_credentials", "credentials"),
    ("gateway/http/client.py", "", "sending"),
    ("gateway/http/wire.py", "ReqwestWire", "sending"),
    ("gateway/http/transport.py", "", "sending"),
    ("gateway/http/budget.py", "", "sending"),
    ("gateway/http/library.py", "", "sending"),
    ("gateway/http/reading.py", "", "reading the answer"),
    ("gateway/http/wire.py", "", "reading the answer"),
]
# Helpers that count to their caller's stage: the standard library, generated __init__s, shared gateway pieces.
INHERIT = ("gateway/jsonwire.py", "gateway/messages.py", "gateway/kernel/", "gateway/server/app.py",
           "gateway/server/supervision.py", "gateway/errors.py")


def classify(code: object) -> int:
    """The stage of a code object (`STAGES`' index), or -1: its caller's."""
    filename = getattr(code, "co_filename", "")
    qualname = getattr(code, "co_qualname", "")
    for piece, prefix, stage in RULES:
        if piece in filename and qualname.startswith(prefix):
            return _STAGE[stage]
    if "/gateway/" in filename and not any(piece in filename for piece in INHERIT):
        if _UNSORTED is not None:
            with open(_UNSORTED, "a") as log:
                log.write(f"{filename}:{qualname}\n")
        return _STAGE["other gateway code"]
    return -1
