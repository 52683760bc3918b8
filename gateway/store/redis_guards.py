"""Circuit breakers and concurrency slots shared by every gateway instance, on Redis.

The call pipeline's guard stage on Redis (`gateway.safety.shared_breaker.SharedGuardApi`, used when
`gateway.redis` is set) calls `enter` on a call's way in and `settle` on its way out.

With `gateway.redis` set, an api that fails five times in a row is paused for every instance, not only
for the one that saw the failures, and `max_concurrency` is the number of calls in flight to that api
across all instances. Each decision is one Lua script, so it is atomic with Redis's own clock:

- breaker (a hash per api): `consecutive` failures, `opened` (when it opened), `probe` (until when a
  half-open probe holds the single pass). Same states as `gateway.safety.breaker.CircuitBreaker`.
- slots (a sorted set per api): one member per call in flight, scored with its lease's end. The lease is
  renewed while the call lives (`gateway.store.lease_keeper`), so the slots of an instance killed mid-call
  come back at most a lease (30 s) after it died.
- waiters (two sorted sets per api): a call that finds every slot taken queues a ticket, scored with its
  arrival in `queue` and with its lease's end in `tickets` (renewed as a slot's is: a dead instance's tickets
  end with their lease and are passed over). A slot given back goes straight to a waiter, in the script that
  gives it back, in the order `gateway.safety.fair_slots.FairSlots` keeps in one process: to the waiting caller
  group (client) that holds the fewest slots, ties to the group whose first waiter came first, no group past
  `max_concurrency_per_client`. So a caller that gives a slot back and asks again at once queues behind the
  waiters instead of finding the slot free, and no waiter polls: the script publishes the hand-over and the
  waiter's instance wakes it (`gateway.store.redis_wakeups`).

A ticket (and the slot's member it becomes) is 16 hex digits and the caller group: the scripts count a group's
slots from the members, with no second structure to keep in step.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from typing import TYPE_CHECKING, Any

import redis
import redis.asyncio as aioredis

from ..errors import StoreUnavailable
from .postgres_schema import safe_url
from .redis_wakeups import CHECK, Wakeups

if TYPE_CHECKING:
    from .lease_keeper import LeaseKeeper

logger = logging.getLogger("gateway.safety")

PREFIX = "gateway:{guards}:"
CHANNEL = PREFIX + "handed"
"""Where the scripts publish each hand-over to a waiter (`gateway.store.redis_wakeups`)."""
ANONYMOUS_GROUP = "anonymous"
"""The caller group of calls without a client (as `gateway.safety.breaker` names it)."""
LOOK_LATE = 0.01
"""Seconds after the first slot's lease should end that a waiter nothing woke looks for itself (the clocks of
Redis and of this process are not the same one)."""

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

# KEYS (every script's): breaker, slots, queue (tickets by arrival), tickets (by the end of their lease). A member
# is 16 hex digits and its caller group. `hand_over` gives the free slots to the waiters (see the module's
# docstring for the order), dropping on the way the tickets whose lease ended (their instance died); while the
# breaker is open it tells the waiters so instead (they would only fail). Each waiter's instance hears it on
# CHANNEL. The queue is walked once per slot handed over: a few hundred waiters cost a few hundred ZSCOREs.
_HAND_OVER = _BREAKER + """
local function groups_held()
  local held = {}
  for _, member in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
    local group = string.sub(member, 17)
    held[group] = (held[group] or 0) + 1
  end
  return held
end

local function expire_with_last(key)
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if last[2] then redis.call('PEXPIREAT', key, math.ceil(tonumber(last[2]) * 1000) + 1000) end
end

local function first_end(lease)
  local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  if first[2] then return tostring(math.max(0, tonumber(first[2]) - now)) end
  return tostring(lease)
end

local function hand_over(limit, per_group, reset)
  if redis.call('ZCARD', KEYS[3]) == 0 then return end  -- nobody waits: all a call without waiters pays here
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  local free = limit - redis.call('ZCARD', KEYS[2])
  if free <= 0 then return end
  local held = groups_held()
  while free > 0 do
    local chosen, fewest, seen = nil, 0, {}
    for _, ticket in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
      if tonumber(redis.call('ZSCORE', KEYS[4], ticket) or '0') <= now then
        redis.call('ZREM', KEYS[3], ticket)
        redis.call('ZREM', KEYS[4], ticket)
      else
        local group = string.sub(ticket, 17)
        if not seen[group] then
          seen[group] = true
          local h = held[group] or 0
          if h < per_group and (chosen == nil or h < fewest) then chosen, fewest = ticket, h end
        end
      end
    end
    if chosen == nil then return end
    local lease = redis.call('ZSCORE', KEYS[4], chosen)
    redis.call('ZREM', KEYS[3], chosen)
    redis.call('ZREM', KEYS[4], chosen)
    local state, left = breaker_state(KEYS[1], now, reset)
    if state == 'open' or state == 'held' then
      redis.call('PUBLISH', '@CHANNEL@', 'open ' .. tostring(left) .. ' ' .. chosen)
    else
      redis.call('ZADD', KEYS[2], lease, chosen)
      expire_with_last(KEYS[2])
      if state == 'probe' then redis.call('HSET', KEYS[1], 'probe', tostring(now + reset)) end
      held[string.sub(chosen, 17)] = fewest + 1
      free = free - 1
      redis.call('PUBLISH', '@CHANNEL@', 'ok 0 ' .. chosen)
    end
  end
end
""".replace("@CHANNEL@", CHANNEL)

# ARGV: reset_after, ticket, limit, per-group cap, lease seconds, seconds the call may wait (0: never queued).
# Returns {'ok' | 'open' | 'busy' | 'queued', seconds}: one round trip for a call's way in. 'open': the seconds
# until a probe may pass; 'queued': until the first slot's lease ends (the waiter looks for itself then, should
# nothing wake it before: a slot whose lease ended is handed over by the next script that runs).
_ENTER = _HAND_OVER + """
local reset = tonumber(ARGV[1])
local limit, per_group, lease = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
hand_over(limit, per_group, reset)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local state, left = breaker_state(KEYS[1], now, reset)
if state == 'open' or state == 'held' then return {'open', tostring(left)} end
-- After the hand-over a slot is free only while every waiting group is at its cap: a group under its cap has
-- nobody waiting, so taking the slot passes nobody.
if redis.call('ZCARD', KEYS[2]) < limit and
    (per_group >= limit or (groups_held()[string.sub(ARGV[2], 17)] or 0) < per_group) then
  redis.call('ZADD', KEYS[2], now + lease, ARGV[2])
  expire_with_last(KEYS[2])
  if state == 'probe' then redis.call('HSET', KEYS[1], 'probe', tostring(now + reset)) end
  return {'ok', '0'}
end
local wait = tonumber(ARGV[6])
if wait <= 0 then return {'busy', '0'} end
redis.call('ZADD', KEYS[3], now, ARGV[2])
redis.call('ZADD', KEYS[4], now + lease, ARGV[2])
expire_with_last(KEYS[4])
local keep = math.ceil((wait + lease) * 1000)
if redis.call('PTTL', KEYS[3]) < keep then redis.call('PEXPIRE', KEYS[3], keep) end
return {'queued', first_end(lease)}
"""

# ARGV: lease id, verdict (1 ok, 0 failed, -1 none: cancelled or no slot), failures, reset_after, limit, per-group
# cap. Gives the slot back (to the next waiter) and records the verdict: one round trip for a call's way out.
_SETTLE = _HAND_OVER + """
if ARGV[1] ~= '' then redis.call('ZREM', KEYS[2], ARGV[1]) end
local reset = tonumber(ARGV[4])
local verdict = tonumber(ARGV[2])
local probing = tonumber(redis.call('HGET', KEYS[1], 'probe') or '0') > 0
local consecutive = 0
if verdict == 1 then
  redis.call('DEL', KEYS[1])
elseif verdict == -1 then
  if probing then redis.call('HSET', KEYS[1], 'probe', '0') end
else
  consecutive = redis.call('HINCRBY', KEYS[1], 'consecutive', 1)
  if probing or consecutive >= tonumber(ARGV[3]) then
    redis.call('HSET', KEYS[1], 'opened', tostring(now), 'probe', '0')
  end
  redis.call('EXPIRE', KEYS[1], math.ceil(reset * 10 + 3600))
end
hand_over(tonumber(ARGV[5]), tonumber(ARGV[6]), reset)
return consecutive
"""

# ARGV: reset_after, ticket, limit, per-group cap, lease seconds. What became of a waiter's ticket, for a waiter
# nothing woke (the first slot's lease ended, a message was lost): {'ok' | 'queued' | 'gone', seconds}, after
# handing the free slots over. 'gone': its lease ended, or it was told the breaker opened and missed it.
_LOOK = _HAND_OVER + """
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)  -- (hand_over drops them only while someone waits)
hand_over(tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[1]))
if redis.call('ZSCORE', KEYS[2], ARGV[2]) then return {'ok', '0'} end
if redis.call('ZSCORE', KEYS[3], ARGV[2]) then return {'queued', first_end(tonumber(ARGV[5]))} end
return {'gone', '0'}
"""

# ARGV: reset_after, ticket, limit, per-group cap. A waiter leaving (timed out, its client gone): out of the queue
# at once; a slot handed to it meanwhile (the hand-over and its wake-up are two steps) goes to the next waiter.
_LEAVE = _HAND_OVER + """
if redis.call('ZREM', KEYS[3], ARGV[2]) == 1 then
  redis.call('ZREM', KEYS[4], ARGV[2])
  return 'left'
end
if redis.call('ZREM', KEYS[2], ARGV[2]) == 1 then
  if tonumber(redis.call('HGET', KEYS[1], 'probe') or '0') > 0 then redis.call('HSET', KEYS[1], 'probe', '0') end
  hand_over(tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[1]))
  return 'returned'
end
return 'gone'
"""


class SharedGuards:
    def __init__(self, client: aioredis.Redis, url: str, keeper: LeaseKeeper) -> None:
        """Breakers and slots on `client` (`RedisCounters.client`); `url` only names the server in errors; `keeper`
        renews the slots and tickets held here (the process's one renewer)."""
        self.url = url
        self.keeper = keeper
        self.wakeups = Wakeups(client, url, CHANNEL)
        self._enter = client.register_script(_ENTER)
        self._settle = client.register_script(_SETTLE)
        self._look = client.register_script(_LOOK)
        self._leave = client.register_script(_LEAVE)

    async def _call(self, script: Any, keys: list[str], args: list[Any]) -> Any:
        try:
            return await script(keys=keys, args=args)
        except (redis.RedisError, OSError) as exc:
            raise StoreUnavailable(f"Redis at {safe_url(self.url)} is unreachable: {exc}") from None

    async def _state(self, script: Any, keys: list[str], args: list[Any]) -> tuple[str, float]:
        state, seconds = await self._call(script, keys, args)
        return _text(state), float(_text(seconds))

    @staticmethod
    def _keys(api: str) -> list[str]:
        return [f"{PREFIX}breaker:{api}", f"{PREFIX}slots:{api}", f"{PREFIX}queue:{api}", f"{PREFIX}tickets:{api}"]

    async def enter(self, api: str, *, reset_after: float, limit: int, wait: float, group: str = ANONYMOUS_GROUP,
                    per_group: int | None = None) -> tuple[str | None, float]:
        """A call's way in: (its slot's lease id, 0) once the breaker lets it pass and a slot is handed to it within
        `wait` seconds; (None, seconds until a probe may pass) while the breaker is open; (None, 0) when no slot
        came in time. `group`: the caller group (client) whose slots `per_group` caps. A half-open breaker lets
        exactly one call through (the probe)."""
        ticket = secrets.token_hex(8) + group
        keys = self._keys(api)
        cap = min(per_group or limit, limit)
        args = [repr(float(reset_after)), ticket, limit, cap, self.keeper.seconds, repr(float(max(wait, 0.0)))]
        if wait <= 0:
            state, seconds = await self._state(self._enter, keys, args)
        else:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + wait
            told = await self.wakeups.expect(ticket, wait)
            try:
                state, seconds = await self._state(self._enter, keys, args)
                if state == "queued":
                    state, seconds = await self._wait(keys, args[:5], told, deadline, seconds)
            finally:
                self.wakeups.forget(ticket)
        if state == "ok":
            self.keeper.hold(keys[1], ticket)  # its ticket, if it waited, becomes its slot: renewed as one
            return ticket, 0.0
        self.keeper.drop(ticket)  # told the breaker opened, or its ticket's lease ended: nothing to renew
        return None, seconds if state == "open" else 0.0

    async def _wait(self, keys: list[str], args: list[Any], told: asyncio.Queue[tuple[str, float]],
                    deadline: float, first_end: float) -> tuple[str, float]:
        """A queued ticket's wait, renewed while it lasts: until a hand-over's message, its deadline, or its
        caller's cancellation; a ticket that leaves takes itself out of the queue at once.

        Nothing runs a script when a slot's lease ends, so a waiter nothing woke looks for itself (one script) when
        the first slot's lease should end, and at least every third of a lease (as often as its ticket is renewed):
        a slot handed to a ticket whose instance had just died ends with that ticket's lease, sooner than the slots
        the waiters were told of, and comes back to them within a lease and a third."""
        ticket = args[1]
        loop = asyncio.get_running_loop()
        self.keeper.hold(keys[3], ticket, lost=lambda: self.wakeups.tell(ticket))
        every = self.keeper.lease / 3
        look_at = loop.time() + min(first_end + LOOK_LATE, every)
        try:
            while True:
                try:
                    async with asyncio.timeout_at(min(deadline, look_at)):
                        state, seconds = await told.get()
                except TimeoutError:
                    if loop.time() >= deadline:
                        raise
                    state, seconds = CHECK
                if (state, seconds) == CHECK:
                    state, seconds = await self._state(self._look, keys, args)
                    if state == "queued":
                        look_at = loop.time() + min(seconds + LOOK_LATE, every)
                        continue
                return state, seconds
        except BaseException as exc:
            self.keeper.drop(ticket)
            # Shielded: a cancelled waiter leaves the queue all the same (or it stands until its lease ends).
            try:
                await asyncio.shield(self._call(self._leave, keys, args[:4]))
            except StoreUnavailable as unreachable:
                logger.warning("a call that stopped waiting for a slot is still queued (until its lease ends): %s",
                               unreachable)
            if isinstance(exc, TimeoutError):
                return "busy", 0.0
            raise

    async def settle(self, api: str, lease_id: str | None, ok: bool | None, *, failures: int, reset_after: float,
                     limit: int, per_group: int | None = None) -> None:
        """A call's way out: its slot back (to the next waiter, in order), and its verdict (`None`: none, e.g.
        cancelled; a held probe is given back). `limit`, `per_group`: as the call entered with."""
        verdict = -1 if ok is None else int(ok)
        if lease_id:
            self.keeper.drop(lease_id)
        await self._call(self._settle, self._keys(api),
                         [lease_id or "", verdict, failures, repr(float(reset_after)), limit,
                          min(per_group or limit, limit)])

    async def aclose(self) -> None:
        await self.wakeups.aclose()


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
