"""A tool's input schema as form fields: each kind of value gets its control, the rest a JSON box."""

from __future__ import annotations

from gateway.server.console.forms import form_fields

SCHEMA = {
    "type": "object",
    "required": ["owner", "labels"],
    "properties": {
        "owner": {"type": "string", "description": "The account owner."},
        "count": {"type": "integer", "default": 30},
        "ratio": {"type": ["number", "null"]},
        "draft": {"type": "boolean"},
        "state": {"enum": ["open", "closed", 3]},
        "labels": {"type": "array", "items": {"type": "string"}},
        "author": {"type": "object", "required": ["name"], "properties": {
            "name": {"type": "string"}, "email": {"type": "string", "format": "email"}}},
        "either": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
        "node": {"$ref": "#/$defs/Node"},
    },
    "$defs": {"Node": {"type": "object", "properties": {"value": {"type": "string"},
                                                         "next": {"$ref": "#/$defs/Node"}}}},
}


def test_each_kind_of_value_gets_its_control() -> None:
    fields = {f.name: f for f in form_fields(SCHEMA)}
    assert {name: f.kind for name, f in fields.items()} == {
        "owner": "string", "count": "integer", "ratio": "number", "draft": "boolean", "state": "enum",
        "labels": "array", "author": "object", "either": "json", "node": "object"}
    assert fields["owner"].required and fields["owner"].description == "The account owner."
    assert not fields["count"].required and fields["count"].default == "30"
    assert fields["state"].options == [('"open"', "open"), ('"closed"', "closed"), ("3", "3")]
    assert fields["labels"].item is not None and fields["labels"].item.kind == "string"
    author = {f.name: f for f in fields["author"].children}
    assert author["name"].required and author["email"].format == "email"
    node = {f.name: f for f in fields["node"].children}
    assert node["value"].kind == "string" and node["next"].kind == "json"  # a cycle stops at a JSON box
    ids = [f.id for f in fields.values()]
    assert len(set(ids)) == len(ids)  # each control its own label


def test_a_tool_without_arguments_has_no_fields() -> None:
    assert form_fields({"type": "object", "properties": {}}) == []
    assert form_fields({}) == []
