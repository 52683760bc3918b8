"""Provider adapters: one wire format per module, one contract (`ProviderAdapter`).

`get_adapter(config)` picks the adapter for a provider of agents.yaml; `AdapterPool` keeps one per provider
so their HTTP connection pools are shared by every run.
"""

from __future__ import annotations

import httpx

from ..errors import ConfigError
from ..manifest import AgentConfig, Manifest, ProviderConfig
from .anthropic import AnthropicAdapter
from .base import ProviderAdapter, Turn, Usage
from .gemini import GeminiAdapter
from .ollama import OllamaAdapter
from .openai import OpenAIAdapter

ADAPTERS: dict[str, type[ProviderAdapter]] = {
    "openai": OpenAIAdapter,
    "anthropic": AnthropicAdapter,
    "gemini": GeminiAdapter,
    "ollama": OllamaAdapter,
}


def get_adapter(config: ProviderConfig, *, transport: httpx.AsyncBaseTransport | None = None,
                **options: object) -> ProviderAdapter:
    """The adapter for `config.kind`; `options` go to `ProviderAdapter.__init__` (max_retries, backoff, ...)."""
    try:
        cls = ADAPTERS[config.kind]
    except KeyError:
        raise ConfigError(f"provider {config.name!r}: unknown kind {config.kind!r} "
                          f"(expected one of {', '.join(ADAPTERS)})") from None
    return cls(config, transport=transport, **options)  # type: ignore[arg-type]


class AdapterPool:
    """One adapter per provider of a manifest, created on first use; `pool(agent)` gives the agent's adapter."""

    def __init__(self, manifest: Manifest, *, transport: httpx.AsyncBaseTransport | None = None,
                 **options: object) -> None:
        self.manifest = manifest
        self._transport = transport
        self._options = options
        self._adapters: dict[str, ProviderAdapter] = {}

    def __call__(self, agent: AgentConfig) -> ProviderAdapter:
        adapter = self._adapters.get(agent.provider)
        if adapter is None:
            config = self.manifest.providers.get(agent.provider)
            if config is None:
                raise ConfigError(f"agent {agent.name!r}: provider {agent.provider!r} is not in agents.yaml")
            adapter = self._adapters[agent.provider] = get_adapter(config, transport=self._transport,
                                                                   **self._options)
        return adapter

    async def aclose(self) -> None:
        for adapter in self._adapters.values():
            await adapter.aclose()
        self._adapters.clear()


__all__ = ["ADAPTERS", "AdapterPool", "AnthropicAdapter", "GeminiAdapter", "OllamaAdapter", "OpenAIAdapter",
           "ProviderAdapter", "Turn", "Usage", "get_adapter"]
