"""A synchronous hook the no-stall tests name in agents.yaml (`stall_hooks:held`): it blocks until released."""

from __future__ import annotations

import threading
from typing import Any

RELEASE = threading.Event()
ENTERED = threading.Event()


def held(step: dict[str, Any]) -> None:
    """Blocks its thread until the test sets `RELEASE` (at most a minute): a hook stuck on I/O or a lock."""
    ENTERED.set()
    RELEASE.wait(60)
