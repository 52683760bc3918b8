"""Circuit breakers and concurrency slots shared by every gateway instance, on Redis.

The call pipeline's guard stage on Redis (`gateway.safety.shared_breaker.SharedGuardApi`, used when
`gateway.redis` is set) calls `enter` on a call's way in and `settle` on its way out.

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

from ..errors import StoreUnavailable
from .postgres_schema import safe_url

PREFIX = "gateway:{guards}:"
LEASE_MARGIN = 30.0
"""Seconds a slot's lease outlives the call's timeout (a killed instance's slots return after that)."""
_POLL = (0.005, 0.05)
"""First and largest pause between two tries for a slot while all are taken."""

# The breaker's state (`KEYS[1]`, its hash) at `now`: 'closed', 'open' (with the seconds left), 'probe' (this
# call takes the half-open pass) or 'held' (another call holds it, until its lease ends). Shared by the scripts.
_BREAKER = """
local function breaker_state(key, now, reset)
  local held = redis.call('HMGET', key, 'opened', 'probe')
  local opened = tonumber(held[1] or '0')
  if opened == 0 then return 'closed', 0 end
  if now - opened < reset then return 'open', opened + reset - now end
  local probe = tonumber(held[2] or '0')
  if probe > now then return 'held', probe - now end
  return 'probe', 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
"""

# KEYS: breaker, slots; ARGV: reset_after, lease id, limit, lease seconds.
# Returns {'open' | 'busy' | 'ok', seconds until a probe may pass}: one round trip for a call's way in.
_ENTER = _BREAKER + """
local reset = tonumber(ARGV[1])
local state, left = breaker_state(KEYS[1], now, reset)
if state == 'open' or state == 'held' then return {'open', tostring(left)} end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[3]) then return {'busy', '0'} end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[4]), ARGV[2])
redis.call('EXPIRE', KEYS[2], math.ceil(tonumber(ARGV[4])) + 1)
if state == 'probe' then redis.call('HSET', KEYS[1], 'probe', tostring(now + reset)) end
return {'ok', '0'}
"""

# KEYS: breaker, slots; ARGV: lease id, verdict (1 ok, 0 failed, -1 none: cancelled or no slot), failures,
# reset_after. Gives the slot back and records the verdict: one round trip for a call's way out.
_SETTLE = _BREAKER + """
if ARGV[1] ~= '' then redis.call('ZREM', KEYS[2], ARGV[1]) end
local verdict = tonumber(ARGV[2])
local probing = tonumber(redis.call('HGET', KEYS[1], 'probe') or '0') > 0
if verdict == 1 then redis.call('DEL', KEYS[1]) return 0 end
if verdict == -1 then
  if probing then redis.call('HSET', KEYS[1], 'probe', '0') end
  return 0
end
local consecutive = redis.call('HINCRBY', KEYS[1], 'consecutive', 1)
if probing or consecutive >= tonumber(ARGV[3]) then
  redis.call('HSET', KEYS[1], 'opened', tostring(now), 'probe', '0')
end
redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[4]) * 10 + 3600))
return consecutive
"""


class SharedGuards:
    def __init__(self, client: aioredis.Redis, url: str) -> None:
        """Breakers and slots on `client` (`RedisCounters.client`); `url` only names the server in errors."""
        self.url = url
        self._enter = client.register_script(_ENTER)
        self._settle = client.register_script(_SETTLE)

    async def _call(self, script: Any, keys: list[str], args: list[Any]) -> Any:
        try:
            return await script(keys=keys, args=args)
        except (redis.RedisError, OSError) as exc:
            raise StoreUnavailable(f"Redis at {safe_url(self.url)} is unreachable: {exc}") from None

    async def enter(self, api: str, *, reset_after: float, limit: int, wait: float,
                    lease: float) -> tuple[str | None, float]:
        """A call's way in: (its slot's lease id, 0) once the breaker lets it pass and a slot is free within
        `wait` seconds; (None, seconds until a probe may pass) while the breaker is open; (None, 0) when every
        slot stayed taken. A half-open breaker lets exactly one call through (the probe)."""
        lease_id = secrets.token_hex(8)
        keys = [f"{PREFIX}breaker:{api}", f"{PREFIX}slots:{api}"]
        args = [repr(float(reset_after)), lease_id, limit, repr(float(lease + LEASE_MARGIN))]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        pause = _POLL[0]
        while True:
            state, left = await self._call(self._enter, keys, args)
            state = state.decode() if isinstance(state, bytes) else str(state)
            if state == "ok":
                return lease_id, 0.0
            if state == "open":
                return None, float(left.decode() if isinstance(left, bytes) else left)
            remaining = deadline - loop.time()
            if remaining <= 0:
                return None, 0.0
            await asyncio.sleep(min(pause, remaining))  # no blocking wait in Redis for a sorted set: poll
            pause = min(pause * 2, _POLL[1])

    async def settle(self, api: str, lease_id: str | None, ok: bool | None, *, failures: int,
                     reset_after: float) -> None:
        """A call's way out: its slot back, and its verdict (`None`: none, e.g. cancelled; a held probe is
        given back)."""
        verdict = -1 if ok is None else int(ok)
        await self._call(self._settle, [f"{PREFIX}breaker:{api}", f"{PREFIX}slots:{api}"],
                         [lease_id or "", verdict, failures, repr(float(reset_after))])
