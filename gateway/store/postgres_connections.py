"""The PostgreSQL store's part for users' own connections to apis (`gateway.identity.connections`): shared by every
instance, so a user connected through one instance is connected on all, and a refresh by one is seen by the others."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any

from .answer_within import answered_within
from .base import ConnectionRecord, PendingConnection
from .server_watch import ServerWatch

_COLUMNS = ConnectionRecord.COLUMNS


class PostgresConnections:
    """Mixed into `PostgresStore` (`_connection` is its pooled connection; `timeout` and `part` bound each question
    as its own are)."""

    timeout: float
    part: str
    watch: ServerWatch | None

    def _connection(self) -> AbstractAsyncContextManager[Any]:  # provided by PostgresStore
        raise NotImplementedError

    @answered_within
    async def save_connection(self, record: ConnectionRecord) -> None:
        async with self._connection() as conn:
            await conn.execute(
                f"INSERT INTO connections ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (subject, api)"
                " DO UPDATE SET secret = excluded.secret, scopes = excluded.scopes, updated = excluded.updated",
                (record.subject, record.api, record.secret, record.scopes, record.created, record.updated))

    @answered_within
    async def get_connection(self, subject: str, api: str) -> ConnectionRecord | None:
        async with self._connection() as conn:
            cursor = await conn.execute(f"SELECT {_COLUMNS} FROM connections WHERE subject = %s AND api = %s",
                                        (subject, api))
            row = await cursor.fetchone()
        return ConnectionRecord.from_row(row) if row else None

    @answered_within
    async def list_connections(self, subject: str) -> list[ConnectionRecord]:
        async with self._connection() as conn:
            cursor = await conn.execute(f"SELECT {_COLUMNS} FROM connections WHERE subject = %s ORDER BY api",
                                        (subject,))
            rows = await cursor.fetchall()
        return [ConnectionRecord.from_row(row) for row in rows]

    @answered_within
    async def delete_connection(self, subject: str, api: str) -> bool:
        async with self._connection() as conn:
            cursor = await conn.execute("DELETE FROM connections WHERE subject = %s AND api = %s", (subject, api))
            return bool(cursor.rowcount)

    @answered_within
    async def add_pending_connection(self, pending: PendingConnection) -> None:
        async with self._connection() as conn:
            values = pending.values()
            await conn.execute(f"INSERT INTO pending_connections ({PendingConnection.COLUMNS})"
                               f" VALUES ({', '.join(['%s'] * len(values))})", values)

    @answered_within
    async def take_pending_connection(self, state: str, now: float) -> PendingConnection | None:
        async with self._connection() as conn:
            await conn.execute("DELETE FROM pending_connections WHERE expires <= %s", (now,))
            cursor = await conn.execute(
                f"DELETE FROM pending_connections WHERE state = %s RETURNING {PendingConnection.COLUMNS}", (state,))
            row = await cursor.fetchone()
        if row is None:
            return None
        return PendingConnection.from_row(row)
