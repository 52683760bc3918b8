"""Tool search reads what a tool's arguments say (gateway/offer/parameter_text.py): their descriptions and enum
values, where a request's word may be the only one that names the operation."""

from __future__ import annotations

from pathlib import Path

from gateway.catalog import Argument, Catalog, Tool
from gateway.offer.index import index_of
from gateway.offer.parameter_text import MAX_VALUES, parameter_texts
from gateway.openapi import compile_specs

SPECS = Path(__file__).resolve().parents[2] / "specs"


def test_a_word_only_an_enum_value_says_finds_its_operation(tmp_path: Path) -> None:
    # the example's weather spec: "rain" is one of the forecast's variables, no other word of its operation says it
    folder = tmp_path / "specs"
    folder.mkdir()
    (folder / "open-meteo.yaml").write_text((SPECS / "open-meteo.yaml").read_text())
    catalog = compile_specs(folder, use_cache=False)
    hits = index_of(catalog).search("will it rain tomorrow in Oslo", limit=3)
    assert [hit.tool.operation_id for hit in hits] == ["getForecast"]


def _tool(name: str, path: str, summary: str, properties: dict[str, object], **defs: object) -> Tool:
    schema: dict[str, object] = {"type": "object", "properties": properties}
    if defs:
        schema["$defs"] = defs
    return Tool(name=name, api="events", operation_id=name, method="GET", path=path, description=summary,
                input_schema=schema, summary=summary)


_FILLER = [_tool(f"list{thing}", f"/{thing.lower()}s", f"List {thing.lower()}s", {})
           for thing in ("Order", "Store", "Vet", "Invoice", "Coupon", "Ticket")]
"""Other operations, so that the words under test are rare enough to weigh."""


def test_a_word_only_an_arguments_description_says_finds_its_operation() -> None:
    alerts = _tool("listAlerts", "/alerts", "List alerts", {"area": {"type": "string", "description": "Only alerts "
                                                                      "for this area. A region's code."}})
    warnings = _tool("listWarnings", "/warnings", "List warnings",
                     {"kind": {"type": "string", "description": "Only warnings of hail, frost or storms."}})
    hits = index_of(Catalog([alerts, warnings, *_FILLER])).search("anything about hail near Lyon", limit=3)
    assert [hit.tool.name for hit in hits] == ["listWarnings"]


def test_enum_values_are_read_through_refs_and_items_and_long_lists_are_not() -> None:
    fields = [f"field{i}" for i in range(MAX_VALUES + 1)]
    tool = _tool("getForecast", "/forecast", "Forecast", {
        "hourly": {"type": "array", "description": "Hourly variables.", "items": {"$ref": "#/$defs/Hourly"}},
        "unit": {"anyOf": [{"type": "string", "enum": ["celsius", "fahrenheit"]}, {"type": "null"}]},
        "fields": {"type": "array", "items": {"type": "string", "enum": fields}},
        "$orderby": {"type": "array", "description": "Order items by property values.",
                     "items": {"type": "string", "enum": ["id", "id desc"]}}},
        Hourly={"type": "string", "enum": ["rain", "snowfall"]})
    tool.arguments = (Argument(name="$orderby", location="query", wire_name="$orderby"),)  # OData's: not read
    [(described, values)] = parameter_texts([tool])
    assert described == "Hourly variables."
    assert values.split() == ["rain", "snowfall", "celsius", "fahrenheit"]  # a catalog of field names is no word of it


def test_a_path_parameters_description_is_not_read() -> None:
    # it says what the path says already: Graph's "The unique identifier of user" on thousands of paths
    tool = _tool("getUser", "/users/{id}", "Get a user", {"id": {"type": "string", "description": "The user's id."},
                                                          "fields": {"type": "string", "description": "What to show."}})
    tool.arguments = (Argument(name="id", location="path", wire_name="id", required=True),
                      Argument(name="fields", location="query", wire_name="fields"))
    assert parameter_texts([tool])[0][0] == "What to show."
