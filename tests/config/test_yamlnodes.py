from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.config.yamlnodes import MAY_RETYPE, MISSING, cache_entry, format_path, load_yaml


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


_KEPT = """\
a: ${A:-1}
b: "${A:-1}"
c: [x${B:-}y, ${C}]
d: &d {e: ${E:-on}}
f: {<<: *d, g: plain}
"""


def _loaded(text: str, environ: dict[str, str], cache: Path | None) -> tuple[Any, dict[Any, int], list[Any], Any]:
    data, lines, diagnostics = load_yaml(text, file="f.yaml", environ=environ, cache=cache)
    return data, dict(lines), [(d.line, d.pointer, d.message) for d in diagnostics], getattr(lines, "variables", None)


def test_a_kept_document_reads_the_environment_again_as_a_composed_one_does(tmp_path: Path) -> None:
    entry = cache_entry(tmp_path / "cache", tmp_path / "agents.yaml")
    fresh = _loaded(_KEPT, {"C": "3"}, None)
    assert fresh[0] == {"a": 1, "b": "1", "c": ["xy", 3], "d": {"e": True}, "f": {"e": True, "g": "plain"}}
    assert _loaded(_KEPT, {"C": "3"}, entry) == fresh  # composed, then kept
    assert entry.exists()
    assert _loaded(_KEPT, {"C": "3"}, entry) == fresh  # read back
    # Another environment: the kept document is the text's, the values are this environment's.
    other = _loaded(_KEPT, {"A": "2.5", "B": "-", "E": "openai/x"}, entry)
    assert other == _loaded(_KEPT, {"A": "2.5", "B": "-", "E": "openai/x"}, None)
    assert other[0]["a"] == 2.5 and other[0]["c"][1] is MISSING and other[0]["f"]["e"] == "openai/x"
    assert [(line, pointer) for line, pointer, _ in other[2]] == [(3, "c[1]")]


def test_a_changed_text_is_composed_again_and_a_broken_one_never_kept(tmp_path: Path) -> None:
    entry = cache_entry(tmp_path, tmp_path / "agents.yaml")
    load_yaml("a: 1\n", file="f.yaml", environ={}, cache=entry)
    assert load_yaml("a: 2\n", file="f.yaml", environ={}, cache=entry)[0] == {"a": 2}
    duplicate = "a: 1\na: 2\n"
    kept = entry.read_bytes()
    _, _, diagnostics = load_yaml(duplicate, file="f.yaml", environ={}, cache=entry)
    assert [(d.line, d.message) for d in diagnostics] == [(2, "duplicate key 'a' (first at line 1)")]
    assert entry.read_bytes() == kept  # the entry of the last good text stays
    assert load_yaml("a: [\n", file="f.yaml", environ={}, cache=entry)[2][0].message.startswith("invalid YAML")
    entry.write_bytes(b"not a pickle")  # a damaged entry: composed again
    assert load_yaml("a: 2\n", file="f.yaml", environ={}, cache=entry)[0] == {"a": 2}


@pytest.mark.parametrize("written", ["0b1010_0111", "0x_0A_74_AE", "02472256", "685_230", "-190:20:30", "+12", "0",
                                     "6.8523015e+5", "685.230_15e+03", "-.inf", ".Inf", ".NaN", "190:20:30.15",
                                     "yes", "No", "TRUE", "false", "on", "Off", "12\n"])
def test_what_yaml_types_as_a_number_or_boolean_is_written_with_the_characters_that_may_retype(written: str) -> None:
    """`MAY_RETYPE` decides without PyYAML that a substituted value is text: every int, float and bool spelling of
    YAML 1.1 (PyYAML's resolver) is written with its characters, and what it lets through PyYAML still types."""
    assert MAY_RETYPE.issuperset(written)
    data, _, _ = load_yaml("v: ${V}\n", file="f.yaml", environ={"V": written})
    assert not isinstance(data["v"], str)


@pytest.mark.parametrize("written", ["openai/gpt-4o", "https://x", "12 ", "1e5", "0x1G", "yes!", "y", "n", "", "~",
                                     "null"])
def test_values_outside_those_characters_or_forms_stay_text(written: str) -> None:
    data, _, _ = load_yaml("v: ${V}\n", file="f.yaml", environ={"V": written})
    assert data["v"] == written
