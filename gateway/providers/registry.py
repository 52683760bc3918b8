"""The registry of provider kinds: one adapter class per `kind:` of agents.yaml, each carrying its kind's facts
(`ProviderAdapter`'s class attributes: default base URL, key variable, tool dialect, strict mode, native tool search,
...). `get_adapter(config)` makes the adapter for a provider; `AdapterPool` keeps one per provider so their HTTP
connection pools are shared by every run.
"""

from __future__ import annotations

import httpx

from ..config.model import AgentConfig, Manifest, ProviderConfig
from ..errors import ConfigError
from .anthropic import AnthropicAdapter
from .base import ProviderAdapter
from .gemini import GeminiAdapter
from .ollama import OllamaAdapter
from .openai import OpenAIAdapter
from .openai_responses import OpenAIResponsesAdapter

ADAPTERS: dict[str, type[ProviderAdapter]] = {
    adapter.kind: adapter
    for adapter in (OpenAIAdapter, OpenAIResponsesAdapter, AnthropicAdapter, GeminiAdapter, OllamaAdapter)
}
"""Provider kind -> its adapter class (and so its facts)."""


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
    """One adapter per provider of a manifest, created on first use; `pool(agent)` gives the agent's adapter
    (a ToolRunner's `adapter_factory`)."""

    def __init__(self, manifest: Manifest, *, transport: httpx.AsyncBaseTransport | None = None,
                 **options: object) -> None:
        self.manifest = manifest
        self._transport = transport
        self._options = options
        self._adapters: dict[str, ProviderAdapter] = {}

    def __call__(self, which: AgentConfig | ProviderConfig | str) -> ProviderAdapter:
        """The adapter of an agent's provider, of a provider config, or of a provider named in agents.yaml."""
        name = which.provider if isinstance(which, AgentConfig) else which.name if isinstance(
            which, ProviderConfig) else which
        adapter = self._adapters.get(name)
        if adapter is None:
            config = which if isinstance(which, ProviderConfig) else self.manifest.providers.get(name)
            if config is None:
                owner = f"agent {which.name!r}: " if isinstance(which, AgentConfig) else ""
                raise ConfigError(f"{owner}provider {name!r} is not in agents.yaml")
            adapter = self._adapters[name] = get_adapter(config, transport=self._transport, **self._options)
        return adapter

    async def aclose(self) -> None:
        for adapter in self._adapters.values():
            await adapter.aclose()
        self._adapters.clear()
