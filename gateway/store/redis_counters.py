"""What several gateway instances count together, on Redis: the rate-limit token buckets (and, through
`guards`, the breakers and concurrency slots of `gateway.store.redis_slots`).

`gateway: {redis: redis://host:6379/0}` puts every bucket in Redis (redis-py's asyncio client); the
rest of the state stays in the store (`CountedStore` hands `take_tokens` to Redis and everything
else to the store). One Lua script takes from all of a call's buckets or none, with Redis's own
clock, so a limit of N per minute lets exactly N calls through across every instance. Keys share
one hash tag, so the script's keys sit in one slot of a Redis Cluster too, and expire once a bucket
would be full again (nothing to remember then).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import redis
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

from ..config.settings import DEFAULT_SHARED_STATE_TIMEOUT
from .base import (
    ApprovalRecord,
    ApprovalStatus,
    AuditQuery,
    AuditRow,
    Bucket,
    ConnectionRecord,
    PendingConnection,
    ResponseRecord,
    RunRecord,
    RunStatus,
    Store,
)
from .lease_keeper import LeaseKeeper
from .postgres_schema import safe_url
from .redis_scripts import unavailable
from .redis_slots import SharedGuards
from .redis_watch import watch_of, watched_connections
from .server_watch import settle

KEY_PREFIX = "gateway:{buckets}:"
HEALTH_CHECK_SECONDS = 10
"""A pooled Redis connection idle this long is checked (PING) before it is used again."""
RETRIES = 2
"""Times a command is sent again when its connection turns out closed."""

# KEYS: the buckets; ARGV: cost, then rate and burst of each bucket. Returns the seconds to wait as a string
# (Lua numbers come back as integers otherwise): "0" granted, "inf" never.
_TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local cost = tonumber(ARGV[1])
local levels = {}
local wait = 0
for i, key in ipairs(KEYS) do
  local rate = tonumber(ARGV[2 * i])
  local burst = tonumber(ARGV[2 * i + 1])
  local held = redis.call('HMGET', key, 'tokens', 'updated')
  local tokens = burst
  if held[1] then
    tokens = math.min(burst, tonumber(held[1]) + math.max(0, now - tonumber(held[2])) * rate)
  end
  levels[i] = tokens
  if tokens < cost then
    if rate <= 0 then
      wait = math.huge
    else
      wait = math.max(wait, (cost - tokens) / rate)
    end
  end
end
if wait > 0 then
  if wait == math.huge then return 'inf' end
  return tostring(wait)
end
for i, key in ipairs(KEYS) do
  local rate = tonumber(ARGV[2 * i])
  local burst = tonumber(ARGV[2 * i + 1])
  redis.call('HSET', key, 'tokens', tostring(levels[i] - cost), 'updated', tostring(now))
  if rate > 0 then
    redis.call('EXPIRE', key, math.ceil((burst - levels[i] + cost) / rate) + 1)
  end
end
return '0'
"""


class RedisCounters:
    def __init__(self, url: str, *, timeout: float = DEFAULT_SHARED_STATE_TIMEOUT) -> None:
        """Check that Redis at `url` answers (a clear ConfigError at start when not) and prepare the client.

        Parameters:
            url: `redis://[:password@]host:port/db` (or `rediss://` for TLS).
            timeout: seconds for connecting and for each command's answer (`gateway.shared_state_timeout`).
        """
        from ..errors import ConfigError

        self.url = url
        try:
            with redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout) as probe:
                probe.ping()
        except (redis.RedisError, OSError) as exc:
            raise ConfigError(f"cannot use Redis at {safe_url(url)} (agents.yaml gateway.redis): {exc}") from None
        self._client: aioredis.Redis = aioredis.Redis.from_url(
            url, socket_connect_timeout=timeout, socket_timeout=timeout,
            # A pooled connection idle this long is PINGed before its next command: one Redis dropped without a
            # word (a restart behind a proxy, a failover, a NAT's expiry) is found and replaced there, not by
            # failing a call minutes after Redis is back.
            health_check_interval=HEALTH_CHECK_SECONDS,
            # A command whose connection turns out closed is sent again on a new one (connection errors only:
            # after a timeout the script may have run, and a Redis that did not answer in `timeout` seconds is not
            # asked again: the caller is told at once, not after RETRIES more timeouts).
            retry=Retry(ExponentialBackoff(cap=0.2, base=0.01), RETRIES, supported_errors=(redis.ConnectionError,)),
            retry_on_error=[redis.ConnectionError],
            # One log line when Redis is slow past the timeout, one when it is gone, one when it is back
            # (`gateway.store.redis_watch`).
            connection_class=watched_connections(url, timeout))
        self._take = self._client.register_script(_TAKE)
        self._guards: SharedGuards | None = None
        self._keeper: LeaseKeeper | None = None

    @property
    def client(self) -> aioredis.Redis:
        """The asyncio client (one pool per process) the shared guards and budgets run their scripts on."""
        return self._client

    @property
    def keeper(self) -> LeaseKeeper:
        """The process's renewer of the places it holds in Redis (clients' shares, apis' slots, waiters' tickets):
        one for all of them, so one round trip a period renews every place."""
        if self._keeper is None:
            self._keeper = LeaseKeeper(self._client, self.url)
        return self._keeper

    @property
    def guards(self) -> SharedGuards:
        """Breakers and concurrency slots on the same Redis (`gateway.store.redis_slots`)."""
        if self._guards is None:
            self._guards = SharedGuards(self._client, self.url, self.keeper)
        return self._guards

    async def take_tokens(self, buckets: Sequence[Bucket], cost: float = 1.0) -> float:
        """`Store.take_tokens`, counted in Redis."""
        if not buckets:
            return 0.0
        args: list[Any] = [repr(float(cost))]
        for bucket in buckets:
            args += [repr(float(bucket.rate)), repr(float(bucket.burst))]
        try:
            answer = await self._take(keys=[KEY_PREFIX + b.key for b in buckets], args=args)
        except (redis.RedisError, OSError) as exc:
            raise unavailable(self.url, exc, self._client) from None
        text = answer.decode() if isinstance(answer, bytes) else str(answer)
        return math.inf if text == "inf" else float(text)

    async def ping(self) -> None:
        try:
            await self._client.ping()
        except (redis.RedisError, OSError) as exc:
            raise unavailable(self.url, exc, self._client) from None

    async def check(self) -> None:
        """`ping`, asked again while a timeout leaves slow and gone undecided (`server_watch.settle`): the sweep's."""
        await settle(self.ping, watch_of(self._client))

    async def aclose(self) -> None:
        if self._guards is not None:
            await self._guards.aclose()
        await self._client.aclose()


class CountedStore(Store):
    """A store whose rate-limit buckets are counted in Redis; everything else is the inner store's."""

    def __init__(self, inner: Store, counters: RedisCounters) -> None:
        self.inner = inner
        self.counters = counters
        self.watch = inner.watch  # the store's server's (Redis has its own, `counters`)

    async def save_run(self, run: RunRecord, approvals: list[ApprovalRecord], *,
                       pending_cap: int | None = None) -> bool:
        return await self.inner.save_run(run, approvals, pending_cap=pending_cap)

    async def get_run(self, run_id: str) -> RunRecord | None:
        return await self.inner.get_run(run_id)

    async def get_approval(self, approval_id: str) -> ApprovalRecord | None:
        return await self.inner.get_approval(approval_id)

    async def list_approvals(
        self, *, status: ApprovalStatus | None = "pending", run_id: str | None = None, client: str | None = None,
        limit: int = 100, fair: bool = False,
    ) -> list[ApprovalRecord]:
        return await self.inner.list_approvals(status=status, run_id=run_id, client=client, limit=limit, fair=fair)

    async def pending_count(self, client: str | None) -> int:
        return await self.inner.pending_count(client)

    async def decide_approval(
        self, approval_id: str, *, approve: bool, arguments: dict[str, Any] | None = None, reason: str | None = None,
        by: str | None = None,
    ) -> ApprovalRecord | None:
        return await self.inner.decide_approval(approval_id, approve=approve, arguments=arguments, reason=reason,
                                                by=by)

    async def claim_run(self, run_id: str) -> RunRecord | None:
        return await self.inner.claim_run(run_id)

    async def finish_run(self, run_id: str, status: RunStatus) -> None:
        await self.inner.finish_run(run_id, status)

    async def reopen_run(self, run_id: str, approval_ids: Sequence[str], *, status: RunStatus) -> bool:
        return await self.inner.reopen_run(run_id, approval_ids, status=status)

    async def stuck_runs(self, before: float) -> list[RunRecord]:
        return await self.inner.stuck_runs(before)

    async def add_audit(self, row: AuditRow) -> None:
        await self.inner.add_audit(row)

    async def update_audit(self, row: AuditRow) -> None:
        await self.inner.update_audit(row)

    def add_audit_now(self, row: AuditRow) -> bool:
        return self.inner.add_audit_now(row)

    def update_audit_now(self, row: AuditRow) -> bool:
        return self.inner.update_audit_now(row)

    async def list_audit(self, *, limit: int = 100, agents: set[str] | None = None,
                         query: AuditQuery | None = None) -> list[AuditRow]:
        return await self.inner.list_audit(limit=limit, agents=agents, query=query)

    async def prune_audit(self, before: float) -> int:
        return await self.inner.prune_audit(before)

    async def save_response(self, record: ResponseRecord, *, keep: int | None = None) -> list[str]:
        return await self.inner.save_response(record, keep=keep)

    async def prune_conversations(self, before: float) -> int:
        return await self.inner.prune_conversations(before)

    async def end_session(self, session: str, until: float) -> None:
        await self.inner.end_session(session, until)

    async def session_ended(self, session: str) -> bool:
        return await self.inner.session_ended(session)

    async def ping(self) -> None:
        await self.inner.ping()
        await self.counters.ping()

    async def check_writable(self) -> None:
        await self.inner.check_writable()
        await self.counters.ping()

    async def check(self) -> None:
        try:
            await self.inner.check()
        finally:  # Redis asked whether the store answers or not
            await self.counters.check()

    def readiness(self) -> list[tuple[str, Callable[[], Awaitable[None]]]]:
        return [*self.inner.readiness(), ("redis", self.counters.ping)]

    async def get_response(self, response_id: str) -> ResponseRecord | None:
        return await self.inner.get_response(response_id)

    async def get_responses(self, response_ids: Sequence[str]) -> dict[str, ResponseRecord]:
        return await self.inner.get_responses(response_ids)

    async def save_connection(self, record: ConnectionRecord) -> None:
        await self.inner.save_connection(record)

    async def get_connection(self, subject: str, api: str) -> ConnectionRecord | None:
        return await self.inner.get_connection(subject, api)

    async def list_connections(self, subject: str) -> list[ConnectionRecord]:
        return await self.inner.list_connections(subject)

    async def delete_connection(self, subject: str, api: str) -> bool:
        return await self.inner.delete_connection(subject, api)

    async def add_pending_connection(self, pending: PendingConnection) -> None:
        await self.inner.add_pending_connection(pending)

    async def take_pending_connection(self, state: str, now: float) -> PendingConnection | None:
        return await self.inner.take_pending_connection(state, now)

    async def take_tokens(self, buckets: Sequence[Bucket], cost: float = 1.0) -> float:
        return await self.counters.take_tokens(buckets, cost)

    async def aclose(self) -> None:
        try:
            await self.counters.aclose()
        finally:
            await self.inner.aclose()
