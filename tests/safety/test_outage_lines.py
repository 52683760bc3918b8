"""What the log says of a Redis or PostgreSQL outage: one line when the server goes, one when it is back, whether
requests come or not, whether it refuses connections (stopped) or takes them and never answers (SIGSTOP), and from
the renewal of the places held in Redis as from the client's connections. Real parts: Debian's redis-server and
PostgreSQL on 127.0.0.1, halted and started again on their port, or paused (SIGSTOP) and resumed (SIGCONT)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from shared_servers import PostgresServer, RedisServer

from gateway.config.model import Manifest
from gateway.errors import StoreUnavailable
from gateway.safety.guards import Safeguards
from gateway.store import Bucket, open_store
from gateway.store.postgres import PostgresStore
from gateway.store.redis_counters import RedisCounters

pytestmark = pytest.mark.anyio

BUCKET = Bucket("k", 100.0, 100.0)


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer().start()
    try:
        yield server
    finally:
        server.stop()


def _lines(caplog: pytest.LogCaptureFixture, name: str) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == name]


def _outage_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The store's lines less its schema migrations' (a fresh database says them at its first question; whether one
    is fresh depends on what the worker's earlier tests left in the shared server's template)."""
    return [line for line in _lines(caplog, "gateway.store") if "schema migration" not in line]


async def test_a_paused_redis_is_said_gone_at_the_first_request_it_does_not_answer(
        redis_server: RedisServer, caplog: pytest.LogCaptureFixture) -> None:
    counters = RedisCounters(redis_server.url, timeout=1)
    where = f"Redis at redis://127.0.0.1:{redis_server.port}/0"
    try:
        with caplog.at_level(logging.INFO):
            assert await counters.take_tokens([BUCKET]) == 0.0
            redis_server.pause()  # connections stay open, new ones are accepted: nothing answers
            with pytest.raises(StoreUnavailable, match="did not answer within 1 s"):
                await counters.take_tokens([BUCKET])
            # Before: nothing yet (its connection was open: no connection refused); the line came at the next
            # request, whose new connection's handshake timed out, or never, for a single request.
            assert _lines(caplog, "gateway.store") == [
                f"{where} is unreachable: Timeout reading from 127.0.0.1:{redis_server.port} (said once: a line "
                "will say when it is back)"]
            for _ in range(3):
                with pytest.raises(StoreUnavailable, match="did not answer within 1 s"):
                    await counters.take_tokens([BUCKET])
            redis_server.resume()
            assert await counters.take_tokens([BUCKET]) == 0.0
            assert await counters.take_tokens([BUCKET]) == 0.0
    finally:
        await counters.aclose()
    lines = _lines(caplog, "gateway.store")
    assert len(lines) == 2 and lines[1] == f"{where} answers again", lines


@pytest.mark.parametrize("outage", ["halted", "paused"])
async def test_the_renewal_of_places_held_in_redis_says_an_outage_once_and_its_end_once(
        redis_server: RedisServer, caplog: pytest.LogCaptureFixture, outage: str) -> None:
    counters = RedisCounters(redis_server.url, timeout=1)
    keeper = counters.keeper
    try:
        with caplog.at_level(logging.INFO):
            with redis.Redis.from_url(redis_server.url) as direct:  # a place taken, as a share's script takes it
                direct.zadd("gateway:test:places", {"place-1": time.time() + 30})
            keeper.hold("gateway:test:places", "place-1")  # its task renews every 10 s: not in this test
            await keeper.renew()
            redis_server.halt() if outage == "halted" else redis_server.pause()
            for _ in range(4):  # four periods of the outage (before: a warning each)
                await keeper.renew()
            redis_server.start() if outage == "halted" else redis_server.resume()  # halted: the same port
            await keeper.renew()
            await keeper.renew()
    finally:
        keeper.drop("place-1")
        await counters.aclose()
    renewals = _lines(caplog, "gateway.safety")
    if outage == "halted":  # a Redis started afresh (nothing saved) has lost the place: said, once
        assert renewals.pop().startswith("a place held in Redis (a client's share, an api's slot) ended with its "
                                         "lease while its work went on"), renewals
    assert len(renewals) == 2, renewals
    assert renewals[0].startswith("1 place held in Redis (clients' shares, apis' slots, waiters' tickets) not "
                                  "renewed") and renewals[0].endswith(
        "(said once: a line will say when a renewal reaches it again)"), renewals
    assert renewals[1] == (f"the places held in Redis at redis://127.0.0.1:{redis_server.port}/0 are renewed again "
                           "(1 place now)")
    watched = _lines(caplog, "gateway.store")
    where = f"Redis at redis://127.0.0.1:{redis_server.port}/0"
    assert len(watched) == 2 and watched[0].startswith(f"{where} is unreachable: "), watched
    assert watched[1] == f"{where} answers again", watched


@pytest.mark.parametrize("outage", ["halted", "paused"])
async def test_an_idle_instance_says_when_redis_goes_and_comes_back_at_its_sweep(
        tmp_path: Path, redis_server: RedisServer, caplog: pytest.LogCaptureFixture, outage: str) -> None:
    """No request all along: the sweep for stuck runs, which every `gateway serve` runs (each minute at most), asks
    Redis one PING (before: nothing was said of the outage until a request came)."""
    safety = Safeguards(open_store(str(tmp_path / "gateway.db"), redis=redis_server.url, timeout=1), Manifest(),
                        redact_log_records=False)
    where = f"Redis at redis://127.0.0.1:{redis_server.port}/0"
    try:
        with caplog.at_level(logging.INFO):
            assert await safety.sweep_once() is False
            if outage == "halted":
                redis_server.halt()
            else:
                redis_server.pause()
            assert await safety.sweep_once() is False  # the stuck runs are in SQLite: looked for
            assert await safety.sweep_once() is False
            if outage == "halted":
                redis_server.start()
            else:
                redis_server.resume()
            await safety.sweep_once()
            await safety.sweep_once()
    finally:
        await safety.aclose()
    lines = _lines(caplog, "gateway.store")
    assert len(lines) == 2, lines
    assert lines[0].startswith(f"{where} is unreachable: ") and lines[1] == f"{where} answers again", lines


async def test_a_paused_postgresql_is_said_gone_at_the_first_question_it_does_not_answer_and_back_once_it_does(
        caplog: pytest.LogCaptureFixture) -> None:
    database = PostgresServer().start()
    try:
        store = PostgresStore(database.url(), timeout=1)
        where = store.part
        with caplog.at_level(logging.INFO):
            await store.ping()
            database.pause()
            with pytest.raises(StoreUnavailable, match="did not answer within 1 s"):
                await store.ping()
            # Before: nothing (its connection was open), until a new connection's attempt timed out.
            assert _outage_lines(caplog) == [
                f"{where} is unreachable: no answer within 1 s (said once: a line will say when it is back)"]
            for _ in range(2):
                with pytest.raises(StoreUnavailable):
                    await store.ping()
            database.resume()
            for _ in range(3):
                await store.ping()
        await store.aclose()
    finally:
        database.resume()
        database.halt()
    # Before: no line said it was back when it answered on a connection the pool kept.
    lines = _outage_lines(caplog)
    assert len(lines) == 2 and lines[1] == f"{where} answers again", lines
