"""Whether an agent's provider can be called at all: defined in agents.yaml, and holding a key if it needs one.

Both `gateway serve` (503 with the reason) and `gateway chat` (the reason, exit 1) ask before any request, so
a missing key is reported as the local configuration mistake it is, not sent to the cloud as an empty key.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from ..config.model import AgentConfig, Manifest
from .registry import ADAPTERS

_LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1", "0.0.0.0", "::")
"""Hosts a request goes to this machine by: the unspecified addresses too, which servers such as vLLM print as
their URL (`http://0.0.0.0:8000`) and which reach the local host when connected to."""


def provider_problem(manifest: Manifest, agent: AgentConfig) -> str | None:
    """Why `agent`'s provider cannot be called (None: it can): undefined, or a cloud API without its key.

    A provider on a loopback address (a local OpenAI-compatible server, Ollama) needs no key."""
    provider = manifest.providers.get(agent.provider)
    if provider is None:
        return f"Agent {agent.name!r} uses provider {agent.provider!r}, which agents.yaml does not define."
    adapter = ADAPTERS.get(provider.kind)
    hint = adapter.key_variable if adapter is not None else None
    if hint is not None and not provider.api_key and not _is_loopback(provider.base_url):
        ways = [f"set {hint} (agents.yaml providers.{provider.name}.api_key) and restart"]
        if provider.kind == "openai":  # the only kind other servers speak: a local one needs no key
            ways.append("point its base_url at an OpenAI-compatible server on loopback, which needs no key (the "
                        "example agents.yaml reads OPENAI_BASE_URL)")
        ollama = sorted(name for name, p in manifest.providers.items() if p.kind == "ollama")
        ways.append(f"run the agent on a local Ollama (model: {ollama[0]}/<model>)" if ollama else
                    "run the agent on a local Ollama (a provider of kind: ollama; model: <that provider>/<model>)")
        return (f"Agent {agent.name!r} runs on provider {provider.name!r} ({provider.kind}), whose api_key is empty: "
                f"{', '.join(ways[:-1])}, or {ways[-1]}.")
    return None


def _is_loopback(url: str) -> bool:
    host = (urlsplit(url).hostname or "").strip("[]")
    return host in _LOOPBACK_HOSTS or host.startswith("127.")
