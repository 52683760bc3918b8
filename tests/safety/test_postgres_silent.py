"""A PostgreSQL that stops answering while the pool is open (a hung server, or a balancer whose server is gone):
a question that waits for a new connection is told in the setting's seconds that the store did not answer, not that
it refused nor that it is busy (`gateway.store.postgres_pool.no_connection`). Real parts: the session's PostgreSQL
(Debian's) behind a loopback TCP proxy that, once silenced, accepts connections and never answers them."""

from __future__ import annotations

import time
from typing import Any

import pytest
from psycopg_pool import PoolTimeout
from quiet_proxy import QuietProxy
from shared_servers import PostgresServer

from gateway.store.postgres_pool import no_connection, open_pool

pytestmark = pytest.mark.anyio

TIMEOUT = 0.5
"""Under the pool's connect timeout (`open_pool`: at least 1 s): the attempt to open a connection is still waiting
when the question's wait ends, as against a server that never answers."""


async def _configure(conn: Any) -> None:
    return None


async def test_a_server_gone_silent_is_told_as_not_answering_in_the_set_time(postgres_server: PostgresServer) -> None:
    url = postgres_server.create_database()
    proxy = QuietProxy(postgres_server.port)
    with proxy.running():
        through = url.replace(f":{postgres_server.port}/", f":{proxy.port}/")
        pool, attempts = open_pool(through, min_size=1, max_size=4, timeout=TIMEOUT, configure=_configure)
        await pool.open(wait=True, timeout=30)  # one connection, made while the server answered
        try:
            async with pool.connection() as busy:  # held: the next question needs a new one
                await busy.execute("SELECT 1")
                proxy.silence()
                while proxy.mode != "silent":  # the proxy's loop takes the change in its own time
                    time.sleep(0.01)
                with pytest.raises(PoolTimeout) as waited:
                    async with pool.connection():
                        pass
                told = str(no_connection(through, waited.value, pool, attempts, TIMEOUT))
        finally:
            await pool.close(timeout=0)
    assert proxy.unheard_connections >= 1  # the new connection was taken and never answered
    assert told == (f"the store {through} did not answer within 0.5 s: no connection could be opened in time"), told
