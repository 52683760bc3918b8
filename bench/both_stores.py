"""One async measurement run on each shared store: SQLite (WAL, in a temporary folder) and PostgreSQL (started on a
free loopback port in a temporary folder, from Debian's packages as the tests start it), each store closed after."""

from __future__ import annotations

import asyncio
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from bench.support import ROOT

sys.path.insert(0, str(ROOT / "tests"))

from shared_servers import PostgresServer  # noqa: E402

from gateway.store import SQLiteStore, Store  # noqa: E402
from gateway.store.postgres import PostgresStore  # noqa: E402

T = TypeVar("T")


def on_both_stores(measure: Callable[[Store], Awaitable[T]]) -> dict[str, T]:
    """`measure`'s figures on each store, by the store's name as the benches print it."""
    results: dict[str, T] = {}
    postgres = PostgresServer().start()
    try:
        with tempfile.TemporaryDirectory() as folder:
            results["SQLite (WAL)"] = asyncio.run(_closed(SQLiteStore(Path(folder) / "state.db"), measure))
        results["PostgreSQL"] = asyncio.run(_closed(PostgresStore(postgres.create_database()), measure))
    finally:
        postgres.stop()
    return results


async def _closed(store: Store, measure: Callable[[Store], Awaitable[T]]) -> T:
    try:
        return await measure(store)
    finally:
        await store.aclose()
