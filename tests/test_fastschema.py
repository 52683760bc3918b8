from __future__ import annotations

import pytest

from gateway.execution import fastschema as _fastschema
from gateway.execution.fastschema import is_valid

SCHEMA = {"type": "object", "properties": {"owner": {"type": "string"}, "per_page": {"type": "integer", "minimum": 1},
                                           "email": {"type": "string", "format": "email"}},
          "required": ["owner"], "additionalProperties": False}


@pytest.mark.skipif(_fastschema.jsonschema_rs is None, reason="jsonschema_rs not installed")
def test_valid_instances_are_valid() -> None:
    assert is_valid(SCHEMA, {"owner": "octo", "per_page": 30, "email": "a@example.com"})
    assert is_valid(SCHEMA, {"owner": "octo"})


@pytest.mark.parametrize("instance", [
    {}, {"owner": 1}, {"owner": "o", "per_page": 0}, {"owner": "o", "per_page": True}, {"owner": "o", "extra": 1},
    {"owner": "o", "email": "not an address"}, [], "text", {"owner": "o", "per_page": object()},
])
def test_anything_invalid_or_foreign_defers_to_the_slow_path(instance: object) -> None:
    assert is_valid(SCHEMA, instance) is False


def test_a_schema_it_cannot_compile_defers_to_the_slow_path() -> None:
    assert is_valid({"type": "string", "pattern": "(unclosed"}, "x") is False
    assert is_valid("not a schema", {}) is False


def test_the_compiled_validator_follows_the_schema_object_not_its_id() -> None:
    first = {"type": "integer"}
    assert is_valid(first, 1) is (_fastschema.jsonschema_rs is not None)
    second = {"type": "string"}
    assert is_valid(second, 1) is False
    assert is_valid(first, "1") is False
