from __future__ import annotations

import pytest

from gateway.errors import RateLimited
from gateway.safety.ratelimit import RateLimiter, RateLimits
from gateway.store import MemoryStore

pytestmark = pytest.mark.anyio


async def test_client_bucket_refuses_with_retry_after() -> None:
    limiter = RateLimiter(MemoryStore(), RateLimits.model_validate({"client": "2/min"}))
    await limiter.check_request("ci", "clerk")
    await limiter.check_request("ci", "clerk")
    with pytest.raises(RateLimited) as refused:
        await limiter.check_request("ci", "clerk")
    assert refused.value.scope == "client ci"
    assert 1 <= int(refused.value.retry_after_header) <= 30
    await limiter.check_request("other", "clerk")  # another client has its own bucket


async def test_agent_and_per_name_overrides() -> None:
    limits = RateLimits.model_validate({"agent": "100/min", "agents": {"clerk": "1/min"}, "tool": "100/min",
                                        "tools": {"createItem": "1/min"}})
    limiter = RateLimiter(MemoryStore(), limits)
    await limiter.check_request(None, "clerk")
    with pytest.raises(RateLimited, match="agent clerk"):
        await limiter.check_request(None, "clerk")
    await limiter.check_request(None, "weather")
    await limiter.check_tool("shop_createItem", "createItem")  # matched by its operationId alias
    with pytest.raises(RateLimited, match="tool shop_createItem"):
        await limiter.check_tool("shop_createItem", "createItem")
    await limiter.check_tool("listItems")


async def test_no_limits_never_refuse() -> None:
    limiter = RateLimiter(MemoryStore(), RateLimits())
    for _ in range(50):
        await limiter.check_request("c", "a")
        await limiter.check_tool("t")
