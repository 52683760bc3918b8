"""The breaker-and-concurrency stage when `gateway.redis` is set: one breaker and one `max_concurrency` per api
across every instance.

Same contract as `gateway.safety.breaker.GuardApi` (a paused api answers at once, a busy one after the call's
timeout), with the state in Redis (`gateway.store.redis_slots`): failures seen by one instance pause the api for
all of them, and the slots count the calls in flight everywhere. The breaker is per api, not per api and client
as in one process: Redis holds one verdict per api, which every instance reads. The slots keep one process's
promise (`gateway.safety.fair_slots`) across instances: a freed slot goes to the waiting client that holds the
fewest, ties to the one waiting longest, and `max_concurrency_per_client` caps what one client holds.
"""

from __future__ import annotations

import asyncio
import logging

from ..config.model import Manifest
from ..config.settings import GuardSettings
from ..errors import StoreUnavailable
from ..kernel.calls import Invocation, Proceed
from ..messages import ToolResult
from ..store.redis_slots import QueueFull, SharedGuards
from .breaker import ANONYMOUS_GROUP, circuit_open, is_failure, too_many_waiting

logger = logging.getLogger("gateway.safety")


class SharedGuardApi:
    """The pipeline's breaker-and-concurrency stage on Redis."""

    def __init__(self, manifest: Manifest, guards: SharedGuards, settings: GuardSettings) -> None:
        self.manifest = manifest
        self.guards = guards
        self.settings = settings

    async def __call__(self, invocation: Invocation, proceed: Proceed) -> ToolResult:
        api = invocation.tool.api
        configured = self.manifest.apis.get(api)
        limit = (configured.max_concurrency if configured else None) or self.settings.max_concurrency
        per_client = (configured.max_concurrency_per_client if configured else None) \
            or self.settings.max_concurrency_per_client
        timeout = invocation.agent_tool.timeout or self.manifest.api(api).timeout
        group = invocation.client or ANONYMOUS_GROUP
        try:
            lease, retry_in = await self.guards.enter(api, reset_after=self.settings.reset_after, limit=limit,
                                                      wait=timeout, group=group, per_group=per_client,
                                                      waiting=self.settings.max_waiting_calls_per_client)
        except StoreUnavailable as exc:  # Redis did not answer: a tool error the model reads, 503 on a direct call
            return ToolResult.failure("store_unavailable", exc.refused(f"the call to the {api} API"))
        except QueueFull as full:
            return too_many_waiting(api, invocation.client, full.cap)
        if lease is None and retry_in > 0:
            return circuit_open(api, self.settings.failures, retry_in)
        if lease is None:
            return ToolResult.failure(
                "timeout", f"The {api} API is busy (all {limit} concurrent calls in use across the gateway's "
                           f"instances, or this client's {per_client}, for {timeout:g} s); try again later."
                if per_client and per_client < limit else
                f"The {api} API is busy (all {limit} concurrent calls in use across the gateway's instances for "
                f"{timeout:g} s); try again later.")
        result: ToolResult | None = None
        try:
            result = await proceed(invocation)
        finally:
            # Shielded: a cancelled caller must still give its slot back (and a held probe), or it stays taken
            # until its lease runs out.
            verdict = None if result is None else not is_failure(result)
            try:
                await asyncio.shield(self.guards.settle(api, lease, verdict, failures=self.settings.failures,
                                                        reset_after=self.settings.reset_after, limit=limit,
                                                        per_group=per_client))
            except StoreUnavailable as exc:
                # The call is done (it may have run): its result and audit row matter more than the slot, which
                # its lease gives back on its own; a lost verdict only delays the breaker by one call.
                logger.warning("the %s API's slot was not given back (it returns when its lease ends): %s", api, exc)
        return result
