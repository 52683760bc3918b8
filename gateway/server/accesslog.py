"""The access log of `gateway serve`, as a plain ASGI middleware: uvicorn's line, written after the answer left.

uvicorn writes its access line while the response is still being sent, so making the record, formatting it and
writing it to a terminal or pipe lie on the path of every answer. `log_access` logs the same message with the
same five arguments (so uvicorn's `AccessFormatter` renders it, colours included) to the logger
`gateway.access`; the request envelope (`gateway.server.envelope`) calls it on the event loop's next turn after
the app is done. `gateway serve`'s logging configuration
(`gateway.server.run.log_config`) gives that logger uvicorn's access handler and leaves uvicorn's own access
logger without one (uvicorn then skips its line). Lines keep their order.

A line is written for every request, so its record is handed to `Logger.handle` (no search of the stack for the
caller's file and line, which are always `log_access`'s) and `AccessLineFormatter` renders an uncoloured line in one
f-string, without the two copies of the record uvicorn's formatter makes. The record is an `AccessRecord`: logging's
`LogRecord` with the fields that are the same on every line (its level, file, function, message) copied from one
record logging made, not worked out again per line (`os.path` on the file name is a third of a `LogRecord`); the
time, thread and process are read per line as logging reads them. While the record factory is logging's own (with
the log-record redaction of `gateway.kernel.redaction` over it, as `gateway serve` installs it), that is the record
the factory would have made, scrubbed the same way; under another factory the line's record is the factory's
(`Logger.makeRecord`).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from http import HTTPStatus
from typing import Literal
from urllib.parse import quote

from starlette.types import Scope
from uvicorn.logging import AccessFormatter

from ..kernel.redaction import records_are_plain, scrub_record

ACCESS_FORMAT = '%s - "%s %s HTTP/%s" %d'
"""uvicorn's access message and its five arguments: client address, method, path with query, HTTP version, status."""


def log_access(logger: logging.Logger, scope: Scope, status: int) -> None:
    """Write `scope`'s access line with the answer's `status` to `logger`."""
    if not logger.isEnabledFor(logging.INFO):
        return
    client = scope.get("client")
    address = f"{client[0]}:{client[1]}" if client else "-"
    path = _QUOTED.get(scope["path"]) or _quoted(scope["path"])
    if scope.get("query_string"):
        path += "?" + scope["query_string"].decode("ascii", "replace")
    args = (address, scope["method"], path, scope.get("http_version", "1.1"), status)
    if type(logger) is logging.Logger and records_are_plain():
        record: logging.LogRecord = AccessRecord(logger.name, args)
        scrub_record(record)
    else:  # a factory or logger class of someone else's makes the record
        record = logger.makeRecord(logger.name, logging.INFO, __file__, _LOG_LINE, ACCESS_FORMAT, args, None,
                                   func="log_access")
    logger.handle(record)


_LOG_LINE = log_access.__code__.co_firstlineno


class AccessRecord(logging.LogRecord):
    """An access line's `LogRecord`: the fields that are the same on every line copied from one record logging made
    (`_template`), the time, thread and process read as logging reads them (its `logThreads`, `logMultiprocessing`
    and `logProcesses` switches honoured)."""

    def __init__(self, name: str, args: tuple[object, ...]) -> None:
        fields, started = _TEMPLATE or _template()
        self.__dict__.update(fields)
        now = time.time()
        self.name = name
        self.args = args
        self.created = now
        self.msecs = int((now - int(now)) * 1000) + 0.0  # as logging computes the two
        self.relativeCreated = (now - started) * 1000
        self.thread = threading.get_ident() if logging.logThreads else None
        self.threadName = threading.current_thread().name if logging.logThreads else None
        self.processName = _process_name() if logging.logMultiprocessing else None
        self.process = os.getpid() if logging.logProcesses else None


_TEMPLATE: tuple[dict[str, object], float] | None = None


def _template() -> tuple[dict[str, object], float]:
    """Every field of a record of `log_access`'s, from one record logging made (whatever fields this Python's records
    have), and logging's start time (the record's `created` less its `relativeCreated`)."""
    global _TEMPLATE
    probe = logging.LogRecord("gateway.access", logging.INFO, __file__, _LOG_LINE, ACCESS_FORMAT, (), None,
                              func="log_access")
    _TEMPLATE = (dict(vars(probe)), probe.created - probe.relativeCreated / 1000)
    return _TEMPLATE


def _process_name() -> str:
    """The process's name as `LogRecord` reads it."""
    process = sys.modules.get("multiprocessing")
    if process is not None:
        try:
            return str(process.current_process().name)
        except Exception:  # noqa: BLE001 - as logging: the default name
            pass
    return "MainProcess"


_QUOTED: dict[str, str] = {}
_MAX_QUOTED = 1024


def _quoted(path: str) -> str:
    """`quote(path)`, remembered for the paths seen most (a handful of doors and tools, asked on every line)."""
    quoted = _QUOTED.get(path)
    if quoted is None:
        quoted = quote(path)
        if len(_QUOTED) < _MAX_QUOTED:  # foreign paths cannot grow it without bound
            _QUOTED[path] = quoted
    return quoted
_PHRASES = {status.value: status.phrase for status in HTTPStatus}


_PREFIXES: dict[str, str] = {}


def _prefix(levelname: str) -> str:
    """uvicorn's uncoloured `levelprefix` (`INFO:     `), remembered per level name."""
    prefix = levelname + ":" + " " * (8 - len(levelname))
    if len(_PREFIXES) < 64:  # level names are few; a custom one per record cannot grow it without bound
        _PREFIXES[levelname] = prefix
    return prefix


LINE_FORMAT = '%(levelprefix)s %(client_addr)s - "%(request_line)s" %(status_code)s'
"""uvicorn's access format (`uvicorn.config.LOGGING_CONFIG`), which `AccessLineFormatter` writes without `%`."""


class AccessLineFormatter(AccessFormatter):
    """uvicorn's `AccessFormatter`, the same line. Without colours and with uvicorn's format it writes the line in
    one f-string (uvicorn copies the record twice per line, and `logging.Formatter.format` would render the
    message, which the line does not show, and the format's fields); otherwise it is uvicorn's own."""

    def __init__(self, fmt: str | None = None, datefmt: str | None = None, style: Literal["%", "{", "$"] = "%",
                 use_colors: bool | None = None) -> None:
        super().__init__(fmt=fmt, datefmt=datefmt, style=style, use_colors=use_colors)
        self.writes_line = fmt == LINE_FORMAT and style == "%"

    def format(self, record: logging.LogRecord) -> str:
        args = record.args
        # The arguments are read after the log-record redaction (the record factory) has scrubbed them: a line
        # whose secret it could only remove by rewriting the message has no five arguments left and goes below.
        if self.writes_line and not self.use_colors and type(args) is tuple and len(args) == 5 \
                and not record.exc_info and not record.stack_info:
            client_addr, method, full_path, http_version, code = args
            if type(code) is int:
                prefix = _PREFIXES.get(record.levelname) or _prefix(record.levelname)
                return (f'{prefix} {client_addr} - "{method} {full_path} HTTP/{http_version}" '
                        f'{code} {_PHRASES.get(code, "")}')
        return super().format(record)

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        if self.use_colors or not isinstance(record.args, tuple) or len(record.args) != 5:
            return super().formatMessage(record)
        client_addr, method, full_path, http_version, code = record.args
        if not isinstance(code, int):
            return super().formatMessage(record)
        levelname = record.levelname
        record.__dict__.update(levelprefix=levelname + ":" + " " * (8 - len(levelname)), client_addr=client_addr,
                               request_line=f"{method} {full_path} HTTP/{http_version}",
                               status_code=f"{code} {_PHRASES.get(code, '')}")
        return logging.Formatter.formatMessage(self, record)
