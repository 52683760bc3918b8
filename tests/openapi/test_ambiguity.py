"""Schemas a value would be judged by exponentially often (`gateway.openapi._ambiguity`): found at load, left to the
upstream, named where they are written; the model's view stays the spec's. And path templates no call could fill."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gateway.execution.executor import validate_arguments
from gateway.openapi import compile_document, compile_specs


def _compile(paths: dict[str, Any], schemas: dict[str, Any]) -> Any:
    spec = {"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "paths": paths,
            "components": {"schemas": schemas}}
    return compile_document(spec, api="t", file="t.yaml")


def _posting(schema: dict[str, Any]) -> dict[str, Any]:
    body = {"content": {"application/json": {"schema": {"type": "object", "properties": {"v": schema}}}}}
    return {"/t": {"post": {"operationId": "t", "requestBody": body, "responses": {"200": {"description": "ok"}}}}}


def _told(catalog: Any) -> list[tuple[str, str]]:
    return [(d.file, d.pointer) for d in catalog.diagnostics if "exponentially often" in d.message]


def _nested(value: Any, depth: int) -> Any:
    for _ in range(depth):
        value = [value]
    return value


def test_a_recursive_union_whose_variants_share_the_recursion_is_left_unjudged_and_named() -> None:
    # Two variants with the same recursive `children`: each level applies Node twice as often (2**depth).
    child = {"type": "array", "items": {"$ref": "#/components/schemas/Node"}}
    schemas = {"Node": {"anyOf": [{"$ref": "#/components/schemas/Leaf"}, {"$ref": "#/components/schemas/Branch"}]},
               "Leaf": {"type": "object", "properties": {"children": child, "size": {"type": "integer"}}},
               "Branch": {"type": "object", "properties": {"children": child, "name": {"type": "string"}}}}
    catalog = _compile(_posting({"$ref": "#/components/schemas/Node"}), schemas)
    tool = catalog.get("t")
    assert _told(catalog) == [("t.yaml", "/components/schemas/Node")]
    assert tool.input_schema["$defs"]["Node"]["anyOf"]  # the model sees the union as written
    assert tool.judged_schema is not None and tool.judged_schema["$defs"]["Node"] == {}
    deep: Any = {"size": 1}
    for _ in range(40):
        deep = {"children": [deep]}
    assert validate_arguments(tool, {"v": deep}) == []  # judged at once: left to the upstream


def test_a_chain_of_doubling_unions_is_cut_where_it_passes_the_bound_and_judged_above() -> None:
    schemas: dict[str, Any] = {"L30": {"type": "string"}}
    for level in range(29, -1, -1):
        below = {"$ref": f"#/components/schemas/L{level + 1}"}
        schemas[f"L{level}"] = {"anyOf": [{"type": "array", "items": below, "minItems": 1},
                                          {"type": "array", "items": below, "maxItems": 5}]}
    catalog = _compile(_posting({"$ref": "#/components/schemas/L0"}), schemas)
    tool = catalog.get("t")
    assert _told(catalog) == [("t.yaml", "/components/schemas/L5")]  # applied 2**5 times at its place: past 16
    assert validate_arguments(tool, {"v": _nested(1, 30)}) == []
    assert validate_arguments(tool, {"v": [["x"]]})  # L0, L1 are still judged: "x" is no array


def test_plain_recursion_and_an_all_of_diamond_stay_judged() -> None:
    # A tree (recursion, each entry once per place) and a base reached through two allOf parents (twice, once).
    schemas = {"Tree": {"type": "object", "properties": {
                   "children": {"type": "array", "items": {"$ref": "#/components/schemas/Tree"}},
                   "parent": {"$ref": "#/components/schemas/Tree"}, "id": {"type": "integer"}}},
               "Base": {"type": "object", "properties": {"id": {"type": "integer"}}},
               "A": {"allOf": [{"$ref": "#/components/schemas/Base"}]},
               "B": {"allOf": [{"$ref": "#/components/schemas/Base"}]},
               "Both": {"allOf": [{"$ref": "#/components/schemas/A"}, {"$ref": "#/components/schemas/B"}]}}
    catalog = _compile(_posting({"type": "object", "properties": {
        "tree": {"$ref": "#/components/schemas/Tree"}, "both": {"$ref": "#/components/schemas/Both"}}}), schemas)
    tool = catalog.get("t")
    assert _told(catalog) == [] and tool.judged_schema is None
    assert validate_arguments(tool, {"v": {"tree": {"children": [{"id": "x"}]}}})
    assert validate_arguments(tool, {"v": {"both": {"id": "x"}}})


def test_a_path_template_no_call_could_fill_is_left_out_where_it_is_written() -> None:
    ok = {"responses": {"200": {"description": "ok"}}}
    catalog = _compile({"/b/{x}}/{{y}/{": {"get": {"operationId": "broken", **ok}},
                        "/q/{id}/{name}.{ext}": {"get": {"operationId": "fine", **ok}}}, {})
    assert [tool.name for tool in catalog] == ["fine"]
    [said] = [d for d in catalog.diagnostics if "no call could fill" in d.message]
    assert (said.file, said.pointer) == ("t.yaml", "/paths/~1b~1{x}}~1{{y}~1{/get")
    assert "'/b/{x}}/{{y}/{'" in said.message


def test_an_entry_in_a_specs_second_file_is_named_in_that_file(tmp_path: Path) -> None:
    child = {"type": "array", "items": {"$ref": "#/Node"}}
    part = {"Node": {"anyOf": [{"$ref": "#/Leaf"}, {"$ref": "#/Branch"}]},
            "Leaf": {"type": "object", "properties": {"children": child}},
            "Branch": {"type": "object", "properties": {"children": child, "name": {"type": "string"}}}}
    (tmp_path / "parts").mkdir()
    (tmp_path / "parts" / "tree.json").write_text(json.dumps(part))
    spec = {"openapi": "3.0.3", "info": {"title": "t", "version": "1"},
            "paths": _posting({"$ref": "parts/tree.json#/Node"})}
    (tmp_path / "shop.json").write_text(json.dumps(spec))
    catalog = compile_specs(tmp_path, use_cache=False)
    assert _told(catalog) == [("parts/tree.json", "/Node")]
    assert catalog.get("t").judged_schema is not None
