"""Tools as Python functions: identifiers, and type hints read from the exact JSON Schema."""

from __future__ import annotations

from gateway.catalog import AgentTool
from gateway.codemode import FunctionNames, python_name, signature


def _tool(name: str, schema: dict, output: dict | None = None, description: str = "Do it.") -> AgentTool:
    return AgentTool(name=name, description=description, input_schema=schema, output_schema=output)


def test_names_become_identifiers_that_call_no_builtin() -> None:
    assert python_name("listIssues") == "listIssues"
    assert python_name("get-item") == "get_item"
    assert python_name("2fa_status") == "_2fa_status"
    assert python_name("list") == "list_" and python_name("print") == "print_" and python_name("class") == "class_"


def test_colliding_identifiers_get_a_number_and_map_back() -> None:
    names = FunctionNames(["get_item", "get-item"])
    assert names.tool("get_item") == "get_item" and names.tool("get_item_2") == "get-item"
    assert names.function("get-item") == "get_item_2" and names.tool("nope") is None


def test_required_arguments_first_optional_ones_default_to_none() -> None:
    schema = {"type": "object", "required": ["owner"], "properties": {
        "state": {"type": "string", "enum": ["open", "closed"]}, "owner": {"type": "string"},
        "per_page": {"type": "integer"}}}
    assert signature(_tool("listIssues", schema), summary=False) == (
        'def listIssues(*, owner: str, state: Literal["open", "closed"] = None, per_page: int = None) -> Any')


def test_names_that_are_not_identifiers_are_passed_as_a_dict() -> None:
    schema = {"type": "object", "required": ["X-Api-Key"], "properties": {
        "X-Api-Key": {"type": "string"}, "from": {"type": "string"}, "top": {"type": "integer"}}}
    assert signature(_tool("list", schema), "list_", summary=False) == (
        'def list_(*, top: int = None, **{"X-Api-Key": str, "from"?: str}) -> Any')


def test_types_follow_refs_unions_and_nesting_to_the_depth_asked() -> None:
    output = {"type": "array", "items": {"$ref": "#/$defs/Issue"}, "$defs": {
        "Issue": {"type": "object", "required": ["id"], "properties": {
            "id": {"type": "integer"}, "body": {"type": ["string", "null"]},
            "user": {"anyOf": [{"$ref": "#/$defs/User"}, {"type": "null"}]},
            "tags": {"type": "object", "additionalProperties": {"type": "number"}}}},
        "User": {"type": "object", "properties": {"login": {"type": "string"}, "parent": {"$ref": "#/$defs/User"}}}}}
    tool = _tool("listIssues", {"type": "object", "properties": {}}, output, "List issues. Many of them.")
    assert signature(tool, depth=3) == (
        "# List issues. Many of them.\ndef listIssues() -> list[{id: int, body?: str | None, "
        "user?: {login?: str, parent?: User} | None, tags?: dict[str, float]}]")
    assert signature(tool, depth=1, summary=False) == (
        "def listIssues() -> list[{id: int, body?: str | None, user?: dict | None, tags?: dict}]")
    assert signature(tool, depth=0, summary=False) == "def listIssues() -> list[dict]"
    assert signature(tool, returns=False, summary=False) == "def listIssues() -> Any"


def test_all_of_objects_merge_and_large_enums_are_their_type() -> None:
    schema = {"type": "object", "required": ["pet"], "properties": {
        "pet": {"allOf": [{"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}},
                          {"type": "object", "properties": {"age": {"type": "integer"}}}]},
        "color": {"type": "string", "enum": [f"c{i}" for i in range(20)]}, "anything": {}}}
    assert signature(_tool("addPet", schema), summary=False) == (
        "def addPet(*, pet: {name: str, age?: int}, color: str = None, anything: Any = None) -> Any")
