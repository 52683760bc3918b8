"""The one place a gateway is put together, above everything it assembles.

`build_pipeline` orders a tool call's stages; a `Generation` is one runtime with everything built from it (the
executor, the pipeline, the tool runner, the run observer, the hooks, the provider adapters); a `GatewayState`
keeps the current generation across hot reloads, with the safety layer. Every door and command gets its
generation here: the HTTP doors (`gateway.server.create_app`), `gateway mcp`, and the commands (`open_local`).

The names below are imported when first used (PEP 562): `gateway mcp` holds a `GatewayState` and lists its tools
before it needs `build_pipeline` and the stages it imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..kernel.lazy import lazy_names

_WHERE = {
    "GatewayState": ".state",
    "Generation": ".generation",
    "Holding": ".generation",
    "build_pipeline": ".composition",
    "open_local": ".state",
}
"""Each public name and the module (relative to this package) that defines it."""

if TYPE_CHECKING:
    from .composition import build_pipeline
    from .generation import Generation, Holding
    from .state import GatewayState, open_local

__all__ = ["GatewayState", "Generation", "Holding", "build_pipeline", "open_local"]

__getattr__, __dir__ = lazy_names(__name__, _WHERE, globals(), __all__)
