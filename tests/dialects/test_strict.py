"""OpenAI strict mode: what the rendering does to real-world schema shapes, and the way back to the exact schema."""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft202012Validator
from strict_rules import model_arguments, strict_violations

from gateway.dialects import StrictArgumentsError, strict_arguments, strict_reason, strict_schema


def render(schema: dict[str, Any]) -> dict[str, Any]:
    rendered = strict_schema(schema)
    assert rendered is not None, strict_reason(schema)
    assert strict_violations(rendered) == []
    return rendered


def root(properties: dict[str, Any], required: list[str] | None = None, **defs: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    if defs:
        schema["$defs"] = defs
    return schema


def test_annotation_only_all_of_parts_are_folded() -> None:
    schema = root({"name": {"allOf": [{"$ref": "#/$defs/Str"}, {"description": "The name."}]},
                   "config": {"allOf": [{"$ref": "#/$defs/Config"}, {"description": "The setup."}]},
                   "other": {"allOf": [{"$ref": "#/$defs/Config"}, {"description": "Another."}]}},
                  ["name", "config"],
                  Str={"type": "string", "maxLength": 5},
                  Config={"type": "object", "properties": {"on": {"type": "boolean"}}})
    params = render(schema)
    # a scalar definition is inlined with the local description (strict mode refuses keywords beside $ref)
    assert params["properties"]["name"] == {"type": "string", "description": "The name."}
    assert params["properties"]["config"] == {"$ref": "#/$defs/Config"}
    assert params["properties"]["other"] == {"anyOf": [{"$ref": "#/$defs/Config"}, {"type": "null"}],
                                             "description": "Another."}


def test_all_of_objects_are_merged_and_conflicts_fall_back_with_a_reason() -> None:
    schema = root({"item": {"allOf": [{"$ref": "#/$defs/Base"},
                                      {"type": "object", "required": ["size"],
                                       "properties": {"size": {"type": "integer", "minimum": 1},
                                                      "id": {"type": "integer", "maximum": 9}}}]}},
                  ["item"],
                  Base={"type": "object", "required": ["id"], "properties": {"id": {"type": "integer"},
                                                                           "note": {"type": "string"}}})
    item = render(schema)["properties"]["item"]
    assert item["required"] == ["id", "note", "size"]
    assert item["properties"]["id"] == {"type": "integer", "maximum": 9}  # the same property in both parts
    assert item["properties"]["note"] == {"type": ["string", "null"]}
    closed = root({"a": {"allOf": [{"type": "object", "properties": {"x": {"type": "string"}},
                                    "additionalProperties": False},
                                   {"properties": {"y": {"type": "string"}}}]}})
    assert strict_reason(closed) == "root: allOf of a closed object and properties it does not declare"
    types = root({"a": {"allOf": [{"type": "string"}, {"type": "integer"}]}})
    assert strict_reason(types) == "root: allOf of different types"
    in_defs = root({"a": {"$ref": "#/$defs/A"}}, A={"allOf": [{"type": "string"}, {"type": "object"}]})
    assert strict_reason(in_defs) == "$defs: allOf of different types"


def test_schemas_without_a_type_get_the_type_their_keywords_imply() -> None:
    params = render(root({"obj": {"properties": {"x": {"type": "string"}}, "required": ["x"]},
                          "list": {"items": {"type": "integer"}},
                          "code": {"pattern": "^[a-z]+$"},
                          "size": {"minimum": 0}}, ["obj", "list", "code", "size"]))
    assert params["properties"]["obj"]["type"] == "object"
    assert params["properties"]["obj"]["additionalProperties"] is False
    assert params["properties"]["list"] == {"type": "array", "items": {"type": "integer"}}
    assert params["properties"]["code"] == {"type": "string", "pattern": "^[a-z]+$"}
    assert params["properties"]["size"] == {"type": "number", "minimum": 0}


def test_free_form_objects_and_any_values_travel_as_json_text() -> None:
    schema = root({"metadata": {"type": "object", "description": "Free data."}, "value": {}}, ["metadata"])
    params = render(schema)
    assert params["properties"]["metadata"] == {
        "type": "string", "description": "Free data. (A JSON object, sent as a string holding its JSON text.)"}
    assert params["properties"]["value"]["type"] == ["string", "null"]
    arguments = {"metadata": '{"a": [1, {"b": null}]}', "value": "3"}
    assert strict_arguments(schema, arguments) == {"metadata": {"a": [1, {"b": None}]}, "value": 3}
    assert strict_arguments(schema, {"metadata": "{}", "value": None}) == {"metadata": {}}
    with pytest.raises(StrictArgumentsError, match=r"`metadata` must be a string holding JSON text"):
        strict_arguments(schema, {"metadata": "{'a': 1}", "value": None})


def test_maps_travel_as_key_value_pairs() -> None:
    schema = root({"labels": {"type": "object", "additionalProperties": {"type": "string"}},
                   "limits": {"type": "object", "additionalProperties": {"$ref": "#/$defs/Limit"}}},
                  Limit={"type": "object", "properties": {"max": {"type": "integer"}, "min": {"type": "integer"}}})
    params = render(schema)
    labels = params["properties"]["labels"]
    assert labels["type"] == ["array", "null"]
    assert labels["items"] == {"type": "object", "properties": {"key": {"type": "string"},
                                                                 "value": {"type": "string"}},
                               "required": ["key", "value"], "additionalProperties": False}
    arguments = {"labels": [{"key": "env", "value": "prod"}, {"key": "team", "value": "a"}],
                 "limits": [{"key": "cpu", "value": {"max": 4, "min": None}}]}
    assert strict_arguments(schema, arguments) == {"labels": {"env": "prod", "team": "a"},
                                                   "limits": {"cpu": {"max": 4}}}
    with pytest.raises(StrictArgumentsError, match="`labels` has the key 'env' twice"):
        strict_arguments(schema, {"labels": [{"key": "env", "value": "a"}, {"key": "env", "value": "b"}],
                                  "limits": None})


def test_open_objects_with_declared_properties_are_closed() -> None:
    params = render(root({"user": {"type": "object", "additionalProperties": True,
                                   "properties": {"id": {"type": "string"}}}}))
    user = params["properties"]["user"]
    assert user["additionalProperties"] is False and user["properties"] == {"id": {"type": ["string", "null"]}}


def test_a_free_form_branch_beside_a_string_is_left_out_keeping_null() -> None:
    schema = root({"kind": {"anyOf": [{"$ref": "#/$defs/Kind"}, {"type": ["object", "null"]}]}}, ["kind"],
                  Kind={"type": "string", "enum": ["text", "html"]})
    assert render(schema)["properties"]["kind"] == {"anyOf": [{"$ref": "#/$defs/Kind"}, {"type": "null"}]}
    assert strict_arguments(schema, {"kind": "html"}) == {"kind": "html"}


def test_a_ref_beside_other_keywords_is_both() -> None:
    schema = root({"status": {"$ref": "#/$defs/Status", "type": "string", "description": "Which ones."}},
                  ["status"], Status={"type": "string", "enum": ["open", "closed"], "maxLength": 6})
    assert render(schema)["properties"]["status"] == {"type": "string", "enum": ["open", "closed"],
                                                      "description": "Which ones."}


def test_nulls_are_dropped_in_the_any_of_branch_the_model_took() -> None:
    schema = root({"target": {"oneOf": [
        {"type": "object", "required": ["user"], "properties": {"user": {"type": "string"},
                                                                "note": {"type": "string"}}},
        {"type": "object", "required": ["team"], "properties": {"team": {"type": "string"},
                                                                "extra": {"type": "object"}}}]}}, ["target"])
    render(schema)
    assert strict_arguments(schema, {"target": {"team": "core", "extra": '{"x": 1}'}}) == {
        "target": {"team": "core", "extra": {"x": 1}}}
    assert strict_arguments(schema, {"target": {"user": "ann", "note": None}}) == {"target": {"user": "ann"}}


def test_a_tool_that_is_not_strict_keeps_its_arguments() -> None:
    schema = root({"a": {"allOf": [{"type": "string"}, {"type": "integer"}]}, "b": {"type": "string"}})
    assert strict_reason(schema) is not None
    assert strict_arguments(schema, {"a": None, "b": None}) == {"a": None, "b": None}


def test_round_trip_validates_against_the_exact_schema() -> None:
    schema = root({"name": {"type": "string"}, "tags": {"type": "array", "items": {"$ref": "#/$defs/Tag"}},
                   "meta": {"type": "object"}, "labels": {"additionalProperties": {"type": "integer"}},
                   "node": {"$ref": "#/$defs/Node"}},
                  ["name"],
                  Tag={"allOf": [{"$ref": "#/$defs/Node"}, {"properties": {"label": {"type": "string"}}}]},
                  Node={"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"},
                                                         "id": {"type": "integer"}}})
    rendered = render(schema)
    for leave_out in (True, False):
        arguments = model_arguments(rendered, leave_out=leave_out)
        Draft202012Validator(rendered).validate(arguments)
        Draft202012Validator(schema).validate(strict_arguments(schema, arguments))


def test_the_checker_finds_each_broken_rule() -> None:
    bad = {"type": "object", "properties": {
        "open": {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]},
        "optional": {"type": "object", "properties": {"x": {"type": "string"}}, "required": [],
                     "additionalProperties": False},
        "both": {"allOf": [{"type": "string"}]},
        "list": {"type": "array"},
        "ref": {"$ref": "#/$defs/A", "description": "d"},
        "fmt": {"type": "string", "format": "uri"},
        "big": {"type": "string", "enum": [f"value-{i:060d}" for i in range(251)]}},
        "required": ["open", "optional", "both", "list", "ref", "fmt", "big"], "additionalProperties": False,
        "$defs": {"A": {"type": "string"}}}
    problems = strict_violations(bad)
    for expected in ("/properties/open: additionalProperties must be false",
                     "/properties/optional: every property must be required",
                     "/properties/both: unsupported keywords ['allOf']", "/properties/list: an array without items",
                     "/properties/ref: $ref beside ['description']", "/properties/fmt: format 'uri'",
                     "/properties/big: an enum of 251 values"):
        assert any(p.startswith(expected) for p in problems), (expected, problems)
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(11):
        deep = {"type": "object", "properties": {"x": deep}, "required": ["x"], "additionalProperties": False}
    assert any("10 levels" in p for p in strict_violations(deep))
    assert strict_violations({"anyOf": [deep]})[0] == "/: the root must be an object, not anyOf"


def test_merged_recursive_definitions_do_not_crash_the_rendering() -> None:
    # A and B both declare `x` differently and refer back to themselves: merging unfolds without end.
    schema = root({"v": {"allOf": [{"$ref": "#/$defs/A"}, {"$ref": "#/$defs/B"}]}}, ["v"],
                  A={"type": "object", "properties": {"x": {"allOf": [{"$ref": "#/$defs/A"}, {"$ref": "#/$defs/B"}]},
                                                      "a": {"type": "string"}}},
                  B={"type": "object", "properties": {"x": {"allOf": [{"$ref": "#/$defs/B"}, {"$ref": "#/$defs/A"}]},
                                                      "b": {"type": "string"}}})
    assert strict_reason(schema) == "root: allOf of recursive definitions that unfold without end"
