from __future__ import annotations

from gateway.config.yamlnodes import MISSING, format_path, load_yaml


def test_format_path_quotes_keys_that_are_not_plain_names() -> None:
    assert format_path(("agents", "reader", "tools", 1, "api")) == "agents.reader.tools[1].api"
    assert format_path(("apis", "twilio.com/api", "auth", 0)) == "apis['twilio.com/api'].auth[0]"
    assert format_path(()) == ""


def test_every_key_path_maps_to_its_line() -> None:
    text = "a:\n  b:\n    - x\n    - {c: 1,\n       d: 2}\n"
    data, lines, diagnostics = load_yaml(text, file="f.yaml", environ={})
    assert diagnostics == [] and data == {"a": {"b": ["x", {"c": 1, "d": 2}]}}
    assert lines[("a",)] == 1 and lines[("a", "b")] == 2 and lines[("a", "b", 0)] == 3
    assert lines[("a", "b", 1, "c")] == 4 and lines[("a", "b", 1, "d")] == 5


def test_substitution_in_flow_style_and_the_typing_of_plain_values() -> None:
    text = "x: {key: ${KEY}, n: ${N:-3}, quoted: \"${N:-3}\", mixed: a${N:-3}b, f: ${F}, on: ${B}}\n"
    data, _, diagnostics = load_yaml(text, file="f.yaml", environ={"KEY": "a: b, {c}", "F": "1.5", "B": "true"})
    assert diagnostics == []
    assert data == {"x": {"key": "a: b, {c}", "n": 3, "quoted": "3", "mixed": "a3b", "f": 1.5, "on": True}}


def test_a_failed_substitution_yields_the_missing_marker() -> None:
    data, _, diagnostics = load_yaml("a: ${NOPE}\nb: x${NOPE:-}y\n", file="f.yaml", environ={})
    assert data == {"a": MISSING, "b": "xy"}
    assert [(d.line, d.pointer) for d in diagnostics] == [(1, "a")]
    assert "NOPE" in diagnostics[0].message


def test_an_integer_python_does_not_read_is_an_error_at_its_line() -> None:
    data, _, diagnostics = load_yaml("a: 1\nb: " + "1" * 5000 + "\n", file="f.yaml", environ={})
    assert data == {"a": 1, "b": MISSING}
    assert [(d.line, d.pointer, d.level) for d in diagnostics] == [(2, "b", "error")]
    assert "5000 digits" in diagnostics[0].message
