"""The formatter of the gateway's own log lines under `gateway serve` (reloads, refused requests, audit trouble).

Those lines quote what others wrote: a refused request's path (anyone who reaches the port, before any key is
checked), an upstream's or a model's text in an error. Written as they came, an escape sequence in them acts on the
operator's terminal (OSC 52 sets the clipboard, CSI codes rewrite what was shown) and a line break in them writes a
log line of the sender's making (redteam45). `LineFormatter` is uvicorn's default formatter, the same line and
colours, with the message's control characters, line breaks included, shown as escapes (`gateway.printable`); a
traceback below it keeps its lines (an exception's message quotes such text too: its control characters escaped).

Every line starts with its time in UTC, ISO 8601 to the millisecond (`2026-12-07T11:51:20.123Z`), the form the audit
log's `time` has, so an operator can line a log line up with an audit row. `UtcTime` sets the three attributes
`logging.Formatter` documents for that (`converter`, `default_time_format`, `default_msec_format`); the formatter's
own `formatTime` writes `%(asctime)s`. `gateway serve --log-format json` writes each record as one JSON object
(python-json-logger's `JsonFormatter`) with the same time as `time`.

The store's driver repeats itself: psycopg_pool warns on every failed attempt to connect, each warning libpq's
two lines. `DRIVER_LINES`, a filter on its pool logger, makes each warning one line and says it once until a server
answers again (`gateway.store.server_watch`). It is put on here, where the commands configure logging (`log_config`
for `serve`, `quiet_drivers` for the others), never by a store: logging's configuration is the process's.
"""

from __future__ import annotations

import logging
import time
from types import TracebackType
from typing import Any, TextIO

from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter
from uvicorn.logging import DefaultFormatter

from ..printable import printable
from ..store.server_watch import ServerWatch, one_line

LOG_FORMATS = ("text", "json")
"""`gateway serve --log-format`: uvicorn's lines with the time in front, or one JSON object per line."""


DRIVER_LOGGER = "psycopg.pool"
"""The logger `DRIVER_LINES` filters (a logger's filters see only the records logged on it, not its children's)."""
_MAX_REMEMBERED = 256
"""Lines `OnceEach` remembers: several pools' refusals and give-ups fit; more (foreign text) starts it afresh."""


class OnceEach(logging.Filter):
    """Each warning one line; a line seen since a server last answered again dropped (logging's filter protocol)."""

    def __init__(self) -> None:
        super().__init__()
        self._seen: set[str] = set()
        self._answered_again = ServerWatch.answered_again

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:  # the pool's INFO lines (one per connection asked for) are not repeats
            return True
        if self._answered_again != ServerWatch.answered_again or len(self._seen) >= _MAX_REMEMBERED:
            self._answered_again = ServerWatch.answered_again
            self._seen.clear()
        text = one_line(record.getMessage())
        if text in self._seen:
            return False
        self._seen.add(text)
        record.msg, record.args = text, None
        return True


DRIVER_LINES = OnceEach()
"""The one filter on `DRIVER_LOGGER`, however often logging is configured (`addFilter` adds a filter once)."""


def driver_lines() -> OnceEach:
    """`DRIVER_LINES`, as `logging.config.dictConfig` asks a filter's factory for it (`log_config`)."""
    return DRIVER_LINES


def quiet_drivers() -> None:
    """Put `DRIVER_LINES` on the driver's logger, for a command that configures logging without `log_config`."""
    logging.getLogger(DRIVER_LOGGER).addFilter(DRIVER_LINES)


class LineHandler(logging.StreamHandler[TextIO]):
    """logging's `StreamHandler` (`gateway serve`'s two handlers, the access line's and the gateway's own), each line
    written and flushed in `emit`, the method logging leaves to a handler's subclass. The standard `emit` flushes
    through `StreamHandler.flush`, which takes the handler's lock a second time, though `Handler.handle` holds it
    around `emit` already; every request writes a line."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            stream = self.stream
            stream.write(self.format(record) + self.terminator)
            if hasattr(stream, "flush"):  # what `StreamHandler.flush` asks
                stream.flush()
        except RecursionError:  # as logging's own: a recursion is not a line's error
            raise
        except Exception:
            self.handleError(record)


class UtcTime(logging.Formatter):
    """`%(asctime)s` in UTC, ISO 8601 with milliseconds and `Z`: `logging.Formatter.formatTime`'s own text (the
    three attributes it documents), the second's part written once per second."""

    converter = staticmethod(time.gmtime)
    default_time_format = "%Y-%m-%dT%H:%M:%S"
    default_msec_format = "%s.%03dZ"
    _second: tuple[int, str] = (-1, "")
    """The last second written (whole seconds since the epoch) and its text."""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802 - logging's
        """`logging.Formatter.formatTime` (an operator's `datefmt` goes to it as it is); without one, the text of
        the record's second is made by `converter` and `time.strftime` once and shared by the lines of that second
        (`strftime` is most of a line's formatting, and a busy gateway writes many lines a second)."""
        if datefmt:
            return super().formatTime(record, datefmt)
        second = int(record.created)
        seen = self._second  # one tuple, replaced whole: a line on another thread reads a pair that belongs together
        if seen[0] != second:
            seen = self._second = (second, time.strftime(self.default_time_format, self.converter(second)))
        return self.default_msec_format % (seen[1], record.msecs)


class JsonLineFormatter(UtcTime, JsonFormatter):
    """One JSON object per record: `time`, `level`, `logger`, `message` (an exception's traceback as `exc_info`;
    an access line's parts also as `client`, `method`, `path`, `status`).
    JSON escapes every control character, so what a sender wrote cannot act on a terminal or break the line."""

    def __init__(self, **options: Any) -> None:
        options.pop("use_colors", None)  # uvicorn's option for its own formatters
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s",
                         rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
                         # uvicorn passes its start line's ANSI-coloured twin as an extra field
                         reserved_attrs=[*RESERVED_ATTRS, "taskName", "color_message"])

    def add_fields(self, log_data: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]) -> None:
        """An access line's parts as fields of their own (`client`, `method`, `path`, `status`), for a log shipper
        to filter on without parsing the message (python-json-logger's hook for added fields)."""
        super().add_fields(log_data, record, message_dict)
        args = record.args
        # five arguments: `gateway.server.accesslog`'s (a record the redaction rewrote has none left: message only)
        if record.name == "gateway.access" and type(args) is tuple and len(args) == 5 and type(args[4]) is int:
            log_data.update(client=args[0], method=args[1], path=args[2], status=args[4])


class LineFormatter(UtcTime, DefaultFormatter):
    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        record.message = printable(record.message, lines=False)
        return super().formatMessage(record)

    def formatException(self, ei: tuple[type[BaseException], BaseException, TracebackType | None]  # noqa: N802
                        | tuple[None, None, None]) -> str:
        return printable(super().formatException(ei))

    def format(self, record: logging.LogRecord) -> str:
        # The redaction's record factory renders a traceback when the record is made (`exc_text`), so
        # `formatException` is not asked for it: its text is made inert here.
        if record.exc_text:
            record.exc_text = printable(record.exc_text)
        return super().format(record)
