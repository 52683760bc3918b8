"""An api's concurrency slots across every gateway instance, in Redis: a call's way in and its way out.

The call pipeline's guard stage on Redis (`gateway.safety.shared_breaker.SharedGuardApi`, used when
`gateway.redis` is set) calls `enter` on a call's way in and `settle` on its way out. `max_concurrency` is the
number of calls in flight to that api across all instances, and its breaker (`gateway.store.redis_breaker`) is
one for all of them. Each way is one Lua script, so it is atomic with Redis's own clock.

The slots are a sorted set per api: one member per call in flight, scored with its lease's end. The lease is renewed
while the call lives (`gateway.store.lease_keeper`), so the slots of an instance killed mid-call come back at most a
lease (30 s) after it died. A call that finds every slot taken waits in the queue (`gateway.store.redis_slot_queue`)
until a slot given back is handed to it.
"""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import redis.asyncio as aioredis

from .lease_keeper import LeaseKeeper
from .redis_scripts import reply_state, run_script
from .redis_slot_queue import HAND_OVER, PREFIX, SlotQueue

ANONYMOUS_GROUP = "anonymous"
"""The caller group of calls without a client (as `gateway.safety.breaker` names it)."""

# ARGV: reset_after, ticket, limit, per-group cap, lease seconds, seconds the call may wait (0: never queued), the
# most of a group's calls that may wait (0: any number). Returns {'ok' | 'open' | 'busy' | 'full' | 'queued',
# seconds}: one round trip for a call's way in. 'open': the seconds until a probe may pass; 'full': its group has as
# many calls waiting as it may (not queued); 'queued': until the first slot's lease ends (the waiter looks for itself
# then, should nothing wake it before: a slot whose lease ended is handed over by the next script that runs).
_ENTER = HAND_OVER + """
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
local most = tonumber(ARGV[7])
if most > 0 and waiting_of(string.sub(ARGV[2], 17)) >= most then return {'full', '0'} end
queue_ticket(ARGV[2], lease)
expire_with_last(KEYS[4])
local keep = math.ceil((wait + lease) * 1000)
for _, key in ipairs({KEYS[3], KEYS[5], KEYS[6]}) do
  if redis.call('PTTL', key) < keep then redis.call('PEXPIRE', key, keep) end
end
return {'queued', first_end(lease)}
"""

# ARGV: lease id, verdict (1 ok, 0 failed, -1 none: cancelled or no slot), failures, reset_after, limit, per-group
# cap. Gives the slot back (to the next waiter) and records the verdict: one round trip for a call's way out.
_SETTLE = HAND_OVER + """
if ARGV[1] ~= '' then redis.call('ZREM', KEYS[2], ARGV[1]) end
local reset = tonumber(ARGV[4])
local consecutive = record_verdict(KEYS[1], tonumber(ARGV[2]), tonumber(ARGV[3]), reset)
hand_over(tonumber(ARGV[5]), tonumber(ARGV[6]), reset)
return consecutive
"""


class QueueFull(Exception):
    """The caller group has as many calls waiting for the api's slots as it may: this one was not queued."""

    def __init__(self, cap: int) -> None:
        super().__init__(f"{cap} calls waiting")
        self.cap = cap


class SharedGuards:
    def __init__(self, client: aioredis.Redis, url: str, keeper: LeaseKeeper) -> None:
        """Breakers and slots on `client` (`RedisCounters.client`); `url` only names the server in errors; `keeper`
        renews the slots and tickets held here (the process's one renewer)."""
        self.url = url
        self.keeper = keeper
        self.queue = SlotQueue(client, url, keeper)
        self._enter = client.register_script(_ENTER)
        self._settle = client.register_script(_SETTLE)

    @staticmethod
    def _keys(api: str) -> list[str]:
        return [f"{PREFIX}{part}:{api}" for part in ("breaker", "slots", "queue", "tickets", "heads", "lines")]

    async def enter(self, api: str, *, reset_after: float, limit: int, wait: float, group: str = ANONYMOUS_GROUP,
                    per_group: int | None = None, waiting: int | None = None) -> tuple[str | None, float]:
        """A call's way in: (its slot's lease id, 0) once the breaker lets it pass and a slot is handed to it within
        `wait` seconds; (None, seconds until a probe may pass) while the breaker is open; (None, 0) when no slot
        came in time. `group`: the caller group (client) whose slots `per_group` caps, and whose calls waiting at
        once `waiting` caps (`QueueFull` past it: the call is not queued). A half-open breaker lets exactly one
        call through (the probe)."""
        ticket = secrets.token_hex(8) + group
        keys = self._keys(api)
        cap = min(per_group or limit, limit)
        args = [repr(float(reset_after)), ticket, limit, cap, self.keeper.seconds, repr(float(max(wait, 0.0))),
                waiting or 0]
        if wait <= 0:
            state, seconds = await self._run_enter(keys, args)
        else:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + wait
            told = await self.queue.wakeups.expect(ticket, wait)
            try:
                state, seconds = await self._run_enter(keys, args)
                if state == "queued":
                    state, seconds = await self.queue.wait(keys, args[:5], told, deadline, seconds)
            finally:
                self.queue.wakeups.forget(ticket)
        if state == "ok":
            self.keeper.hold(keys[1], ticket)  # its ticket, if it waited, becomes its slot: renewed as one
            return ticket, 0.0
        if state == "full":
            raise QueueFull(waiting or 0)
        self.keeper.drop(ticket)  # told the breaker opened, or its ticket's lease ended: nothing to renew
        return None, seconds if state == "open" else 0.0

    async def _run_enter(self, keys: list[str], args: list[Any]) -> tuple[str, float]:
        try:
            return reply_state(await run_script(self._enter, keys, args, self.url))
        except BaseException:
            # Cancelled (its client gone) or told that Redis did not answer while the script's reply was on its way:
            # the script may have run, and taken a slot (or queued the ticket) that nothing would give back before
            # its lease ends (30 s; nothing renews it). The leave script gives it back by ticket, in a task of its
            # own: the caller waits for nothing more. It reaches Redis after the entry script: sent later, on
            # another connection (redis-py drops the one whose reply it stopped waiting for), and Redis reads its
            # clients' commands in the order they arrived; against a hung Redis both run when it answers again.
            self.queue.leave_soon(keys, args[:4])
            raise

    async def settle(self, api: str, lease_id: str | None, ok: bool | None, *, failures: int, reset_after: float,
                     limit: int, per_group: int | None = None) -> None:
        """A call's way out: its slot back (to the next waiter, in order), and its verdict (`None`: none, e.g.
        cancelled; a held probe is given back). `limit`, `per_group`: as the call entered with."""
        verdict = -1 if ok is None else int(ok)
        if lease_id:
            self.keeper.drop(lease_id)
        await run_script(self._settle, self._keys(api),
                         [lease_id or "", verdict, failures, repr(float(reset_after)), limit,
                          min(per_group or limit, limit)], self.url)

    async def aclose(self) -> None:
        await self.queue.aclose()
