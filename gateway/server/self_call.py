"""A provider whose base_url is this gateway's own address: its agents' model requests would come back to it.

The example agents.yaml's `openai` provider reads `OPENAI_BASE_URL`, and the docs tell a client (pydantic-ai, the
`openai` SDK) to point that same variable at the gateway: a `gateway serve` started in that shell called itself, and
the developer was shown the gateway's own "Unknown agent 'gpt-4o-mini'" as the provider's failure."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from ..config.model import AgentConfig, Manifest


def self_call_problem(manifest: Manifest, agent: AgentConfig, server: tuple[str, int] | None) -> str | None:
    """Why `agent` cannot run when its provider is this gateway (None: it is not). `server`: the ASGI scope's
    (host, port) the request came to, i.e. this gateway's own socket."""
    provider = manifest.providers.get(agent.provider)
    if provider is None or not provider.base_url or server is None:
        return None
    url = urlsplit(provider.base_url)
    try:
        port = url.port or (443 if url.scheme == "https" else 80)
    except ValueError:  # a port that is no number: the provider's own request fails, saying so
        return None
    host = (url.hostname or "").strip("[]")
    if port != server[1] or not (host == server[0] or (_local(host) and _local(server[0]))):
        return None
    return (f"Agent {agent.name!r} runs on provider {provider.name!r}, whose base_url {provider.base_url} is this "
            f"gateway itself: its model requests would come back here. Point providers.{provider.name}.base_url at "
            "the model's server (the example agents.yaml reads OPENAI_BASE_URL: set it to the gateway for its "
            "clients, not for `gateway serve`) and restart.")


def _local(host: str) -> bool:
    """A host that reaches this machine: a loopback name or address, or the unspecified one (`0.0.0.0`, `::`)."""
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified
