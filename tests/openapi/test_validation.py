"""`gateway validate` and `gateway tools` (the compiler's two CLI doors) and the validation report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from gateway.cli.commands import main
from gateway.openapi import compile_specs
from gateway.openapi.spec_validation import spec_reports

ROOT = Path(__file__).resolve().parents[2]

GOOD = {"openapi": "3.0.3", "info": {"title": "shop", "version": "1"}, "paths": {
    "/items": {"get": {"operationId": "listItems", "responses": {"200": {"description": "ok", "content": {
        "application/json": {"schema": {"type": "array", "items": {"type": "string"}}}}}}}}}}


@pytest.fixture
def specs(tmp_path: Path) -> Path:
    root = tmp_path / "specs"
    root.mkdir()
    (root / "shop.yaml").write_text(yaml.safe_dump(GOOD))
    return root


@pytest.fixture(autouse=True)
def _no_manifest_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`validate` without `--agents` checks the specs alone when ./agents.yaml is absent (a manifest named but absent
    is an error: a mistyped path must fail a CI check), so these tests run in a folder that holds none."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GATEWAY_AGENTS", raising=False)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_validate_reports_counts_and_full_validation_findings(specs: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    invalid = {**GOOD, "info": {"title": "no version"}}  # compiles, but the spec validator objects
    (specs / "loose.yaml").write_text(yaml.safe_dump(invalid))
    code, out, _ = _run(capsys, "validate", "--specs", str(specs),
                        "--json", "--no-cache")
    report = json.loads(out)
    assert code == 0 and report["ok"] is True
    by_file = {s["file"]: s for s in report["specs"]}
    assert by_file["shop.yaml"]["tools"] == 1 and by_file["shop.yaml"]["operations"] == 1
    assert by_file["loose.yaml"]["usable"] is True
    assert any("spec validation" in d["message"] and "version" in d["message"]
               for d in by_file["loose.yaml"]["diagnostics"])
    assert report["manifest"]["checked"] is False


def test_validate_exits_1_on_an_unusable_spec(specs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (specs / "broken.json").write_text("{")
    code, out, _ = _run(capsys, "validate", "--specs", str(specs),
                        "--no-cache")
    assert code == 1
    assert "broken.json: UNUSABLE" in out and "shop.yaml: ok, 1/1 operations" in out


def test_validate_exits_1_on_an_unusable_manifest(specs: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    agents = tmp_path / "agents.yaml"
    agents.write_text("agents: {a: {model: nope, tools: [{api: missing}]}}\n")
    code, out, _ = _run(capsys, "validate", "--specs", str(specs), "--agents", str(agents), "--json", "--no-cache")
    report = json.loads(out)
    assert code == 1 and report["manifest"]["usable"] is False and report["manifest"]["diagnostics"]


def test_refs_outside_the_folder_are_not_followed_by_full_validation(tmp_path: Path) -> None:
    root = tmp_path / "specs"
    root.mkdir()
    spec = {**GOOD, "components": {"schemas": {"X": {"$ref": "https://example.com/x.json"}}}}
    (root / "api.yaml").write_text(yaml.safe_dump(spec))
    [report] = spec_reports(root, compile_specs(root, use_cache=False))
    assert any("full validation skipped" in d.message for d in report.diagnostics)


@pytest.mark.parametrize("fmt", ["json", "openai", "anthropic", "gemini", "mcp"])
def test_tools_prints_a_json_array_in_every_format(specs: Path, tmp_path: Path, fmt: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    (specs / "bad.yaml").write_text("openapi: [")
    code, out, err = _run(capsys, "tools", "--specs", str(specs), "--agents", str(tmp_path / "none.yaml"),
                          "--format", fmt, "--no-cache")
    tools = json.loads(out)
    assert code == 0 and len(tools) == 1
    assert "bad.yaml" in err and "error" in err
    if fmt == "json":
        assert {"name", "api", "operation_id", "method", "path", "description", "input_schema",
                "output_schema"} <= set(tools[0])


def test_tools_missing_folder_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "tools", "--specs", str(tmp_path / "nope"), "--no-cache")
    assert code == 1 and out == "" and "does not exist" in err


def test_tools_for_an_agent_of_the_example(capsys: pytest.CaptureFixture[str]) -> None:
    if not (ROOT / "agents.yaml").exists():
        pytest.skip("the example agents.yaml is absent")
    code, out, _ = _run(capsys, "tools", "--specs", str(ROOT / "specs"), "--agents", str(ROOT / "agents.yaml"),
                        "--agent", "weather", "--format", "openai", "--strict", "--no-cache")
    tools = json.loads(out)
    assert code == 0 and tools and all(t["type"] == "function" for t in tools)
    code, _, err = _run(capsys, "tools", "--specs", str(ROOT / "specs"), "--agents", str(ROOT / "agents.yaml"),
                        "--agent", "nobody", "--no-cache")
    assert code == 1 and "nobody" in err


SHOP_WITH_MISTAKES = """\
openapi: 3.0.3
info: {title: Shop, version: "1"}
paths:
  /items/{id}:
    get:
      operationId: getItem
      parameters:
        - {name: id, in: path, required: true, schema: {type: intger}}
      responses:
        "200": {description: ok}
  /items:
    post:
      operationId: createItem
      requestBody:
        content:
          application/json:
            schema: {$ref: "#/components/schemas/Missing"}
      responses:
        "201": {description: ok}
"""


def test_validate_says_what_was_lost_with_lines_and_the_manifest_names_the_real_cause(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "shop.yaml").write_text(SHOP_WITH_MISTAKES)
    agents = tmp_path / "agents.yaml"
    agents.write_text("providers: {p: {kind: openai}}\nagents:\n  clerk:\n    model: p/m\n"
                      "    tools: [{api: shop, operations: [createItem, getItem]}]\n"
                      "apis: {shop: {base_url: 'http://127.0.0.1:9'}}\n")
    code, out, _ = _run(capsys, "validate", "--specs", str(specs), "--agents", str(agents), "--json", "--no-cache")
    report = json.loads(out)
    assert code == 3 and report["ok"] is True and report["complete"] is False
    [shop] = report["specs"]
    assert shop["usable"] is True and shop["lost"] == 2 and shop["tools"] == 1
    by_message = {d["message"].split(":")[0]: d for d in shop["diagnostics"]}
    typo = by_message["unknown type 'intger' (did you mean 'integer'?)"]
    assert typo["level"] == "error" and typo["line"] == 8
    assert typo["pointer"] == "/paths/~1items~1{id}/get/parameters/0/schema"
    skipped = by_message["operation skipped"]
    assert skipped["level"] == "error" and skipped["line"] == 12 and "Missing does not exist" in skipped["message"]
    assert all(d["line"] is not None for d in shop["diagnostics"])
    [hint] = report["manifest"]["diagnostics"]
    assert hint["line"] == 5 and "did you mean" not in hint["message"]
    assert "'createItem' of 'shop' was skipped" in hint["message"] and "shop.yaml:12" in hint["message"]
    assert "Missing does not exist" in hint["message"]
    code, out, _ = _run(capsys, "validate", "--specs", str(specs), "--agents", str(agents), "--no-cache")
    assert code == 3 and "shop.yaml: INCOMPLETE (2 lost), 1/2 operations" in out and "shop.yaml:8:" in out


def test_json_specs_get_lines_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    spec = {**GOOD, "paths": {"/items": {"get": {"operationId": "listItems", "parameters": [
        {"name": "n", "in": "query", "schema": {"type": "integer", "default": "ten"}}],
        "responses": {"200": {"description": "ok"}}}}}}
    (specs / "shop.json").write_text(json.dumps(spec, indent=2))
    code, out, _ = _run(capsys, "validate", "--specs", str(specs),
                        "--json", "--no-cache")
    [shop] = json.loads(out)["specs"]
    [dropped] = [d for d in shop["diagnostics"] if "does not match its own schema" in d["message"]]
    assert code == 0 and dropped["level"] == "warning"
    lines = (specs / "shop.json").read_text().splitlines()
    assert lines[dropped["line"] - 1].strip().startswith('"schema"')


def test_a_finding_inside_a_schema_object_gets_no_false_place(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """openapi-spec-validator checks schema objects on their own, so such a finding's path starts at the schema
    (`/type`): shown as that pointer at line 1 it sent the reader to the wrong place."""
    specs = tmp_path / "specs"
    specs.mkdir()
    parameter = {"name": "limit", "in": "query", "schema": {"type": "intger"}}
    typo = {**GOOD, "paths": {"/items": {"get": {**GOOD["paths"]["/items"]["get"], "parameters": [parameter]}}}}
    (specs / "shop.yaml").write_text(yaml.safe_dump(typo, sort_keys=False))
    _, out, _ = _run(capsys, "validate", "--specs", str(specs), "--no-cache")
    findings = [line for line in out.splitlines() if "spec validation" in line]
    assert findings and not [line for line in findings if "/type" in line], out
    assert any("(in a schema object; the validator does not say which)" in line for line in findings), out
    assert any("/paths/~1items/get/parameters/0" in line for line in findings), out  # a finding with its place


def test_a_duplicate_operation_id_is_named_at_its_pointer_with_the_name_its_tool_got(
        specs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = {"openapi": "3.0.3", "info": {"title": "files", "version": "1"}, "paths": {
        "/images/{id}/png": {"get": {"operationId": "getThing", "parameters": [
            {"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}}],
            "responses": {"200": {"description": "ok"}}}},
        "/images/export": {"get": {"operationId": "getThing", "responses": {"200": {"description": "ok"}}}}}}
    (specs / "files.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    code, out, _ = _run(capsys, "validate", "--specs", str(specs), "--no-cache")
    [line] = [line for line in out.splitlines() if "getThing" in line]
    # file, line and pointer of the second operation; the other operation; the tool name agents.yaml must use
    assert line.strip().startswith("warning: files.yaml:20: /paths/~1images~1export/get/operationId: ")
    assert "also that of GET /images/{id}/png" in line and "named 'getThing_" in line
    assert "does not say which" not in out  # the spec validator's own line (no pointer) is not repeated
    assert code == 0


def test_a_spec_that_does_not_parse_is_named_with_the_line_where_the_parser_stopped(
        specs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (specs / "unclosed.yaml").write_text("swagger: '2.0'\ninfo: {title: x, version: '1'\npaths: {}\n")
    (specs / "comma.json").write_text('{"openapi": "3.0.0",\n "info": {}\n "paths": {}}')
    code, out, _ = _run(capsys, "validate", "--specs", str(specs), "--no-cache")
    # file:line as every other diagnostic has it, the parser's finding, and no "<byte string>" for a stream name
    assert "error: unclosed.yaml:3: invalid YAML: did not find expected ',' or '}' (line 3, column 1; while " \
           "parsing a flow mapping that starts at line 2)" in out
    assert "error: comma.json:3: invalid JSON: " in out and "(line 3, column 2)" in out
    assert "byte string" not in out and "shop.yaml: ok" in out and code == 1


def test_a_ref_the_spec_validator_cannot_follow_is_named_without_the_document_it_searched(
        specs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = {"swagger": "2.0", "info": {"title": "erskine", "version": "1"}, "host": "127.0.0.1", "paths": {
        "/api/Part": {"get": {"responses": {"200": {"description": "ok", "schema": {
            "$ref": "#/definitions/NoSuchThing"}}}}}}, "definitions": {"Part": {"type": "object"}}}
    (specs / "erskine.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    _, out, _ = _run(capsys, "validate", "--specs", str(specs), "--no-cache")
    [line] = [line for line in out.splitlines() if "spec validation stopped" in line]
    # referencing's own text went on with "does not exist within {'swagger': '2.0', 'info': ..." (300 characters)
    assert line.strip() == ("warning: erskine.yaml:1: spec validation stopped: PointerToNowhere: the $ref "
                            "'/definitions/NoSuchThing' leads nowhere")


SPLIT = """\
openapi: 3.0.3
info: {title: split, version: "1"}
servers: [{url: "http://127.0.0.1:9"}]
paths:
  /items:
    get:
      operationId: listItems
      responses:
        "200":
          description: ok
          content:
            application/json:
              schema: {$ref: "parts/item.yaml#/Item"}
    post:
      operationId: addItem
      requestBody:
        content:
          application/json:
            schema: {$ref: "parts/item.yaml#/NewItem"}
      responses:
        "201": {description: made}
"""
PART = """\
Item:
  type: object
  properties:
    id: {type: integer}
    owner:
      $ref: "#/Owner"
NewItem:
  type: object
  properties:
    name: {type: string}
    tags:
      type: array
      items: {$ref: "tags.yaml#/Tag"}
"""


def test_a_bad_ref_in_a_second_file_is_named_where_it_is_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    specs = tmp_path / "specs"
    (specs / "parts").mkdir(parents=True)
    (specs / "split.yaml").write_text(SPLIT)
    (specs / "parts" / "item.yaml").write_text(PART)
    _, out, _ = _run(capsys, "validate", "--specs", str(specs), "--no-cache")
    lines = [line.strip() for line in out.splitlines()]
    # the file, line and pointer of each broken $ref (a schema's property; an array's items), and who uses it
    assert "warning: parts/item.yaml:6: /Item/properties/owner/$ref: $ref target parts/item.yaml#/Owner does " \
           "not exist (a $ref split.yaml uses: what uses it is left out)" in lines, out
    [tags] = [line for line in lines if line.startswith("warning: parts/item.yaml:13: /NewItem/properties/tags/"
                                                        "items/$ref: cannot read referenced file 'parts/tags.yaml'")]
    # the operations say what they lost, at their own place, as before
    assert any(line.startswith("warning: split.yaml:9: /paths/~1items/get/responses/200: output schema left out")
               for line in lines), out
    assert any(line.startswith("error: split.yaml:14: /paths/~1items/post: operation skipped") for line in lines), out


BOXES = """\
  /boxes:
    post:
      operationId: addBox
      requestBody:
        content:
          application/json:
            schema:
              additionalProperties: false
              allOf: [{$ref: "parts/item.yaml#/Box"}, {properties: {label: {type: strng}}}]
      responses:
        "201": {description: made}
"""
WARNED_PART = """\
Item:
  type: object
  properties:
    id: {type: intger}
NewItem:
  type: object
  properties:
    size: {type: string, enum: [1, 2]}
    count: {type: integer, default: "many"}
    name: {type: string, minLength: -1}
Box:
  type: object
  properties:
    weight: {type: nmber}
"""


def test_a_schema_warning_in_a_second_file_is_named_where_it_is_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    specs = tmp_path / "specs"
    (specs / "parts").mkdir(parents=True)
    (specs / "split.yaml").write_text(SPLIT + BOXES)
    (specs / "parts" / "item.yaml").write_text(WARNED_PART)
    _, out, _ = _run(capsys, "validate", "--specs", str(specs), "--no-cache")
    said = {line.strip().split(": ", 3)[2]: line.strip().split(": ", 3)[:2] for line in out.splitlines()
            if "/properties/" in line}
    # each at its own file and line: a type, an enum, a count, a default (checked after the compile), and a
    # property an allOf member brings to a closed object, from the second file or written inline in the first
    assert said == {
        "/Item/properties/id": ["error", "parts/item.yaml:4"],
        "/NewItem/properties/size": ["warning", "parts/item.yaml:8"],
        "/NewItem/properties/count": ["warning", "parts/item.yaml:9"],
        "/NewItem/properties/name": ["warning", "parts/item.yaml:10"],
        "/Box/properties/weight": ["error", "parts/item.yaml:14"],
        "/paths/~1boxes/post/requestBody/content/application~1json/schema/allOf/1/properties/label":
            ["error", "split.yaml:30"],
    }, out
