"""Cross-site requests and DNS rebinding: which `Host`, `Origin` and `Content-Type` a request may carry.

A gateway on loopback without `clients` trusts whoever can reach it, and a web page the operator opens can
reach it too: a cross-site `fetch` or form (an `Origin` of another site, a `text/plain` body, no preflight), or
a rebinding page whose own host name now resolves to 127.0.0.1 (a foreign `Host`). `refusal`, asked by the
outermost middleware of every door (`gateway.server.envelope`), refuses all three before anything else runs:

- `Host` must name the gateway: on a loopback bind, a loopback name (127.0.0.1, localhost, [::1]) on any port;
  names in `gateway: {allowed_hosts: [...]}` are added (`gw.example.com`, `gw.example.com:8443`,
  `*.example.com`, `"*"` for any). A gateway bound to another address checks `Host` against a configured list;
  with none, its keys guard it, and without keys (`--allow-public`, as in the Docker example, a port published on
  the host's loopback) it answers an IP address or a one-label name (`gateway-a`, a compose service) but no
  other domain name: a rebinding page is always served from a domain of its own. A foreign `Host` gets 421 (as the
  MCP SDK answers).
- `Origin`, on a state-changing request (POST, PUT, PATCH, DELETE), must be the request's own origin, a host
  above, or one of `gateway: {allowed_origins: [...]}` (403 otherwise). Clients that are not browsers send none.
- A request with a body must declare it JSON (`application/json` or `application/*+json`; 415 otherwise):
  a browser can send `text/plain` or a form across sites without asking first, but not JSON.
"""

from __future__ import annotations

import ipaddress
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ..config.model import Manifest
from ..config.settings import GatewaySettings
from .api_errors import APIError
from .listening import is_loopback

if TYPE_CHECKING:
    from ..runtime import Runtime

logger = logging.getLogger("gateway.server")

_MAX_VERDICTS = 256
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def _split_host(value: str) -> tuple[str, str | None]:
    """(`host`, `port` or None) of a `Host` header value or an allowed-host entry, host lowercased."""
    value = value.strip().lower()
    if value.startswith("["):  # [::1]:8080
        end = value.find("]")
        if end == -1:
            return value, None
        host, rest = value[: end + 1], value[end + 1:]
        return host, rest[1:] if rest.startswith(":") else None
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        return value, None
    return host, port


@dataclass(frozen=True, slots=True)
class HostPolicy:
    """The hosts and origins one gateway answers to."""

    hosts: tuple[str, ...] | None
    """Allowed `Host` entries (`name`, `name:port`, `*.suffix`, `*`); None: any host (but see `local_names`)."""
    local_names: bool = False
    """With `hosts` None: only an IP address or a one-label name (no domain a rebinding page could own)."""
    origins: frozenset[str] = frozenset()
    """Extra allowed origins, `scheme://host[:port]`, lowercased."""
    _verdicts: dict[str, bool] = field(default_factory=dict, init=False, compare=False, repr=False)
    """`host_allowed` by `Host` value: every request asks, nearly always with the same value."""
    _admitted: set[tuple[str, bytes | None, bytes | None, bytes | None, bool]] = field(
        default_factory=set, init=False, compare=False, repr=False)
    """The header combinations `refusal` let through (method, Host, Origin, Content-Type as sent, has a body): a
    caller sends the same few on every request."""

    @classmethod
    def build(cls, bound_host: str | None, settings: GatewaySettings | None = None, *,
              keyless: bool = False) -> HostPolicy:
        """The policy for a server bound to `bound_host` with agents.yaml's `gateway:` settings; `keyless` when it
        has neither client keys nor sign-in (whoever reaches it is trusted)."""
        settings = settings or GatewaySettings()
        configured = settings.allowed_hosts
        origins = frozenset(o.rstrip("/").lower() for o in settings.allowed_origins)
        hosts: list[str] = []
        if bound_host is not None and is_loopback(bound_host):
            hosts.extend(sorted(LOOPBACK_NAMES))
        elif not configured:  # bound beyond loopback, nothing configured: keys guard it, or local names only
            return cls(hosts=None, origins=origins, local_names=keyless)
        hosts.extend(h.strip().lower() for h in configured)
        return cls(hosts=None if "*" in hosts else tuple(hosts), origins=origins)

    def host_allowed(self, host_header: str) -> bool:
        if self.hosts is None and not self.local_names:
            return True
        verdict = self._verdicts.get(host_header)
        if verdict is None:
            verdict = self._judge_host(host_header)
            if len(self._verdicts) < _MAX_VERDICTS:  # foreign values cannot grow it without bound
                self._verdicts[host_header] = verdict
        return verdict

    def _judge_host(self, host_header: str) -> bool:
        host, port = _split_host(host_header)
        if self.hosts is None:  # local names only
            return _is_address(host) or ("." not in host and bool(host))
        for entry in self.hosts:
            entry_host, entry_port = _split_host(entry)
            if entry_port is not None and entry_port != port:
                continue
            if entry_host == host or (entry_host.startswith("*.") and host.endswith(entry_host[1:])):
                return True
        return False

    def origin_allowed(self, origin: str, host_header: str) -> bool:
        origin = origin.strip().rstrip("/").lower()
        if origin in self.origins:
            return True
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return False  # "null" (a sandboxed page, a file) and anything else that is no web origin
        if parts.netloc == host_header.strip().lower():
            return True  # same origin as the request
        return self.hosts is not None and self.host_allowed(parts.netloc)


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host.removeprefix("[").removesuffix("]"))
    except ValueError:
        return False
    return True


def is_json_media_type(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def refusal(policy: HostPolicy, method: str, host: bytes | None, origin: bytes | None, content_type: bytes | None,
            *, has_body: bool) -> APIError | None:
    """The error that refuses a request with these headers, as sent (foreign host, cross-site origin, a body that
    is not JSON), or None when it may go on (remembered per policy for the combinations seen most, so a header is
    decoded only when its combination is new)."""
    key = (method, host, origin, content_type, has_body)
    admitted = policy._admitted
    if key in admitted:
        return None
    error = _refusal(policy, method, _text(host), _text(origin), _text(content_type), has_body=has_body)
    if error is None and len(admitted) < _MAX_VERDICTS:  # foreign values cannot grow it without bound
        admitted.add(key)
    return error


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("latin-1")


def _refusal(policy: HostPolicy, method: str, host: str | None, origin: str | None, content_type: str | None, *,
             has_body: bool) -> APIError | None:
    if host is None or not policy.host_allowed(host):
        return APIError(421, f"This gateway does not answer to host {host!r}; add it to agents.yaml "
                             "`gateway: {allowed_hosts: [...]}` if it should.", code="host_not_allowed")
    if origin is not None and method in STATE_CHANGING and not policy.origin_allowed(origin, host):
        return APIError(403, f"Requests from origin {origin!r} are refused (cross-site); add it to agents.yaml "
                             "`gateway: {allowed_origins: [...]}` if it should call this gateway.",
                        code="origin_not_allowed")
    if (has_body or content_type is not None) and method in STATE_CHANGING \
            and not is_json_media_type(content_type or ""):
        return APIError(415, f"The request body must be JSON (`Content-Type: application/json`), not "
                             f"{content_type or 'undeclared'!r}.", code="unsupported_media_type")
    return None


class PolicySource:
    """The `HostPolicy` of the served manifest (`current`, read by the request envelope on every request), rebuilt
    by `follow` when a reload swaps in a new runtime (an `on_reload` callback of the runtime's holder, registered by
    the app's lifespan; the loader refuses a reload with a bad value, so the last good one keeps serving)."""

    def __init__(self, bound_host: str | None, manifest: Manifest) -> None:
        self.bound_host = bound_host
        self.current = self._build(manifest)

    def _build(self, manifest: Manifest) -> HostPolicy:
        keyless = not manifest.clients and manifest.gateway.auth is None
        return HostPolicy.build(self.bound_host, manifest.gateway, keyless=keyless)

    def follow(self, runtime: Runtime) -> None:
        """The reloaded `runtime`'s policy from now on (synchronous: no request sees a half-swapped state)."""
        self.current = self._build(runtime.manifest)
