"""agents.yaml: the manifest's model (`model`), its loader with located diagnostics (`loader`), and the pieces
the loader reads it with (`yamlnodes`, `checker`, `auth`, `delegation`)."""

from __future__ import annotations

from .loader import load_manifest
from .model import AgentConfig, ApiConfig, Manifest, ProviderConfig

__all__ = ["AgentConfig", "ApiConfig", "Manifest", "ProviderConfig", "load_manifest"]
