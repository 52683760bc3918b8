from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from gateway.catalog import AgentTool, ApiSpec, Argument, Catalog, Diagnostic, Server, Tool
from gateway.cli.commands import main
from gateway.config.loader import parse_manifest
from gateway.configuration import parse_configuration
from gateway.openapi import compile_specs
from gateway.toolsets import Toolset, build_toolsets, select_tools


def _tool(api: str, operation_id: str, method: str, path: str, tags: tuple[str, ...] = (),
          properties: dict | None = None, required: tuple[str, ...] = ()) -> Tool:
    properties = properties or {}
    schema: dict = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    arguments = tuple(Argument(name=name, location="query", wire_name=name, required=name in required)
                      for name in properties)
    return Tool(name=operation_id, api=api, operation_id=operation_id, method=method, path=path,
                description=f"{operation_id} description", input_schema=schema, arguments=arguments, tags=tags,
                servers=(Server(url=f"https://{api}.example.com"),))


def _catalog() -> Catalog:
    tenant = {"type": "string", "enum": ["acme", "globex"]}
    tools = [
        _tool("shop", "listItems", "GET", "/items", ("items",), {"tenant": tenant, "q": {"type": "string"}},
              ("tenant",)),
        _tool("shop", "getItem", "GET", "/items/{id}", ("items",), {"tenant": tenant, "id": {"type": "integer"}},
              ("tenant", "id")),
        _tool("shop", "createItem", "POST", "/items", ("items", "admin"), {"tenant": tenant}, ("tenant",)),
        _tool("shop", "deleteItem", "DELETE", "/items/{id}", ("admin",), {"id": {"type": "integer"}}, ("id",)),
        _tool("shop", "getStats", "GET", "/stats", ("reports",)),
        _tool("github", "getRepo", "GET", "/repos/{owner}/{repo}", ("repos",)),
        _tool("github", "listItems_gh", "GET", "/items"),
    ]
    tools[-1].operation_id = "listRepoItems"
    return Catalog(tools, {"shop": ApiSpec(name="shop", file="shop.yaml"),
                           "github": ApiSpec(name="github", file="github.yaml")})


def _build(agents_yaml: str, catalog: Catalog | None = None) -> tuple[dict[str, Toolset], list[Diagnostic]]:
    text = "providers: {p: {kind: openai}}\nagents:\n" + textwrap.indent(textwrap.dedent(agents_yaml), "  ")
    catalog = catalog or _catalog()
    manifest, _, diagnostics = parse_configuration(text, catalog=catalog, environ={})
    toolsets, build_diagnostics = build_toolsets(manifest, catalog)
    assert all(d in diagnostics for d in build_diagnostics)  # the configuration's load reports them too
    return toolsets, diagnostics


def test_an_entry_with_only_the_api_selects_every_operation_in_catalog_order() -> None:
    toolsets, diagnostics = _build("a: {model: p/m, tools: [{api: shop}]}")
    assert diagnostics == []
    assert toolsets["a"].names == [tool.name for tool in _catalog().for_api("shop")]
    assert all(isinstance(t, AgentTool) and t.tool is not None and t.tool.api == "shop" for t in toolsets["a"])


def test_criteria_combine_and_entries_unite() -> None:
    toolsets, diagnostics = _build("""\
    a:
      model: p/m
      tools:
        - {api: shop, operations: ["get*", createItem], methods: [GET]}
        - {api: shop, tags: [admin], exclude: [createItem]}
        - {api: github, paths: ["/repos/*"]}
        - {api: github, operations: [listRepoItems]}
    """)
    assert diagnostics == []
    assert toolsets["a"].names == ["getItem", "getStats", "deleteItem", "getRepo", "listItems_gh"]


def test_operations_match_operation_ids_or_catalog_names() -> None:
    catalog = _catalog()
    manifest, _ = parse_manifest("agents: {a: {model: p/m, tools: [{api: github, operations: [listItems_gh]}]}}",
                                 environ={})
    assert [t.name for t in select_tools(manifest.agents["a"].tools[0], catalog)] == ["listItems_gh"]


def test_fixed_args_leave_the_schema_and_are_kept_for_the_call() -> None:
    toolsets, diagnostics = _build("a: {model: p/m, tools: [{api: shop, operations: [listItems, getStats], "
                                   "args: {tenant: acme}}]}")
    assert diagnostics == []
    listing = toolsets["a"].get("listItems")
    assert listing is not None and listing.tool is not None
    assert listing.fixed_args == {"tenant": "acme"}
    assert "tenant" not in listing.input_schema["properties"] and "required" not in listing.input_schema
    assert listing.input_schema["properties"] == {"q": {"type": "string"}}
    assert "tenant" in listing.tool.input_schema["properties"]  # the catalog keeps the exact schema
    assert listing.tool.input_schema["required"] == ["tenant"]
    stats = toolsets["a"].get("getStats")
    assert stats is not None and stats.fixed_args == {}  # an operation without that argument is left alone


def test_fixed_args_must_be_taken_by_some_operation_and_valid() -> None:
    text = """\
    a:
      model: p/m
      tools:
        - {api: shop, operations: [getItem], args: {tenant: initech, colour: red}}
    """
    _, diagnostics = _build(text)
    assert {(d.level, d.pointer) for d in diagnostics} == {
        ("error", "agents.a.tools[0].args.tenant"), ("error", "agents.a.tools[0].args.colour")}
    by_pointer = {d.pointer: d.message for d in diagnostics}
    assert "initech" in by_pointer["agents.a.tools[0].args.tenant"]
    assert "no selected operation takes an argument 'colour'" in by_pointer["agents.a.tools[0].args.colour"]


def test_a_fixed_arg_may_name_the_wire_name_of_a_renamed_argument() -> None:
    tool = _tool("shop", "update", "PUT", "/items/{id}", properties={"path_id": {"type": "string"},
                                                                     "id": {"type": "string"}})
    tool.arguments = (Argument(name="path_id", location="path", wire_name="id", required=True),
                      Argument(name="id", location="body", wire_name="id"))
    catalog = Catalog([tool], {"shop": ApiSpec(name="shop", file="shop.yaml")})
    toolsets, _ = _build("a: {model: p/m, tools: [{api: shop, args: {path_id: x}}]}", catalog)
    assert toolsets["a"].tools["update"].fixed_args == {"path_id": "x"}
    assert list(toolsets["a"].tools["update"].input_schema["properties"]) == ["id"]


def test_overrides_rename_describe_and_set_policies_per_tool() -> None:
    toolsets, diagnostics = _build("""\
    a:
      model: p/m
      approval: writes
      tool_timeout: 7
      max_result_bytes: 900
      tools:
        - api: shop
          override:
            getItem: {rename: fetch_item, description: Fetch one item., timeout: 2, max_result_bytes: 50}
            deleteItem: {approval: always}
            listItems: {approval: never}
    """)
    assert diagnostics == []
    toolset = toolsets["a"]
    assert "getItem" not in toolset.names
    fetch = toolset.get("fetch_item")
    assert fetch is not None and fetch.tool is not None and fetch.tool.name == "getItem"
    assert (fetch.description, fetch.timeout, fetch.max_result_bytes) == ("Fetch one item.", 2.0, 50)
    stats = toolset.tools["getStats"]
    assert (stats.description, stats.timeout, stats.max_result_bytes) == ("getStats description", 7.0, 900)
    approvals = {t.name: t.needs_approval for t in toolset}
    assert approvals == {"listItems": False, "fetch_item": False, "createItem": True, "deleteItem": True,
                         "getStats": False}


def test_overrides_for_unknown_or_unselected_operations() -> None:
    _, diagnostics = _build("""\
    a:
      model: p/m
      tools:
        - api: shop
          operations: [listItems]
          override:
            getItme: {rename: x}
            getItem: {rename: y}
    """)
    assert [(d.level, d.pointer) for d in diagnostics] == [
        ("error", "agents.a.tools[0].override.getItme"), ("warning", "agents.a.tools[0].override.getItem")]
    assert "did you mean 'getItem'" in diagnostics[0].message


def test_selections_that_match_nothing_are_warnings_with_lines() -> None:
    text = """\
    a:
      model: p/m
      tools:
        - {api: shop, methods: [PATCH]}
        - api: shop
          operations: [listItem, "zz*"]
          exclude: [nope]
    """
    toolsets, diagnostics = _build(text)
    assert all(d.level == "warning" for d in diagnostics)
    body = "providers: {p: {kind: openai}}\nagents:\n" + textwrap.indent(textwrap.dedent(text), "  ")
    lines = body.splitlines()
    found = {(d.pointer, lines[(d.line or 0) - 1].strip()) for d in diagnostics}
    assert found == {
        ("agents.a.tools[0]", "- {api: shop, methods: [PATCH]}"),
        ("agents.a.tools[1].operations[0]", 'operations: [listItem, "zz*"]'),
        ("agents.a.tools[1].operations[1]", 'operations: [listItem, "zz*"]'),
        ("agents.a.tools[1].exclude[0]", "exclude: [nope]"),
        ("agents.a.tools[1]", "- api: shop"),
    }
    assert any("did you mean 'listItems'" in d.message for d in diagnostics)
    assert toolsets["a"].names == []


def test_a_tool_selected_twice_keeps_the_first_entry() -> None:
    toolsets, diagnostics = _build("""\
    a:
      model: p/m
      tools:
        - {api: shop, operations: [listItems], args: {tenant: acme}}
        - {api: shop, operations: ["list*"], args: {tenant: globex}}
    """)
    assert toolsets["a"].tools["listItems"].fixed_args == {"tenant": "acme"}
    assert [(d.level, d.pointer) for d in diagnostics] == [("warning", "agents.a.tools[1]")]


def test_delegation_tools() -> None:
    toolsets, diagnostics = _build("""\
    lead: {model: p/m, approval: writes, delegates: [auditor], tools: [{api: github}]}
    boss: {model: p/m, approval: always, delegates: [auditor]}
    auditor: {model: p/m, description: Checks the books., tools: [{api: shop, methods: [GET]}]}
    """)
    assert diagnostics == []
    lead = toolsets["lead"]
    assert lead.names == ["getRepo", "listItems_gh", "ask_auditor"]
    ask = lead.tools["ask_auditor"]
    assert ask.delegate == "auditor" and ask.tool is None
    assert ask.input_schema["required"] == ["task"] and ask.input_schema["properties"]["task"]["type"] == "string"
    assert "Checks the books." in ask.description
    assert not ask.needs_approval  # the auditor's own policy gates its own calls
    assert toolsets["boss"].tools["ask_auditor"].needs_approval
    assert toolsets["auditor"].names == ["listItems", "getItem", "getStats"]


def test_names_stay_unique_when_renames_or_delegation_tools_collide() -> None:
    agents = """\
    a:
      model: p/m
      delegates: [b]
      tools:
        - api: shop
          override: {getItem: {rename: getRepo}, getStats: {rename: ask_b}}
        - api: github
    b: {model: p/m}
    """
    toolsets, diagnostics = _build(agents)
    names = toolsets["a"].names
    assert len(names) == len(set(names)) == 8
    assert {"shop_getRepo", "github_getRepo", "shop_ask_b", "ask_b"} <= set(names)
    assert toolsets["a"].tools["shop_getRepo"].tool.name == "getItem"  # type: ignore[union-attr]
    assert toolsets["a"].tools["github_getRepo"].tool.name == "getRepo"  # type: ignore[union-attr]
    assert toolsets["a"].tools["ask_b"].delegate == "b"
    assert len([d for d in diagnostics if d.level == "warning"]) == 3
    again, _ = _build(agents)
    assert again["a"].names == names  # deterministic


def _spec(title: str, operations: dict[str, str]) -> str:
    paths = {path: {"get": {"operationId": op, "responses": {"200": {"description": "ok"}}}}
             for op, path in operations.items()}
    return json.dumps({"openapi": "3.0.3", "info": {"title": title, "version": "1"},
                       "servers": [{"url": "http://127.0.0.1:9/"}], "paths": paths})


def test_two_apis_with_the_same_operation_id_get_distinct_names_and_keep_their_binding(tmp_path: Path) -> None:
    (tmp_path / "github.json").write_text(_spec("GitHub", {"getUser": "/users/{u}", "getRepo": "/repo"}))
    (tmp_path / "shop.json").write_text(_spec("Shop", {"getUser": "/customers/{u}"}))
    catalog = compile_specs(tmp_path, use_cache=False)
    toolsets, diagnostics = _build("a: {model: p/m, tools: [github, shop]}", catalog)
    assert not [d for d in diagnostics if d.level == "error"]
    names = toolsets["a"].names
    assert len(names) == len(set(names)) == 3
    paths = {name: (t.tool.api, t.tool.path) for name, t in toolsets["a"].tools.items() if t.tool}
    assert sorted(paths.values()) == [("github", "/repo"), ("github", "/users/{u}"), ("shop", "/customers/{u}")]
    users = [name for name in names if paths[name][1] != "/repo"]
    assert all("getUser" in name for name in users)
    assert _build("a: {model: p/m, tools: [github, shop]}", catalog)[0]["a"].names == names


def test_gateway_tools_for_an_agent_prints_exactly_its_selected_set(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "shop.json").write_text(_spec("Shop", {"listItems": "/items", "getItem": "/items/{id}",
                                                    "getStats": "/stats"}))
    agents = tmp_path / "agents.yaml"
    agents.write_text(textwrap.dedent("""\
        providers: {p: {kind: openai}}
        agents:
          clerk:
            model: p/m
            delegates: [auditor]
            tools:
              - api: shop
                operations: ["get*"]
                exclude: [getStats]
                override: {getItem: {rename: fetch_item}}
              - {api: shop, operations: [listItems]}
          auditor: {model: p/m}
        """))
    common = ["--specs", str(specs), "--agents", str(agents), "--no-cache"]
    assert main(["tools", *common, "--agent", "clerk"]) == 0
    printed = json.loads(capsysbinary.readouterr().out)
    assert [(t["name"], t["operation_id"], t["delegate"]) for t in printed] == [
        ("fetch_item", "getItem", None), ("listItems", "listItems", None), ("ask_auditor", None, "auditor")]
    assert main(["tools", *common, "--agent", "clerk", "--format", "openai"]) == 0
    printed = json.loads(capsysbinary.readouterr().out)
    assert [t["function"]["name"] for t in printed] == ["fetch_item", "listItems", "ask_auditor"]
    assert main(["tools", *common, "--agent", "nobody"]) == 1
    assert b"no agent named 'nobody'" in capsysbinary.readouterr().err


@pytest.mark.corpus
def test_selecting_from_the_real_github_spec(corpus: Path, tmp_path: Path) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "github.json").symlink_to(corpus / "github" / "api.github.com.json")
    catalog = compile_specs(specs, use_cache=False)
    toolsets, diagnostics = _build("""\
    triage:
      model: p/m
      tools:
        - api: github
          tags: [issues]
          methods: [GET]
          exclude: ["*comment*"]
          args: {owner: octocat}
          override: {"issues/get": {rename: get_issue}}
    """, catalog)
    assert not [d for d in diagnostics if d.level == "error"]
    tools = list(toolsets["triage"])
    assert tools and len({t.name for t in tools}) == len(tools)
    expected = [t for t in catalog.for_api("github") if t.method == "GET" and "issues" in t.tags
                and "comment" not in (t.operation_id or "") and "comment" not in t.name]
    assert [t.tool for t in tools] == expected
    assert "get_issue" in toolsets["triage"].names
    for agent_tool in tools:
        assert agent_tool.tool is not None
        if "owner" in agent_tool.tool.input_schema.get("properties", {}):
            assert agent_tool.fixed_args == {"owner": "octocat"}
            assert "owner" not in agent_tool.input_schema["properties"]
            assert "owner" not in agent_tool.input_schema.get("required", [])


def test_an_api_whose_spec_yields_no_tools_is_a_warning() -> None:
    catalog = _catalog()
    catalog.apis["empty"] = ApiSpec(name="empty", file="empty.yaml")
    toolsets, diagnostics = _build("a: {model: p/m, tools: [empty]}", catalog)
    assert toolsets["a"].names == []
    assert [(d.level, d.pointer) for d in diagnostics] == [("warning", "agents.a.tools[0]")]
    assert "0 operations" in diagnostics[0].message


def test_a_fixed_arg_whose_variable_is_missing_is_reported_once() -> None:
    _, diagnostics = _build("a: {model: p/m, tools: [{api: shop, operations: [listItems], args: {tenant: ${TENANT}}}]}")
    assert [(d.level, d.pointer) for d in diagnostics] == [("error", "agents.a.tools[0].args.tenant")]
    assert "TENANT" in diagnostics[0].message


def _duplicate_ids_catalog(tmp_path: Path) -> Catalog:
    """A GET and a DELETE that share the operationId `get_item` (common in real specs)."""
    specs = tmp_path / "specs"
    specs.mkdir()
    ok = {"200": {"description": "ok"}}
    param = [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}]
    spec = {"openapi": "3.0.3", "info": {"title": "shop", "version": "1"},
            "servers": [{"url": "https://shop.example.com"}], "paths": {"/items/{id}": {
        "get": {"operationId": "get_item", "parameters": param, "responses": ok},
        "delete": {"operationId": "get_item", "parameters": param, "responses": ok}}}}
    (specs / "shop.json").write_text(json.dumps(spec))
    return compile_specs(specs, use_cache=False)


def test_a_name_that_selects_several_operations_is_an_error_listing_them(tmp_path: Path) -> None:
    catalog = _duplicate_ids_catalog(tmp_path)
    get, delete = catalog.for_api("shop")
    assert get.name == "get_item" and delete.name.startswith("get_item_") and delete.operation_id == "get_item"
    _, diagnostics = _build("a: {model: p/m, tools: [{api: shop, operations: [get_item]}]}", catalog)
    [error] = [d for d in diagnostics if d.level == "error"]
    assert error.pointer == "agents.a.tools[0].operations[0]" and error.line == 3
    assert "names 2 operations" in error.message
    assert "get_item (GET /items/{id})" in error.message and f"{delete.name} (DELETE /items/{{id}})" in error.message
    # Narrowed by method, or named by the unique tool name, each is one operation again.
    toolsets, diagnostics = _build("a: {model: p/m, tools: [{api: shop, operations: [get_item], methods: [GET]}]}",
                                   catalog)
    assert diagnostics == [] and toolsets["a"].names == ["get_item"]
    toolsets, diagnostics = _build(f"a: {{model: p/m, tools: [{{api: shop, operations: [{delete.name}]}}]}}", catalog)
    assert diagnostics == [] and toolsets["a"].names == [delete.name]


def test_an_ambiguous_exclude_removes_every_match_with_a_warning(tmp_path: Path) -> None:
    catalog = _duplicate_ids_catalog(tmp_path)
    toolsets, diagnostics = _build("a: {model: p/m, tools: [{api: shop, exclude: [get_item]}]}", catalog)
    assert toolsets["a"].names == []
    assert any(d.level == "warning" and "names 2 operations" in d.message and "excluded" in d.message
               for d in diagnostics)
    assert not any(d.level == "error" for d in diagnostics)


def test_tools_renamed_by_another_spec_sharing_their_operation_ids_are_named_with_the_way_to_keep_them(
        tmp_path: Path) -> None:
    """Adding a spec whose operationIds the example's github.yaml has renamed the triage agent's tools
    (listIssues -> github_listIssues) under its clients, with no word (found trying the docs with a third spec)."""
    specs = tmp_path / "specs"
    specs.mkdir()
    example = Path(__file__).resolve().parents[1] / "specs" / "github.yaml"
    for name in ("github.yaml", "tracker.yaml"):
        (specs / name).write_text(example.read_text())
    catalog = compile_specs(specs, use_cache=False)
    toolsets, diagnostics = _build("triage: {model: p/m, tools: [{api: github, operations: [listIssues]}]}", catalog)
    assert toolsets["triage"].names == ["github_listIssues"]
    [warning] = [d for d in diagnostics if "prefix" in d.message]
    assert warning.level == "warning" and warning.pointer == "agents.triage.tools"
    assert "github_listIssues (listIssues)" in warning.message
    assert "override: {github_listIssues: {rename: listIssues}}" in warning.message
    kept, diagnostics = _build("""\
        triage:
          model: p/m
          tools: [{api: github, operations: [listIssues], override: {github_listIssues: {rename: listIssues}}}]
        """, catalog)
    assert kept["triage"].names == ["listIssues"] and not [d for d in diagnostics if "prefix" in d.message]
