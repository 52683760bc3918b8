"""The Redis client's connections, logging once when Redis stops answering this process and once when it is back
(`gateway.store.server_watch`).

redis-py opens every connection through `connect()` (a pooled one when it is taken and found closed, a command
resent after its connection dropped), and its pool takes the class of its connections as `connection_class`:
the class here is redis-py's own for the URL's scheme, telling a `ServerWatch` how each attempt went.

A Redis that accepts and never answers (stopped with SIGSTOP, or behind a proxy whose server is gone) refuses no
connection: a command on an open one times out, and so does a new connection's handshake. So does a busy Redis's (a
long script, `DEBUG SLEEP`: one thread serves every client), which answers late, not never: a timeout is told to the
watch as a late answer (`ServerWatch.late`: one line as slow, and gone only once Redis has answered nothing for a few
waits), a refused or dropped connection as Redis gone (`went_away`, called where a round trip's failure is turned
into the caller's error, and the connections' own `connect`). redis-py drops a connection whose answer timed out, so
the next one it opens says whether Redis answers (ending a slow spell without a line, an outage with one). Nothing is
added to a command that succeeds.
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


def watched_connections(url: str, wait: float | None = None) -> type[Any]:
    """The connection class for Redis at `url` (`from_url(url, connection_class=...)`), logging its outages; `wait`:
    the client's `socket_timeout` (`gateway.shared_state_timeout`)."""
    watch = ServerWatch(f"Redis at {safe_url(url)}", wait)
    base = _BY_SCHEME.get(urlsplit(url).scheme, Connection)

    class Watched(base):  # type: ignore[valid-type,misc]  # redis-py's class for the scheme, chosen above
        server_watch = watch

        async def connect(self) -> None:
            try:
                await super().connect()
            except (redis.RedisError, OSError) as exc:
                tell(watch, exc)
                raise
            watch.answered()

    return Watched


def went_away(client: Any, exc: BaseException) -> None:
    """Tell the watch of `client` (an asyncio `redis.Redis` on `watched_connections`) that a round trip failed with
    `exc` for want of an answer (late) or of a connection (gone); a refused script, a wrong type, are Redis
    answering."""
    if isinstance(exc, redis.TimeoutError | redis.ConnectionError | OSError):
        watch = watch_of(client)
        if watch is not None:
            tell(watch, exc)


def tell(watch: ServerWatch, exc: BaseException) -> None:
    """`exc` (a round trip's or a connection's failure) told to `watch`: a timeout as late, the rest as gone."""
    reason = str(exc) or type(exc).__name__
    if isinstance(exc, redis.TimeoutError | TimeoutError):  # TimeoutError: asyncio's and the socket's
        watch.late(reason)
    else:
        watch.failed(reason)


def watch_of(client: Any) -> ServerWatch | None:
    """The watch of `client`'s connections (None: not made by `watched_connections`)."""
    watch = getattr(client.connection_pool.connection_class, "server_watch", None)
    return watch if isinstance(watch, ServerWatch) else None
