"""Provider adapters: one wire format per module, one contract (`ProviderAdapter`), one registry of the kinds and
their facts (`registry`: `ADAPTERS`, `get_adapter`, `AdapterPool`).

The names below are imported when first used (PEP 562): `gateway.providers.deferred` (what tool search marks for a
provider's own search) is imported by commands that never call a model (`gateway mcp`), and importing it must not
import every adapter and the HTTP client they speak.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # asked once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = ["ADAPTERS", "AdapterPool", "AnthropicAdapter", "GeminiAdapter", "OllamaAdapter", "OpenAIAdapter",
           "OpenAIResponsesAdapter", "ProviderAdapter", "Turn", "Usage", "get_adapter"]
