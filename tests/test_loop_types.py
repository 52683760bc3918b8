"""The loop's data: decisions parsed from what a human or an HTTP body sends, messages through JSON and back."""

from __future__ import annotations

import json

import pytest

from gateway.loop_types import Decision, Step, message_from_dict, message_to_dict
from gateway.messages import Message, ToolCall


@pytest.mark.parametrize("value, approve, arguments, reason", [
    ("approve", True, None, None),
    ("deny", False, None, None),
    (True, True, None, None),
    ({"decision": "approve", "arguments": {"amount": 3}}, True, {"amount": 3}, None),
    ({"decision": "deny", "reason": "no"}, False, None, "no"),
    (Decision(approve=False, reason="x"), False, None, "x"),
])
def test_decision_parse(value, approve, arguments, reason) -> None:
    decision = Decision.parse(value)
    assert (decision.approve, decision.arguments, decision.reason) == (approve, arguments, reason)


@pytest.mark.parametrize("value, fragment", [({"decision": "ok"}, "'approve' or 'deny'"),
                                             ({"decision": "approve", "arguments": [1]}, "JSON object")])
def test_decision_parse_refuses_nonsense(value, fragment) -> None:
    with pytest.raises(ValueError, match=fragment):
        Decision.parse(value)


def test_messages_survive_json() -> None:
    messages = [
        Message(role="assistant", content=None, extras={"gemini_parts": [{"functionCall": {"name": "a", "args": {}},
                                                                          "thoughtSignature": "c2ln"}]},
                tool_calls=[ToolCall(id="c1", name="a", arguments=None, raw_arguments='{"x": ', parse_error="bad",
                                     extras={"synthesized_id": True})]),
        Message(role="tool", content="boom", tool_call_id="c1", name="a", is_error=True, extras={"result": {"ok": 0}}),
        Message(role="user", content="hi"),
    ]
    again = [message_from_dict(json.loads(json.dumps(message_to_dict(m)))) for m in messages]
    assert again == messages


def test_step_round_trip_ignores_unknown_keys() -> None:
    step = Step(tool="a", arguments={"x": 1}, call_id="c", iteration=2, status=200, ok=True, duration_ms=1.23456)
    data = step.to_dict()
    assert data["duration_ms"] == 1.235
    assert Step.from_dict({**data, "future_field": 1}).tool == "a"
