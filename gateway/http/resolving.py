"""Host names checked where they resolve: a spec's server whose name resolves to a link-local address (where a
cloud serves its instances' credentials: 169.254.169.254, fe80::/10, AWS's fd00:ec2::254) gets nothing.

`gateway.http.request` refuses such an address when a spec writes it as an address; a name that resolves there
(`metadata.attacker.example`, or a DNS answer that changes between two lookups: rebinding) is only seen here.
pyreqwest has no resolver hook, but its client builder pins a name to an address (`ClientBuilder.resolve`):
`PinnedClients` resolves each name itself (the event loop's `getaddrinfo`, in a worker thread), refuses it when
any of its addresses is link-local, and sends on a client pinned to the first address (the next one after a
connection to it failed), so the connection goes to an address that was checked and not to what a second lookup
answers. A name is resolved again after
`RESOLVE_SECONDS` (a new pinned client when its address changed; the old one is closed once its calls can have
ended). A URL with an address as its host, and a name the environment's proxy serves (`HTTP_PROXY` and the like:
the proxy resolves it, not the gateway), go on the api's ordinary client.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import httpx
from pyreqwest.client import Client
from pyreqwest.http import Url

from ..errors import ApiSetupError
from .library import ClientOptions, build_client, host_of
from .request import link_local

RESOLVE_SECONDS = 30.0
"""How long a checked name's address is used before it is resolved (and checked) again."""
RETIRED_SECONDS = 600.0
"""A client whose name moved is closed this long after: its calls in flight (each within its api's timeout)."""

_ORIGINS_KEPT = 256
"""The most URL heads whose split `PinnedClients` remembers (an api has a few origins; a redirect stays on one)."""

_METADATA = ("{}, a link-local address where a cloud serves its instances' metadata and credentials, not an API: the "
             "request was not sent (an operator who means it writes that address in apis.<name>.base_url)")

Resolver = Callable[[str, int], Awaitable[list[str]]]
"""(host, port) -> its addresses, in the order to try them."""


async def system_resolver(host: str, port: int) -> list[str]:
    """The addresses `getaddrinfo` gives (the system's resolver, as the client library's own lookup uses)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


@dataclass(slots=True)
class _Pin:
    address: str | None
    """None: the name is sent on the api's ordinary client (the environment's proxy serves it)."""
    client: Client | None
    until: float
    others: list[str] = field(default_factory=list)
    """The name's other checked addresses, tried in turn when the pinned one refuses connections (a client pins one
    address only: `localhost` may be `::1` first while its server listens on 127.0.0.1)."""


class PinnedClients:
    """A client per host name, pinned to its checked address (see the module's docstring).

    Args:
        options: the api's connection settings, for each pinned client.
        resolver: resolves a name (default: `system_resolver`; tests inject one that answers a name no DNS knows).
    """

    def __init__(self, options: ClientOptions, resolver: Resolver | None = None) -> None:
        self._options = options
        self._resolver = resolver
        self._pins: dict[tuple[str, int], _Pin] = {}
        self._retired: list[tuple[float, Client]] = []
        self._origins: dict[str, tuple[str, int, str]] = {}
        self._lookups: dict[tuple[str, int], asyncio.Task[list[str]]] = {}
        """Lookups under way: the calls that find a name's time up at once share one (one worker thread a name)."""

    def _origin(self, url: str) -> tuple[str, int, str]:
        """(host, port, scheme) of `url` as the client library reads it (`_split`). An api's calls go to its server's
        origin (or a tool's own server's: a few known at load), so the URL is split once per `scheme://authority`,
        the text before the first `/` after `//` (a `?` or `#` before it only makes the text longer: the authority
        is the same), not on every call; a head that alone reads otherwise than its URL is not remembered."""
        end = url.find("/", url.find("//") + 2)
        head = url if end < 0 else url[:end]
        origin = self._origins.get(head)
        if origin is None:
            origin = _split(url)
            if head is not url and _split(head) != origin:
                return origin  # e.g. `http:/\t/name/`: its head is no URL of that origin; split each time
            if len(self._origins) >= _ORIGINS_KEPT:
                self._origins.clear()
            self._origins[head] = origin
        return origin

    async def client_for(self, url: str) -> Client | None:
        """The client to send `url` on, None for the api's ordinary one (an address as host, a proxied name);
        an `ApiSetupError` when the name resolves to a link-local address (nothing is sent)."""
        host, port, scheme = self._origin(url)
        key = (host, port)
        now = time.monotonic()
        pin = self._pins.get(key)
        if pin is not None and pin.until > now:
            return pin.client
        if not host or _is_address(host) or _proxied(scheme, host):
            if host and link_local(host):  # `2852039166` as the library reads it (`gateway.http.request` refuses it
                raise ApiSetupError(_METADATA.format(f"{host_of(url)} is {host}"))  # first; as a resolved name was)
            self._pins[key] = _Pin(None, None, now + RESOLVE_SECONDS)
            return None
        lookup = self._lookups.get(key)
        if lookup is None:
            lookup = self._lookups[key] = asyncio.ensure_future((self._resolver or system_resolver)(host, port))
            lookup.add_done_callback(lambda _: self._lookups.pop(key, None))
        try:
            addresses = await asyncio.shield(lookup)
        except OSError as error:  # no network, a typo, a DNS outage: a connection that could not be made, as
            # the client library's own lookup failing was before names were resolved here (retried where it may be)
            raise httpx.ConnectError(f"cannot resolve {host_of(url)} ({error}); the request was not sent") from None
        bad = next((address for address in addresses if link_local(address)), None)
        if bad is not None or not addresses:
            raise ApiSetupError(_METADATA.format(f"{host_of(url)} resolves to {bad or 'no address'}"))
        pin = self._pins.get(key)  # another call may have pinned it meanwhile
        if pin is not None and pin.address == addresses[0]:
            pin.until = max(pin.until, now + RESOLVE_SECONDS)
            return pin.client
        if pin is not None and pin.client is not None:
            self._retired.append((now + RETIRED_SECONDS, pin.client))
        client = build_client(self._options, pinned=(host, addresses[0], port))
        self._pins[key] = _Pin(addresses[0], client, now + RESOLVE_SECONDS, list(addresses[1:]))
        await self._close_retired(now)
        return client

    def connect_failed(self, url: str, client: Client) -> None:
        """No connection could be made on `client` for `url`: its name's next checked address is tried next (a call
        retried after a connect error, an idempotent one, goes there)."""
        host, port, _ = self._origin(url)
        key = (host, port)
        pin = self._pins.get(key)
        if pin is None or pin.client is not client or not pin.others or pin.address is None:
            return
        now = time.monotonic()
        self._retired.append((now + RETIRED_SECONDS, client))
        address, pin.others = pin.others[0], [*pin.others[1:], pin.address]
        pin.address, pin.client = address, build_client(self._options, pinned=(key[0], address, key[1]))

    async def _close_retired(self, now: float) -> None:
        while self._retired and self._retired[0][0] <= now:
            await self._retired.pop(0)[1].close()

    async def aclose(self) -> None:
        for lookup in list(self._lookups.values()):  # a lookup nobody waits for any more
            lookup.cancel()
        clients = [pin.client for pin in self._pins.values() if pin.client is not None]
        clients += [client for _, client in self._retired]
        self._pins.clear()
        self._retired.clear()
        for client in clients:
            await client.close()


def _split(url: str) -> tuple[str, int, str]:
    """(host, port, scheme) as the client library's own URL parser reads them (pyreqwest's `Url`, the WHATWG URL
    Standard's rules), where the request goes: `urlsplit` read another host in some URLs the library sends
    elsewhere (a trailing dot it dropped, so the name pinned was not the one connected to, which the library then
    looked up itself, unchecked; a percent-encoded or backslashed host). An IPv6 address loses its brackets; a URL
    the library refuses gets no host (its ordinary client refuses it too, sending nothing)."""
    try:
        parsed = Url(url)
    except ValueError:
        return "", 0, ""
    host = parsed.host_str or ""
    return (host[1:-1] if host.startswith("[") else host), parsed.port_or_known_default or 0, parsed.scheme


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _proxied(scheme: str, host: str) -> bool:
    """Whether the environment's proxy settings send this host through a proxy (which then resolves it)."""
    proxies = urllib.request.getproxies_environment()
    if not (proxies.get(scheme) or proxies.get("all")):
        return False
    return not urllib.request.proxy_bypass(host)  # NO_PROXY (the environment's, on this platform)
