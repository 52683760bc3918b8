"""Hooks the tests name in agents.yaml (`sample_hooks:NAME`): docs/hooks-and-budgets.md's examples, and bad ones."""

from __future__ import annotations

import re
import time
from typing import Any

import anyio

SEEN: list[dict[str, Any]] = []
EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.-]+")


def refuse_repo_writes(step: dict[str, Any]) -> dict[str, Any] | None:
    """docs/hooks-and-budgets.md's guardrail: no writes to the acme/app repository."""
    SEEN.append(step)
    arguments = step["arguments"]
    if step["method"] != "GET" and (arguments.get("owner"), arguments.get("repo")) == ("acme", "app"):
        return {"deny": "acme/app is read-only for agents"}
    return None


def mask_emails(step: dict[str, Any]) -> dict[str, Any] | None:
    """docs/hooks-and-budgets.md's masking hook: e-mail addresses in results become [email]."""
    body = step["result"]["body"]
    if body is None:
        return None
    text = body if isinstance(body, str) else repr(body)
    if not EMAIL.search(text):
        return None
    return {"result": _mask(body)}


def _mask(value: Any) -> Any:
    if isinstance(value, str):
        return EMAIL.sub("[email]", value)
    if isinstance(value, list):
        return [_mask(v) for v in value]
    if isinstance(value, dict):
        return {k: _mask(v) for k, v in value.items()}
    return value


def pin_latitude(step: dict[str, Any]) -> dict[str, Any]:
    return {"arguments": {**step["arguments"], "latitude": 1.5}}


def deny_all(step: dict[str, Any]) -> dict[str, Any]:
    SEEN.append(step)
    return {"deny": "no, by policy"}


async def sleepy(step: dict[str, Any]) -> None:
    await anyio.sleep(5)


def blocking(step: dict[str, Any]) -> None:
    time.sleep(0)
    raise RuntimeError("the hook broke")


def shout(step: dict[str, Any]) -> dict[str, Any]:
    return {"content": (step["message"]["content"] or "").upper()}


def record(step: dict[str, Any]) -> None:
    SEEN.append(step)


def break_latitude(step: dict[str, Any]) -> dict[str, Any]:
    return {"arguments": {**step["arguments"], "latitude": "north"}}


def narrow_search(step: dict[str, Any]) -> dict[str, Any]:
    """Rewrites the arguments it is given (the query made narrower), keeping every other one as it came."""
    return {"arguments": {**step["arguments"], "q": f"{step['arguments'].get('q', '')} is:open".strip()}}
