"""Each client's share of one kind of work (chat runs, code-mode sandboxes) across every gateway instance and
worker, on Redis (`gateway.redis`).

The same contract as `gateway.safety.shares.LocalShares`, counted as `max_concurrency` is there
(`gateway.store.redis_slots`): a sorted set per kind and client, one member per place held, scored with the end of
its lease; one Lua script, with Redis's own clock, drops the ended leases, refuses a place past the share or adds
it. A place is leased for `LEASE` seconds and renewed while its work lives, however long that is
(`gateway.store.lease_keeper`), so the places of an instance killed mid-run come back at most `LEASE` seconds
after it died. Without a cap nothing is sent to Redis (no cap, nothing to count).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from typing import Any

import redis
import redis.asyncio as aioredis

from ..errors import OverShare
from ..store.lease_keeper import LeaseKeeper
from ..store.postgres_schema import safe_url
from ..store.redis_scripts import unavailable
from .client_shares import RETRY_AFTER
from .shares import UNCOUNTED, Held, Kind

logger = logging.getLogger("gateway.safety")

PREFIX = "gateway:{shares}:"
"""Then the kind's name (`runs`, `sandboxes`), ':' and the client ('-' for none, '=' + its name)."""

# KEYS: the client's places; ARGV: cap (-1: admitted before, never refused), member, lease seconds. Returns 1
# (taken) or 0 (the share is full). The key expires with its longest lease: a client that stops leaves nothing.
_TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local cap = tonumber(ARGV[1])
if cap >= 0 and redis.call('ZCARD', KEYS[1]) >= cap then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[2])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], math.ceil(tonumber(last[2]) * 1000) + 1000)
return 1
"""


class _Leased:
    """A place held in Redis until `release` or the end of its lease (renewed until then)."""

    __slots__ = ("_book", "_key", "_member")

    def __init__(self, book: SharedShares, key: str, member: str) -> None:
        self._book: SharedShares | None = book
        self._key = key
        self._member = member

    async def release(self) -> None:
        book, self._book = self._book, None
        if book is None:
            return
        book.keeper.drop(self._member)
        try:
            # Shielded: cancelled work gives its place back all the same, or it stays taken until its lease ends.
            await asyncio.shield(book.client.zrem(self._key, self._member))
        except (redis.RedisError, OSError) as exc:
            logger.warning("a place in a client's share of %s was not given back (it is when its lease ends): "
                           "Redis at %s: %s", book.kind.what, safe_url(book.url), exc)


class SharedShares:
    def __init__(self, client: aioredis.Redis, url: str, kind: Kind, keeper: LeaseKeeper) -> None:
        """`kind`'s places counted on `client` (`RedisCounters.client`); `url` only names the server in errors;
        `keeper` renews the places held here (the process's, for every kind: one renewal for all of them)."""
        self.client = client
        self.url = url
        self.kind = kind
        self.keeper = keeper
        self._prefix = f"{PREFIX}{kind.name}:"
        self._take = client.register_script(_TAKE)

    async def take(self, client: str | None, cap: int | None, *, admitted: bool = False) -> Held:
        if cap is None:
            return UNCOUNTED
        key = self._prefix + ("-" if client is None else "=" + client)  # no client name is empty: "-" is no client
        member = secrets.token_hex(8)
        try:
            taken: Any = await self._take(keys=[key], args=[-1 if admitted else cap, member, self.keeper.seconds])
        except (redis.RedisError, OSError) as exc:
            raise unavailable(self.url, exc, self.client) from None
        if not int(taken):
            raise OverShare(client, self.kind.what, cap, self.kind.setting, RETRY_AFTER)
        self.keeper.hold(key, member)
        return _Leased(self, key, member)
