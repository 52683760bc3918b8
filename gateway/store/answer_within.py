"""A shared part (the PostgreSQL store) waited for at most `gateway.shared_state_timeout` seconds per question.

A hung PostgreSQL (stopped, or behind a balancer whose server is gone) keeps its connections open and never answers;
no driver setting ends that wait on the client's side: `connect_timeout` and the pool's `timeout` bound getting a
connection, not its answers (the pool's check of a connection is a query, so it hangs too), `statement_timeout` is
the server's own, and TCP's timeouts never fire while the server's kernel acknowledges every byte. So each question
runs in a task of its own, and the caller stops waiting for it at the deadline: a 503 naming the part
(`StoreUnavailable`), in the setting's seconds. The task is cancelled then, in the background: psycopg cancels its
query (up to 10 s of its own against a server that does not answer) and the pool replaces the connection. Awaiting
the cancelled task instead would keep the caller those 10 s more.

A question given up so is told to the log's watch as late (`ServerWatch.late`: said slow at once, one line a spell;
gone once nothing has answered for a few timeouts, or a connection could not be opened): a hung server refuses no
connection, so the pool's attempts to connect said nothing of it until one timed out, and a busy one (a question
waiting on a lock, a slow disk) answers the next question on another connection, which ends the spell without a
line, where it was said gone and back before.

What the question may already have done stays done once the part answers (a row written after the caller was told
503): the store's writes are each one statement or one transaction, so none is half done.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from ..errors import StoreUnavailable
from .server_watch import ServerWatch

T = TypeVar("T")
P = ParamSpec("P")

_abandoned: set[asyncio.Future[Any]] = set()
"""Questions whose caller stopped waiting, kept until they end (a task nobody references may be collected)."""


GRACE = 0.2
"""Seconds past the setting before a question is given up: the driver's own timeouts of the same length (the pool's
wait for a connection, against a server that refuses them) end first and say why."""


async def within(seconds: float, question: Awaitable[T], part: str, watch: ServerWatch | None = None) -> T:
    """`question`'s answer, or `StoreUnavailable` ("`part` did not answer within `seconds` s") once `seconds` (and
    `GRACE`) pass; the question is then cancelled without being waited for, and `watch` told the part is gone. A
    cancelled caller cancels it too."""
    task = asyncio.ensure_future(question)
    try:
        done, _ = await asyncio.wait((task,), timeout=seconds + GRACE)
    except BaseException:
        task.cancel()
        raise
    if done:
        return task.result()
    task.cancel()
    _abandoned.add(task)
    task.add_done_callback(_forget)
    if watch is not None:
        watch.late("the question was cancelled")
    raise StoreUnavailable(f"{part} did not answer within {seconds:g} s")


def _forget(task: asyncio.Future[Any]) -> None:
    _abandoned.discard(task)
    if not task.cancelled():
        task.exception()  # retrieved: an abandoned question's failure was the caller's 503 already


class Timed(Protocol):
    timeout: float
    """Seconds a question waits at most."""

    @property
    def part(self) -> str:
        """What the 503 names ("the store postgresql://...")."""

    @property
    def watch(self) -> ServerWatch | None:
        """Told when a question is given up (the log's line that the part is gone)."""


S = TypeVar("S", bound=Timed)


def answered_within(method: Callable[Concatenate[S, P], Awaitable[T]]
                    ) -> Callable[Concatenate[S, P], Coroutine[Any, Any, T]]:
    """A store's method, each call of it bounded by `within` (the store's `timeout` and `part`)."""

    @functools.wraps(method)
    async def bounded(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await within(self.timeout, method(self, *args, **kwargs), self.part, self.watch)

    return bounded
