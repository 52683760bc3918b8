"""A shared server that comes back after an outage: the first request after it answers again is served (not after
the pool's backoff has grown through the outage), and the log says once when it went away and once when it is back."""

from __future__ import annotations

import asyncio
import logging

import pytest
from shared_servers import PostgresServer, RedisServer

from gateway.errors import StoreUnavailable
from gateway.store import Bucket
from gateway.store.postgres import PostgresStore
from gateway.store.redis_counters import RedisCounters

pytestmark = pytest.mark.anyio

_OUTAGE_SECONDS = 9.0
"""Long enough that psycopg_pool's default backoff (1, 2, 4, 8 s: its attempts at 0, 1, 3, 7, 15 s) has its next
attempt several seconds after the server is back: longer than a request waits for a connection (the store's
timeout)."""


@pytest.mark.slow
async def test_the_first_request_after_postgresql_is_back_is_served(caplog: pytest.LogCaptureFixture) -> None:
    # user47's trial: the instance that had traffic during the outage took 5.3 s to serve again, the idle one 0.7 s.
    from gateway.server.loglines import DRIVER_LINES, DRIVER_LOGGER, quiet_drivers

    quiet_drivers()  # as the commands' logging configuration does (a store leaves logging alone)
    database = PostgresServer().start()
    try:
        store = PostgresStore(database.url(), timeout=2)
        await store.ping()
        database.halt()
        refused = 0
        deadline = asyncio.get_running_loop().time() + _OUTAGE_SECONDS
        with caplog.at_level(logging.INFO):
            while asyncio.get_running_loop().time() < deadline:  # traffic all through the outage
                try:
                    await store.ping()
                except StoreUnavailable:
                    refused += 1
                await asyncio.sleep(0.05)
            await asyncio.to_thread(database.restart)  # returns once the server accepts a connection
            served = []
            for _ in range(3):
                try:
                    await store.ping()  # waits for a connection at most the store's own timeout (2 s)
                    served.append(True)
                except StoreUnavailable:
                    served.append(False)
        await store.aclose()
    finally:
        database.halt()
        logging.getLogger(DRIVER_LOGGER).removeFilter(DRIVER_LINES)
    assert refused > 0
    assert served == [True, True, True], served
    lines = [r.getMessage() for r in caplog.records if r.name == "gateway.store"]
    down = [line for line in lines if "is unreachable" in line]
    back = [line for line in lines if "answers again" in line]
    assert len(down) == 1 and "Connection refused" in down[0], lines
    assert len(back) == 1, lines
    assert lines.index(down[0]) < lines.index(back[0])
    pool_lines = [r.getMessage() for r in caplog.records if r.name.startswith("psycopg")
                  and r.levelno >= logging.WARNING]
    assert any("Connection refused" in line for line in pool_lines), pool_lines
    assert all("\n" not in line for line in pool_lines), pool_lines
    assert len(pool_lines) == len(set(pool_lines)), pool_lines  # each of the driver's warnings once per outage


async def test_redis_going_and_coming_back_is_one_line_each(caplog: pytest.LogCaptureFixture) -> None:
    server = RedisServer().start()
    bucket = Bucket("k", 100.0, 100.0)
    try:
        counters = RedisCounters(server.url, timeout=1)
        with caplog.at_level(logging.INFO):
            assert await counters.take_tokens([bucket]) == 0.0
            server.halt()
            for _ in range(5):
                with pytest.raises(StoreUnavailable, match="unreachable"):
                    await counters.take_tokens([bucket])
            server.start()  # the same port
            assert await counters.take_tokens([bucket]) == 0.0
            assert await counters.take_tokens([bucket]) == 0.0
        await counters.aclose()
    finally:
        server.stop()
    lines = [r.getMessage() for r in caplog.records if r.name == "gateway.store"]
    where = f"Redis at redis://127.0.0.1:{server.port}/0"
    assert lines == [f"{where} is unreachable: {lines[0].split(': ', 1)[1]}", f"{where} answers again"], lines
    assert "Connection refused" in lines[0] or "Error 111" in lines[0], lines
