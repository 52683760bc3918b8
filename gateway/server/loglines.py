"""The formatter of the gateway's own log lines under `gateway serve` (reloads, refused requests, audit trouble).

Those lines quote what others wrote: a refused request's path (anyone who reaches the port, before any key is
checked), an upstream's or a model's text in an error. Written as they came, an escape sequence in them acts on the
operator's terminal (OSC 52 sets the clipboard, CSI codes rewrite what was shown) and a line break in them writes a
log line of the sender's making (redteam45). `LineFormatter` is uvicorn's default formatter, the same line and
colours, with the message's control characters, line breaks included, shown as escapes (`gateway.printable`); a
traceback below it keeps its lines (an exception's message quotes such text too: its control characters escaped).
"""

from __future__ import annotations

import logging
from types import TracebackType

from uvicorn.logging import DefaultFormatter

from ..printable import printable


class LineFormatter(DefaultFormatter):
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
