"""`hooks:` and `budgets:` in agents.yaml: what they read into, and the mistakes they report."""

from __future__ import annotations

from gateway.config.hooks_budgets import parse_window
from gateway.config.loader import parse_manifest

HEAD = """\
providers: {openai: {kind: openai, base_url: "http://127.0.0.1:9/v1"}}
agents:
  clerk:
    model: openai/gpt-4o
    hooks:
      - {on: before_model_call, call: "guards:check"}
"""


def test_hooks_global_and_per_agent() -> None:
    manifest, diagnostics = parse_manifest(HEAD + """\
hooks:
  - {on: before_tool_call, call: "guards:no_writes", tools: ["create*"], timeout: 2, on_error: allow}
  - {on: after_tool_call, url: "http://127.0.0.1:9100/mask", headers: {X-Token: t}}
""")
    assert [d for d in diagnostics if d.level == "error"] == []
    first, second = manifest.hooks
    assert (first.event, first.call, first.tools, first.timeout, first.on_error) == (
        "before_tool_call", "guards:no_writes", ["create*"], 2.0, "allow")
    assert (second.url, second.on_error, second.headers, second.agent) == (
        "http://127.0.0.1:9100/mask", "deny", {"X-Token": "t"}, None)
    (own,) = manifest.agents["clerk"].hooks
    assert (own.event, own.call, own.agent) == ("before_model_call", "guards:check", "clerk")


def test_bad_hooks_are_located() -> None:
    _, diagnostics = parse_manifest(HEAD + """\
hooks:
  - {on: before_everything, call: "a:b"}
  - {on: after_tool_call}
  - {on: after_tool_call, call: "not a callable"}
  - {on: before_model_call, call: "a:b", tools: [x]}
""")
    messages = {d.pointer: d.message for d in diagnostics if d.level == "error"}
    assert "is not one of before_model_call" in messages["hooks[0].on"]
    assert "exactly one of 'call'" in messages["hooks[1]"]
    assert "module:function" in messages["hooks[2].call"]
    assert "limits a tool hook" in messages["hooks[3].tools"]


def test_budgets() -> None:
    manifest, diagnostics = parse_manifest(HEAD + """\
budgets:
  on_exceed: summary
  run: {tokens: 2000}
  agent: {cost: 5, window: 1h}
  clients: {ci-bot: {tokens: 100000, window: 1d}}
  prices: {openai/gpt-4o: {input: 2.5, output: 10}}
""")
    assert [d for d in diagnostics if d.level == "error"] == []
    budgets = manifest.budgets
    assert budgets.on_exceed == "summary"
    assert budgets.run is not None and budgets.run.tokens == 2000
    assert budgets.for_agent("clerk") is not None and budgets.for_agent("clerk").window == 3600  # type: ignore[union-attr]
    assert budgets.for_client("ci-bot").tokens == 100000  # type: ignore[union-attr]
    assert budgets.for_client("other") is None
    assert budgets.price("openai/gpt-4o", "gpt-4o").cost(1_000_000, 100_000) == 3.5  # type: ignore[union-attr]


def test_bad_budgets_are_located() -> None:
    _, diagnostics = parse_manifest(HEAD + """\
budgets:
  run: {window: 1h}
  agent: {tokens: 10, window: soon}
  on_exceed: shrug
""")
    messages = {d.pointer: d.message for d in diagnostics}
    assert "unknown key 'window'" in messages["budgets.run.window"]  # a run has no window
    assert "duration" in messages["budgets.agent.window"]
    assert "is not one of error, summary" in messages["budgets.on_exceed"]


def test_cost_without_prices_warns() -> None:
    _, diagnostics = parse_manifest(HEAD + "budgets: {run: {cost: 1}}\n")
    assert ("warning", "budgets.prices") in [(d.level, d.pointer) for d in diagnostics]


def test_a_hook_module_that_is_not_there_is_a_warning() -> None:
    _, diagnostics = parse_manifest(HEAD + 'hooks: [{on: after_tool_call, call: "json:dumps"}]\n')
    warnings = {d.pointer: d.message for d in diagnostics if d.level == "warning"}
    assert "no module 'guards' on the gateway's path" in warnings["agents.clerk.hooks[0].call"]
    assert "hooks[0].call" not in warnings  # json is importable


def test_windows() -> None:
    assert [parse_window(v) for v in ("90s", "30m", "1h", "2d", 45, "0h", "soon", True)] == [
        90, 1800, 3600, 172800, 45, None, None, None]
