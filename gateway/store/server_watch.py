"""One log line when a shared server (the PostgreSQL store, Redis) stops answering this process, one when it answers
again: an operator lines the outage up with the requests told 503 `store_unavailable` and sees when it ended.

The drivers say more, and say it on every attempt: psycopg_pool logs a warning for each connection it fails to open
(one a second or more while requests keep coming), each carrying libpq's two-line message ("Connection refused" and,
after a line break and a tab, "Is the server running on that host...?"), which the text log shows escaped
(`\\u000a\\u0009`, `gateway.server.loglines`). Where the commands configure logging, `gateway.server.loglines` puts a
filter on psycopg's pool logger that makes each of its warnings one line and drops a line already logged until a
server answers again (`ServerWatch.answered_again`); a store only counts, it never touches the logging configuration
(which is the process's: a store that did made one test's log depend on whether an earlier one had opened a store).

A request that got no answer within its wait (`gateway.shared_state_timeout`) is not yet an outage: a busy server (a
long script, `DEBUG SLEEP`, a question waiting on a lock) answers late, and from outside it looks exactly like a hung
one (stopped with SIGSTOP: the kernel still accepts connections, nothing answers) until it answers. So such a request is
said once, as slow (`late`: the timeout and the request's error, one line for a spell of them), and the server is said
gone only once it has answered nothing for `GONE_AFTER` of its waits in a row, or at once when it refuses a connection;
its coming back is said only after an outage, not after a slow spell.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar

logger = logging.getLogger("gateway.store")

_BREAKS = re.compile(r"\s*[\r\n]+\s*")

GONE_AFTER = 3
"""A server that has answered nothing for this many of a request's waits (`gateway.shared_state_timeout`) in a row
is gone, not slow: longer than any answer a request could have used, and short enough (6 s at the default 2 s) that
the outage's line comes within a few of its 503s."""

_CALLER_SAYS_SLOW: ContextVar[bool] = ContextVar("gateway_caller_says_slow", default=False)


@contextlib.contextmanager
def caller_says_slow() -> Iterator[None]:
    """Questions asked in this block that go unanswered start or go on with a slow spell as any other (the server is
    said gone as usual), but without the watch's slow line: their caller says what they were slow at itself (the
    stuck-runs sweep: one line a spell of its own, where the watch's would come again at every sweep, a minute apart,
    each answer of the sweep's `check` ending the spell)."""
    token = _CALLER_SAYS_SLOW.set(True)
    try:
        yield
    finally:
        _CALLER_SAYS_SLOW.reset(token)


SPELL_OVER = 30.0
"""Seconds after the last unanswered request past which a slow spell is over even though no new connection said so
(requests may have been answered on connections the pool kept): the next unanswered one starts a new spell."""


class ServerWatch:
    """Whether a server answered this process's last attempt to connect, logging each change once."""

    answered_again = 0
    """How many times a server of this process answered after failing: the log's filter of the drivers' warnings
    (`gateway.server.loglines.DRIVER_LINES`) says each of them again once this changes."""

    def __init__(self, what: str, wait: float | None = None) -> None:
        """`what` names the server in the log ("the store postgresql://gateway@db:5432/gateway"); `wait`: the seconds
        a request waits for its answer (`gateway.shared_state_timeout`; None: not known, and a second request left
        unanswered says the server gone)."""
        self.what = what
        self.wait = wait
        self.down: str | None = None
        """The error of the attempt that found it gone (one line); None while it answers."""
        self.slow_since: float | None = None
        """When (`time.monotonic`) the first request of the current slow spell went unanswered; None outside one
        (and while the server is said gone: `failed` ends the spell)."""
        self._last_late = 0.0

    @property
    def gone_after(self) -> float:
        """Seconds of no answer after which a slow server is said gone."""
        return GONE_AFTER * (self.wait or 0.0)

    def late(self, reason: str) -> None:
        """A request got no answer within its wait (`reason`: its error): said once a spell as slow, and as gone
        once nothing has answered for `gone_after` seconds (a new connection that answers ends the spell)."""
        if self.down is not None:
            return
        now = time.monotonic()
        if self.slow_since is None or now - self._last_late > SPELL_OVER:
            self.slow_since = now
            if not _CALLER_SAYS_SLOW.get():
                logger.warning("%s did not answer a request within %g s (gateway.shared_state_timeout): %s (slow, "
                               "not gone: a busy server answers late; said once: should it answer nothing for %g s, a "
                               "line will say it is unreachable)", self.what, self.wait or 0.0, one_line(reason),
                               self.gone_after)
        elif now - self.slow_since >= self.gone_after:
            self.failed(f"no answer for {now - self.slow_since + (self.wait or 0.0):.0f} s ({one_line(reason)})")
            return
        self._last_late = now

    def failed(self, reason: str) -> None:
        self.slow_since = None
        if self.down is None:
            self.down = reason
            logger.warning("%s is unreachable: %s (said once: a line will say when it is back)",
                           self.what, one_line(reason))

    def answered(self) -> None:
        self.slow_since = None  # a slow spell ends without a line: nothing was said gone
        if self.down is not None:
            self.down = None
            ServerWatch.answered_again += 1
            logger.info("%s answers again", self.what)


def one_line(text: str) -> str:
    """`text` with its line breaks (and the indentation after them) read as one space."""
    return _BREAKS.sub(" ", text.strip())


async def settle(ask: Callable[[], Awaitable[None]], watch: ServerWatch | None) -> None:
    """`ask` (a PING, a `SELECT 1`), asked again while it goes unanswered and `watch` cannot yet tell a slow server
    from a gone one (`late`): the stuck-runs sweep's (`Safeguards.sweep_once`, off every request's path), so that an
    idle instance says a hung server gone in the sweep that found it, not a sweep later (a spell's requests a minute
    apart are each a new spell: `SPELL_OVER`). At most `GONE_AFTER` + 1 questions, each waiting its timeout at most;
    raises as `ask` when the server does not answer."""
    for attempt in range(GONE_AFTER + 1):
        try:
            return await ask()
        except Exception:
            if watch is None or watch.slow_since is None or attempt == GONE_AFTER:
                raise
