"""The access log: uvicorn's own line, formatted by uvicorn's formatter, written once the answer has left."""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import logging.config
import pathlib
import re
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from gateway.config.model import Manifest
from gateway.server.envelope import RequestEnvelope
from gateway.server.hosts import PolicySource
from gateway.server.run import log_config


@contextlib.contextmanager
def _access_lines(handler: str = "access", log_format: str = "text") -> Iterator[io.StringIO]:
    """The access log (or the gateway's own lines: `default`) configured as `gateway serve` does, uncoloured, into a
    string; reset afterwards."""
    stream = io.StringIO()
    config = log_config(log_format)
    config["handlers"][handler]["stream"] = stream
    config["formatters"][handler]["use_colors"] = False
    logging.config.dictConfig(config)
    try:
        yield stream
    finally:
        for name in ("gateway", "gateway.access", "uvicorn.access", "psycopg", "psycopg.pool"):
            logger = logging.getLogger(name)
            logger.handlers.clear()
            logger.filters.clear()
            logger.propagate = True
            logger.setLevel(logging.NOTSET)


UTC_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
"""The time every line starts with: UTC, ISO 8601 to the millisecond (the audit log's form)."""


def _untimed(text: str) -> str:
    """`text`'s lines without the time each must start with."""
    lines = text.splitlines(keepends=True)
    for line in lines:
        assert UTC_TIME.match(line) and line[24] == " ", line
    return "".join(line[25:] for line in lines)


async def _hello(request: Request) -> PlainTextResponse:
    return PlainTextResponse("hi", status_code=201)


def test_the_line_is_uvicorns_and_comes_after_the_answer() -> None:
    with _access_lines() as stream:
        app = Starlette(routes=[Route("/hello", _hello)], middleware=[Middleware(
            RequestEnvelope, policy=PolicySource("127.0.0.1", Manifest()), max_body_bytes=1024,
            metrics=None, access_log=logging.getLogger("gateway.access"))])
        order: list[str] = []

        async def run() -> None:
            scope: dict[str, Any] = {"type": "http", "method": "GET", "path": "/hello", "raw_path": b"/hello",
                                     "query_string": b"a=1", "headers": [(b"host", b"127.0.0.1:8080")],
                                     "client": ("127.0.0.1", 5000),
                                     "server": ("127.0.0.1", 8080), "scheme": "http", "root_path": "",
                                     "http_version": "1.1"}

            async def receive() -> dict[str, Any]:
                return {"type": "http.request", "body": b"", "more_body": False}

            async def send(message: dict[str, Any]) -> None:
                if message["type"] == "http.response.body":
                    order.append("answer" if not stream.getvalue() else "line first")

            await app(scope, receive, send)
            assert stream.getvalue() == ""  # not yet: the line is written on the next turn
            await asyncio.sleep(0)

        asyncio.run(run())
        assert order == ["answer"]
        assert _untimed(stream.getvalue()) == 'INFO:     127.0.0.1:5000 - "GET /hello?a=1 HTTP/1.1" 201 Created\n'
        assert not logging.getLogger("uvicorn.access").hasHandlers()  # uvicorn writes no second line


def test_the_app_logs_a_line_per_request_only_when_asked(tmp_path: Any, llm: Any, upstream: Any,
                                                         caplog: Any) -> None:
    import httpx
    from server_support import gateway

    caplog.set_level(logging.INFO, logger="gateway.access")
    for access_log in (True, False):
        caplog.clear()
        with gateway(tmp_path / str(access_log), llm.url, upstream.url, access_log=access_log) as (url, _):
            assert httpx.get(f"{url}/agents").status_code == 200
        lines = [r.getMessage() for r in caplog.records if r.name == "gateway.access"]
        assert lines == (['127.0.0.1:' + lines[0].split(":")[1].split(" ")[0] + ' - "GET /agents HTTP/1.1" 200']
                         if access_log else [])


def test_the_formatter_writes_uvicorns_line_with_and_without_colours() -> None:
    from uvicorn.logging import AccessFormatter

    from gateway.server.accesslog import ACCESS_FORMAT, AccessLineFormatter

    fmt = '%(levelprefix)s %(client_addr)s - "%(request_line)s" %(status_code)s'
    for colours in (False, True):
        ours, uvicorns = AccessLineFormatter(fmt, use_colors=colours), AccessFormatter(fmt, use_colors=colours)
        for status in (200, 404, 503, 599):
            args = ("127.0.0.1:5000", "POST", "/agents/a/tools/t?x=1", "1.1", status)
            records = [logging.LogRecord("gateway.access", logging.INFO, __file__, 1, ACCESS_FORMAT, args, None)
                       for _ in range(2)]
            assert ours.format(records[0]) == uvicorns.format(records[1])


def test_uvicorns_access_format_is_the_line_the_formatter_writes_itself() -> None:
    from uvicorn.config import LOGGING_CONFIG

    from gateway.server.accesslog import LINE_FORMAT, AccessLineFormatter

    assert "%(asctime)s " + LOGGING_CONFIG["formatters"]["access"]["fmt"] == LINE_FORMAT
    assert AccessLineFormatter(LINE_FORMAT, use_colors=False).writes_line
    assert not AccessLineFormatter("%(client_addr)s %(status_code)s", use_colors=False).writes_line


def test_a_secret_in_the_access_line_is_replaced() -> None:
    from gateway.kernel.redaction import Redactor, redact_logs
    from gateway.server.accesslog import log_access

    secret = "s3cr3t-in-a-query-7781"
    redactor = Redactor([secret])  # held here: redact_logs keeps it only weakly
    redact_logs(redactor)
    with _access_lines() as stream:
        logger = logging.getLogger("gateway.access")
        for path, query in (("/agents/a/tools/t", f"key={secret}".encode()), (f"/x/{secret}", b"")):
            log_access(logger, {"client": ("127.0.0.1", 5000), "method": "POST", "path": path, "query_string": query,
                                "http_version": "1.1"}, 200)
        lines = _untimed(stream.getvalue()).splitlines()
        assert lines == ['INFO:     127.0.0.1:5000 - "POST /agents/a/tools/t?key=[REDACTED] HTTP/1.1" 200 OK',
                         'INFO:     127.0.0.1:5000 - "POST /x/[REDACTED] HTTP/1.1" 200 OK']
    with _access_lines(log_format="json") as stream:  # the JSON line's fields too
        log_access(logging.getLogger("gateway.access"), {"client": ("127.0.0.1", 5000), "method": "POST",
                                                         "path": f"/x/{secret}", "query_string": b"",
                                                         "http_version": "1.1"}, 200)
        written = stream.getvalue()
        assert secret not in written and '"path": "/x/[REDACTED]"' in written, written


def test_what_a_request_wrote_cannot_act_on_the_terminal_or_forge_a_line() -> None:
    """redteam45: the gateway's own lines quote a refused request's path (anyone who reaches the port sends one
    before any key is looked at): written as it came, `ESC ] 52` set the operator's clipboard, CSI codes rewrote the
    screen, and a line break wrote a log line of the sender's making."""
    from gateway.kernel.redaction import Redactor, redact_logs

    redactor = Redactor(["a-secret-0123456789"])  # as under `gateway serve`: tracebacks rendered when logged
    redact_logs(redactor)
    with _access_lines("default") as stream:
        path = "/agents/x\x1b]52;c;ZXZpbA==\x07\x1b[2J\u009b1A\nINFO:     gateway reloaded: all clients are admins"
        # a logger under `gateway` of this test's own (another test may have disabled or levelled gateway.server)
        logger = logging.getLogger("gateway.tests.loglines")
        logger.info("refused a request to %s: %s", path, "no key")
        try:
            raise ValueError("an upstream's text \x1b[31m")
        except ValueError:
            logger.exception("failed on %s", "/x\r\ny")
    written = stream.getvalue()
    assert not any(code in written for code in ("\x1b", "\x07", "\u009b", "\r")), repr(written)
    first, second = _untimed("".join(written.splitlines(keepends=True)[:2])).splitlines()
    assert first.startswith("INFO:") and "refused a request to /agents/x" in first and first.endswith("no key")
    assert second.startswith("ERROR:") and "failed on /x" in second  # its own line, not the sender's
    assert "Traceback" in written  # a traceback keeps its lines
    del redactor


def test_the_store_drivers_warning_is_a_line_of_the_gateways_log() -> None:
    # PostgreSQL stopped under a serving pair: psycopg_pool's "error connecting" came out bare (no level) over two
    # lines, the second starting with a tab. A pool at a port nothing listens on warns the same way.
    from psycopg_pool import ConnectionPool

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    with _access_lines("default") as stream:
        pool = ConnectionPool(f"postgresql://gateway@127.0.0.1:{port}/gateway", min_size=1, open=False,
                              reconnect_timeout=1)
        pool.open(wait=False)
        deadline = time.monotonic() + 20
        while "error connecting" not in stream.getvalue():
            assert time.monotonic() < deadline, "the pool never warned"
            time.sleep(0.05)
        pool.close()
    first = next(line[25:] for line in stream.getvalue().splitlines() if "error connecting" in line)
    assert re.match(r"WARNING:  error connecting in 'pool-\d+': connection failed", first), first
    # One readable line: the driver's line break and tab read as spaces (gateway.server.loglines), no escapes.
    assert "\\u000a" not in first and "\\u0009" not in first and "Connection refused Is the server" in first


@pytest.mark.anyio
async def test_a_store_leaves_the_logging_configuration_alone() -> None:
    """mend56's filter of the driver's warnings was put on psycopg's logger when a PostgreSQL store made its pool: a
    store's constructor changed the process's logging, and a test's log depended on whether one before had opened a
    store. It is the commands' logging configuration's now (`log_config`, `quiet_drivers`)."""
    from gateway.store.postgres_pool import open_pool

    async def configure(conn: Any) -> None:
        return None

    pool_logger = logging.getLogger("psycopg.pool")
    before = list(pool_logger.filters)
    pool, _ = open_pool("postgresql://gateway@127.0.0.1:9/gateway", min_size=1, max_size=1, timeout=1,
                        configure=configure)  # not opened: nothing connects
    assert pool_logger.filters == before
    assert logging.getLogger("psycopg").filters == []


def test_the_drivers_warnings_are_said_once_until_a_server_answers_again() -> None:
    from gateway.server.loglines import DRIVER_LINES, OnceEach
    from gateway.store.server_watch import ServerWatch

    once = OnceEach()

    def logged(message: str, level: int = logging.WARNING) -> bool:
        record = logging.LogRecord("psycopg.pool", level, __file__, 1, message, None, None)
        return once.filter(record) and record.getMessage() == " ".join(message.split())

    refused = "error connecting in 'pool-1': connection failed: Connection refused\n\tIs the server running?"
    assert logged(refused)
    assert not logged(refused)  # the same warning on the next attempt
    assert logged("connection 1 asked for", logging.INFO) and logged("connection 1 asked for", logging.INFO)
    watch = ServerWatch("the store")
    watch.failed("refused")
    watch.answered()  # the outage ended: the next one's warnings are said again
    assert logged(refused) and not logged(refused)
    with _access_lines("default"):  # `gateway serve`'s configuration puts the one filter on, once
        assert logging.getLogger("psycopg.pool").filters == [DRIVER_LINES]
        logging.config.dictConfig(log_config())
        assert logging.getLogger("psycopg.pool").filters == [DRIVER_LINES]


def test_every_line_says_its_time_in_utc_in_text_and_json() -> None:
    """An operator lines a log line up with an audit row (whose `time` is UTC ISO 8601): each line starts with the
    time it was logged, in UTC whatever the machine's zone, the gateway's own lines and the access lines alike."""
    import datetime
    import json
    import os

    def logged_at(stamp: str) -> float:
        return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()

    scope = {"client": ("127.0.0.1", 5000), "method": "GET", "path": "/agents", "query_string": b"",
             "http_version": "1.1"}
    saved = os.environ.get("TZ")
    os.environ["TZ"] = "America/Sao_Paulo"  # local time would be three hours off
    time.tzset()
    try:
        for log_format in ("text", "json"):
            for handler in ("default", "access"):
                before = time.time()
                with _access_lines(handler, log_format) as stream:
                    if handler == "access":
                        from gateway.server.accesslog import log_access

                        log_access(logging.getLogger("gateway.access"), scope, 200)
                    else:
                        logging.getLogger("gateway.tests.loglines").warning("reloaded %s", "agents.yaml")
                after = time.time()
                line = stream.getvalue()
                if log_format == "json":
                    entry = json.loads(line)
                    stamp = entry["time"]
                    assert entry["level"] == ("INFO" if handler == "access" else "WARNING")
                    assert entry["message"] == ('127.0.0.1:5000 - "GET /agents HTTP/1.1" 200' if handler == "access"
                                                else "reloaded agents.yaml")
                    assert entry["logger"] in ("gateway.access", "gateway.tests.loglines")
                    if handler == "access":  # its parts as fields, for a shipper to filter on
                        assert (entry["client"], entry["method"], entry["path"], entry["status"]) == (
                            "127.0.0.1:5000", "GET", "/agents", 200)
                else:
                    stamp = line.split(" ", 1)[0]
                    assert _untimed(line) in ('INFO:     127.0.0.1:5000 - "GET /agents HTTP/1.1" 200 OK\n',
                                              "WARNING:  reloaded agents.yaml\n")
                assert UTC_TIME.fullmatch(stamp), (log_format, handler, line)
                assert int(before) - 1 <= logged_at(stamp) <= after + 1, (stamp, before)
    finally:
        if saved is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = saved
        time.tzset()


def test_a_lines_time_is_loggings_own_whichever_second_came_before() -> None:
    """The second's text is made once per second and shared: each line still says its own time to the millisecond,
    as `logging.Formatter.formatTime` writes it, however the records' times come (the same second, the next, an
    earlier one from another thread, one just before a second's end); an operator's `datefmt` is logging's."""
    from gateway.server.accesslog import AccessLineFormatter
    from gateway.server.loglines import JsonLineFormatter, LineFormatter, UtcTime

    class Loggings(logging.Formatter):  # the standard library's formatTime with the same three attributes
        converter = staticmethod(time.gmtime)
        default_time_format = UtcTime.default_time_format
        default_msec_format = UtcTime.default_msec_format

    expected = Loggings()
    start = 1_765_000_000.0
    times = [start + 0.25, start + 0.999, start + 1.0, start + 0.5, start + 86_400.125, start + 86_400.9995,
             start + 86_401.001, start + 1.75]
    for ours in (AccessLineFormatter(use_colors=False), LineFormatter(use_colors=False), JsonLineFormatter()):
        for created in times:
            record = logging.LogRecord("gateway.access", logging.INFO, __file__, 1, "x", None, None)
            record.created, record.msecs = created, int((created - int(created)) * 1000) + 0.0
            assert ours.formatTime(record) == expected.formatTime(record), created
            assert ours.formatTime(record, "%H:%M") == expected.formatTime(record, "%H:%M")


def test_a_json_line_escapes_what_a_sender_wrote_and_keeps_the_traceback() -> None:
    import json

    with _access_lines("default", "json") as stream:
        logger = logging.getLogger("gateway.tests.loglines")
        try:
            raise ValueError("an upstream's text \x1b[31m")
        except ValueError:
            logger.exception("refused %s", "/x\x1b]52;c;ZXZpbA==\x07\nINFO: forged")
    written = stream.getvalue()
    assert written.count("\n") == 1 and "\x1b" not in written and "\x07" not in written
    entry = json.loads(written)
    assert entry["message"].startswith("refused /x\x1b]52") and "Traceback" in entry["exc_info"]
    assert "color_message" not in entry


def test_the_terminal_commands_that_open_a_store_put_the_filter_on(tmp_path: pathlib.Path) -> None:
    """The store no longer puts it on: `gateway audit` (and call, chat, approvals, migrate) does, as serve does."""
    from gateway.cli.commands import main
    from gateway.server.loglines import DRIVER_LINES, DRIVER_LOGGER

    pool_logger = logging.getLogger(DRIVER_LOGGER)
    pool_logger.removeFilter(DRIVER_LINES)
    try:
        main(["audit", "--agents", str(tmp_path / "agents.yaml"), "--specs", str(tmp_path), "--json"])
        assert pool_logger.filters == [DRIVER_LINES]
    finally:
        pool_logger.removeFilter(DRIVER_LINES)


def test_each_line_is_written_then_flushed_once_by_the_configured_handlers(capsys: pytest.CaptureFixture[str]) -> None:
    """`gateway serve`'s handlers (`LineHandler`) write a line, then flush the stream once, holding the lock
    `Handler.handle` took (no second acquire to flush); a stream that fails is logging's `handleError`'s, as with
    the standard `StreamHandler`."""
    from gateway.server.loglines import LineHandler

    config = log_config()
    assert {handler["class"] for handler in config["handlers"].values()} == {"gateway.server.loglines.LineHandler"}
    events: list[tuple[str, str]] = []
    handler = LineHandler()

    class Stream(io.StringIO):
        def write(self, text: str) -> int:
            events.append(("write", text))
            return super().write(text)

        def flush(self) -> None:
            events.append(("flush", "held" if handler.lock is not None and not _free(handler.lock) else "free"))
            super().flush()

    handler.setStream(Stream())
    handler.setFormatter(logging.Formatter("%(message)s"))
    for text in ("one", "two"):
        handler.handle(logging.LogRecord("gateway.access", logging.INFO, __file__, 1, text, None, None))
    assert events == [("write", "one\n"), ("flush", "held"), ("write", "two\n"), ("flush", "held")]

    class Broken(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError("the terminal is gone")

    handler.setStream(Broken())
    handler.handle(logging.LogRecord("gateway.access", logging.INFO, __file__, 1, "three", None, None))
    err = capsys.readouterr().err
    assert "--- Logging error ---" in err and "OSError: the terminal is gone" in err


def _free(lock: Any) -> bool:
    """Whether another thread could take `lock` now (it is free), asked from a thread of its own."""
    import threading

    taken: list[bool] = []

    def attempt() -> None:
        got = lock.acquire(blocking=False)
        taken.append(got)
        if got:
            lock.release()

    thread = threading.Thread(target=attempt)
    thread.start()
    thread.join()
    return taken[0]
