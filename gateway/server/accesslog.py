"""The access log of `gateway serve`, as a plain ASGI middleware: uvicorn's line, written after the answer left.

uvicorn writes its access line while the response is still being sent, so making the record, formatting it and
writing it to a terminal or pipe lie on the path of every answer. `log_access` logs the same message with the
same five arguments (so uvicorn's `AccessFormatter` renders it, colours included) to the logger
`gateway.access`; the request envelope (`gateway.server.envelope`) calls it on the event loop's next turn after
the app is done. `gateway serve`'s logging configuration
(`gateway.server.run.log_config`) gives that logger uvicorn's access handler and leaves uvicorn's own access
logger without one (uvicorn then skips its line). Lines keep their order.

A line is written for every request, so its record is made with `Logger.makeRecord` and handed to
`Logger.handle` (no search of the stack for the caller's file and line, which are always `log_access`'s), and
`AccessLineFormatter` renders an uncoloured line in one f-string, without the two copies of the record uvicorn's
formatter makes.
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Literal
from urllib.parse import quote

from starlette.types import Scope
from uvicorn.logging import AccessFormatter

from .loglines import UtcTime

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
    record = logger.makeRecord(logger.name, logging.INFO, __file__, _LOG_LINE, ACCESS_FORMAT,
                               (address, scope["method"], path, scope.get("http_version", "1.1"), status), None,
                               func="log_access")
    logger.handle(record)


_LOG_LINE = log_access.__code__.co_firstlineno
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


UVICORN_LINE_FORMAT = '%(levelprefix)s %(client_addr)s - "%(request_line)s" %(status_code)s'
"""uvicorn's access format (`uvicorn.config.LOGGING_CONFIG`)."""
LINE_FORMAT = "%(asctime)s " + UVICORN_LINE_FORMAT
"""`gateway serve`'s access format: the time (UTC, `UtcTime`), then uvicorn's line; `AccessLineFormatter` writes
it without `%`."""


class AccessLineFormatter(UtcTime, AccessFormatter):
    """uvicorn's `AccessFormatter`, the same line, its time in UTC. Without colours and with `LINE_FORMAT` it writes
    the line in one f-string (uvicorn copies the record twice per line, and `logging.Formatter.format` would render
    the message, which the line does not show, and the format's fields); otherwise it is uvicorn's own."""

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
                return (f'{self.formatTime(record)} {prefix} {client_addr} - "{method} {full_path} '
                        f'HTTP/{http_version}" '
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
