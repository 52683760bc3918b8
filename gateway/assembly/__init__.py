"""The one place a gateway is put together, above everything it assembles.

`build_pipeline` orders a tool call's stages; a `Generation` is one runtime with everything built from it (the
executor, the pipeline, the tool runner, the run observer, the hooks, the provider adapters); a `GatewayState`
keeps the current generation across hot reloads, with the safety layer. Every door and command gets its
generation here: the HTTP doors (`gateway.server.create_app`), `gateway mcp`, and the commands (`open_local`).
"""

from __future__ import annotations

from .composition import build_pipeline
from .generation import Generation, Holding
from .state import GatewayState, open_local

__all__ = ["GatewayState", "Generation", "Holding", "build_pipeline", "open_local"]
