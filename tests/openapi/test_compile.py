from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gateway.openapi import compile_specs


def _spec(paths: dict, version: str = "3.0.3", **extra) -> dict:
    return {"openapi": version, "info": {"title": "t", "version": "1"}, "paths": paths, **extra}


def _get(operation_id: str, **fields) -> dict:
    return {"get": {"operationId": operation_id, "responses": {"200": {"description": "ok"}}, **fields}}


@pytest.fixture
def specs(tmp_path: Path) -> Path:
    root = tmp_path / "specs"
    (root / "twilio.com").mkdir(parents=True)
    (root / "shop.yaml").write_text(yaml.safe_dump(_spec({"/items": _get("listItems")})))
    (root / "twilio.com" / "api.json").write_text(json.dumps(_spec({"/calls": _get("listCalls")}, "3.1.0")))
    (root / "old.yml").write_text(yaml.safe_dump({"swagger": "2.0", "info": {"title": "o", "version": "1"},
                                                  "paths": {"/x": _get("listItems")}}))
    return root


def test_every_file_at_any_depth_with_api_names(specs: Path, tmp_path: Path) -> None:
    catalog = compile_specs(specs, cache_dir=tmp_path / "cache")
    assert sorted(catalog.apis) == ["old", "shop", "twilio.com/api"]
    assert catalog.apis["twilio.com/api"].file == "twilio.com/api.json"
    # listItems exists in two specs: both are prefixed, the unique one is not.
    assert sorted(catalog.tools) == ["listCalls", "old_listItems", "shop_listItems"]
    assert catalog.diagnostics == []


def test_broken_files_are_reported_and_others_still_load(specs: Path, tmp_path: Path) -> None:
    (specs / "bad.yaml").write_text("openapi: 3.0.0\npaths: [unclosed\n")
    (specs / "list.json").write_text("[1, 2]")
    (specs / "broken.json").write_text("{not json")
    (specs / "fragment.yaml").write_text(yaml.safe_dump({"components": {"schemas": {}}}))
    (specs / "empty.yaml").write_text("")
    (specs / "huge.yaml").write_text("openapi: 3.0.0\nx-n: " + "1" * 5000 + "\n")  # more digits than Python reads
    catalog = compile_specs(specs, use_cache=False)
    assert len(catalog) == 3
    by_file = {d.file: d for d in catalog.diagnostics}
    assert by_file["huge.yaml"].level == "error" and "integer string conversion" in by_file["huge.yaml"].message
    assert by_file["bad.yaml"].level == "error" and "YAML" in by_file["bad.yaml"].message
    assert by_file["broken.json"].level == "error" and "JSON" in by_file["broken.json"].message
    assert by_file["list.json"].level == "error"
    assert by_file["empty.yaml"].level == "error"
    assert by_file["fragment.yaml"].level == "warning"


def test_relative_file_refs_inside_the_folder(tmp_path: Path) -> None:
    root = tmp_path / "specs"
    (root / "common").mkdir(parents=True)
    (root / "common" / "schemas.yaml").write_text(yaml.safe_dump({"components": {"schemas": {
        "Item": {"type": "object", "properties": {"name": {"type": "string"},
                                                  "next": {"$ref": "#/components/schemas/Item"}}}},
        "parameters": {"Id": {"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}}}}}))
    paths = {"/items/{id}": _get("getItem", parameters=[{"$ref": "common/schemas.yaml#/components/parameters/Id"}],
                                 responses={"200": {"description": "ok", "content": {"application/json": {
                                     "schema": {"$ref": "./common/schemas.yaml#/components/schemas/Item"}}}}})}
    (root / "api.yaml").write_text(yaml.safe_dump(_spec(paths)))
    catalog = compile_specs(root, use_cache=False)
    tool = catalog.get("getItem")
    assert tool.input_schema["properties"]["id"] == {"type": "integer"}
    assert tool.output_schema["properties"]["next"] == {"$ref": "#/$defs/schemas.Item"}
    assert list(tool.output_schema["$defs"]) == ["schemas.Item"]


@pytest.mark.parametrize("ref", [
    "../outside.yaml#/components/schemas/X",
    "https://example.com/schemas.yaml#/X",
    "file:///etc/passwd#/x",
    "//example.com/x.yaml#/X",
])
def test_refs_leaving_the_folder_or_to_urls_are_refused(tmp_path: Path, ref: str) -> None:
    root = tmp_path / "specs"
    root.mkdir()
    (tmp_path / "outside.yaml").write_text(yaml.safe_dump({"components": {"schemas": {"X": {"type": "string"}}}}))
    paths = {"/a": _get("bad", parameters=[{"name": "q", "in": "query", "schema": {"$ref": ref}}]),
             "/b": _get("good")}
    (root / "api.yaml").write_text(yaml.safe_dump(_spec(paths)))
    catalog = compile_specs(root, use_cache=False)
    assert list(catalog.tools) == ["good"]
    [error] = catalog.errors
    assert error.pointer == "/paths/~1a/get" and "refused" in error.message


def test_cache_reuses_compiled_specs_and_notices_changes(specs: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    lines: list[str] = []
    first = compile_specs(specs, cache_dir=cache, progress=lines.append)
    assert all("compiling" in line for line in lines) and len(lines) == 3
    lines.clear()
    second = compile_specs(specs, cache_dir=cache, progress=lines.append)
    assert all("cached" in line for line in lines)
    assert [t.input_schema for t in second] == [t.input_schema for t in first]
    assert list(second.tools) == list(first.tools)
    (specs / "shop.yaml").write_text(yaml.safe_dump(_spec({"/items": _get("listAll")})))
    lines.clear()
    third = compile_specs(specs, cache_dir=cache, progress=lines.append)
    assert "listAll" in third and sum("compiling" in line for line in lines) == 1


def test_cache_entry_invalidated_by_a_referenced_file(tmp_path: Path) -> None:
    root = tmp_path / "specs"
    root.mkdir()
    (root / "frag.yaml").write_text(yaml.safe_dump({"S": {"type": "string"}}))
    (root / "api.yaml").write_text(yaml.safe_dump(_spec({"/a": _get("a", parameters=[
        {"name": "q", "in": "query", "schema": {"$ref": "frag.yaml#/S"}}])})))
    compile_specs(root, cache_dir=tmp_path / "cache")
    (root / "frag.yaml").write_text(yaml.safe_dump({"S": {"type": "integer"}}))
    catalog = compile_specs(root, cache_dir=tmp_path / "cache")
    assert catalog.get("a").input_schema["$defs"]["frag.S"] == {"type": "integer"}


def test_no_cache_does_not_write(specs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATEWAY_CACHE_DIR", str(tmp_path / "env-cache"))
    compile_specs(specs, use_cache=False)
    assert not (tmp_path / "env-cache").exists()
    compile_specs(specs)
    assert any((tmp_path / "env-cache").iterdir())


def test_missing_folder_is_a_diagnostic(tmp_path: Path) -> None:
    catalog = compile_specs(tmp_path / "nope", use_cache=False)
    assert len(catalog) == 0 and catalog.errors


def test_description_size_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "specs"
    root.mkdir()
    (root / "a.yaml").write_text(yaml.safe_dump(_spec({"/a": _get("a", description="word " * 500)})))
    monkeypatch.setenv("GATEWAY_MAX_DESCRIPTION", "100")
    assert len(compile_specs(root, cache_dir=tmp_path / "c").get("a").description) == 100
    monkeypatch.delenv("GATEWAY_MAX_DESCRIPTION")
    assert len(compile_specs(root, cache_dir=tmp_path / "c").get("a").description) == 1024


def test_yaml_specs_yield_json_data_only(tmp_path: Path) -> None:
    root = tmp_path / "specs"
    root.mkdir()
    (root / "a.yaml").write_text(
        "openapi: 3.0.0\ninfo: {title: t, version: 2024-01-01}\npaths:\n  /a:\n    get:\n      operationId: a\n"
        "      parameters: [{name: since, in: query, schema: {type: string, format: date, default: 2024-01-01}}]\n"
        "      responses:\n        200:\n          description: ok\n"
        "          content: {application/json: {schema: {type: object, properties: {1: {type: integer}}}}}\n")
    catalog = compile_specs(root, use_cache=False)
    tool = catalog.get("a")
    assert tool.input_schema["properties"]["since"]["default"] == "2024-01-01"
    assert tool.output_schema["properties"] == {"1": {"type": "integer"}}
    assert catalog.apis["a"].version == "2024-01-01"


def test_damaged_cache_entries_are_compiled_again(specs: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = compile_specs(specs, cache_dir=cache)
    for entry in cache.iterdir():
        entry.write_bytes(b"not a pickle")
    again = compile_specs(specs, cache_dir=cache)
    assert list(again.tools) == list(first.tools)


def test_a_cached_load_leaves_nothing_for_the_collector_to_rescan(tmp_path: Path) -> None:
    root = tmp_path / "specs"
    root.mkdir()
    paths = {f"/items{i}/{{id}}": _get(f"getItem{i}", parameters=[
        {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}},
        {"name": "fields", "in": "query", "schema": {"type": "array", "items": {"enum": ["a", "b", "c"]}}}])
        for i in range(400)}
    (root / "big.json").write_text(json.dumps(_spec(paths)))
    compile_specs(root, cache_dir=tmp_path / "cache")
    # Counted in a process of its own: in the test run's, a thread another test left running (a server, an
    # embeddings computation) may allocate during the load and set off a collection the load did not cause.
    subprocess.run([sys.executable, "-c", _COLLECTIONS_DURING_A_CACHED_LOAD, str(root), str(tmp_path / "cache")],
                   check=True, timeout=120)


_COLLECTIONS_DURING_A_CACHED_LOAD = """
import gc, sys
from pathlib import Path
from gateway.openapi import compile_specs

root, cache = Path(sys.argv[1]), Path(sys.argv[2])
compile_specs(root, cache_dir=cache)  # the modules a load imports, imported
# The unpickled catalog (thousands of containers, all alive) must not sit in the youngest generation,
# where the first collection after the load would scan every one of them (a cached Stripe load: 21 of 50 ms).
gc.collect()
collections = sum(generation["collections"] for generation in gc.get_stats())
catalog = compile_specs(root, cache_dir=cache)
assert len(catalog) == 400
assert sum(generation["collections"] for generation in gc.get_stats()) == collections, "a collection ran"
assert gc.get_freeze_count() == 0  # a process that froze nothing gets nothing frozen
gc.freeze()  # a process that keeps its long-lived heap frozen (gateway serve) ...
before = gc.get_freeze_count()
kept = compile_specs(root, cache_dir=cache)
assert len(kept) == 400 and gc.get_freeze_count() > before + 1_000  # ... keeps the new catalog frozen
"""


def test_cache_entries_change_with_every_module_that_builds_the_search_index() -> None:
    """An entry carries the spec's search index: a change to any module the index's builder reads (its words, its
    summaries) must make old entries unreadable, or a new ranking would search an index built by the old code."""
    import ast

    from gateway.offer import index, index_build
    from gateway.openapi._cache import fingerprinted_sources

    hashed = {path.resolve() for path in fingerprinted_sources()}
    offer = Path(index.__file__).resolve().parent
    needed: set[Path] = set()
    unread = [Path(index.__file__).resolve(), Path(index_build.__file__).resolve()]
    while unread:  # what they import from their own folder, and what that imports
        module = unread.pop()
        if module in needed:
            continue
        needed.add(module)
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
                unread.append(offer / f"{node.module}.py")
    assert needed - hashed == set()
    assert offer / "query.py" in needed and offer / "vocabulary.py" in needed
