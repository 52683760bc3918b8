"""`gateway validate` does not hand openapi-spec-validator a spec whose schemas it would walk exponentially often
(gateway.openapi._validator_walk): a 1 KB spec of `allOf` branches that meet again level after level held it for
minutes (14 levels: 21 s, 18: 266 s). Full validation is skipped, saying where; the corpus's specs are all
below the bound; a split spec's schemas in another file are counted too."""

from __future__ import annotations

import json
from pathlib import Path

from gateway.openapi import compile_specs
from gateway.openapi._documents import Documents
from gateway.openapi._validator_walk import MAX_WALK, costly_walk
from gateway.openapi.spec_validation import spec_reports


def _doubling(levels: int, ref: str = "#/components/schemas/S") -> dict[str, object]:
    schemas: dict[str, object] = {f"S{i}": {"allOf": [{"$ref": f"{ref}{i + 1}"}, {"$ref": f"{ref}{i + 1}"}]}
                                  for i in range(levels)}
    schemas[f"S{levels}"] = {"type": "object", "properties": {"a": {"type": "string"}}}
    return schemas


def _spec(schemas: dict[str, object], body: str = "#/components/schemas/S0") -> dict[str, object]:
    content = {"application/json": {"schema": {"$ref": body}}}
    return {"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "servers": [{"url": "http://127.0.0.1:9"}],
            "paths": {"/x": {"post": {"operationId": "x", "requestBody": {"content": content},
                                      "responses": {"200": {"description": "ok"}}}}},
            "components": {"schemas": schemas}}


def _said(specs: Path) -> list[tuple[str, str]]:
    reports = spec_reports(specs, compile_specs(specs, use_cache=False))
    return [(d.pointer, d.message) for report in reports for d in report.diagnostics
            if "full validation" in d.message]


def test_a_spec_the_validator_would_walk_for_ever_is_not_handed_to_it(tmp_path: Path) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "t.json").write_text(json.dumps(_spec(_doubling(12))))  # 2**13 steps: seconds, without the check
    said = _said(specs)
    assert [pointer for pointer, _ in said] == ["/components/schemas/S0"]
    assert f"more than {MAX_WALK:,} times" in said[0][1]


def test_schemas_in_another_file_are_counted_and_a_tame_spec_is_validated(tmp_path: Path) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "parts.json").write_text(json.dumps(_doubling(40, "#/S")))
    main = _spec({}, "parts.json#/S0")
    documents = Documents(specs)
    documents.add("main.json", main)
    assert costly_walk(main, documents, "main.json") is not None
    (specs / "main.json").write_text(json.dumps(_spec(_doubling(5))))  # 63 steps: validated as before
    assert _said(specs) == []
