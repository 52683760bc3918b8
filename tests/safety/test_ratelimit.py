from __future__ import annotations

import pytest

from gateway.errors import ConfigError, RateLimited
from gateway.safety.ratelimit import Limit, RateLimiter, RateLimits, parse_limit
from gateway.store import MemoryStore

pytestmark = pytest.mark.anyio


def test_parse_limit_forms() -> None:
    assert parse_limit("60/min", "x") == Limit(rate=1.0, burst=60.0)
    assert parse_limit("10/s", "x") == Limit(rate=10.0, burst=10.0)
    assert parse_limit({"rate": "1/s", "burst": 5}, "x") == Limit(rate=1.0, burst=5.0)
    for bad in ("ten/min", "5/fortnight", "0/s", 5, {"burst": 3}, {"rate": "1/s", "burst": 0}):
        with pytest.raises(ConfigError, match="gateway.rate_limits.tool"):
            parse_limit(bad, "gateway.rate_limits.tool")


def test_settings_name_the_bad_key() -> None:
    with pytest.raises(ConfigError, match="unknown key"):
        RateLimits.from_settings({"rate_limits": {"clientz": "1/s"}})
    with pytest.raises(ConfigError, match=r"rate_limits\.agents\.clerk"):
        RateLimits.from_settings({"rate_limits": {"agents": {"clerk": "lots"}}})
    assert not RateLimits.from_settings({})
    limits = RateLimits.from_settings({"rate_limits": {"client": "2/min", "tools": {"createItem": "1/h"}}})
    assert limits.client == Limit(rate=2 / 60, burst=2) and limits.tools["createItem"].burst == 1


async def test_client_bucket_refuses_with_retry_after() -> None:
    limiter = RateLimiter(MemoryStore(), RateLimits.from_settings({"rate_limits": {"client": "2/min"}}))
    await limiter.check_request("ci", "clerk")
    await limiter.check_request("ci", "clerk")
    with pytest.raises(RateLimited) as refused:
        await limiter.check_request("ci", "clerk")
    assert refused.value.scope == "client ci"
    assert 1 <= int(refused.value.retry_after_header) <= 30
    await limiter.check_request("other", "clerk")  # another client has its own bucket


async def test_agent_and_per_name_overrides() -> None:
    settings = {"rate_limits": {"agent": "100/min", "agents": {"clerk": "1/min"}, "tool": "100/min",
                                "tools": {"createItem": "1/min"}}}
    limiter = RateLimiter(MemoryStore(), RateLimits.from_settings(settings))
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
