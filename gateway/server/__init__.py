"""The HTTP gateway: OpenAI-compatible chat, tool listings, direct calls and MCP on one Starlette app."""

from __future__ import annotations

from .app import create_app
from .errors import APIError

__all__ = ["APIError", "create_app"]
