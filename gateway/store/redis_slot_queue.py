"""The calls waiting for an api's slot across every gateway instance, in Redis: a queue of tickets, each handed a
freed slot in order by the script that frees it.

A call that finds every slot taken (`gateway.store.redis_slots`) queues a ticket, scored with its arrival in
`queue` and with its lease's end in `tickets` (renewed as a slot's is, by `gateway.store.lease_keeper`: a dead
instance's tickets end with their lease and are passed over). A slot given back goes straight to a waiter, in the
script that gives it back, in the order `gateway.safety.fair_slots.FairSlots` keeps in one process: to the waiting
caller group (client) that holds the fewest slots, ties to the group whose first waiter came first, no group past
`max_concurrency_per_client`. So a caller that gives a slot back and asks again at once queues behind the waiters
instead of finding the slot free, and no waiter polls: the script publishes the hand-over and the waiter's instance
wakes it (`gateway.store.redis_wakeups`).

A ticket (and the slot's member it becomes) is 16 hex digits and the caller group: the scripts count a group's
slots from the members, with no second structure to keep in step.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import redis.asyncio as aioredis

from ..errors import StoreUnavailable
from .lease_keeper import LeaseKeeper
from .redis_breaker import BREAKER
from .redis_scripts import reply_state, run_script
from .redis_wakeups import CHECK, Told, Wakeups

logger = logging.getLogger("gateway.safety")

PREFIX = "gateway:{guards}:"
"""Every key of the guards (breaker, slots, queue, tickets) shares one hash tag: one slot of a Redis Cluster."""
CHANNEL = PREFIX + "handed"
"""Where the scripts publish each hand-over to a waiter (`gateway.store.redis_wakeups`)."""
LOOK_LATE = 0.01
"""Seconds after the first slot's lease should end that a waiter nothing woke looks for itself (the clocks of
Redis and of this process are not the same one)."""

# KEYS (every guard script's): breaker, slots, queue (tickets by arrival), tickets (by the end of their lease), heads
# (each waiting group by its first waiter's arrival), lines (every ticket as `group NUL arrival hex`, all scored 0:
# by group, then arrival, so a group's first waiter and its count are lookups in the order of the index). A member of
# slots, queue and tickets is 16 hex digits and its caller group. `hand_over` gives the free slots to the waiters
# (see the module's docstring for the order), dropping first the tickets whose lease ended (their instance died);
# while the breaker is open it tells the waiters so instead (they would only fail). Each waiter's instance hears it
# on CHANNEL. A slot handed over looks at the waiting groups in the order of their first waiter until one holds no
# slot (at most the api's `max_concurrency` groups hold any), then takes that group's first waiter: it never walks
# the waiters, however many wait (it did, a ZSCORE each, once per slot handed over: bench/README.md, mend49).
HAND_OVER = BREAKER + """
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

-- A ticket's member of `lines`; `stamp`: its arrival as written in `queue` (17 characters, to the microsecond).
local function line_member(ticket, stamp)
  return string.sub(ticket, 17) .. '\\0' .. string.format('%017.6f', tonumber(stamp)) .. string.sub(ticket, 1, 16)
end

-- A group's first waiter: its ticket, arrival and member of `lines` (nil when none of it waits).
local function first_of(group)
  local first = redis.call('ZRANGEBYLEX', KEYS[6], '[' .. group .. '\\0', '(' .. group .. '\\1', 'LIMIT', 0, 1)[1]
  if first == nil then return nil, nil, nil end
  return string.sub(first, #group + 19) .. group, tonumber(string.sub(first, #group + 2, #group + 18)), first
end

-- The group's head: its first waiter's arrival, or gone with its last waiter.
local function new_head(group)
  local _, arrival = first_of(group)
  if arrival then redis.call('ZADD', KEYS[5], arrival, group) else redis.call('ZREM', KEYS[5], group) end
end

local function waiting_of(group)
  return redis.call('ZLEXCOUNT', KEYS[6], '[' .. group .. '\\0', '(' .. group .. '\\1')
end

local function queue_ticket(ticket, lease)
  local stamp = string.format('%017.6f', now)
  redis.call('ZADD', KEYS[3], stamp, ticket)
  redis.call('ZADD', KEYS[4], now + lease, ticket)
  redis.call('ZADD', KEYS[6], 0, line_member(ticket, stamp))
  redis.call('ZADD', KEYS[5], 'NX', stamp, string.sub(ticket, 17))
end

-- A ticket out of the queue; its group's head moves on to its next waiter. False: it was not queued.
local function unqueue(ticket)
  local stamp = redis.call('ZSCORE', KEYS[3], ticket)
  if not stamp then return false end
  redis.call('ZREM', KEYS[3], ticket)
  redis.call('ZREM', KEYS[4], ticket)
  redis.call('ZREM', KEYS[6], line_member(ticket, stamp))
  new_head(string.sub(ticket, 17))
  return true
end

-- During a rolling upgrade an instance of the version before queues its waiters in the queue and the tickets
-- only, and takes waiters by the queue alone: its tickets get their line and their group's head here, so that they
-- are handed slots as any waiter is (in the order of arrival), and lines whose ticket it took are dropped. The
-- queue and the lines hold the same tickets otherwise: two counts are all a hand-over pays for this.
local function reconcile()
  if redis.call('ZCARD', KEYS[3]) == redis.call('ZCARD', KEYS[6]) then return end
  local queued = redis.call('ZRANGE', KEYS[3], 0, -1, 'WITHSCORES')
  for i = 1, #queued, 2 do
    local ticket, stamp = queued[i], queued[i + 1]
    if redis.call('ZADD', KEYS[6], 'NX', 0, line_member(ticket, stamp)) == 1 then
      redis.call('ZADD', KEYS[5], 'LT', stamp, string.sub(ticket, 17))
    end
  end
  for _, member in ipairs(redis.call('ZRANGE', KEYS[6], 0, -1)) do
    local cut = string.find(member, '\\0', 1, true)
    local group = string.sub(member, 1, cut - 1)
    if not redis.call('ZSCORE', KEYS[3], string.sub(member, cut + 18) .. group) then
      redis.call('ZREM', KEYS[6], member)
      new_head(group)
    end
  end
end

-- The waiting group to hand a slot to: under its cap, holding the fewest, ties to the earliest first waiter.
local function choose(held, per_group)
  local chosen, fewest, start = nil, 0, 0
  while true do
    local groups = redis.call('ZRANGE', KEYS[5], start, start + 63)
    for _, group in ipairs(groups) do
      local h = held[group] or 0
      if h < per_group and (chosen == nil or h < fewest) then
        chosen, fewest = group, h
        if h == 0 then return chosen, fewest end  -- nobody holds fewer, and nobody after waited longer
      end
    end
    if #groups < 64 then return chosen, fewest end
    start = start + 64
  end
end

local function hand_over(limit, per_group, reset)
  if redis.call('ZCARD', KEYS[3]) == 0 then return end  -- nobody waits: all a call without waiters pays here
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  for _, ticket in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now)) do unqueue(ticket) end
  reconcile()
  local free = limit - redis.call('ZCARD', KEYS[2])
  if free <= 0 then return end
  local held = groups_held()
  while free > 0 do
    local group, fewest = choose(held, per_group)
    if group == nil then return end
    local chosen, _, member = first_of(group)
    local lease = chosen and redis.call('ZSCORE', KEYS[4], chosen)
    local state, left = breaker_state(KEYS[1], now, reset)
    if chosen == nil then
      redis.call('ZREM', KEYS[5], group)  -- a head with no line left (never so but by hand): gone
    elseif not lease or not unqueue(chosen) then
      -- a line's ticket gone from the queue some other way (taken by an instance of an older version, which knows
      -- no lines): dropped from its line, and the hand-over looks again (a ticket that version queued meanwhile
      -- may have hidden the difference in count from `reconcile`)
      redis.call('ZREM', KEYS[6], member)
      new_head(group)
      reconcile()
    elseif state == 'open' or state == 'held' then
      redis.call('PUBLISH', '@CHANNEL@', 'open ' .. tostring(left) .. ' ' .. chosen)
    else
      redis.call('ZADD', KEYS[2], lease, chosen)
      expire_with_last(KEYS[2])
      if state == 'probe' then redis.call('HSET', KEYS[1], 'probe', tostring(now + reset)) end
      held[group] = fewest + 1
      free = free - 1
      redis.call('PUBLISH', '@CHANNEL@', 'ok 0 ' .. chosen)
    end
  end
end
""".replace("@CHANNEL@", CHANNEL)

# ARGV: reset_after, ticket, limit, per-group cap, lease seconds. What became of a waiter's ticket, for a waiter
# nothing woke (the first slot's lease ended, a message was lost): {'ok' | 'queued' | 'gone', seconds}, after
# handing the free slots over. 'gone': its lease ended, or it was told the breaker opened and missed it.
_LOOK = HAND_OVER + """
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)  -- (hand_over drops them only while someone waits)
hand_over(tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[1]))
if redis.call('ZSCORE', KEYS[2], ARGV[2]) then return {'ok', '0'} end
if redis.call('ZSCORE', KEYS[3], ARGV[2]) then return {'queued', first_end(tonumber(ARGV[5]))} end
return {'gone', '0'}
"""

# ARGV: reset_after, ticket, limit, per-group cap. A waiter leaving (timed out, its client gone): out of the queue
# at once; a slot handed to it meanwhile (the hand-over and its wake-up are two steps) goes to the next waiter.
_LEAVE = HAND_OVER + """
if unqueue(ARGV[2]) then return 'left' end
if redis.call('ZREM', KEYS[2], ARGV[2]) == 1 then
  give_back_probe(KEYS[1])
  hand_over(tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[1]))
  return 'returned'
end
return 'gone'
"""


class SlotQueue:
    """This process's waiters for apis' slots: how each waits for its ticket's turn, and leaves.

    Parameters:
        client: the Redis client (`RedisCounters.client`).
        url: names the server in errors.
        keeper: renews the tickets waiting here (the process's one renewer).
    """

    def __init__(self, client: aioredis.Redis, url: str, keeper: LeaseKeeper) -> None:
        self.url = url
        self.keeper = keeper
        self.wakeups = Wakeups(client, url, CHANNEL)
        self._look = client.register_script(_LOOK)
        self._leave = client.register_script(_LEAVE)
        self._leaving: set[asyncio.Task[None]] = set()

    async def wait(self, keys: list[str], args: list[Any], told: asyncio.Queue[Told], deadline: float,
                   first_end: float) -> tuple[str, float]:
        """A queued ticket's wait, renewed while it lasts: until a hand-over's message, its deadline, or its
        caller's cancellation; a ticket that leaves takes itself out of the queue at once. `args`: the look
        script's (reset_after, ticket, limit, per-group cap, lease seconds); `told`: from `wakeups.expect`.

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
                    state, seconds = reply_state(await run_script(self._look, keys, args, self.url))
                    if state == "queued":
                        look_at = loop.time() + min(seconds + LOOK_LATE, every)
                        continue
                return state, seconds
        except BaseException as exc:
            self.keeper.drop(ticket)
            # Shielded: a cancelled waiter leaves the queue all the same (or it stands until its lease ends).
            await asyncio.shield(self.leave(keys, args[:4]))
            if isinstance(exc, TimeoutError):
                return "busy", 0.0
            raise

    async def leave(self, keys: list[str], args: list[Any]) -> None:
        """The ticket `args[1]` out of the queue, or its slot given back (to the next waiter) if it holds one: the
        leave script, by ticket, so asking twice (or for a ticket that took nothing) changes nothing. `args`:
        reset_after, ticket, limit, per-group cap. A Redis that does not answer is logged: the ticket or slot
        stands until its lease ends (30 s)."""
        try:
            await run_script(self._leave, keys, args, self.url)
        except StoreUnavailable as unreachable:
            logger.warning("a call that stopped waiting for a slot may still hold its place (until its lease "
                           "ends): %s", unreachable)

    def leave_soon(self, keys: list[str], args: list[Any]) -> None:
        """`leave`, in a task of its own (kept until it ends): for a caller that is gone, or is being told that Redis
        did not answer, and waits for nothing more."""
        task = asyncio.get_running_loop().create_task(self.leave(keys, args))
        self._leaving.add(task)
        task.add_done_callback(self._leaving.discard)

    async def aclose(self) -> None:
        await self.wakeups.aclose()
