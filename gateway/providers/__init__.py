"""Provider adapters: one wire format per module, one contract (`ProviderAdapter`), one registry of the kinds and
their facts (`registry`: `ADAPTERS`, `get_adapter`, `AdapterPool`).

The names below are imported when first used (PEP 562): `gateway.providers.deferred` (what tool search marks for a
provider's own search) is imported by commands that never call a model (`gateway mcp`), and importing it must not
import every adapter and the HTTP client they speak.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..kernel.lazy import lazy_names

_WHERE = {
    "ADAPTERS": ".registry",
    "AdapterPool": ".registry",
    "AnthropicAdapter": ".anthropic",
    "GeminiAdapter": ".gemini",
    "OllamaAdapter": ".ollama",
    "OpenAIAdapter": ".openai",
    "OpenAIResponsesAdapter": ".openai_responses",
    "ProviderAdapter": ".base",
    "Turn": ".base",
    "Usage": "..kernel.usage",
    "get_adapter": ".registry",
}
"""Each public name and the module (relative to this package) that defines it."""

if TYPE_CHECKING:
    from ..kernel.usage import Usage
    from .anthropic import AnthropicAdapter
    from .base import ProviderAdapter, Turn
    from .gemini import GeminiAdapter
    from .ollama import OllamaAdapter
    from .openai import OpenAIAdapter
    from .openai_responses import OpenAIResponsesAdapter
    from .registry import ADAPTERS, AdapterPool, get_adapter


__all__ = ["ADAPTERS", "AdapterPool", "AnthropicAdapter", "GeminiAdapter", "OllamaAdapter", "OpenAIAdapter",
           "OpenAIResponsesAdapter", "ProviderAdapter", "Turn", "Usage", "get_adapter"]

__getattr__, __dir__ = lazy_names(__name__, _WHERE, globals(), __all__)
