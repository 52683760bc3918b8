"""Rate limits: token buckets per client, per agent and per tool, kept in the `Store`.

Configured in agents.yaml under `gateway: {rate_limits: ...}`; a limit is `"<count>/<s|min|h>"`
(a bucket of `count` tokens refilled over that window) or `{rate: "10/s", burst: 20}`:

```yaml
gateway:
  rate_limits:
    client: 600/min        # default for every client (anonymous callers share the client "anonymous")
    agent: 300/min         # default for every agent
    tool: 120/min          # default for every catalog tool
    clients: {ci-bot: 60/min}
    agents: {clerk: 100/min}
    tools: {createIssue: {rate: 1/s, burst: 5}}
```

No setting, no limit. The settings are parsed once, with the rest of `gateway:`, in
`gateway.config.settings`. A request is charged to its client and agent buckets (all or none); each tool call
to its tool bucket. Refusals carry the seconds to wait, answered as HTTP 429 with `Retry-After`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..config.settings import Limit, RateLimits, parse_limit
from ..errors import RateLimited, StoreUnavailable
from ..kernel.caller import current_caller
from ..messages import ToolResult
from ..store import Bucket, Store

if TYPE_CHECKING:
    from ..catalog import AgentTool
    from ..kernel.calls import Invocation, Proceed

__all__ = ["ANONYMOUS", "ChargeToolBucket", "Limit", "RateLimiter", "RateLimits", "parse_limit"]

ANONYMOUS = "anonymous"


class RateLimiter:
    def __init__(self, store: Store, limits: RateLimits) -> None:
        """Charge requests and tool calls to their buckets.

        Parameters:
            store: where the buckets live (shared by every gateway instance on that store).
            limits: the configured limits; an empty RateLimits never refuses anything.
        """
        self.store = store
        self.limits = limits

    @property
    def limits_requests(self) -> bool:
        """Whether any client or agent limit is configured (else `check_request` never charges anything)."""
        limits = self.limits
        return bool(limits.client or limits.agent or limits.clients or limits.agents)

    @property
    def limits_tools(self) -> bool:
        """Whether any tool limit is configured (else `check_tool` never charges anything)."""
        return bool(self.limits.tool or self.limits.tools)

    async def check_request(self, client: str | None, agent: str | None) -> None:
        """Charge one request to its client and agent; raise RateLimited when either is empty."""
        buckets: list[tuple[str, Bucket]] = []
        client_name = client or ANONYMOUS
        limit = self.limits.clients.get(client_name, self.limits.client)
        if limit:
            buckets.append((f"client {client_name}", Bucket(f"client:{client_name}", limit.rate, limit.burst)))
        if agent:
            limit = self.limits.agents.get(agent, self.limits.agent)
            if limit:
                buckets.append((f"agent {agent}", Bucket(f"agent:{agent}", limit.rate, limit.burst)))
        await self._take(buckets)

    def tool_limit(self, tool: str, *aliases: str) -> Limit | None:
        """The limit of catalog tool `tool` (an override may name it by an alias, e.g. its operationId); None: none."""
        return next((self.limits.tools[n] for n in (tool, *aliases) if n in self.limits.tools), self.limits.tool)

    async def check_tool(self, tool: str, *aliases: str) -> None:
        """Charge one call of catalog tool `tool` (an override may name it by an alias, e.g. its operationId)."""
        limit = self.tool_limit(tool, *aliases)
        if limit:
            await self._take([(f"tool {tool}", Bucket(f"tool:{tool}", limit.rate, limit.burst))])

    async def _take(self, buckets: list[tuple[str, Bucket]]) -> None:
        if not buckets:
            return
        retry_after = await self.store.take_tokens([bucket for _, bucket in buckets])
        if retry_after > 0:
            scope = ", ".join(label for label, _ in buckets) if len(buckets) > 1 else buckets[0][0]
            raise RateLimited(scope, retry_after)


class ChargeToolBucket:
    """The pipeline's rate-limit stage: each call is charged to its tool's bucket (a seam for budgets too).

    A refusal is a `rate_limited` result for the model; the direct-call door answers it with 429 and the
    `Retry-After` it finds in the caller's notes."""

    def __init__(self, limiter: RateLimiter) -> None:
        self.limiter = limiter

    def for_tool(self, agent_tool: AgentTool) -> ChargeToolBucket | None:
        """A tool that no limit names, with no default tool limit, is charged nothing: the stage is left out of its
        chain (the limiter is its generation's: a reload builds a new pipeline)."""
        tool = agent_tool.tool
        if tool is None or self.limiter.tool_limit(tool.name, *(n for n in (tool.operation_id,) if n)):
            return self
        return None

    async def __call__(self, invocation: Invocation, proceed: Proceed) -> ToolResult:
        tool = invocation.tool
        try:
            await self.limiter.check_tool(tool.name, *(n for n in (tool.operation_id,) if n))
        except RateLimited as exc:
            notes = current_caller().notes
            if notes is not None:  # lets a direct call's 429 carry Retry-After
                notes["retry_after"] = exc.retry_after_header
            return ToolResult.failure("rate_limited", f"{exc} Wait before calling {tool.name} again.")
        except StoreUnavailable as exc:  # the buckets' store did not answer: a tool error, not a failed request
            return ToolResult.failure("store_unavailable", exc.refused(f"the call to {tool.name}"))
        return await proceed(invocation)
