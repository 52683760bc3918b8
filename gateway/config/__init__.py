"""agents.yaml: one typed settings model (`model` and its sections), its loader with located diagnostics
(`loader`), and its JSON Schema (`schema`)."""

from __future__ import annotations

from .loader import load_manifest
from .model import AgentConfig, ApiConfig, Manifest, ProviderConfig

__all__ = ["AgentConfig", "ApiConfig", "Manifest", "ProviderConfig", "load_manifest"]
