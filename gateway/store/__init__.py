"""State the gateway keeps between requests, behind one interface (`Store`).

`open_store(location)` picks the backend from the manifest's `gateway: {store: ...}` setting:
a file path or `sqlite:///path` (the default, `./.gateway/state.db` beside agents.yaml) or `memory:`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .base import ApprovalRecord, AuditQuery, AuditRow, Bucket, ResponseRecord, RunRecord, Store
from .memory import MemoryStore
from .sqlite import SQLiteStore

DEFAULT_STORE = ".gateway/state.db"

__all__ = [
    "DEFAULT_STORE",
    "ApprovalRecord",
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


def store_location(settings: dict[str, Any] | None, base_dir: Path | None = None) -> str:
    """Where the store lives: `gateway.store` from the manifest, relative to agents.yaml's folder."""
    location = (settings or {}).get("store") or DEFAULT_STORE
    if not isinstance(location, str):
        raise ConfigError(f"agents.yaml: gateway.store must be a path or URL, not {type(location).__name__}")
    if location in ("memory:", ":memory:") or "://" in location:
        return location
    path = Path(location).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    return str(path)


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
