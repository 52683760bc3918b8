"""The HTTP gateway: OpenAI-compatible chat, tool listings, direct calls and MCP on one Starlette app.

`create_app` and `APIError` are imported when first used (PEP 562), so `gateway mcp` (in `gateway.server.run`)
does not load the HTTP app it never serves.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .api_errors import APIError
    from .app import create_app

_WHERE = {"APIError": ".api_errors", "create_app": ".app"}

__all__ = ["APIError", "create_app"]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
