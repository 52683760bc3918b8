"""What the log says of a Redis or PostgreSQL outage: one line when the server goes, one when it is back, whether
requests come or not, whether it refuses connections (stopped) or takes them and never answers (SIGSTOP: said slow
first), and from the renewal of the places held in Redis as from the client's connections; of a busy server (a long
script, DEBUG SLEEP, a lock), one line that it was slow; of places lost with Redis's data, one line. Real parts:
Debian's redis-server and PostgreSQL on 127.0.0.1, halted and started again on their port, or paused (SIGSTOP) and
resumed (SIGCONT)."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from shared_servers import PostgresServer, RedisServer

from gateway.config.model import Manifest
from gateway.errors import StoreUnavailable
from gateway.safety.guards import Safeguards
from gateway.store import Bucket, open_store
from gateway.store.postgres import PostgresStore
from gateway.store.redis_counters import RedisCounters
from gateway.store.redis_watch import watch_of
from gateway.store.server_watch import GONE_AFTER

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


async def test_a_paused_redis_is_said_slow_at_the_first_request_it_does_not_answer_and_gone_once_it_answers_nothing(
        redis_server: RedisServer, caplog: pytest.LogCaptureFixture) -> None:
    counters = RedisCounters(redis_server.url, timeout=1)
    watch = watch_of(counters.client)
    assert watch is not None
    where = f"Redis at redis://127.0.0.1:{redis_server.port}/0"
    try:
        with caplog.at_level(logging.INFO):
            assert await counters.take_tokens([BUCKET]) == 0.0
            redis_server.pause()  # connections stay open, new ones are accepted: nothing answers
            with pytest.raises(StoreUnavailable, match="did not answer within 1 s"):
                await counters.take_tokens([BUCKET])
            # At once, as mend59 made it (before him nothing until a new connection's handshake timed out); but as
            # slow, not gone: a busy Redis looks the same until it answers.
            assert _lines(caplog, "gateway.store") == [_slow_line(where, redis_server.port)]
            for _ in range(2 * GONE_AFTER):  # gone once nothing has answered for GONE_AFTER waits
                with pytest.raises(StoreUnavailable, match="did not answer within 1 s"):
                    await counters.take_tokens([BUCKET])
                if watch.down is not None:
                    break
            redis_server.resume()
            assert await counters.take_tokens([BUCKET]) == 0.0
            assert await counters.take_tokens([BUCKET]) == 0.0
    finally:
        await counters.aclose()
    lines = _lines(caplog, "gateway.store")
    assert len(lines) == 3 and lines[1].startswith(f"{where} is unreachable: no answer for "), lines
    assert lines[2] == f"{where} answers again", lines


def _slow_line(where: str, port: int) -> str:
    return (f"{where} did not answer a request within 1 s (gateway.shared_state_timeout): Timeout reading from "
            f"127.0.0.1:{port} (slow, not gone: a busy server answers late; said once: should it answer nothing for "
            "3 s, a line will say it is unreachable)")


_SLOW_SCRIPT = """
local t = redis.call('TIME')
local start = tonumber(t[1]) + tonumber(t[2]) / 1000000
local now = start
while now - start < tonumber(ARGV[1]) do
  t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
return 1
"""


@pytest.mark.parametrize("busy", ["script", "DEBUG SLEEP"])
async def test_a_busy_redis_is_said_slow_once_not_gone_and_back(
        caplog: pytest.LogCaptureFixture, busy: str) -> None:
    """A script (or `DEBUG SLEEP`) holding Redis past the request's wait: the request is told 503, and the log says
    Redis was slow, once, with the request's error (before: "unreachable", then "answers again", as for an outage)."""
    server = RedisServer("--enable-debug-command", "local").start()
    counters = RedisCounters(server.url, timeout=1)
    where = f"Redis at redis://127.0.0.1:{server.port}/0"
    # 4 s: under the 5 s after which Redis answers BUSY to other clients during a script (busy-reply-threshold)
    command = (["EVAL", _SLOW_SCRIPT, "0", "4"] if busy == "script" else ["DEBUG", "SLEEP", "4"])
    keeper = counters.keeper
    try:
        with caplog.at_level(logging.INFO):
            with redis.Redis.from_url(server.url) as direct:  # a place taken, as a share's script takes it
                direct.zadd("gateway:test:places", {"place-1": time.time() + 30})
            keeper.hold("gateway:test:places", "place-1")
            assert await counters.take_tokens([BUCKET]) == 0.0
            with socket.create_connection(("127.0.0.1", server.port), timeout=10) as busy_client:
                busy_client.sendall(_resp(command))
                _wait_until_busy(server.port)
                with pytest.raises(StoreUnavailable, match="did not answer within 1 s"):
                    await counters.take_tokens([BUCKET])
                await keeper.renew()  # timed out too: late, not lost (before: "not renewed", then "renewed again")
                assert busy_client.recv(64).startswith(b"+OK" if busy != "script" else b":1")  # done: it answers
            assert await counters.take_tokens([BUCKET]) == 0.0
            await keeper.renew()
            assert await counters.take_tokens([BUCKET]) == 0.0
    finally:
        keeper.drop("place-1")
        await counters.aclose()
        server.stop()
    assert _lines(caplog, "gateway.store") == [_slow_line(where, server.port)]
    assert _lines(caplog, "gateway.safety") == []


def _resp(command: list[str]) -> bytes:
    """`command` in Redis's protocol (sent on a socket of its own: the test waits for nothing of it until it is
    known to be running)."""
    parts = [f"*{len(command)}\r\n".encode()]
    for arg in command:
        data = arg.encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(parts)


def _wait_until_busy(port: int) -> None:
    """Until a PING goes unanswered for a moment: the slow command sent on the other socket is running."""
    with redis.Redis(port=port, socket_timeout=0.2, retry=Retry(NoBackoff(), 0)) as probe:  # redis-py retries else
        for _ in range(100):
            try:
                probe.ping()
            except redis.TimeoutError:
                return
    raise AssertionError("the slow command never held Redis")


@pytest.mark.parametrize("outage", ["halted", "paused"])
async def test_the_renewal_of_places_held_in_redis_says_an_outage_once_and_its_end_once(
        redis_server: RedisServer, caplog: pytest.LogCaptureFixture, outage: str) -> None:
    counters = RedisCounters(redis_server.url, timeout=1)
    keeper = counters.keeper
    watch = watch_of(counters.client)
    assert watch is not None
    renewals = 4
    try:
        with caplog.at_level(logging.INFO):
            with redis.Redis.from_url(redis_server.url) as direct:  # a place taken, as a share's script takes it
                direct.zadd("gateway:test:places", {"place-1": time.time() + 30})
            keeper.hold("gateway:test:places", "place-1")  # its task renews every 10 s: not in this test
            await keeper.renew()
            redis_server.halt() if outage == "halted" else redis_server.pause()
            for _ in range(4):  # four periods of the outage (before: a warning each)
                await keeper.renew()
            while outage == "paused" and watch.down is None and renewals < 4 + 2 * GONE_AFTER:
                await keeper.renew()  # slow first, gone once nothing has answered for GONE_AFTER waits
                renewals += 1
            redis_server.start() if outage == "halted" else redis_server.resume()  # halted: the same port
            await keeper.renew()
            await keeper.renew()
    finally:
        keeper.drop("place-1")
        await counters.aclose()
    said = _lines(caplog, "gateway.safety")
    if outage == "halted":  # a Redis started afresh (nothing saved) has lost the place: said, once
        assert said.pop().startswith(f"1 place held in Redis at redis://127.0.0.1:{redis_server.port}/0 by this "
                                     "instance (host "), said
    assert len(said) == 2, said
    assert said[0].startswith("1 place held in Redis (clients' shares, apis' slots, waiters' tickets) not "
                                  "renewed") and said[0].endswith(
        "(said once: a line will say when a renewal reaches it again)"), said
    assert said[1] == (f"the places held in Redis at redis://127.0.0.1:{redis_server.port}/0 are renewed again "
                           "(1 place now)")
    watched = _lines(caplog, "gateway.store")
    where = f"Redis at redis://127.0.0.1:{redis_server.port}/0"
    if outage == "paused":  # slow first: a busy Redis looks the same until it answers
        assert watched.pop(0) == _slow_line(where, redis_server.port), watched
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
            assert await safety.sweep_once() is None
            if outage == "halted":
                redis_server.halt()
            else:
                redis_server.pause()
            assert await safety.sweep_once() is None  # the stuck runs are in SQLite: looked for
            assert any(" is unreachable: " in line for line in _lines(caplog, "gateway.store"))  # in that sweep
            assert await safety.sweep_once() is None
            if outage == "halted":
                redis_server.start()
            else:
                redis_server.resume()
            await safety.sweep_once()
            await safety.sweep_once()
    finally:
        await safety.aclose()
    lines = _lines(caplog, "gateway.store")
    if outage == "paused":  # said slow, then gone within the first sweep of the outage (it PINGs again meanwhile)
        assert lines.pop(0) == _slow_line(where, redis_server.port), lines
    assert len(lines) == 2, lines
    assert lines[0].startswith(f"{where} is unreachable: ") and lines[1] == f"{where} answers again", lines


async def test_places_lost_with_redis_s_data_are_said_in_one_line(
        redis_server: RedisServer, caplog: pytest.LogCaptureFixture) -> None:
    """A Redis restarted without its data (here flushed, as a restart without persistence leaves it) loses every
    place at once: one line says how many, in which keys, and which instance found them gone (before: one a place)."""
    counters = RedisCounters(redis_server.url, timeout=1)
    keeper = counters.keeper
    places = {"gateway:{shares}:test:ci-bot": ["share-1", "share-2"],
              "gateway:{guards}:slots:test": ["slot-1", "slot-2", "slot-3"]}
    try:
        with caplog.at_level(logging.INFO):
            with redis.Redis.from_url(redis_server.url) as direct:  # places taken, as the scripts take them
                for key, members in places.items():
                    direct.zadd(key, {member: time.time() + 30 for member in members})
            for key, members in places.items():
                for member in members:
                    keeper.hold(key, member)
            await keeper.renew()
            redis_server.flush()
            await keeper.renew()
            await keeper.renew()  # nothing held any more: nothing more said
    finally:
        for members in places.values():
            for member in members:
                keeper.drop(member)
        await counters.aclose()
    said = _lines(caplog, "gateway.safety")
    assert said == [
        f"5 places held in Redis at redis://127.0.0.1:{redis_server.port}/0 by this instance (host "
        f"{socket.gethostname()}, pid {os.getpid()}) ended with their lease while their work went on (Redis lost "
        "them: restarted without its data, or flushed; or it was out of reach for longer than 30 s, or this process "
        "stalled): that work is no longer counted (gateway:{guards}:slots:test: 3, gateway:{shares}:test:ci-bot: 2)"]
    assert _lines(caplog, "gateway.store") == []  # Redis answered all along: no outage


async def test_the_sweep_s_ping_of_a_hung_redis_keeps_no_request_waiting(
        tmp_path: Path, redis_server: RedisServer) -> None:
    """The sweep PINGs a hung Redis for a few of its waits (`RedisCounters.check`) in its own task, on a connection of
    its own (the client's pool is unbounded): a request of the store beside it is answered meanwhile."""
    safety = Safeguards(open_store(str(tmp_path / "gateway.db"), redis=redis_server.url, timeout=1), Manifest(),
                        redact_log_records=False)
    try:
        await safety.sweep_once()
        redis_server.pause()
        watch = watch_of(safety.store.counters.client)
        assert watch is not None
        sweep = asyncio.ensure_future(safety.sweep_once())
        for _ in range(200):  # until its first PING went unanswered: it PINGs again, for up to GONE_AFTER waits
            if watch.slow_since is not None:
                break
            await asyncio.sleep(0.05)
        await safety.store.inner.ping()  # SQLite, through the same store: answered while the sweep waits
        assert await safety.store.list_audit(limit=1) == []
        assert not sweep.done()
        redis_server.resume()
        await sweep
    finally:
        redis_server.resume()
        await safety.aclose()


async def test_a_paused_postgresql_is_said_slow_at_the_first_question_it_does_not_answer_gone_then_back(
        caplog: pytest.LogCaptureFixture) -> None:
    database = PostgresServer().start()
    try:
        store = PostgresStore(database.url(), timeout=1)
        where = store.part
        watch = store.watch
        assert watch is not None
        with caplog.at_level(logging.INFO):
            await store.ping()
            database.pause()
            with pytest.raises(StoreUnavailable, match="did not answer within 1 s"):
                await store.ping()
            # Said at once (before mend59: nothing, its connection was open), as slow: a busy server looks the same.
            assert _outage_lines(caplog) == [_slow_question(where)]
            for _ in range(2 * GONE_AFTER):  # gone once a connection cannot be opened, or nothing answers for long
                with pytest.raises(StoreUnavailable):
                    await store.ping()
                if watch.down is not None:
                    break
            database.resume()
            for _ in range(3):
                await store.ping()
        await store.aclose()
    finally:
        database.resume()
        database.halt()
    # Before mend59: no line said it was back when it answered on a connection the pool kept.
    lines = _outage_lines(caplog)
    assert len(lines) == 3 and lines[1].startswith(f"{where} is unreachable: "), lines
    assert lines[2] == f"{where} answers again", lines


def _slow_question(where: str) -> str:
    return (f"{where} did not answer a request within 1 s (gateway.shared_state_timeout): the question was cancelled "
            "(slow, not gone: a busy server answers late; said once: should it answer nothing for 3 s, a line will "
            "say it is unreachable)")


async def test_a_postgresql_question_waiting_on_a_lock_is_said_slow_once_not_gone_and_back(
        postgres_server: PostgresServer, caplog: pytest.LogCaptureFixture) -> None:
    """A question held past the wait by another session's lock: told 503, and said slow once (before: the store
    "is unreachable", then "answers again", as for an outage, while every other question was answered)."""
    url = postgres_server.create_database()
    store = PostgresStore(url, timeout=1)
    where = store.part
    try:
        await store.ping()
        with caplog.at_level(logging.INFO):
            with psycopg.connect(url) as other:  # a transaction holding the audit table
                other.execute("LOCK TABLE audit IN ACCESS EXCLUSIVE MODE")
                with pytest.raises(StoreUnavailable, match="did not answer within 1 s"):
                    await store.list_audit(limit=1)
                await store.ping()  # the server answers all along
                other.rollback()
            assert await store.list_audit(limit=1) == []
    finally:
        await store.aclose()
    assert _outage_lines(caplog) == [_slow_question(where)]


async def test_an_idle_instance_says_a_hung_postgresql_gone_within_one_sweep(
        caplog: pytest.LogCaptureFixture) -> None:
    """No request: the sweep's question for stuck runs goes unanswered, and the sweep asks again until the store's
    watch tells slow from gone (`Store.check`): gone in that sweep, not slow again a minute later; the sweep adds no
    line of its own to the store's two (gone, back)."""
    database = PostgresServer().start()
    try:
        safety = Safeguards(open_store(database.url(), timeout=1), Manifest(), redact_log_records=False)
        with caplog.at_level(logging.INFO):
            assert await safety.sweep_once() is None
            database.pause()
            assert await safety.sweep_once() == "down"  # the stuck runs could not be looked for
            assert any(" is unreachable: " in line for line in _outage_lines(caplog))  # in that sweep
            database.resume()
            assert await safety.sweep_once("down") is None
        await safety.aclose()
    finally:
        database.resume()
        database.halt()
    # The store's lines only, and no slow line first: the sweep's question says its slowness itself (as slow, when the
    # store answers its `check`; here it does not, and is said gone in the same sweep).
    lines = [line for line in _lines(caplog, "gateway.store") + _lines(caplog, "gateway.safety")
             if "schema migration" not in line]
    assert len(lines) == 2 and " is unreachable: " in lines[0], lines
    assert lines[1].endswith(" answers again"), lines


@pytest.mark.parametrize("with_redis", [False, True])
async def test_a_sweep_whose_question_waits_on_a_lock_says_the_store_slow_once_a_spell_not_down(
        postgres_server: PostgresServer, caplog: pytest.LogCaptureFixture, request: pytest.FixtureRequest,
        with_redis: bool) -> None:
    """The stuck runs' question held past the wait by another session's lock on the runs table, sweep after sweep,
    while the store answers every other question: one line says the sweep could not look because the store is slow
    (not down) and once a line that it looks again (before: the store's slow line and the sweep's "could not look"
    at the first sweep, and the store's slow line again at every later one). A store that is down is said so by the
    sweep too (the test of a hung PostgreSQL above). With `gateway.redis` as without (the store's buckets counted in
    Redis: the sweep reads the PostgreSQL store's watch through it)."""
    url = postgres_server.create_database()
    redis_url = request.getfixturevalue("redis_server").url if with_redis else None
    safety = Safeguards(open_store(url, timeout=1, redis=redis_url), Manifest(), redact_log_records=False)
    try:
        assert await safety.sweep_once() is None
        with caplog.at_level(logging.INFO):
            with psycopg.connect(url) as other:  # a transaction holding the runs table
                other.execute("LOCK TABLE runs IN ACCESS EXCLUSIVE MODE")
                failing = None
                for _ in range(3):
                    failing = await safety.sweep_once(failing)
                    assert failing == "slow"
                other.rollback()
            assert await safety.sweep_once(failing) is None
    finally:
        await safety.aclose()
    lines = [record.getMessage() for record in caplog.records
             if record.name in ("gateway.store", "gateway.safety") and "schema migration" not in record.getMessage()]
    assert len(lines) == 2, lines
    assert lines[0].startswith("could not look for stuck runs: the store answers, but not this question within 1 s "
                               "(slow, not down"), lines
    assert lines[1] == "looks for stuck runs again", lines
