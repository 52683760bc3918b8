"""One question to an authorization server at a time, its answer or failure shared, and a slow answer still had.

Callers that need the same thing from the server (its key set, its metadata, one user's token refresh) share one
asking of it (`Asking.ask`): the first starts it as a task, the others arriving while it runs wait for the same task,
and all get its answer or its failure. Without this, callers queued behind a server that does not answer each waited
the full timeout in turn (the tenth caller ten times as long), and a flood of tokens with unknown keys became a flood
of fetches.

Each caller waits at most `wait` seconds (`gateway.auth_server_timeout`); the question itself goes on after its
callers gave up, up to its own longer bound (`BOUND_FACTOR` times the wait), so that a provider slower than the
setting still delivers to the next callers (its keys, a user's rotated refresh token) instead of being asked again
and abandoned every time. One question at a time while its callers wait for it; once they all gave up on it (their
wait ran out) and the failure they shared has been told for `retry_after`, the next caller asks a fresh question
beside it rather than waiting for it again: a request lost in a connection that went silent is not waited for up to
its bound (3 x the setting, and 2: 9.8 s at a 3 s setting, bench/README.md, branch mend48) before the server is asked
again; the one given up on still delivers if it answers first. At most two at a time: a fresh question that is given
up on too drops the oldest one still running. Not for a user's refresh (`beside=False`): a provider that rotates
refresh tokens would refuse the second use of the one both asked with, and end the user's connection.

A failure (the server's, or a caller's wait running out) is also remembered for `retry_after` seconds: callers
arriving then are told at once, with the seconds left (`AuthServerUnavailable.retry_after`, the 503's Retry-After),
and asked again (or waited for again, while the question still runs) after that; an answer that arrives meanwhile
ends the failure. So a server found again is found without a restart, and a server that is down gets one request
per `retry_after` (a hung one, per bound) however many callers need it.

The sharing is asyncio's own (one `Task`, each caller awaiting it through `asyncio.shield` under its own
`asyncio.timeout`). Looked at for the rest and not used: singleflight 0.1.3 (2022, no release since), oneflight,
dedup-me, cacheflight and async-lru (each shares a call in flight; none remembers a failure for a window, lets a
caller's wait end while the call goes on, or bounds that call on its own).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from ..errors import AuthServerUnavailable

T = TypeVar("T")

RETRY_AFTER = 2.0
"""Seconds a failed question to an authorization server is not asked again (its callers are told at once)."""
BOUND_FACTOR = 3.0
"""A question runs at most this many times its callers' wait. Longer lets a slower server deliver; but a request
lost in a connection that went silent (a load balancer's black hole) is waited for that long before the server is
asked again, one question at a time: at 10 x, every door came back 28-30 s after such a silence ended, against 3 s
before (bench/README.md, branch mend48)."""
BOUND_SETTING = f"{BOUND_FACTOR:g} x gateway.auth_server_timeout, a request's own bound: its callers gave up sooner"


def not_in_time(seconds: float, where: str, setting: str = "gateway.auth_server_timeout") -> AuthServerUnavailable:
    """The failure of a request to an authorization server that did not answer in time."""
    return AuthServerUnavailable(f"the authorization server did not answer within {seconds:g} s ({where}; {setting})")


class Asking(Generic[T]):
    """The callers asking one authorization server one thing, and the one question they share.

    Args:
        retry_after: seconds a failure is remembered (0: only the callers that waited share it).
        beside: ask a fresh question beside one its callers gave up on (see the module's docstring); False for a
            question that must not be asked twice at once (a refresh that spends its refresh token).
    """

    def __init__(self, retry_after: float = RETRY_AFTER, *, beside: bool = True) -> None:
        self.retry_after = retry_after
        self.beside = beside
        self._task: asyncio.Task[T] | None = None
        self._given_up: asyncio.Task[T] | None = None
        """The question whose callers all gave up on it (their wait ran out), if it is still `_task`."""
        self._beside: asyncio.Task[T] | None = None
        """A question given up on that still runs beside the fresh one (`_task`), which may still deliver."""
        self._failure: AuthServerUnavailable | None = None
        self._failed_at = float("-inf")

    @property
    def last_failure(self) -> AuthServerUnavailable | None:
        """The last failure, remembered or not, until the server answers."""
        return self._failure

    @property
    def failure(self) -> AuthServerUnavailable | None:
        """The last failure while it is remembered (None once the server answered, or after `retry_after`)."""
        if self._failure is not None and self._left() > 0:
            return self._failure
        return None

    def _left(self) -> float:
        return self.retry_after - (time.monotonic() - self._failed_at)

    def _remember(self, failure: AuthServerUnavailable) -> AuthServerUnavailable:
        self._failure, self._failed_at = failure, time.monotonic()
        failure.retry_after = self.retry_after if self.retry_after > 0 else None
        return failure

    def _told(self, failure: AuthServerUnavailable) -> AuthServerUnavailable:
        left = self._left()
        awaited = self._task is not None and self._task is not self._given_up
        again = "its answer is still awaited, and callers wait for it again" if awaited else "it is asked again"
        return AuthServerUnavailable(f"{failure}; {again} in {left:.1f} s", retry_after=left)

    def start(self, question: Callable[[float], Awaitable[T]], *, wait: float, where: str) -> None:
        """Ask `question` without waiting for the answer (unless it is being asked, or a failure is remembered)."""
        if self._task is None and self.failure is None:
            self._begin(question, wait, where)

    def _begin(self, question: Callable[[float], Awaitable[T]], wait: float, where: str) -> asyncio.Task[T]:
        task = self._task = asyncio.create_task(self._asked(question, wait * BOUND_FACTOR, where))
        task.add_done_callback(_retrieved)
        return task

    async def ask(self, question: Callable[[float], Awaitable[T]], *, wait: float, where: str) -> T:
        """The answer to `question` (called with the seconds it may take), asked now or by the caller before, while
        it still runs. AuthServerUnavailable when the server failed, a failure is remembered, or `wait` seconds
        passed (`where`: what was asked, for that message); the question's other errors are raised as they are."""
        if (failure := self.failure) is not None:
            raise self._told(failure)
        task = self._task
        if task is None:
            task = self._begin(question, wait, where)
        elif task is self._given_up:  # nobody waits for it, and its failure was told for `retry_after`
            task = self._ask_beside(task, question, wait, where)
        try:
            async with asyncio.timeout(wait):
                return await asyncio.shield(task)  # a caller gone or out of time leaves the question running
        except TimeoutError:
            if task.done():  # answered just as the wait ran out
                return task.result()
            if task is self._task and self.beside:
                self._given_up = task
            raise self._remember(not_in_time(wait, where)) from None

    def _ask_beside(self, given_up: asyncio.Task[T], question: Callable[[float], Awaitable[T]], wait: float,
                    where: str) -> asyncio.Task[T]:
        """A fresh question beside the one its callers gave up on (which runs on, and may still deliver); the one
        before that, if it still runs, is dropped (two at a time at most)."""
        if self._beside is not None:
            self._beside.cancel()
        self._beside = given_up
        return self._begin(question, wait, where)

    async def _asked(self, question: Callable[[float], Awaitable[T]], bound: float, where: str) -> T:
        # Only the current question's failure is remembered and told: one beside it (given up on, superseded) that
        # fails says nothing of the fresh one; any answer ends a failure.
        this = asyncio.current_task()
        try:
            async with asyncio.timeout(bound):  # a server that trickles its answer is bounded too
                answer = await question(bound)
        except TimeoutError:
            failure = not_in_time(bound, where, BOUND_SETTING)
            raise (self._remember(failure) if this is self._task else failure) from None
        except AuthServerUnavailable as error:
            raise (self._remember(error) if this is self._task else error) from None
        except BaseException:  # refused for another reason (the server answered), or cancelled: nothing to share
            if this is self._task:
                self._failure = None
            raise
        else:
            self._failure = None
            return answer
        finally:
            if this is self._task:
                self._task = self._given_up = None
            elif this is self._beside:
                self._beside = None


def _retrieved(task: asyncio.Task[object]) -> None:
    """Read a question's failure when no caller was left to (asyncio would log it as never retrieved)."""
    if not task.cancelled():
        task.exception()
