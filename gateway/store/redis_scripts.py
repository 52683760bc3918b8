"""A Lua script's round trip to Redis, as the shared guards run theirs: a failure becomes `StoreUnavailable` naming
the server (the doors answer 503), a `{state, seconds}` reply becomes a pair."""

from __future__ import annotations

from typing import Any

import redis

from ..errors import StoreUnavailable
from .postgres_schema import safe_url


async def run_script(script: Any, keys: list[str], args: list[Any], url: str) -> Any:
    """`script` (registered on the client) run with `keys` and `args`; `url` names the server in the error."""
    try:
        return await script(keys=keys, args=args)
    except (redis.RedisError, OSError) as exc:
        raise StoreUnavailable(f"Redis at {safe_url(url)} is unreachable: {exc}") from None


def reply_state(reply: Any) -> tuple[str, float]:
    """A guard script's `{state, seconds}` reply, decoded."""
    state, seconds = reply
    return _text(state), float(_text(seconds))


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
