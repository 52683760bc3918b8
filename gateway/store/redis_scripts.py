"""A round trip to Redis as the gateway tells its failure: `StoreUnavailable` naming the server (the doors answer 503),
"did not answer within N s" when it was the client's `socket_timeout` (`gateway.shared_state_timeout`) that ended
the wait; and a guard script's round trip, its `{state, seconds}` reply as a pair."""

from __future__ import annotations

from typing import Any

import redis

from ..errors import StoreUnavailable
from .postgres_schema import safe_url
from .redis_watch import went_away


def answer_within(client: Any) -> float | None:
    """The seconds `client` (an asyncio `redis.Redis`) waits for each answer: its socket timeout, which is
    `gateway.shared_state_timeout` (None: no bound)."""
    seconds = client.get_connection_kwargs().get("socket_timeout")
    return float(seconds) if seconds else None


def unavailable(url: str, exc: Exception, client: Any) -> StoreUnavailable:
    """What the caller is told of `exc`, raised by `client` (an asyncio `redis.Redis`) talking to Redis at `url`; the
    log says once that Redis is gone (`redis_watch.went_away`: a timeout too)."""
    went_away(client, exc)
    if isinstance(exc, redis.TimeoutError):
        seconds = answer_within(client)
        if seconds:
            return StoreUnavailable(f"Redis at {safe_url(url)} did not answer within {seconds:g} s")
    return StoreUnavailable(f"Redis at {safe_url(url)} is unreachable: {exc}")


async def run_script(script: Any, keys: list[str], args: list[Any], url: str) -> Any:
    """`script` (registered on the client) run with `keys` and `args`; `url` names the server in the error."""
    try:
        return await script(keys=keys, args=args)
    except (redis.RedisError, OSError) as exc:
        raise unavailable(url, exc, script.registered_client) from None


def reply_state(reply: Any) -> tuple[str, float]:
    """A guard script's `{state, seconds}` reply, decoded."""
    state, seconds = reply
    return _text(state), float(_text(seconds))


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
