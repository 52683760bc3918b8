"""Where the gateway may listen: a host other than loopback only with client keys (or when the operator says
something in front of it authenticates callers), so that an agents.yaml without `clients` never serves its agents
and their credentials to anyone who can reach the address. Read once, at start (`gateway serve`), and by the Host
check of every request (`gateway.server.hosts`).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

from ..config.model import ClientConfig
from ..errors import ConfigError


def is_loopback(host: str) -> bool:
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, clients: Mapping[str, ClientConfig], *, allow_public: bool = False) -> None:
    """Refuse to serve a non-loopback host without client keys (unless the operator said so)."""
    if clients or allow_public or is_loopback(host):
        return
    raise ConfigError(
        f"refusing to listen on {host}: agents.yaml has no `clients`, so anyone who can reach this address could "
        "use every agent and its credentials. Add `clients: {name: {key: ${KEY}, agents: [...]}}` to agents.yaml, "
        "bind to 127.0.0.1, or pass --allow-public if something in front of the gateway authenticates callers."
    )
