"""The HTTP gateway: OpenAI-compatible chat, tool listings, direct calls and MCP on one Starlette app."""

from __future__ import annotations

from .api_errors import APIError
from .app import create_app

__all__ = ["APIError", "create_app"]
