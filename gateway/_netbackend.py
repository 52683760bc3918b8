"""httpcore's network backend with a cheap idle-connection check, for the executor's pooled clients.

Before every request httpcore's pool asks each idle connection whether the server closed it
(`get_extra_info("is_readable")`). Its AnyIO stream answers by building anyio's whole dict of socket
attributes (a `getpeername()` system call among them) just to fetch the raw socket, for every pooled
connection on every request: with a few dozen keep-alive connections that was an eighth of a proxied
call's CPU time. Here the raw socket is looked up once per connection; reads and writes go straight to
the wrapped stream.
"""

from __future__ import annotations

from typing import Any

import httpcore
from httpcore._backends.auto import AutoBackend
from httpcore._utils import is_socket_readable


class _Stream(httpcore.AsyncNetworkStream):
    def __init__(self, inner: httpcore.AsyncNetworkStream) -> None:
        self._inner = inner
        self._socket = inner.get_extra_info("socket")
        # Bound methods of the wrapped stream: no extra frame per read and write.
        self.read = inner.read  # type: ignore[method-assign]
        self.write = inner.write  # type: ignore[method-assign]

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                        timeout: float | None = None) -> httpcore.AsyncNetworkStream:
        return _Stream(await self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable" and self._socket is not None:
            return is_socket_readable(self._socket)
        return self._inner.get_extra_info(info)


class FastBackend(httpcore.AsyncNetworkBackend):
    """httpcore's default backend (AnyIO), its streams wrapped in `_Stream`."""

    def __init__(self) -> None:
        self._inner = AutoBackend()

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                          socket_options: Any = None) -> httpcore.AsyncNetworkStream:
        return _Stream(await self._inner.connect_tcp(host, port, timeout, local_address, socket_options))

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Any = None) -> httpcore.AsyncNetworkStream:
        return _Stream(await self._inner.connect_unix_socket(path, timeout, socket_options))

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def fast_transport(**options: Any) -> Any:
    """An `httpx.AsyncHTTPTransport(**options)` whose pool uses `FastBackend` (unchanged if httpx's layout differs)."""
    import httpx

    transport = httpx.AsyncHTTPTransport(**options)
    pool = getattr(transport, "_pool", None)
    if isinstance(pool, httpcore.AsyncConnectionPool) and hasattr(pool, "_network_backend"):
        pool._network_backend = FastBackend()
    return transport
