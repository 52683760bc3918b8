"""`Asking`, one question to an authorization server shared by its callers, against a real server on 127.0.0.1 whose
first answer never comes (a request lost in a connection that went silent) and whose later ones come at once.

Before: the callers after the lost question's failure waited for that same question again, up to its own bound (3 x
the setting), before the server was asked anew: every door came back 9.8 s after such a silence ended at a 3 s
setting (bench/README.md, branch mend48). Now a fresh question goes beside the one its callers gave up on."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import httpx
import pytest
from recording_server import Recorded, RecordingServer, Reply

from gateway.errors import AuthServerUnavailable
from gateway.identity.asking import Asking

pytestmark = pytest.mark.anyio


class HangsOnce:
    """A key set whose first request is held unanswered until the test ends; the later ones are answered at once."""

    def __init__(self) -> None:
        self.released = threading.Event()
        self.asked = 0
        self._lock = threading.Lock()

    def __call__(self, request: Recorded) -> Reply:
        with self._lock:
            self.asked += 1
            first = self.asked == 1
        if first:
            self.released.wait(60)
        return Reply(200, {"keys": ["k1"]})


@pytest.fixture
def hangs_once() -> Iterator[tuple[RecordingServer, HangsOnce]]:
    server, responder = RecordingServer(), HangsOnce()
    server.route("/jwks", responder)
    with server:
        try:
            yield server, responder
        finally:
            responder.released.set()


def _question(url: str) -> object:
    async def fetch(bound: float) -> object:
        async with httpx.AsyncClient(timeout=bound) as client:
            return (await client.get(f"{url}/jwks")).json()

    return fetch


async def _failure_told_out(asking: Asking[object]) -> None:
    """Until the shared failure is no longer told at once (its `retry_after` ran out)."""
    import anyio

    with anyio.fail_after(60):  # a hang guard only
        while asking.failure is not None:
            await anyio.sleep(0.01)


async def test_a_question_lost_in_a_silent_connection_is_asked_again_beside_it(
        hangs_once: tuple[RecordingServer, HangsOnce]) -> None:
    server, responder = hangs_once
    asking: Asking[object] = Asking(retry_after=0.05)
    question = _question(server.url)
    with pytest.raises(AuthServerUnavailable, match="did not answer within 0.5 s"):
        await asking.ask(question, wait=0.5, where="key set")  # type: ignore[arg-type]
    await _failure_told_out(asking)
    # The next caller: a fresh request beside the lost one (still held by the server, still run by the gateway),
    # answered at once. Before: it waited for the lost one again, and failed at that one's bound (1.5 s).
    assert await asking.ask(question, wait=30, where="key set") == {"keys": ["k1"]}  # type: ignore[arg-type]
    assert responder.asked == 2 and not responder.released.is_set()


async def test_a_refresh_is_never_asked_twice_at_once(hangs_once: tuple[RecordingServer, HangsOnce]) -> None:
    # A user's refresh spends its refresh token: a second one beside the first would be refused by a provider that
    # rotates them, and end the connection. Its callers wait for the one in flight, as before.
    server, responder = hangs_once
    asking: Asking[object] = Asking(retry_after=0.0, beside=False)
    question = _question(server.url)
    for _ in range(2):
        with pytest.raises(AuthServerUnavailable, match="did not answer within 0.2 s"):
            await asking.ask(question, wait=0.2, where="token refresh")  # type: ignore[arg-type]
    assert responder.asked == 1
