"""The OpenID provider as the gateway meets it when it fails: a front on loopback that forwards every request to
the real provider (tests/identity/oidc.py), unless a fault is set for its path, with tests/quiet_proxy.py before it.

    front = ProviderFront(provider)          # the gateway is pointed at `front.url` for /jwks and /token
    with front.running():
        front.fail("/jwks", Reply(500))      # answer this instead; `slow("/jwks", 5)`: forward, 5 s late
        front.proxy.refuse() / .silence()    # the provider down (connection refused) / hung (accepts, never answers)
        front.heal()                         # every path forwarded again, the proxy listening and answering

`front.asked(path)` counts the requests that reached the front for a path (a fetch the gateway made), and
`front.proxy.unheard_connections` those that went into a silent proxy.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
from oidc import OpenIDProvider
from quiet_proxy import QuietProxy
from recording_server import Recorded, RecordingServer, Reply

INVALID_GRANT = Reply(400, {"error": "invalid_grant", "error_description": "grant request is invalid"})
GARBAGE = Reply(200, "<html><body>Service temporarily unavailable</body></html>", {"Content-Type": "text/html"})
HOP_BY_HOP = frozenset({"host", "connection", "content-length", "transfer-encoding", "keep-alive"})


class ProviderFront:
    def __init__(self, provider: OpenIDProvider) -> None:
        self.provider = provider
        self.server = RecordingServer()
        self.server.route("/", self._forward)
        self.proxy = QuietProxy(int(self.server.url.rsplit(":", 1)[1]))
        self._faults: dict[str, Reply] = {}
        self._delays: dict[str, float] = {}
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        """The provider as the gateway reaches it: through the proxy, then the front."""
        return f"http://127.0.0.1:{self.proxy.port}"

    @contextmanager
    def running(self) -> Iterator[ProviderFront]:
        with self.server, self.proxy.running():
            yield self

    def fail(self, path: str, reply: Reply) -> None:
        with self._lock:
            self._faults[path] = reply

    def slow(self, path: str, seconds: float) -> None:
        with self._lock:
            self._delays[path] = seconds

    def heal(self) -> None:
        with self._lock:
            self._faults.clear()
            self._delays.clear()
        self.proxy.speak()

    def asked(self, path: str) -> int:
        return sum(1 for request in list(self.server.requests) if request.path == path)

    def _forward(self, request: Recorded) -> Reply:
        with self._lock:
            fault = self._faults.get(request.path)
            delay = self._delays.get(request.path, 0.0)
        if fault is not None:
            return fault
        if delay:
            time.sleep(delay)
        headers = [(key, value) for key, value in request.headers if key.lower() not in HOP_BY_HOP]
        answer = httpx.request(request.method, self.provider.issuer + request.target, headers=headers,
                               content=request.body, timeout=30)
        kept = {key: value for key, value in answer.headers.items() if key.lower() not in HOP_BY_HOP
                and key.lower() != "content-encoding"}
        return Reply(answer.status_code, answer.content, kept)


def through_front(agents: str, front: str) -> str:
    """tests/identity/identity_support.py's agents.yaml with the issuer's key set (`jwks_uri`) and both apis' token
    endpoints (the exchange, users' refreshes) reached through the front (the issuer's own URL stays the `iss`)."""
    agents = agents.replace('token_url: "{issuer}/token"', f'token_url: "{front}/token"')
    agents = agents.replace("scopes: [tickets],", f'scopes: [tickets], token_url: "{front}/token",')
    return agents.replace("leeway: 0,", f'leeway: 0, jwks_uri: "{front}/jwks",')
