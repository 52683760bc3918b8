"""Secrets out of every log line: a log-record factory that scrubs each record as it is created.

Filters on a logger miss records of its child loggers, and a library may log what an upstream echoed
(httpcore logs response headers at DEBUG), so the scrubbing happens where every record is born: the
message is rendered and passed through the registered `Redactor`s; a record that held a secret is
rewritten (its string arguments scrubbed, or the whole message frozen when that is not enough); a record
without one is left as it was (uvicorn's access formatter needs its arguments). A traceback is rendered and
scrubbed too. Records are only created for enabled levels, so the cost is
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
    clean = _clean(message, redactors)
    if clean != message:
        record.msg, record.args = _scrubbed_args(record, redactors) or (clean, ())
    if record.exc_info and not record.exc_text:
        text = logging.Formatter().formatException(record.exc_info)
        for redactor in redactors:
            text = redactor.text(text)
        record.exc_text = text


def _clean(text: str, redactors: list[Redactor]) -> str:
    for redactor in redactors:
        text = redactor.text(text)
    return text


def _scrubbed_args(record: logging.LogRecord, redactors: list[Redactor]) -> tuple[Any, tuple[Any, ...]] | None:
    """The record's own format with its string arguments scrubbed, when that leaves no secret.

    Formatters that read `args` themselves (uvicorn's access log unpacks five of them) break on a frozen
    record, so the arguments keep their shape whenever scrubbing them one by one is enough.
    """
    if not isinstance(record.args, tuple) or not record.args or not isinstance(record.msg, str):
        return None
    args = tuple(_clean(a, redactors) if isinstance(a, str) else a for a in record.args)
    msg = _clean(record.msg, redactors)
    try:
        rendered = msg % args
    except (TypeError, ValueError):
        return None
    return (msg, args) if _clean(rendered, redactors) == rendered else None
