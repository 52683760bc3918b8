"""The SQLite store's part for users' own connections to apis (`gateway.identity.connections`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any, TypeVar

from .base import ConnectionRecord, PendingConnection

T = TypeVar("T")
_COLUMNS = ConnectionRecord.COLUMNS


class SQLiteConnections:
    """Mixed into `SQLiteStore`: every statement runs on the store's thread (`_run`)."""

    async def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:  # provided by SQLiteStore
        raise NotImplementedError

    async def save_connection(self, record: ConnectionRecord) -> None:
        values = (record.subject, record.api, record.secret, record.scopes, record.created, record.updated)
        await self._run(lambda conn: conn.execute(
            f"INSERT OR REPLACE INTO connections ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)", values))

    async def get_connection(self, subject: str, api: str) -> ConnectionRecord | None:
        row = await self._run(lambda conn: conn.execute(
            f"SELECT {_COLUMNS} FROM connections WHERE subject = ? AND api = ?", (subject, api)).fetchone())
        return ConnectionRecord.from_row(row) if row else None

    async def list_connections(self, subject: str) -> list[ConnectionRecord]:
        rows = await self._run(lambda conn: conn.execute(
            f"SELECT {_COLUMNS} FROM connections WHERE subject = ? ORDER BY api", (subject,)).fetchall())
        return [ConnectionRecord.from_row(row) for row in rows]

    async def delete_connection(self, subject: str, api: str) -> bool:
        count = await self._run(lambda conn: conn.execute(
            "DELETE FROM connections WHERE subject = ? AND api = ?", (subject, api)).rowcount)
        return bool(count)

    async def add_pending_connection(self, pending: PendingConnection) -> None:
        values = pending.values()
        await self._run(lambda conn: conn.execute(
            f"INSERT INTO pending_connections ({PendingConnection.COLUMNS}) VALUES ({', '.join('?' * len(values))})",
            values))

    async def take_pending_connection(self, state: str, now: float) -> PendingConnection | None:
        def work(conn: sqlite3.Connection) -> Any:
            conn.execute("DELETE FROM pending_connections WHERE expires <= ?", (now,))
            taken = f"DELETE FROM pending_connections WHERE state = ? RETURNING {PendingConnection.COLUMNS}"
            return conn.execute(taken, (state,)).fetchone()

        row = await self._run(work)
        if row is None:
            return None
        return PendingConnection.from_row(row)
