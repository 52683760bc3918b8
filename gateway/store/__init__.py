"""State the gateway keeps between requests, behind one interface (`Store`).

`open_store(location, redis=...)` picks the backend from the manifest's `gateway: {store: ..., redis: ...}`
settings: a file path or `sqlite:///path` (the default, `./.gateway/state.db` beside agents.yaml), `memory:`, or
`postgresql://...` (shared by several instances, `gateway.store.postgres`); with `redis: redis://...` the
rate-limit buckets are counted in Redis (`gateway.store.redis_counters`).
"""

from __future__ import annotations

from ..config.settings import (
    DEFAULT_SHARED_STATE_TIMEOUT,
    DEFAULT_STORE,
    POSTGRES_MODULES,
    POSTGRES_SCHEMES,
    REDIS_MODULES,
    missing_extra,
    store_location,
)
from ..errors import ConfigError
from .base import (
    AUDIT_KINDS,
    AUDIT_RUNNING,
    ApprovalRecord,
    AuditQuery,
    AuditRow,
    Bucket,
    ConnectionRecord,
    PendingConnection,
    ResponseRecord,
    RunRecord,
    Store,
)
from .memory import MemoryStore
from .sqlite import SQLiteStore

__all__ = [
    "DEFAULT_STORE",
    "ApprovalRecord",
    "AUDIT_KINDS",
    "AUDIT_RUNNING",
    "AuditQuery",
    "AuditRow",
    "Bucket",
    "ConnectionRecord",
    "MemoryStore",
    "PendingConnection",
    "ResponseRecord",
    "RunRecord",
    "SQLiteStore",
    "Store",
    "open_store",
    "store_location",
]



def open_store(location: str, *, redis: str | None = None, timeout: float = DEFAULT_SHARED_STATE_TIMEOUT) -> Store:
    """The backend for `location` (see the module docstring); with `redis`, its buckets counted there. `timeout`:
    seconds a question to PostgreSQL or Redis waits for its answer (`gateway.shared_state_timeout`).

    A networked backend connects here (and applies its migrations): ConfigError when it cannot."""
    store = _open_backend(location, timeout)
    store.timeout = timeout
    if redis is None:
        return store
    problem = missing_extra("Redis (agents.yaml gateway.redis)", REDIS_MODULES)
    if problem is not None:
        _close(store)
        raise ConfigError(problem)
    from .redis_counters import CountedStore, RedisCounters

    try:
        counted = CountedStore(store, RedisCounters(redis, timeout=timeout))
        counted.timeout = timeout
        return counted
    except BaseException:
        _close(store)
        raise


def _close(store: Store) -> None:
    close = getattr(store, "close", None)
    if close is not None:
        close()


def _open_backend(location: str, timeout: float) -> Store:
    if location in ("memory:", ":memory:"):
        return MemoryStore()
    if location.startswith(POSTGRES_SCHEMES):
        problem = missing_extra("the PostgreSQL store (agents.yaml gateway.store)", POSTGRES_MODULES)
        if problem is not None:
            raise ConfigError(problem)
        from .postgres import PostgresStore  # psycopg is imported only by those who use it

        return PostgresStore(location, timeout=timeout)
    if location.startswith("sqlite://"):
        # SQLAlchemy's spelling: sqlite:///relative/path, sqlite:////absolute/path
        return SQLiteStore(location.removeprefix("sqlite:///"))
    if "://" in location:
        scheme = location.split("://", 1)[0]
        raise ConfigError(f"agents.yaml: gateway.store: no {scheme!r} backend yet (use a SQLite path, memory: or postgresql://...)")
    return SQLiteStore(location)
