"""The browser console at `/console`: the catalog, trying a tool, chat, runs and audit, approvals, health.

Server-rendered pages (Starlette + Jinja2) with a little JavaScript and CSS of its own, served from the
package. It is one more door on the same pipeline: tool runs are direct calls, chats are the chat door's
runs, decisions go through the safety layer's approval manager.
"""

from __future__ import annotations

from .gate import mount_console
from .rendering import Console

__all__ = ["Console", "mount_console"]
