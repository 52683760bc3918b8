"""Provider adapters: one wire format per module, one contract (`ProviderAdapter`), one registry of the kinds and
their facts (`registry`: `ADAPTERS`, `get_adapter`, `AdapterPool`).
"""

from __future__ import annotations

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
