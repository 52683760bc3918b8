"""Secrets out of every log line: a log-record factory that scrubs each record as it is created.

Filters on a logger miss records of its child loggers, and a library may log what an upstream echoed
(httpcore logs response headers at DEBUG), so the scrubbing happens where every record is born: the
message is rendered, passed through the registered `Redactor`s, and frozen (`msg` set, `args` cleared);
a traceback is rendered and scrubbed too. Records are only created for enabled levels, so the cost is
paid only for lines that are actually written.
"""

from __future__ import annotations

import logging
import threading
import weakref
from typing import Any

from .http.redact import Redactor

_lock = threading.Lock()
_redactors: weakref.WeakSet[Redactor] = weakref.WeakSet()
_installed = False


def redact_logs(redactor: Redactor) -> None:
    """Scrub `redactor`'s secrets from every log record from now on (idempotent; held weakly)."""
    global _installed
    with _lock:
        _redactors.add(redactor)
        if _installed:
            return
        previous = logging.getLogRecordFactory()

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            active = [r for r in list(_redactors) if r]
            if active:
                _scrub(record, active)
            return record

        logging.setLogRecordFactory(factory)
        _installed = True


def _scrub(record: logging.LogRecord, redactors: list[Redactor]) -> None:
    try:
        message = record.getMessage()
    except Exception:  # a malformed log call: leave it to logging's own error reporting
        return
    clean = message
    for redactor in redactors:
        clean = redactor.text(clean)
    if clean != message or record.args:
        record.msg, record.args = clean, ()
    if record.exc_info and not record.exc_text:
        text = logging.Formatter().formatException(record.exc_info)
        for redactor in redactors:
            text = redactor.text(text)
        record.exc_text = text
