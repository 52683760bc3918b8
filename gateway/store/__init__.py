"""State the gateway keeps between requests, behind one interface (`Store`).

`open_store(location)` picks the backend from the manifest's `gateway: {store: ...}` setting:
a file path or `sqlite:///path` (the default, `./.gateway/state.db` beside agents.yaml) or `memory:`.
"""

from __future__ import annotations

from ..config.settings import DEFAULT_STORE, store_location
from ..errors import ConfigError
from .base import AUDIT_KINDS, ApprovalRecord, AuditQuery, AuditRow, Bucket, ResponseRecord, RunRecord, Store
from .memory import MemoryStore
from .sqlite import SQLiteStore

__all__ = [
    "DEFAULT_STORE",
    "ApprovalRecord",
    "AUDIT_KINDS",
    "AuditQuery",
    "AuditRow",
    "Bucket",
    "MemoryStore",
    "ResponseRecord",
    "RunRecord",
    "SQLiteStore",
    "Store",
    "open_store",
    "store_location",
]


def open_store(location: str) -> Store:
    """The backend for `location` (see the module docstring)."""
    if location in ("memory:", ":memory:"):
        return MemoryStore()
    if location.startswith("sqlite://"):
        # SQLAlchemy's spelling: sqlite:///relative/path, sqlite:////absolute/path
        return SQLiteStore(location.removeprefix("sqlite:///"))
    if "://" in location:
        scheme = location.split("://", 1)[0]
        raise ConfigError(f"agents.yaml: gateway.store: no {scheme!r} backend yet (use a SQLite path or memory:)")
    return SQLiteStore(location)
