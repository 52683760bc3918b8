"""One question to an authorization server at a time, and its failure shared.

Callers that need the same thing from the server (its key set, its metadata, one user's token refresh) take turns
(`Asking.turn`). A caller that waited while another asked gets that answer: on success it finds the result stored
and asks nothing; on failure it gets the same `AuthServerUnavailable` at once instead of asking again. Without
this, callers queued behind a server that does not answer each waited the full timeout in turn (the tenth caller
ten times as long), and a flood of tokens with unknown keys became a flood of fetches.

A failure is also remembered for `retry_after` seconds: callers arriving then are told at once, without asking,
and the server is asked again after that (so it is found again without a restart, and a server that is down
gets one request per `retry_after` however many callers need it).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from ..errors import AuthServerUnavailable

RETRY_AFTER = 2.0
"""Seconds a failed question to an authorization server is not asked again (its callers are told at once)."""


class Asking:
    """The turns of the callers asking one authorization server one thing.

    Args:
        retry_after: seconds a failure is remembered (0: only the callers that waited share it).
    """

    def __init__(self, retry_after: float = RETRY_AFTER) -> None:
        self.retry_after = retry_after
        self._lock = asyncio.Lock()
        self._round = 0
        self._failure: AuthServerUnavailable | None = None
        self._failed_at = float("-inf")

    @property
    def failure(self) -> AuthServerUnavailable | None:
        """The last question's failure while it is remembered (None once the server answered, or after
        `retry_after`)."""
        if self._failure is not None and time.monotonic() - self._failed_at < self.retry_after:
            return self._failure
        return None

    def _told(self, failure: AuthServerUnavailable) -> AuthServerUnavailable:
        left = self.retry_after - (time.monotonic() - self._failed_at)
        return AuthServerUnavailable(f"{failure}; it is asked again in {left:.1f} s" if left > 0 else str(failure))

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """This caller's turn to ask (inside, check first whether the answer is there already). Raises the failure
        of a question asked while this caller waited, or one still remembered, without a turn."""
        if (failure := self.failure) is not None:
            raise self._told(failure)
        waited_from = self._round
        async with self._lock:
            if self._round != waited_from and self._failure is not None:
                raise self._told(self._failure)
            try:
                yield
            except AuthServerUnavailable as error:
                self._failure, self._failed_at = error, time.monotonic()
                raise
            except BaseException:  # refused for another reason, or the caller went away: nothing to share
                self._failure = None
                raise
            else:
                self._failure = None
            finally:
                self._round += 1
