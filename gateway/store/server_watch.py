"""One log line when a shared server (the PostgreSQL store, Redis) stops answering this process, one when it answers
again: an operator lines the outage up with the requests told 503 `store_unavailable` and sees when it ended.

The drivers say more, and say it on every attempt: psycopg_pool logs a warning for each connection it fails to open
(one a second or more while requests keep coming), each carrying libpq's two-line message ("Connection refused" and,
after a line break and a tab, "Is the server running on that host...?"), which the text log shows escaped
(`\\u000a\\u0009`, `gateway.server.loglines`). Where the commands configure logging, `gateway.server.loglines` puts a
filter on psycopg's pool logger that makes each of its warnings one line and drops a line already logged until a
server answers again (`ServerWatch.answered_again`); a store only counts, it never touches the logging configuration
(which is the process's: a store that did made one test's log depend on whether an earlier one had opened a store).
"""

from __future__ import annotations

import logging
import re

logger = logging.getLogger("gateway.store")

_BREAKS = re.compile(r"\s*[\r\n]+\s*")


class ServerWatch:
    """Whether a server answered this process's last attempt to connect, logging each change once."""

    answered_again = 0
    """How many times a server of this process answered after failing: the log's filter of the drivers' warnings
    (`gateway.server.loglines.DRIVER_LINES`) says each of them again once this changes."""

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
            ServerWatch.answered_again += 1
            logger.info("%s answers again", self.what)


def one_line(text: str) -> str:
    """`text` with its line breaks (and the indentation after them) read as one space."""
    return _BREAKS.sub(" ", text.strip())
