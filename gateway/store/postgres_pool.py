"""The PostgreSQL store's connection pool (`psycopg_pool`), and what a question that got no connection is told.

The pool's own timeout ("couldn't get a connection after 2.00 sec") says the same of a server that refuses
connections (stopped, or at its `max_connections`) as of one whose connections are all busy with other questions.
The store used to ask for one connection outside the pool to tell the two apart, on every such timeout: under load
that opened connections exactly when the database was short of them. Nothing is asked of the server here. The pool
opens every connection itself, in its background workers, and its connections are of a class that remembers how the
last attempt went (`connection_class`, as psycopg's documentation shows for its own subclass): a refusal is said as
the driver said it ("Connection refused", "too many clients already", a password refused). When the last attempt
succeeded, the pool's stats (`get_stats`: `pool_size`, `pool_available`, `requests_waiting`) say whether its every
connection was in use.

After an outage the pool must serve the first request that comes once the server answers again. psycopg_pool retries
a connection it failed to open with a backoff that doubles (1, 2, 4, 8... s) for `reconnect_timeout` (300 s by
default): an instance whose requests kept the pool trying through a 9 s outage served its first request 4 s after
the server was back, and told the requests meanwhile 503 (bench/store_recovery.py; user47: 5.3 s, where an idle
instance, which had nothing to retry, took 0.7 s). Its `reconnect_timeout` here is half the store's timeout: a
retry gives up within it, and the next request starts a new attempt at once (the pool grows on demand), so a request
that comes after the server is back waits at most half its own timeout for the pending attempt, never for a backoff
grown through the outage.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Self

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from ..errors import StoreUnavailable
from .postgres_schema import safe_url
from .server_watch import ServerWatch


class ConnectAttempts:
    """How the pool's last attempt to open a connection went."""

    def __init__(self, watch: ServerWatch) -> None:
        self.refused: str | None = None
        """The driver's error of the last attempt (its first line); None when it connected, or none was made."""
        self.watch = watch
        """Logs the first refusal and the next connection after it."""


def remembering(attempts: ConnectAttempts) -> type[psycopg.AsyncConnection[Any]]:
    """The pool's connection class: psycopg's, recording in `attempts` how each attempt to connect went."""

    class Remembering(psycopg.AsyncConnection[Any]):
        @classmethod
        async def connect(cls, conninfo: str = "", **kwargs: Any) -> Self:
            try:
                conn = await super().connect(conninfo, **kwargs)
            except psycopg.OperationalError as exc:
                attempts.refused = first_line(exc)
                attempts.watch.failed(attempts.refused)
                raise
            attempts.refused = None
            attempts.watch.answered()
            return conn

    return Remembering


def open_pool(url: str, *, min_size: int, max_size: int, timeout: float,
              configure: Callable[[psycopg.AsyncConnection[Any]], Awaitable[None]],
              reconnect_timeout: float | None = None) -> tuple[AsyncConnectionPool[Any], ConnectAttempts]:
    """The store's pool (opened on first use) and the record of its attempts to connect; `reconnect_timeout`:
    psycopg_pool's, half of `timeout` when None (the module's docstring; bench/store_recovery.py sets others)."""
    attempts = ConnectAttempts(ServerWatch(f"the store {safe_url(url)}", timeout))
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        url, min_size=min_size, max_size=max_size, timeout=timeout, open=False,
        connection_class=remembering(attempts),
        kwargs={"autocommit": True, "connect_timeout": max(1, int(timeout))},
        # A connection the server dropped (a restart, a failover) is found out before it is handed over.
        check=AsyncConnectionPool.check_connection,
        # A failed attempt is retried for this long, then the next request starts afresh (module docstring).
        reconnect_timeout=timeout / 2 if reconnect_timeout is None else reconnect_timeout,
        configure=configure,
    )
    return pool, attempts


def no_connection(url: str, exc: Exception, pool: AsyncConnectionPool[Any], attempts: ConnectAttempts,
                  timeout: float) -> StoreUnavailable:
    """The 503 for a question that got no connection from `pool` within `timeout` seconds (`exc`: the pool's
    timeout), told from what the pool already knows: no connection is opened for it; or that lost its connection
    (`exc`: the driver's error, said as it is)."""
    where = f"the store {safe_url(url)}"
    if not isinstance(exc, PoolTimeout):
        return StoreUnavailable(f"{where} is unreachable: {first_line(exc)}")
    if attempts.refused is not None:
        return StoreUnavailable(f"{where} is unreachable: {attempts.refused}")
    stats = pool.get_stats()  # keys whose value is 0 may be left out (psycopg_pool's documentation)
    size, idle = stats.get("pool_size", 0), stats.get("pool_available", 0)
    if size >= stats.get("pool_max", size) and idle == 0:
        waiting = stats.get("requests_waiting", 0)
        return StoreUnavailable(
            f"{where} is busy: all {size} of this process's connections to it were in use for {timeout:g} s"
            f" ({waiting} more questions waiting): its answers are slow for the load")
    # Room for another connection, and no attempt refused: the one being made has had no answer yet (a hung server
    # accepts a connection and never answers it), as a question to a hung server is told.
    return StoreUnavailable(f"{where} did not answer within {timeout:g} s: no connection could be opened in time")


def first_line(exc: Exception) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
