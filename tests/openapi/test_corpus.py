"""The compiler over every real-world spec in ../shared/corpus (skipped when the folder is absent)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import jsonschema_rs
import pytest
from google.genai import types as genai_types
from jsonschema import Draft202012Validator
from mcp import types as mcp_types
from strict_rules import model_arguments, strict_violations

from gateway.catalog import Catalog, Tool
from gateway.dialects import render_tools, strict_arguments, strict_schema
from gateway.openapi import NAME_PATTERN

pytestmark = [pytest.mark.corpus, pytest.mark.slow]

GEMINI_SCHEMA_KEYS = {"type", "format", "title", "description", "nullable", "enum", "maxItems", "minItems",
                      "properties", "required", "minProperties", "maxProperties", "minLength", "maxLength",
                      "pattern", "example", "anyOf", "propertyOrdering", "default", "items", "minimum", "maximum"}
DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
GEMINI_TYPES = {"STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT"}


@pytest.fixture
def catalog(corpus_catalog: Catalog) -> Catalog:
    return corpus_catalog


def _schemas(node: Any) -> Iterator[dict[str, Any]]:
    """Every subschema of a (2020-12 or Gemini) schema, $defs included."""
    stack = [node]
    while stack:
        current = stack.pop()
        if not isinstance(current, dict):
            continue
        yield current
        for key in ("properties", "$defs", "patternProperties", "dependentSchemas"):
            stack.extend((current.get(key) or {}).values())
        for key in ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames"):
            if isinstance(current.get(key), dict):
                stack.append(current[key])
        for key in ("allOf", "anyOf", "oneOf", "prefixItems"):
            stack.extend(current.get(key) or ())


def test_corpus_operations_become_tools(catalog: Catalog) -> None:
    operations = sum(spec.operation_count for spec in catalog.apis.values())
    assert len(catalog.apis) >= 60
    assert operations > 19000
    assert len(catalog) >= 0.995 * operations
    for spec in catalog.apis.values():
        assert spec.tool_count >= 0.99 * spec.operation_count, spec.file


def test_corpus_tools_are_callable(catalog: Catalog) -> None:
    """Every tool gets arguments its own schema accepts (the generator in tests/ reads only the schema).

    Before closed `allOf`s were merged and mistyped enums read as text, 9 of 19,432 tools could never be
    called (Jira's createScreenScheme; Zoom, Dracoon and Apacta enums of the wrong type). The two left are
    Zoom's settings updates, a `oneOf` of overlapping objects the simple generator cannot satisfy.
    """
    from corpus_judge import arguments_for

    uncallable = [f"{tool.api}:{tool.name}" for tool in catalog if arguments_for(tool) is None]
    assert len(catalog) - len(uncallable) >= len(catalog) - 2, uncallable
    assert set(uncallable) <= {"apis-guru/zoom.us:accountSettingsUpdate", "apis-guru/zoom.us:userSettingsUpdate"}


def test_corpus_names_valid_and_unique(catalog: Catalog) -> None:
    names = [tool.name for tool in catalog]
    assert len(names) == len(set(names))
    assert all(NAME_PATTERN.match(name) for name in names)


def _unique_schemas(tools: list[Tool]) -> Iterator[Any]:
    """Each tool's roots without `$defs`, then each shared `$defs` object once (they are shared between tools)."""
    seen: set[int] = set()
    for tool in tools:
        for schema in (tool.input_schema, tool.output_schema):
            if schema is None:
                continue
            yield {k: v for k, v in schema.items() if k != "$defs"}
            for definition in schema.get("$defs", {}).values():
                if id(definition) not in seen:
                    seen.add(id(definition))
                    yield definition


def test_corpus_schemas_pass_draft_2020_12_meta_validation(catalog: Catalog) -> None:
    # Every schema of every tool, with the Rust validator (python-jsonschema needs ~5 minutes for this corpus).
    for schema in _unique_schemas(list(catalog)):
        jsonschema_rs.meta.validate(schema if isinstance(schema, bool) else {"$schema": DRAFT_2020_12, **schema})
    assert all(tool.input_schema["type"] == "object" for tool in catalog)


def test_corpus_schemas_pass_check_schema_sample(catalog: Catalog) -> None:
    # python-jsonschema's own `check_schema` on a deterministic sample: every 50th tool of each spec.
    sample = [tool for spec in catalog.apis for tool in catalog.for_api(spec)[::50]]
    assert len(sample) > 350
    checked: set[str] = set()
    for schema in _unique_schemas(sample):
        text = json.dumps(schema, sort_keys=True)  # a schema that recurs (in several specs) is checked once
        if text not in checked:
            checked.add(text)
            Draft202012Validator.check_schema(schema)


def test_corpus_openai_rendering(catalog: Catalog) -> None:
    strict = 0
    for rendered in render_tools(catalog, "openai", strict=True):
        function = rendered["function"]
        assert NAME_PATTERN.match(function["name"])
        assert function["parameters"]["type"] == "object"
        if function["strict"]:
            strict += 1
            assert strict_violations(function["parameters"]) == [], function["name"]
    assert strict >= 0.95 * len(catalog)


def test_corpus_strict_arguments_map_back_to_the_exact_shape(catalog: Catalog) -> None:
    # What a model held to the strict schema sends, mapped back, breaks at most the keywords strict mode
    # dropped (lengths, formats, ...): never a type, a required property or a closed object.
    sample = [tool for spec in catalog.apis for tool in catalog.for_api(spec)[::20]]
    checked = 0
    for tool in sample:
        rendered = strict_schema(tool.input_schema)
        if rendered is None:
            continue
        validator = Draft202012Validator(tool.input_schema)
        for leave_out in (True, False):
            arguments = strict_arguments(tool.input_schema, model_arguments(rendered, leave_out=leave_out))
            shape = [e for e in validator.iter_errors(arguments) if _breaks_shape(e)]
            assert not shape, (tool.name, [(e.json_path, e.message[:200]) for e in shape])
        checked += 1
    assert checked > 900


_SHAPE = {"type", "required", "additionalProperties", "unevaluatedProperties", "false"}


def _breaks_shape(error: Any) -> bool:
    if error.validator in ("anyOf", "oneOf"):
        if not error.context:
            return False  # oneOf matched more than one branch: strict mode sends oneOf as anyOf
        branches: dict[Any, list[Any]] = {}
        for sub in error.context:
            branches.setdefault(sub.schema_path[0], []).append(sub)
        return all(any(_breaks_shape(sub) for sub in subs) for subs in branches.values())
    return error.validator in _SHAPE


def test_corpus_gemini_rendering(catalog: Catalog) -> None:
    subset = 0
    for rendered in render_tools(catalog, "gemini"):
        assert not ("parameters" in rendered and "parametersJsonSchema" in rendered)
        assert rendered["name"][0].isalpha() or rendered["name"][0] == "_"
        if "parameters" in rendered:
            subset += 1
            for schema in _schemas(rendered["parameters"]):
                assert set(schema) <= GEMINI_SCHEMA_KEYS, set(schema) - GEMINI_SCHEMA_KEYS
                assert schema.get("type", "STRING") in GEMINI_TYPES
                assert all(isinstance(v, str) for v in schema.get("enum", ()))
                assert schema.get("type") != "OBJECT" or schema.get("properties")
        else:
            schema = rendered.get("parametersJsonSchema")
            assert schema is None or schema["type"] == "object" and "$schema" not in schema
        genai_types.FunctionDeclaration.model_validate(rendered)
    assert subset > 0


def test_corpus_mcp_rendering(catalog: Catalog) -> None:
    for rendered in render_tools(catalog, "mcp"):
        assert rendered["inputSchema"]["type"] == "object"
        if "outputSchema" in rendered:
            assert rendered["outputSchema"]["type"] == "object"
        mcp_types.Tool.model_validate(rendered)
