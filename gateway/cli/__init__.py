"""The `gateway` command line: serve, validate, tools, call, chat, mcp, audit, approvals."""

from .commands import main

__all__ = ["main"]
