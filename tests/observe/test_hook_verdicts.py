"""A hook's answer and its failures: verdicts, timeouts and errors following `on_error`."""

from __future__ import annotations

import anyio
import pytest

from gateway.config.hooks_budgets import HookConfig
from gateway.hooks import Hook, Verdict


@pytest.mark.parametrize(("answer", "event", "expected"), [
    (None, "before_tool_call", Verdict()),
    ({}, "after_tool_call", Verdict()),
    ({"deny": "read-only"}, "before_tool_call", Verdict("deny", "read-only")),
    ({"allow": False, "reason": "no"}, "before_model_call", Verdict("deny", "no")),
    ({"arguments": {"a": 1}}, "before_tool_call", Verdict("replace", arguments={"a": 1})),
    ({"result": [1]}, "after_tool_call", Verdict("replace", result=[1])),
    ({"content": "hi"}, "after_model_call", Verdict("replace", content="hi")),
])
def test_answers(answer: object, event: str, expected: Verdict) -> None:
    assert Verdict.parse(answer, event) == expected  # type: ignore[arg-type]


def test_nonsense_is_an_error() -> None:
    with pytest.raises(ValueError, match="mean nothing"):
        Verdict.parse({"result": 1}, "before_tool_call")


@pytest.mark.parametrize(("on_error", "action"), [("allow", "allow"), ("deny", "deny")])
def test_late_hook_follows_on_error(on_error: str, action: str) -> None:
    hook = Hook(HookConfig(event="before_tool_call", call="sample_hooks:sleepy", timeout=0.05,
                           on_error=on_error))  # type: ignore[arg-type]
    verdict = anyio.run(hook.judge, {"arguments": {}})
    assert verdict.action == action
    if action == "deny":
        assert verdict.reason == "the before_tool_call hook sample_hooks:sleepy timed out"


def test_failing_hook_follows_on_error() -> None:
    hook = Hook(HookConfig(event="after_tool_call", call="sample_hooks:blocking"))
    verdict = anyio.run(hook.judge, {})
    assert verdict == Verdict("deny", "the after_tool_call hook sample_hooks:blocking failed: the hook broke")
