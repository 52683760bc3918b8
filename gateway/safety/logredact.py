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

from .redaction import Redactor

_lock = threading.RLock()  # reentrant: a weakref callback may run inside the locked block (garbage collection)
_refs: tuple[weakref.ref[Redactor], ...] = ()
"""The registered redactors, held weakly; a tuple replaced whole so the factory reads it without a lock."""
_installed = False


def redact_logs(redactor: Redactor) -> None:
    """Scrub `redactor`'s secrets from every log record from now on (idempotent; held weakly)."""
    global _installed, _refs
    with _lock:
        if any(ref() is redactor for ref in _refs):
            return
        _refs = (*(ref for ref in _refs if ref() is not None), weakref.ref(redactor, _forget))
        if _installed:
            return
        previous = logging.getLogRecordFactory()

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            if _refs:
                _scrub(record)
            return record

        logging.setLogRecordFactory(factory)
        _installed = True


def _forget(dead: weakref.ref[Redactor]) -> None:
    global _refs
    with _lock:
        _refs = tuple(ref for ref in _refs if ref is not dead)


def _scrub(record: logging.LogRecord) -> None:
    redactors = [r for ref in _refs if (r := ref()) is not None]
    try:
        message = record.getMessage()
    except Exception:  # a malformed log call: leave it to logging's own error reporting
        return
    # The common case, a line without a secret, costs one regex search per redactor and no copies.
    if _holds_secret(message, redactors):
        clean = _clean(message, redactors)
        record.msg, record.args = _scrubbed_args(record, redactors) or (clean, ())
    if record.exc_info and not record.exc_text:
        text = logging.Formatter().formatException(record.exc_info)
        for redactor in redactors:
            text = redactor.text(text)
        record.exc_text = text


def _holds_secret(text: str, redactors: list[Redactor]) -> bool:
    for redactor in redactors:
        if redactor.appears_in(text):
            return True
    return False


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
