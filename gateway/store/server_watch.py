"""One log line when a shared server (the PostgreSQL store, Redis) stops answering this process, one when it answers
again: an operator lines the outage up with the requests told 503 `store_unavailable` and sees when it ended.

The drivers say more, and say it on every attempt: psycopg_pool logs a warning for each connection it fails to open
(one a second or more while requests keep coming), each carrying libpq's two-line message ("Connection refused" and,
after a line break and a tab, "Is the server running on that host...?"), which the text log shows escaped
(`\\u000a\\u0009`, `gateway.server.loglines`). `OnceEach` is a `logging.Filter` on psycopg's pool logger: each of its
records is made one line, and a line already logged is dropped until a server of the pool answers again.
"""

from __future__ import annotations

import logging
import re

logger = logging.getLogger("gateway.store")

_BREAKS = re.compile(r"\s*[\r\n]+\s*")
_MAX_REMEMBERED = 256
"""Lines `OnceEach` remembers: several pools' refusals and give-ups fit; more (foreign text) starts it afresh."""


class ServerWatch:
    """Whether a server answered this process's last attempt to connect, logging each change once."""

    def __init__(self, what: str) -> None:
        """`what` names the server in the log ("the store postgresql://gateway@db:5432/gateway")."""
        self.what = what
        self.down: str | None = None
        """The error of the attempt that found it gone (one line); None while it answers."""

    def failed(self, reason: str) -> None:
        if self.down is None:
            self.down = reason
            logger.warning("%s is unreachable: %s (said once: a line will say when it is back)",
                           self.what, one_line(reason))

    def answered(self) -> None:
        if self.down is not None:
            self.down = None
            logger.info("%s answers again", self.what)
            PSYCOPG_POOL_LINES.forget()


class OnceEach(logging.Filter):
    """Each warning one line; a line seen since the last `forget` dropped (logging's filter protocol)."""

    def __init__(self) -> None:
        super().__init__()
        self._seen: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:  # the pool's INFO lines (one per connection asked for) are not repeats
            return True
        text = one_line(record.getMessage())
        if text in self._seen:
            return False
        if len(self._seen) >= _MAX_REMEMBERED:
            self._seen.clear()
        self._seen.add(text)
        record.msg, record.args = text, None
        return True

    def forget(self) -> None:
        self._seen.clear()


def one_line(text: str) -> str:
    return _BREAKS.sub(" ", text.strip())


PSYCOPG_POOL_LINES = OnceEach()
"""The filter on `psycopg.pool` (installed by `quiet_psycopg_pool`, once for every pool of the process)."""


def quiet_psycopg_pool() -> None:
    """Put `PSYCOPG_POOL_LINES` on psycopg's pool logger (again is a no-op: `addFilter` adds a filter once)."""
    logging.getLogger("psycopg.pool").addFilter(PSYCOPG_POOL_LINES)
