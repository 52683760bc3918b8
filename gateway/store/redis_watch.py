"""The Redis client's connections, logging once when Redis stops answering this process and once when it is back
(`gateway.store.server_watch`).

redis-py opens every connection through `connect()` (a pooled one when it is taken and found closed, a command
resent after its connection dropped), and its pool takes the class of its connections as `connection_class`:
the class here is redis-py's own for the URL's scheme, telling a `ServerWatch` how each attempt went.

A Redis that accepts and never answers (stopped with SIGSTOP, or behind a proxy whose server is gone) refuses no
connection: a command on an open one times out. Such a failure, told to its caller as a 503, is Redis gone too
(`went_away`, called where a round trip's failure is turned into the caller's error): redis-py drops a connection
whose answer timed out, so the next one it opens says when Redis answers again. Nothing is added to a command that
succeeds.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import redis
from redis.asyncio.connection import Connection, SSLConnection, UnixDomainSocketConnection

from .postgres_schema import safe_url
from .server_watch import ServerWatch

_BY_SCHEME: dict[str, type[Any]] = {"rediss": SSLConnection, "unix": UnixDomainSocketConnection}
"""redis-py's connection class for a URL's scheme (`redis://`: `Connection`), as its `from_url` chooses it."""


def watched_connections(url: str) -> type[Any]:
    """The connection class for Redis at `url` (`from_url(url, connection_class=...)`), logging its outages."""
    watch = ServerWatch(f"Redis at {safe_url(url)}")
    base = _BY_SCHEME.get(urlsplit(url).scheme, Connection)

    class Watched(base):  # type: ignore[valid-type,misc]  # redis-py's class for the scheme, chosen above
        server_watch = watch

        async def connect(self) -> None:
            try:
                await super().connect()
            except (redis.RedisError, OSError) as exc:
                watch.failed(str(exc) or type(exc).__name__)
                raise
            watch.answered()

    return Watched


def went_away(client: Any, exc: BaseException) -> None:
    """Say once that Redis is gone when `client` (an asyncio `redis.Redis` on `watched_connections`) failed a round
    trip with `exc` for want of an answer or a connection (a refused script, a wrong type, are Redis answering)."""
    if isinstance(exc, redis.TimeoutError | redis.ConnectionError | OSError):
        watch = getattr(client.connection_pool.connection_class, "server_watch", None)
        if isinstance(watch, ServerWatch):
            watch.failed(str(exc) or type(exc).__name__)
