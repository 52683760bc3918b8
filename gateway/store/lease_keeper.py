"""Places held in Redis for as long as the work holding them lives: leased briefly, renewed while held.

A client's share across instances (`gateway.safety.shared_shares`) is a sorted set in Redis, one member per
place, scored with the end of its lease. A lease as long as the work's deadline lets a killed instance's places
stand that long (an agent's `timeout` can be an hour), and work outliving it (a streamed answer still being
sent, the run's audit row) lost its place while alive. So a place is leased for `LEASE` seconds and, while its
work lives, renewed every `LEASE / 3`: one task per process renews every place it holds, one Lua script (one round
trip) for all of them; it ends a period after the last place was given back. A dead instance renews nothing, so its
places end at most `LEASE` seconds after it stopped. An api's slots and the tickets of the calls waiting for one
(`gateway.store.redis_slots`) are leased the same way, by the same task.

A renewal that does not reach Redis is said once (its places end with their lease unless a later one does), and the
first that reaches it again once: one line when Redis goes, one when it is back, as the Redis client's connections say
it (`gateway.store.redis_watch`), not one every period of the outage; a renewal that only timed out while Redis is slow,
not yet gone (`ServerWatch.late`), says nothing of its own: the watch's line said Redis was slow. Places a renewal finds
gone (a Redis restarted without its data, or flushed, loses every one at once) are said in one line: how many, in which
keys, and which instance found them gone.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections import Counter
from collections.abc import Callable
from typing import Any

import redis
import redis.asyncio as aioredis

from .postgres_schema import safe_url
from .redis_watch import watch_of, went_away

logger = logging.getLogger("gateway.safety")

LEASE = 30.0
"""Seconds a place outlives its instance's last renewal (so a dead instance's places last at most that long)."""

# KEYS: each held place's sorted set (one per place, repeated when several share one); ARGV: lease seconds, then
# each place's member. Pushes each live place's lease to now + lease (with Redis's clock) and returns the members
# that were gone (their lease had ended: renewing them now would count them past a share others already took).
# Each key expires with its longest lease, as when a place is taken.
_RENEW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local lease = tonumber(ARGV[1])
local lost = {}
for i, key in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  if redis.call('ZADD', key, 'XX', 'CH', now + lease, ARGV[i + 1]) == 0 then
    lost[#lost + 1] = ARGV[i + 1]
  else
    local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    redis.call('PEXPIREAT', key, math.ceil(tonumber(last[2]) * 1000) + 1000)
  end
end
return lost
"""


class LeaseKeeper:
    """The places this process holds in Redis, renewed until given back.

    Parameters:
        client: the Redis client (`RedisCounters.client`).
        url: names the server in warnings.
        lease: seconds a place is leased for (`LEASE`); renewed every third of it.
    """

    def __init__(self, client: aioredis.Redis, url: str, *, lease: float = LEASE) -> None:
        self.url = url
        self.lease = lease
        self._client = client
        self._renew = client.register_script(_RENEW)
        self._failing = False
        """Whether the last renewal did not reach Redis (said once, until one does)."""
        self._held: dict[str, tuple[str, Callable[[], None] | None]] = {}
        """member -> its sorted set and what to call should it be found gone, for every place held here now."""
        self._task: asyncio.Task[None] | None = None

    @property
    def seconds(self) -> str:
        """The lease as a Lua script's argument."""
        return repr(float(self.lease))

    def hold(self, key: str, member: str, lost: Callable[[], None] | None = None) -> None:
        """Renew the place `member` of `key` (just taken, with a lease of `lease`) until `drop` (or another `hold`
        of the same member, in another key: a waiter's ticket that became a slot). `lost`: called, instead of the
        warning, when a renewal finds the member gone from `key` (a waiter's ticket is taken out of its queue when
        a slot is handed to it: its waiter is told to look)."""
        self._held[member] = (key, lost)
        if self._task is None or self._task.done():  # done: cancelled with its event loop, or failed
            self._task = asyncio.get_running_loop().create_task(self._renew_while_held())

    def drop(self, member: str) -> None:
        """Stop renewing the place (given back, or about to be)."""
        self._held.pop(member, None)

    async def _renew_while_held(self) -> None:
        # The task outlives its last place by up to a period rather than ending with it: an api's slots come and go
        # with every call, and a task made and ended per call cost more than the dict entry does (bench/README.md).
        while True:
            await asyncio.sleep(self.lease / 3)
            if not self._held:  # no await between this test and the reset: a `hold` now starts a new task
                self._task = None
                return
            await self.renew()

    async def renew(self) -> None:
        """Push every held place's lease on (what the task does every third of the lease)."""
        held = [(member, key) for member, (key, _) in self._held.items()]
        try:
            lost: Any = await self._renew(keys=[key for _, key in held], args=[self.seconds, *(m for m, _ in held)])
        except (redis.RedisError, OSError) as exc:
            went_away(self._client, exc)  # a timeout too: late, or gone once nothing has answered for a while
            watch = watch_of(self._client)
            if watch is not None and watch.slow_since is not None:  # (never set while it is said down)
                return  # a slow Redis (said by its watch): the script likely ran late, and the next period tries again
            if not self._failing:
                self._failing = True
                logger.warning("%s held in Redis (clients' shares, apis' slots, waiters' tickets) not renewed (each "
                               "ends with its lease unless a later renewal reaches Redis): Redis at %s: %s (said "
                               "once: a line will say when a renewal reaches it again)",
                               _places(len(held)), safe_url(self.url), exc)
            return
        if self._failing:
            self._failing = False
            logger.info("the places held in Redis at %s are renewed again (%s now)", safe_url(self.url),
                        _places(len(held)))
        renewed = dict(held)
        ended: Counter[str] = Counter()
        for member in lost:
            name = member.decode() if isinstance(member, bytes) else str(member)
            entry = self._held.get(name)
            if entry is None or entry[0] != renewed.get(name):
                continue  # given back, or held in another key, while the renewal was on its way
            del self._held[name]
            if entry[1] is not None:
                entry[1]()
                continue
            ended[entry[0]] += 1
        if ended:  # one line for the event (a Redis restarted empty loses every place at once), not one a place
            logger.warning("%s held in Redis at %s by this instance (%s) ended with their lease while their work went "
                           "on (Redis lost them: restarted without its data, or flushed; or it was out of reach for "
                           "longer than %g s, or this process stalled): that work is no longer counted (%s)",
                           _places(sum(ended.values())), safe_url(self.url), _instance(), self.lease, _by_key(ended))


def _places(count: int) -> str:
    return f"{count} place{'' if count == 1 else 's'}"


def _instance() -> str:
    """This process, as the log names it when its places are found gone (every instance renews its own; asked when
    said: a worker forked after the import has a pid of its own)."""
    return f"host {socket.gethostname()}, pid {os.getpid()}"


def _by_key(ended: Counter[str], most: int = 4) -> str:
    """How many places ended in each sorted set, the fullest first (`most` of them named)."""
    named = [f"{key}: {count}" for key, count in ended.most_common(most)]
    if len(ended) > most:
        named.append(f"{len(ended) - most} more keys")
    return ", ".join(named)
