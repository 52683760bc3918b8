"""Request parameters that change nothing the gateway does, read the same on both chat doors.

Clients send them whatever model stands behind the URL (Codex CLI always sends `prompt_cache_key`, `include`,
`client_metadata` and `reasoning.summary`). Refusing them makes such a client unusable; dropping them silently
would hide that they had no effect. So each is passed to the agent's provider where its API takes it, and
otherwise ignored and listed in the answer's `gateway.ignored` (`{"param", "reason"}` each), beside the tools a
request brought that the gateway left out (`gateway.server.caller_tools`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .api_errors import APIError

_OPENAI_KINDS = ("openai", "openai-responses")

_FOR_PROVIDERS: dict[str, tuple[type, tuple[str, ...], str]] = {
    "prompt_cache_key": (str, _OPENAI_KINDS, "a prompt cache key is OpenAI's"),
    "safety_identifier": (str, _OPENAI_KINDS, "a safety identifier is OpenAI's"),
}
"""Passed on to providers of these kinds (both OpenAI APIs take them); the reason it is ignored for the others."""

_IGNORED: dict[str, tuple[type, str]] = {
    "client_metadata": (dict, "the gateway keeps no client metadata"),
    "include": (list, "the gateway hands back no reasoning, search results or logprobs to include"),
}
"""Ignored everywhere, with the reason (an empty value is not worth listing)."""

_SHOWN: dict[type, str] = {str: "a string", dict: "an object", list: "an array"}
INERT_PARAMS = frozenset(_FOR_PROVIDERS) | frozenset(_IGNORED)


@dataclass(frozen=True, slots=True)
class Ignored:
    """Something a request carried that had no effect: a parameter, or a tool left out."""

    param: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"param": self.param, "reason": self.reason}


def read_inert(body: dict[str, Any]) -> dict[str, Any]:
    """The inert parameters `body` carries (None and empty values left out); a 400 for a value of the wrong type."""
    found: dict[str, Any] = {}
    for name in INERT_PARAMS:
        value = body.get(name)
        if value is None:
            continue
        expected = _FOR_PROVIDERS[name][0] if name in _FOR_PROVIDERS else _IGNORED[name][0]
        if not isinstance(value, expected):
            shown = _SHOWN[expected]
            raise APIError(400, f"`{name}` must be {shown}.", param=name)
        if value or isinstance(value, str):
            found[name] = value
    return found


def place_inert(values: dict[str, Any], kind: str) -> tuple[dict[str, Any], list[Ignored]]:
    """What goes to a provider of `kind` (its params) and what is ignored, from `read_inert`'s values."""
    params: dict[str, Any] = {}
    ignored: list[Ignored] = []
    for name, value in sorted(values.items()):
        if name in _FOR_PROVIDERS:
            _, kinds, why = _FOR_PROVIDERS[name]
            if kind in kinds:
                params[name] = value
            else:
                ignored.append(Ignored(name, f"{why}; the agent's provider is {kind or 'unknown'}"))
        else:
            ignored.append(Ignored(name, _IGNORED[name][1]))
    return params, ignored
