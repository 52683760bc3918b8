"""The access log of `gateway serve`: uvicorn's own lines, formatted at a fraction of the cost.

uvicorn writes one access line per request through its `AccessFormatter`, which copies the log record twice,
and looks the status phrase up in `http.HTTPStatus` for every line: a fifth of the server's own Python time on a
proxied call. `AccessFormatter` here writes the same bytes from values computed once per status and level. Lines
in colour (stdout is a terminal) and any other format string are left to uvicorn's formatter.

uvicorn logs the line when the response starts, before its body is sent: `AfterResponseLogger`, the logger
`gateway.server.protocol` gives uvicorn's protocol, makes and writes the record on the event loop's next turn
instead, after the answer has left (making the record, formatting it and a `write` to a terminal or pipe were on
the path of every answer: 64 µs of a proxied call's p50 on a busy machine, lower in each of 15 rounds side by
side). Lines keep their order.
`log_config()` is uvicorn's logging configuration with the formatter in place.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from typing import Any

from uvicorn.config import LOGGING_CONFIG
from uvicorn.logging import AccessFormatter as UvicornAccessFormatter

DEFAULT_FORMAT = '%(levelprefix)s %(client_addr)s - "%(request_line)s" %(status_code)s'


class AccessFormatter(UvicornAccessFormatter):
    """uvicorn's access formatter with its default, colourless format rendered directly."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._fast = self._fmt == DEFAULT_FORMAT and not self.use_colors
        self._prefixes: dict[str, str] = {}
        self._statuses: dict[int, str] = {}

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        args = record.args
        if not self._fast or not isinstance(args, tuple) or len(args) != 5:
            return super().formatMessage(record)
        client_addr, method, full_path, http_version, status_code = args
        levelname = record.levelname
        prefix = self._prefixes.get(levelname)
        if prefix is None:
            prefix = self._prefixes[levelname] = levelname + ":" + " " * (8 - len(levelname))
        code = int(status_code)  # type: ignore[call-overload]
        status = self._statuses.get(code)
        if status is None:
            status = self._statuses[code] = self.get_status_code(code)
        return f'{prefix} {client_addr} - "{method} {full_path} HTTP/{http_version}" {status}'


class AfterResponseLogger:
    """A logger whose `info` records are made and handled on the event loop's next turn (uvicorn's access log
    calls `info` while the answer is still being written); every other attribute is the wrapped logger's."""

    __slots__ = ("_logger", "_loop")

    def __init__(self, logger: logging.Logger, loop: asyncio.AbstractEventLoop) -> None:
        self._logger = logger
        self._loop = loop

    def info(self, msg: object, *args: object) -> None:
        self._loop.call_soon(self._logger.info, msg, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._logger, name)


def log_config() -> dict[str, Any]:
    """uvicorn's default logging configuration, its access lines formatted by `AccessFormatter`."""
    config = copy.deepcopy(LOGGING_CONFIG)
    config["formatters"]["access"]["()"] = f"{__name__}.AccessFormatter"
    return config
