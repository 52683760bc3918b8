"""agents.yaml: per agent `code_mode` and `code_limits`, with file:line:key diagnostics."""

from __future__ import annotations

import textwrap

from gateway.config.loader import parse_manifest
from gateway.config.model import CodeLimits


def _parse(text: str):  # type: ignore[no-untyped-def]
    return parse_manifest(textwrap.dedent(text), environ={})


def test_code_mode_values_defaults_and_yaml_booleans() -> None:
    manifest, diagnostics = _parse("""\
    providers: {p: {kind: openai}}
    agents:
      plain: {model: p/m}
      coder: {model: p/m, code_mode: on, code_limits: {time: 2.5, memory: 16, tool_calls: 5}}
      only: {model: p/m, code_mode: only}
      quoted: {model: p/m, code_mode: "off"}
    """)
    assert [d for d in diagnostics if d.level == "error"] == []
    agents = manifest.agents
    assert [agents[n].code_mode for n in ("plain", "coder", "only", "quoted")] == ["off", "on", "only", "off"]
    assert agents["plain"].code_limits == CodeLimits(time=30.0, memory=256, tool_calls=50)
    assert agents["coder"].code_limits == CodeLimits(time=2.5, memory=16, tool_calls=5)


def test_bad_code_mode_and_limits_are_errors_with_their_lines() -> None:
    _, diagnostics = _parse("""\
    providers: {p: {kind: openai}}
    agents:
      a:
        model: p/m
        code_mode: always
        code_limits:
          time: 0
          memory: lots
          tool_call: 3
    """)
    errors = {d.pointer: (d.line, d.message) for d in diagnostics if d.level == "error"}
    assert errors["agents.a.code_mode"][0] == 5 and "'always' is not one of on, off, only" in \
        errors["agents.a.code_mode"][1]
    assert errors["agents.a.code_limits.time"] == (7, "must be greater than 0, got 0")
    assert errors["agents.a.code_limits.memory"][0] == 8 and "expected an integer" in \
        errors["agents.a.code_limits.memory"][1]
    assert errors["agents.a.code_limits.tool_call"][0] == 9 and "did you mean 'tool_calls'" in \
        errors["agents.a.code_limits.tool_call"][1]
