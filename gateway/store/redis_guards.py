"""Circuit breakers and concurrency slots shared by every gateway instance, on Redis.

With `gateway.redis` set, an api that fails five times in a row is paused for every instance, not only
for the one that saw the failures, and `max_concurrency` is the number of calls in flight to that api
across all instances. Each decision is one Lua script, so it is atomic with Redis's own clock:

- breaker (a hash per api): `consecutive` failures, `opened` (when it opened), `probe` (until when a
  half-open probe holds the single pass). Same states as `gateway.safety.breaker.CircuitBreaker`.
- slots (a sorted set per api): one member per call in flight, scored with its lease's end. A lease
  outlives the call's timeout by a margin, so the slots of an instance killed mid-call come back on
  their own instead of being lost.
"""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import redis
import redis.asyncio as aioredis

from .base import StoreUnavailable
from .postgres_schema import safe_url

PREFIX = "gateway:{guards}:"
LEASE_MARGIN = 30.0
"""Seconds a slot's lease outlives the call's timeout (a killed instance's slots return after that)."""
_POLL = (0.005, 0.05)
"""First and largest pause between two tries for a slot while all are taken."""

# KEYS[1] breaker; ARGV: reset_after. Returns {allowed (0/1), seconds until a probe may pass}.
_ALLOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local reset = tonumber(ARGV[1])
local held = redis.call('HMGET', KEYS[1], 'opened', 'probe')
local opened = tonumber(held[1] or '0')
if opened == 0 then return {1, '0'} end
if now - opened < reset then return {0, tostring(opened + reset - now)} end
if tonumber(held[2] or '0') > now then return {0, '0'} end
redis.call('HSET', KEYS[1], 'probe', tostring(now + reset))
return {1, '0'}
"""

# KEYS[1] breaker; ARGV: ok (1/0/-1: no verdict), failures, reset_after.
_RECORD = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local verdict = tonumber(ARGV[1])
local probing = tonumber(redis.call('HGET', KEYS[1], 'probe') or '0') > 0
if verdict == 1 then redis.call('DEL', KEYS[1]) return 0 end
if verdict == -1 then
  if probing then redis.call('HSET', KEYS[1], 'probe', '0') end
  return 0
end
local consecutive = redis.call('HINCRBY', KEYS[1], 'consecutive', 1)
if probing or consecutive >= tonumber(ARGV[2]) then
  redis.call('HSET', KEYS[1], 'opened', tostring(now), 'probe', '0')
end
redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[3]) * 10 + 3600))
return consecutive
"""

# KEYS[1] slots; ARGV: lease id, limit, lease seconds. Returns 1 when a slot was taken.
_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[3])) + 1)
return 1
"""


class SharedGuards:
    def __init__(self, client: aioredis.Redis, url: str) -> None:
        """Breakers and slots on `client` (`RedisCounters.client`); `url` only names the server in errors."""
        self.url = url
        self._client = client
        self._allow = client.register_script(_ALLOW)
        self._record = client.register_script(_RECORD)
        self._acquire = client.register_script(_ACQUIRE)

    async def _call(self, script: Any, keys: list[str], args: list[Any]) -> Any:
        try:
            return await script(keys=keys, args=args)
        except (redis.RedisError, OSError) as exc:
            raise StoreUnavailable(f"Redis at {safe_url(self.url)} is unreachable: {exc}") from None

    # -- breaker ------------------------------------------------------------------------------------
    async def allow(self, api: str, *, reset_after: float) -> tuple[bool, float]:
        """May a call to `api` go now (closed, or the one half-open probe)? And if not, seconds until a probe."""
        allowed, retry_in = await self._call(self._allow, [f"{PREFIX}breaker:{api}"], [repr(float(reset_after))])
        return bool(allowed), float(retry_in.decode() if isinstance(retry_in, bytes) else retry_in)

    async def record(self, api: str, ok: bool | None, *, failures: int, reset_after: float) -> None:
        """A call's verdict (`None`: it ended without one, e.g. cancelled: a held probe is given back)."""
        verdict = -1 if ok is None else int(ok)
        await self._call(self._record, [f"{PREFIX}breaker:{api}"], [verdict, failures, repr(float(reset_after))])

    # -- concurrency slots --------------------------------------------------------------------------
    async def acquire(self, api: str, *, limit: int, wait: float, lease: float) -> str | None:
        """A slot's lease id, taken within `wait` seconds; None when every slot stayed taken."""
        lease_id = secrets.token_hex(8)
        key = f"{PREFIX}slots:{api}"
        args = [lease_id, limit, repr(float(lease + LEASE_MARGIN))]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        pause = _POLL[0]
        while True:
            if await self._call(self._acquire, [key], args):
                return lease_id
            left = deadline - loop.time()
            if left <= 0:
                return None
            await asyncio.sleep(min(pause, left))
            pause = min(pause * 2, _POLL[1])

    async def release(self, api: str, lease_id: str) -> None:
        try:
            await self._client.zrem(f"{PREFIX}slots:{api}", lease_id)
        except (redis.RedisError, OSError) as exc:  # the lease expires by itself
            raise StoreUnavailable(f"Redis at {safe_url(self.url)} is unreachable: {exc}") from None
