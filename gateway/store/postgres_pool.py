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
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Self

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from ..errors import StoreUnavailable
from .postgres_schema import safe_url


class ConnectAttempts:
    """How the pool's last attempt to open a connection went."""

    def __init__(self) -> None:
        self.refused: str | None = None
        """The driver's error of the last attempt (its first line); None when it connected, or none was made."""


def remembering(attempts: ConnectAttempts) -> type[psycopg.AsyncConnection[Any]]:
    """The pool's connection class: psycopg's, recording in `attempts` how each attempt to connect went."""

    class Remembering(psycopg.AsyncConnection[Any]):
        @classmethod
        async def connect(cls, conninfo: str = "", **kwargs: Any) -> Self:
            try:
                conn = await super().connect(conninfo, **kwargs)
            except psycopg.OperationalError as exc:
                attempts.refused = first_line(exc)
                raise
            attempts.refused = None
            return conn

    return Remembering


def open_pool(url: str, *, min_size: int, max_size: int, timeout: float,
              configure: Callable[[psycopg.AsyncConnection[Any]], Awaitable[None]],
              ) -> tuple[AsyncConnectionPool[Any], ConnectAttempts]:
    """The store's pool (opened on first use) and the record of its attempts to connect."""
    attempts = ConnectAttempts()
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        url, min_size=min_size, max_size=max_size, timeout=timeout, open=False,
        connection_class=remembering(attempts),
        kwargs={"autocommit": True, "connect_timeout": max(1, int(timeout))},
        # A connection the server dropped (a restart, a failover) is found out before it is handed over.
        check=AsyncConnectionPool.check_connection,
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
