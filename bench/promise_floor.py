"""The floor of the promises: the cheapest server that keeps every promise of the bench's direct call, on the gateway's
own parts, with no gateway code on the request's path.

    python -m bench.promise_floor --port 9002 --upstream http://127.0.0.1:9000 [--no-audit] [--no-output-check] ...

It answers `bench.calls`' HTTP row, `POST /agents/bench/tools/listIssues` with the bench's arguments, with the same
request upstream (`bench.support.DIRECT_PATH` and headers) and the same answer (the `ToolResult` as JSON, the api's
text as its `body`), on the same parts: uvicorn with httptools and uvloop (and the gateway's bounded-head protocol,
the one piece of the gateway on the path: a uvicorn protocol class, see below), one Starlette route, pyreqwest built
by the executor's `build_client` settings, orjson, jsonschema_rs with the tool's own schemas (the bench spec compiled
by the gateway's compiler at start-up) and SQLite in WAL mode with the store's pragmas, tables and statements. Each
promise is kept once, plainly, in the order the gateway keeps them; `--no-NAME` leaves one out, so that a run of
each beside the whole says what it costs:

- `envelope`: headers past 100 fields or 32 KB refused (431), a foreign `Host` (421), a cross-site `Origin` (403), a
  body that is not JSON (415) or past 2 MB (413); the verdict remembered per header combination, as the gateway does;
- `bounded_head`: the gateway's `BoundedHeadProtocol` (a request's head bounded in size and time: slowloris); off:
  uvicorn's own httptools protocol;
- `key`: `Authorization: Bearer <key>` checked (its SHA-256 against the client's with `hmac.compare_digest`), 401;
- `limits`: the client's token bucket (one process: in memory; the gateway's store counts it for every worker), 429;
- the body parsed once (orjson) and required to be an object (always kept);
- `validation`: the arguments judged by the tool's compiled input schema; a refusal worded in a worker thread (422);
- the request built from the spec's path (values percent-encoded, no `.`/`..` segment), query and headers (no CR,
  LF or NUL), the credential injected (always kept: it is the call);
- `breaker`: the api's breaker for the caller (5 failures in a row: 30 s paused), 503;
- `concurrency`: one of the api's 16 slots, waited for at most the call's timeout (504);
- `audit`: the call's row committed before the request leaves (`running`) and its outcome committed before the answer:
  two commits on an inline connection, as the gateway makes them (a row that cannot be written: 503, nothing sent);
- the request sent within the api's 30 s, the answer read under the 4 MB cap, a `Content-Encoding` the client did not
  undo refused unread, the JSON parsed once (always kept);
- `output_check`: the parse judged by the tool's compiled output schema (`invalid_output`, 502);
- `redaction`: the api's credential, in every form the gateway redacts, searched for in the recorded arguments (their
  JSON, written once: the column), in the answer's text, in the error text and in the access line, and replaced;
- the answer sent (always kept);
- `metrics`: prometheus_client's request counter, tool-call counter and latency histogram, after the answer;
- `access_log`: uvicorn's access line, written and flushed to stderr after the answer;
- `disconnect_watch`: a request still running 50 ms in gets a watcher that cancels it when its client leaves (one
  sweeper timer a loop, as the gateway's).

`--audit-form exclusive` (SQLite's lock held by the inline connection: no lock taken and released a commit) and
`--audit-form file` (each row and outcome a line appended to a file, one `write`, the same durability as the WAL
under `synchronous=NORMAL`) are measurements of what the audit's two commits cost in other forms, not forms the
gateway could take as it is (the first shuts out every other connection; the second has no query, index or retention).

Decided at start-up, so nothing per call, as in the gateway for this tool: approval (a GET under `approval: never`),
hooks (none), tracing (none installed), the agent's fixed arguments (none). Left out, and why: retries and same-origin
redirects (features, not promises: the client follows no redirect, so none leaves the api's host); truncation at a
clean JSON boundary (an answer over 64,000 bytes is cut as text and marked truncated; the bench's is 1.2 KB);
arguments beyond strings, numbers, booleans and arrays of them in the path, query and headers (the schema allows no
others for this tool); users' tokens, OAuth and token exchange (the bench's api has a static bearer); the group commit
of rows that arrive while the file is locked (the floor writes alone: a taken lock falls back to a worker thread).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import hmac
import os
import re
import sqlite3
import sys
import tempfile
import time
from collections.abc import Awaitable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields, replace
from datetime import timedelta
from itertools import chain, islice
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import jsonschema_rs
import orjson
import uvicorn
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from bench.support import DOOR, ROOT, TOKEN, Side, python_module, write_project

FLOOR_KEY = "floor-client-key-0123456789"
"""The one client's key (`--no-key`: not asked for)."""
CLIENT = "floor-client"
AGENT, TOOL = "bench", "listIssues"
MARKER = "[REDACTED]"
MAX_HEADERS, MAX_HEADER_BYTES, MAX_BODY = 100, 32 * 1024, 2 * 1024 * 1024
READ_CAP, MAX_RESULT = 4 * 1024 * 1024, 64_000
TIMEOUT = 30.0
SLOTS, FAILURES, RESET_AFTER = 16, 5, 30.0
WATCH_AFTER = 0.05
CHECKPOINT_EVERY = 1000
LOOPBACK = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})
OWNED = frozenset({"host", "content-length", "transfer-encoding", "connection", "accept", "content-type",
                   "authorization", "cookie"})
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
_NOT_JSON = object()
_UNRESERVED = re.compile(r"[A-Za-z0-9._~-]*").fullmatch
_PHRASES = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 413:
            "Content Too Large", 415: "Unsupported Media Type", 421: "Misdirected Request", 422:
            "Unprocessable Content", 429: "Too Many Requests", 431: "Request Header Fields Too Large", 500:
            "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout"}


@dataclass(frozen=True)
class Promises:
    """Which promises the floor keeps (`--no-NAME` turns one off); the module docstring says what each is."""

    envelope: bool = True
    bounded_head: bool = True
    key: bool = True
    limits: bool = True
    validation: bool = True
    breaker: bool = True
    concurrency: bool = True
    audit: bool = True
    output_check: bool = True
    redaction: bool = True
    metrics: bool = True
    access_log: bool = True
    disconnect_watch: bool = True

    def without(self, *names: str) -> Promises:
        return replace(self, **dict.fromkeys(names, False))


PROMISES = tuple(f.name for f in fields(Promises))
AUDIT_FORMS = ("sqlite", "exclusive", "file")
"""How the audit is kept: the gateway's way (SQLite in WAL mode, its pragmas; the floor's), and two measurements."""


class Refused(Exception):
    """A request the floor answers with an error (`status`, `code`, `message`), before or after the call."""

    def __init__(self, status: int, code: str, message: str, *, headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, list(headers)


def _text(value: Any) -> str:
    if type(value) is str:
        return value
    if type(value) is bool:
        return "true" if value else "false"
    if type(value) in (int, float):
        return str(value)
    raise Refused(422, "invalid_arguments", f"the floor sends strings, numbers and booleans only, not {value!r}")


def _encoded(text: str) -> str:
    return text if _UNRESERVED(text) is not None else quote(text, safe="")


class Plan:
    """The tool's request, fixed at start-up: the path's pieces, the query and header arguments, the static headers
    (the credential, `Accept`)."""

    def __init__(self, tool: Any, base_url: str, token: str) -> None:
        self.base = base_url.rstrip("/")
        pieces = re.split(r"\{([^{}]+)\}", tool.path)
        by_wire = {a.wire_name: a.name for a in tool.arguments if a.location == "path"}
        self.path = [(quote(pieces[i], safe="/"), by_wire[pieces[i + 1]]) for i in range(0, len(pieces) - 1, 2)]
        self.tail = quote(pieces[-1], safe="/")
        self.query = [(a.name, _encoded(a.wire_name) + "=", a.explode) for a in tool.arguments if a.location == "query"]
        self.headers = [(a.name, a.wire_name) for a in tool.arguments
                        if a.location == "header" and a.wire_name.lower() not in OWNED]
        self.static = [("Authorization", f"Bearer {token}"), ("Accept", "application/json")]

    def build(self, arguments: dict[str, Any]) -> tuple[str, list[tuple[str, str]]]:
        parts = []
        for literal, name in self.path:
            value = arguments.get(name)
            if value is None or value == "":
                raise Refused(422, "invalid_arguments", f"{name}: required path parameter is missing")
            parts.append(literal)
            parts.append(_encoded(_text(value)))
        path = "".join(parts) + self.tail
        if "." in path and any(segment in (".", "..") for segment in path.split("/")):
            raise Refused(422, "invalid_arguments", "path parameters can't be '.' or '..'")
        query: list[str] = []
        for name, prefix, explode in self.query:
            value = arguments.get(name)
            if value is None:
                continue
            if type(value) is list:
                items = [_encoded(_text(item)) for item in value]
                if explode:
                    query.extend(prefix + item for item in items)
                else:
                    query.append(prefix + ",".join(items))
            else:
                query.append(prefix + _encoded(_text(value)))
        headers = list(self.static)
        for name, wire in self.headers:
            value = arguments.get(name)
            if value is not None:
                text = _text(value)
                if "\r" in text or "\n" in text or "\x00" in text or not text.isascii():
                    raise Refused(422, "invalid_arguments", f"{name}: header values can't hold CR, LF, NUL or "
                                                            "non-ASCII characters")
                headers.append((wire, text))
        url = f"{self.base}{path}?{'&'.join(query)}" if query else self.base + path
        return url, headers


def secret_forms(secret: str) -> tuple[str, ...]:
    """Every form of `secret` the gateway redacts (plain, percent- and form-encoded, base64), longest first."""
    encoded = base64.b64encode(secret.encode()).decode("ascii")
    forms = {secret, quote(secret, safe=""), quote_plus(secret, safe=""), quote(secret), encoded, encoded.rstrip("=")}
    if any('"' in f or "\\" in f or any(ord(c) < 0x20 for c in f) for f in forms):
        raise ValueError("the floor redacts in JSON text: a secret JSON escapes is not supported")
    return tuple(sorted((f for f in forms if len(f) >= 4), key=len, reverse=True))


class Redaction:
    """The credential's forms, searched for in C (`any(map(text.__contains__, ...))`) and replaced when found."""

    def __init__(self, secret: str) -> None:
        self.forms = secret_forms(secret)
        self.byte_forms = tuple(f.encode() for f in self.forms)

    def text(self, text: str) -> str:
        if any(map(text.__contains__, self.forms)):
            for form in self.forms:
                text = text.replace(form, MARKER)
        return text

    def data(self, data: bytes) -> bytes:
        if any(map(data.__contains__, self.byte_forms)):
            for form in self.byte_forms:
                data = data.replace(form, MARKER.encode())
        return data


class Audit:
    """The store's file, tables, pragmas and statements; each row committed inline on the loop's thread (busy timeout
    0, no checkpoint of its own), a taken lock handed to a worker thread that waits for it; a checkpoint every
    `CHECKPOINT_EVERY` rows on that thread."""

    def __init__(self, path: str, *, exclusive: bool = False) -> None:
        """Parameters: exclusive: the inline connection takes the file's lock once and keeps it (`locking_mode=
        EXCLUSIVE`: no shared-memory index, no lock taken and released a commit), and nothing checkpoints. A
        measurement of what SQLite's WAL locking costs the audit, not a form the gateway could take: it shuts out the
        store's thread, `gateway approvals` and every other worker."""
        from gateway.store.sqlite_tables import INSERT_RUNNING, SCHEMA, UPDATE_AUDIT  # the same table and statements

        self.insert, self.update = INSERT_RUNNING, UPDATE_AUDIT
        self.thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="floor-store")
        self.main = self.thread.submit(self._open_main, path, SCHEMA).result()
        self.inline = sqlite3.connect(path, timeout=0.0, isolation_level=None, check_same_thread=False)
        for pragma in ("busy_timeout=0", "synchronous=NORMAL", "wal_autocheckpoint=0"):
            self.inline.execute(f"PRAGMA {pragma}")
        if exclusive:
            # Every open WAL connection holds a shared lock on the index: the main connection must go first, or the
            # inline one never gets its lock and every row takes the worker thread's way.
            self.thread.submit(self.main.close).result()
            self.inline.execute("PRAGMA locking_mode=EXCLUSIVE")
        self.exclusive = exclusive
        self.cursor = self.inline.cursor()
        self.rows = -(2**62) if exclusive else 0  # exclusive: never a checkpoint (no other connection may run one)

    @staticmethod
    def _open_main(path: str, schema: str) -> sqlite3.Connection:
        conn = sqlite3.connect(path, timeout=10.0, isolation_level=None, check_same_thread=False)
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "busy_timeout=10000"):
            conn.execute(f"PRAGMA {pragma}")
        conn.executescript(schema)
        return conn

    def open(self, arguments: dict[str, Any], client: str | None, redaction: Redaction | None) -> Awaitable[int]:
        """The call's row (`running`), its arguments' JSON written once (the column, searched for the credential)."""
        recorded = orjson.dumps(arguments).decode()
        if redaction is not None:
            recorded = redaction.text(recorded)
        return self._written(self.insert, (time.time(), client, AGENT, TOOL, "bench", recorded, None, None, None),
                             "it was not sent")

    def close(self, row_id: int, status: str, http_status: int | None, started: float, size: int,
              error: str | None) -> Awaitable[int]:
        """The call's outcome on its row."""
        values = (status, http_status, (time.perf_counter() - started) * 1000, size, None, error, row_id)
        return self._written(self.update, values, "it was sent and may have run")

    async def _written(self, statement: str, values: tuple[Any, ...], then: str) -> int:
        try:
            return await self.write(statement, values)
        except sqlite3.Error as exc:
            raise Refused(503, "audit_unavailable", f"The audit log cannot record this call ({exc}); {then}.") \
                from None

    async def write(self, statement: str, values: tuple[Any, ...]) -> int:
        """Commit one statement; its row's id. `sqlite3.Error` when the file refuses it."""
        try:
            row_id = self.cursor.execute(statement, values).lastrowid
        except sqlite3.OperationalError as error:
            if self.exclusive or getattr(error, "sqlite_errorcode", 0) & 0xFF not in (sqlite3.SQLITE_BUSY,
                                                                                      sqlite3.SQLITE_LOCKED):
                raise
            row_id = await asyncio.get_running_loop().run_in_executor(
                self.thread, lambda: self.main.execute(statement, values).lastrowid)
        self.rows += 1
        if self.rows >= CHECKPOINT_EVERY:
            self.rows = 0
            self.thread.submit(self.main.execute, "PRAGMA wal_checkpoint(PASSIVE)")
        return row_id or 0


class AppendLog:
    """The audit as lines appended to a file (`--audit-form file`): the row's line written before the request leaves
    and the outcome's before the answer, each one `write` (O_APPEND: atomic for a line this size, across processes).
    The same durability as SQLite's WAL under `synchronous=NORMAL` (in the kernel's page cache at once: a process
    that dies loses nothing, a machine that dies may), without a query, an index or retention: a measurement of what
    the promise costs in its plainest durable form, not a store the gateway has."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self.rows = 0

    def open(self, arguments: dict[str, Any], client: str | None, redaction: Redaction | None) -> Awaitable[int]:
        recorded = orjson.dumps(arguments)
        if redaction is not None:
            recorded = redaction.data(recorded)
        self.rows += 1
        self._write(b'{"id":%d,"time":%r,"client":%s,"agent":"%s","tool":"%s","arguments":%s,"status":"running"}\n'
                    % (self.rows, time.time(), orjson.dumps(client), AGENT.encode(), TOOL.encode(), recorded))
        return _done(self.rows)

    def close(self, row_id: int, status: str, http_status: int | None, started: float, size: int,
              error: str | None) -> Awaitable[int]:
        self._write(orjson.dumps({"id": row_id, "status": status, "http_status": http_status,
                                  "latency_ms": (time.perf_counter() - started) * 1000, "bytes": size,
                                  "error": error}) + b"\n")
        return _done(row_id)

    def _write(self, line: bytes) -> None:
        try:
            os.write(self.fd, line)
        except OSError as exc:
            raise Refused(503, "audit_unavailable", f"The audit log cannot record this call ({exc}).") from None


async def _done(row_id: int) -> int:
    return row_id


class Breaker:
    """One api's breaker for one caller: `FAILURES` failures in a row pause it `RESET_AFTER` s, then one probe."""

    __slots__ = ("failures", "opened", "probing")

    def __init__(self) -> None:
        self.failures, self.opened, self.probing = 0, 0.0, False

    def allow(self, now: float) -> bool:
        if self.failures < FAILURES:
            return True
        if now - self.opened >= RESET_AFTER and not self.probing:
            self.probing = True
            return True
        return False

    def record(self, ok: bool, now: float) -> None:
        self.probing = False
        if ok:
            self.failures = 0
        else:
            self.failures += 1
            if self.failures >= FAILURES:
                self.opened = now


class Bucket:
    """The client's token bucket: `rate` a second, up to `burst`."""

    __slots__ = ("burst", "rate", "tokens", "updated")

    def __init__(self, rate: float, burst: float) -> None:
        self.rate, self.burst, self.tokens, self.updated = rate, burst, burst, time.monotonic()

    def take(self) -> float:
        """0.0 when a token was taken, else the seconds until one is there."""
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate


class Watch:
    """The disconnect watch: requests still running `WATCH_AFTER` s in get a watcher task (one sweeper timer a loop,
    not a timer a request); the watcher cancels the request's task when its client leaves before the answer."""

    def __init__(self) -> None:
        self.pending: dict[asyncio.Task[Any], tuple[Receive, float]] = {}
        self.watchers: dict[asyncio.Task[Any], asyncio.Task[None]] = {}
        self.cancelled: set[asyncio.Task[Any]] = set()
        self.timer: asyncio.TimerHandle | None = None

    def add(self, task: asyncio.Task[Any], receive: Receive) -> None:
        loop = asyncio.get_running_loop()
        self.pending[task] = (receive, loop.time() + WATCH_AFTER)
        if self.timer is None:
            self.timer = loop.call_later(WATCH_AFTER, self.sweep)

    def end(self, task: asyncio.Task[Any]) -> None:
        if self.pending.pop(task, None) is None:
            watcher = self.watchers.pop(task, None)
            if watcher is not None:
                watcher.cancel()

    def sweep(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        for task, (receive, due) in list(self.pending.items()):
            if due <= now + 0.001:
                del self.pending[task]
                self.watchers[task] = loop.create_task(self._watch(task, receive))
        self.timer = loop.call_later(WATCH_AFTER, self.sweep) if self.pending else None

    async def _watch(self, task: asyncio.Task[Any], receive: Receive) -> None:
        message = await receive()
        if message["type"] == "http.disconnect" and task in self.watchers:
            self.cancelled.add(task)
            task.cancel()


class Floor:
    """The route's endpoint: one call of the bench's tool with every promise in `promises` kept."""

    def __init__(self, promises: Promises, upstream: str, store: str, tool: Any, input_schema: Any,
                 output_schema: Any, *, rate: float = 10_000.0, audit_form: str = "sqlite") -> None:
        from gateway.http.library import ClientOptions, build_client  # the executor's client settings, at start-up

        self.p = promises
        self.client = build_client(ClientOptions(max_connections=20))
        self.timeout = timedelta(seconds=TIMEOUT)
        self.plan = Plan(tool, upstream, TOKEN)
        self.api = tool.api
        formats = dict.fromkeys(("hostname", "duration", "iri", "iri-reference", "uri-template"), lambda _: True)
        self.input = jsonschema_rs.validator_for(input_schema, validate_formats=True, formats=formats)
        self.output = jsonschema_rs.validator_for(output_schema, validate_formats=True, formats=formats)
        self.key_digest = hashlib.sha256(FLOOR_KEY.encode()).digest()
        self.buckets = {CLIENT: Bucket(rate, rate), None: Bucket(rate, rate)}
        self.breakers: dict[str | None, Breaker] = {}
        self.slots = asyncio.Semaphore(SLOTS)
        self.redaction = Redaction(TOKEN)
        self.audit: Audit | AppendLog | None = None
        if promises.audit:
            self.audit = AppendLog(store + ".log") if audit_form == "file" else Audit(
                store, exclusive=audit_form == "exclusive")
        self.admitted: set[tuple[Any, ...]] = set()
        self.watch = Watch()
        self.access = sys.stderr
        self.quoted: dict[str, str] = {}
        registry = self.registry = CollectorRegistry()
        self.requests = Counter("floor_requests", "Requests by status.", ["door", "status"], registry=registry)
        self.calls = Counter("floor_tool_calls", "Tool calls by outcome.", ["api", "tool", "outcome"],
                             registry=registry)
        self.latency = Histogram("floor_tool_call_duration_seconds", "Tool call latency.", ["api", "tool"],
                                 buckets=_LATENCY_BUCKETS, registry=registry)
        self.usual = (self.requests.labels("direct", "200"), self.calls.labels(self.api, TOOL, "ok"),
                      self.latency.labels(self.api, TOOL))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        p, started = self.p, time.perf_counter()
        task = asyncio.current_task() if p.disconnect_watch else None
        status, outcome = 500, "error"
        try:
            try:
                status, outcome = await self._answer(scope, receive, send, task, started)
            except Refused as refused:
                status, outcome = refused.status, refused.code
                await self._refuse(send, refused)
        except asyncio.CancelledError:
            if task is None or task not in self.watch.cancelled:
                raise
            self.watch.cancelled.discard(task)
            task.uncancel()  # the client left and the watch cancelled the request: it just ends
        finally:
            if task is not None:
                self.watch.end(task)
            if p.metrics:
                self._count(status, outcome, time.perf_counter() - started)
            if p.access_log:
                self._access_line(scope, status)

    async def _answer(self, scope: Scope, receive: Receive, send: Send, task: asyncio.Task[Any] | None,
                      started: float) -> tuple[int, str]:
        p = self.p
        params = scope["path_params"]
        if params["agent"] != AGENT or params["tool"] != TOOL:
            raise Refused(404, "unknown_tool", f"Agent {params['agent']!r} has no tool {params['tool']!r}.")
        headers = scope["headers"]
        if p.envelope:
            self._envelope(scope, headers)
        client = self._client(headers) if p.key else None
        if p.limits:
            wait = self.buckets[client].take()
            if wait:
                raise Refused(429, "rate_limited", "Too many requests.",
                              headers=[(b"retry-after", b"%d" % max(1, round(wait)))])
        message = await receive()
        body = message.get("body", b"")
        while message.get("more_body", False):
            message = await receive()
            body += message.get("body", b"")
            if len(body) > MAX_BODY:
                raise Refused(413, "request_too_large", "The body passes the limit.")
        if message["type"] == "http.disconnect":
            return 499, "disconnected"
        if task is not None:
            self.watch.add(task, receive)
        try:
            arguments = orjson.loads(body or b"{}")
        except orjson.JSONDecodeError as error:
            raise Refused(422, "invalid_json", f"The body is not JSON: {error}") from None
        if type(arguments) is not dict:
            raise Refused(400, "invalid_request", "The body must be the arguments as a JSON object.")
        if p.validation and not self._valid(arguments):
            problems = await asyncio.to_thread(self._problems, arguments)
            raise Refused(422, "invalid_arguments", f"Invalid arguments for {TOOL}; nothing was sent:\n{problems}")
        url, request_headers = self.plan.build(arguments)
        breaker = self._enter_breaker(client) if p.breaker else None
        if p.concurrency:
            await self._take_slot()
        ok = False
        try:
            status, data, body_out, failure = await self._call(arguments, url, request_headers, client, started)
            ok = 200 <= status < 300 and failure is None
        finally:
            if p.concurrency:
                self.slots.release()
            if breaker is not None:
                breaker.record(ok, time.monotonic())
        duration = (time.perf_counter() - started) * 1000
        if failure is not None:
            code, text = failure
            raise Refused(502, code, text)
        answer = orjson.dumps({"ok": True, "status": status, "media_type": "application/json", "body": body_out,
                               "truncated": False, "error": None, "error_type": None,
                               "duration_ms": round(duration, 3), "bytes": len(data)})
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", b"%d" % len(answer)), (b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": answer})
        return 200, "ok"

    # One method a promise (and one for each part of the call), so that `bench.ledger --door floor` puts each in the
    # gateway's stage of the same work (`bench.stage_rules`); a frame each, a few hundred instructions a call.

    def _valid(self, arguments: dict[str, Any]) -> bool:
        return bool(self.input.is_valid(arguments))

    def _enter_breaker(self, client: str | None) -> Breaker:
        breaker = self.breakers.get(client) or self.breakers.setdefault(client, Breaker())
        if not breaker.allow(time.monotonic()):
            raise Refused(503, "transport_error", f"The {self.api} API is failing; calls are paused.")
        return breaker

    async def _take_slot(self) -> None:
        if not self.slots.locked():
            await self.slots.acquire()  # a free slot is taken at once, without suspending
            return
        try:
            async with asyncio.timeout(TIMEOUT):
                await self.slots.acquire()
        except TimeoutError:
            raise Refused(504, "timeout", f"The {self.api} API is busy.") from None

    async def _call(self, arguments: dict[str, Any], url: str, headers: list[tuple[str, str]], client: str | None,
                    started: float) -> tuple[int, bytes, Any, tuple[str, str] | None]:
        """The row, the request, the answer read and judged, the outcome on the row: (status, the answer's bytes, the
        body to show, the failure (error type, text) or None)."""
        p, audit = self.p, self.audit
        row_id = await audit.open(arguments, client, self.redaction if p.redaction else None) if audit else 0
        try:
            response, request = await self._send(url, headers)
            status, data, failure = await self._read(response, request)
        except asyncio.CancelledError:
            if audit is not None:  # sent: the row says so, and the call is not repeated
                await audit.close(row_id, "transport_error", None, started, 0, "The caller went away.")
            raise
        except Exception as error:  # noqa: BLE001 - the library's errors: a failure, never a crash
            status, data, failure = 0, b"", ("transport_error", f"the request failed ({type(error).__name__}: {error})")
        shown: Any = None
        if failure is None:
            parsed, data = self._parse(data)
            if parsed is _NOT_JSON:
                failure = ("invalid_output", "The answer is not JSON.")
            elif p.output_check and not self._output_holds(parsed):
                failure = ("invalid_output", f"The API answered {status} but the body does not match the spec's "
                                             "output schema; the request ran, so do not repeat it blindly.")
            shown = orjson.Fragment(data)
        elif p.redaction:
            failure = (failure[0], self.redaction.text(failure[1]))
        if audit is not None:
            await audit.close(row_id, "ok" if failure is None else failure[0], status or None, started, len(data),
                              None if failure is None else failure[1])
        return status, data, shown, failure

    async def _send(self, url: str, headers: list[tuple[str, str]]) -> tuple[Any, Any]:
        """The request on its way (the api's timeout covers it whole, the body's read included); its answer's head."""
        request = self.client.request("GET", url).timeout(self.timeout).headers(headers).build_streamed()
        return await request.__aenter__(), request

    async def _read(self, response: Any, request: Any) -> tuple[int, bytes, tuple[str, str] | None]:
        """The answer's body under the cap (a coding the client did not undo refused unread), the connection given back:
        (status, body, failure or None)."""
        try:
            status = response.status
            coding = response.headers.get("content-encoding")
            if coding is not None and coding.strip().lower() not in ("", "identity"):
                return status, b"", ("transport_error", f"The answer says `Content-Encoding: {coding}`, which is "
                                                        "not decoded; it was not read.")
            declared = response.headers.get("content-length")
            reader = response.body_reader
            if declared is not None and declared.isdigit() and int(declared) <= READ_CAP:
                data = bytes(await reader.bytes())
            else:
                chunks, size = [], 0
                while (chunk := await reader.read()) is not None and size <= READ_CAP:
                    chunks.append(bytes(chunk))
                    size += len(chunk)
                data = b"".join(chunks)[:READ_CAP]
        finally:
            await request.__aexit__(None, None, None)
        if not 200 <= status < 300:
            return status, data, ("upstream_error", f"HTTP {status} from GET {self.plan.tail}")
        if len(data) > MAX_RESULT:
            return status, data[:MAX_RESULT], ("invalid_output", "the answer passes the result limit (truncated)")
        return status, data, None

    def _parse(self, data: bytes) -> tuple[Any, bytes]:
        """The answer parsed once, and its text with the credential redacted (escapes undone first, when it has any)."""
        if self.p.redaction and (b"\\" in data or any(map(data.__contains__, self.redaction.byte_forms))):
            try:
                data = self.redaction.data(orjson.dumps(orjson.loads(data)))
            except orjson.JSONDecodeError:
                data = self.redaction.data(data)
        try:
            return orjson.loads(data), data
        except orjson.JSONDecodeError:
            return _NOT_JSON, data

    def _output_holds(self, parsed: Any) -> bool:
        return bool(self.output.is_valid(parsed))

    def _problems(self, arguments: dict[str, Any]) -> str:
        """What is wrong with `arguments`, in a worker thread (a large, deeply wrong value holds no caller up)."""
        return "\n".join(f"- {error.message}" for error in islice(self.input.iter_errors(arguments), 10))

    def _envelope(self, scope: Scope, headers: list[tuple[bytes, bytes]]) -> None:
        size = sum(map(len, chain.from_iterable(headers)))  # in C: no Python step a header
        if len(headers) > MAX_HEADERS or size > MAX_HEADER_BYTES:
            raise Refused(431, "request_header_fields_too_large", "Too many or too large headers.")
        named = dict(headers)
        length = named.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > MAX_BODY:
            raise Refused(413, "request_too_large", "The body passes the limit.")
        key = (named.get(b"host"), named.get(b"origin"), named.get(b"content-type"))
        if key in self.admitted:
            return
        host, origin, content_type = (None if value is None else value.decode("latin-1") for value in key)
        if host is None or host.rsplit(":", 1)[0].lower() not in LOOPBACK:
            raise Refused(421, "host_not_allowed", f"This server does not answer to host {host!r}.")
        if origin is not None and origin.rstrip("/").lower().split("://", 1)[-1] != host.lower():
            raise Refused(403, "origin_not_allowed", f"Requests from origin {origin!r} are refused.")
        media = (content_type or "").split(";", 1)[0].strip().lower()
        if media != "application/json" and not (media.startswith("application/") and media.endswith("+json")):
            raise Refused(415, "unsupported_media_type", "The request body must be JSON.")
        if len(self.admitted) < 256:
            self.admitted.add(key)

    def _client(self, headers: list[tuple[bytes, bytes]]) -> str:
        for name, value in headers:
            if name == b"authorization":
                scheme, _, key = value.partition(b" ")
                if scheme.lower() == b"bearer" and hmac.compare_digest(hashlib.sha256(key.strip()).digest(),
                                                                       self.key_digest):
                    return CLIENT
                break
        raise Refused(401, "invalid_key", "A valid key is required: send `Authorization: Bearer <key>`.",
                      headers=[(b"www-authenticate", b"Bearer")])

    async def _refuse(self, send: Send, refused: Refused) -> None:
        message = self.redaction.text(refused.message) if self.p.redaction else refused.message
        body = orjson.dumps({"error": {"message": message, "type": "invalid_request_error", "code": refused.code}})
        await send({"type": "http.response.start", "status": refused.status,
                    "headers": [(b"content-length", b"%d" % len(body)), (b"content-type", b"application/json"),
                                *refused.headers]})
        await send({"type": "http.response.body", "body": body})

    def _count(self, status: int, outcome: str, seconds: float) -> None:
        requests, calls, latency = self.usual
        if status == 200:
            requests.inc()
            calls.inc()
            latency.observe(seconds)
            return
        self.requests.labels("direct", str(status)).inc()
        if outcome not in ("unknown_tool", "invalid_key", "rate_limited", "invalid_json", "invalid_request"):
            self.calls.labels(self.api, TOOL, outcome).inc()
            latency.observe(seconds)

    def _access_line(self, scope: Scope, status: int) -> None:
        client = scope.get("client")
        query = scope.get("query_string")
        path = scope["path"]
        quoted = self.quoted.get(path)
        if quoted is None:
            quoted = quote(path)
            if len(self.quoted) < 1024:  # foreign paths cannot grow it without bound
                self.quoted[path] = quoted
        address = f"{client[0]}:{client[1]}" if client else "-"
        now = time.time()  # the gateway's lines start with their UTC time (gateway.server.loglines.UtcTime)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"
        line = (f'{stamp} INFO:     {address} - "{scope["method"]} {quoted}'
                f'{"?" + query.decode("ascii", "replace") if query else ""} HTTP/{scope["http_version"]}" '
                f'{status} {_PHRASES.get(status, "")}\n')
        if self.p.redaction:
            line = self.redaction.text(line)
        self.access.write(line)
        self.access.flush()


def bench_tool(upstream: str, folder: Path) -> tuple[Any, Any, Any]:
    """The bench's tool as the gateway compiles it (at start-up only): the tool, its input and output schemas."""
    from gateway.openapi import compile_specs

    project = write_project(folder, upstream, github=False)
    catalog = compile_specs(project / "specs", use_cache=False)
    tool = catalog.tools[TOOL]
    return tool, tool.input_schema, tool.output_schema


def make_app(promises: Promises, upstream: str, folder: Path, *, rate: float = 10_000.0,
             audit_form: str = "sqlite") -> tuple[Starlette, Floor]:
    """The floor's app (the call's route, `/metrics`, `/healthz`) and its endpoint, with its store in `folder`."""
    tool, input_schema, output_schema = bench_tool(upstream, folder)
    floor = Floor(promises, upstream, str(folder / "floor.db"), tool, input_schema, output_schema, rate=rate,
                  audit_form=audit_form)

    async def metrics(request: Request) -> Response:
        return Response(generate_latest(floor.registry), media_type="text/plain; version=0.0.4")

    async def health(request: Request) -> Response:
        return PlainTextResponse("ok")

    app = Starlette(routes=[Route("/agents/{agent}/tools/{tool}", floor, methods=["POST"]),
                            Route("/metrics", metrics, methods=["GET"]), Route("/healthz", health, methods=["GET"])])
    return app, floor


def server_options(promises: Promises) -> dict[str, Any]:
    """What uvicorn is given: `gateway serve`'s parts (httptools, uvloop, its keep-alive), and its head bound."""
    from gateway.server.bounded_head import server_options as bounded
    from gateway.server.run import KEEP_ALIVE_SECONDS

    options: dict[str, Any] = {"http": "httptools", "loop": "uvloop", "timeout_keep_alive": KEEP_ALIVE_SECONDS}
    if promises.bounded_head:
        options.update(bounded())
    return options


def parse(argv: list[str] | None = None) -> tuple[argparse.Namespace, Promises]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True)
    for name in PROMISES:
        parser.add_argument(f"--no-{name.replace('_', '-')}", dest=name, action="store_false")
    parser.add_argument("--audit-form", choices=AUDIT_FORMS, default="sqlite",
                        help="the store's SQLite (default); exclusive: its lock held (a measurement); file: lines "
                             "appended to a file (a measurement)")
    args = parser.parse_args(argv)
    return args, Promises(**{name: getattr(args, name) for name in PROMISES})


def flags(off: tuple[str, ...]) -> list[str]:
    """The command line that leaves the promises `off` out."""
    return [f"--no-{name.replace('_', '-')}" for name in off]


def floor_side(upstream: str, port: int, off: tuple[str, ...] = ()) -> Side:
    """The floor without the promises `off`, on `port`, as a side of the direct-call counts (`bench.support.Side`)."""
    return Side(python_module("bench.promise_floor", "--port", str(port), "--upstream", upstream, *flags(off)),
                f"http://127.0.0.1:{port}/healthz", DOOR, True, ROOT, {},
                headers={"Authorization": f"Bearer {FLOOR_KEY}"})


def main() -> None:
    args, promises = parse()
    with tempfile.TemporaryDirectory() as tmp:
        app, _ = make_app(promises, args.upstream, Path(tmp), audit_form=args.audit_form)
        uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="error", access_log=False, lifespan="off",
                    **server_options(promises))


if __name__ == "__main__":
    main()
