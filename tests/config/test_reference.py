"""The agents.yaml reference (docs/agents-yaml-reference.md): made from the schema, current, naming every key."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

from gateway.cli.commands import main
from gateway.config.reference import COMMAND, agents_reference
from gateway.config.schema import agents_schema

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "agents-yaml-reference.md"


def test_the_reference_in_docs_is_the_one_the_schema_makes() -> None:
    assert REFERENCE.read_text() == agents_reference(), f"docs/ is out of date: run `{COMMAND}`"


def test_gateway_schema_markdown_prints_it() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["schema", "--markdown"]) == 0
    assert out.getvalue() == agents_reference()


def _objects(node: Any) -> list[dict[str, Any]]:
    """Every object schema with properties, anywhere in `node` (definitions and objects written in place)."""
    found = []
    if isinstance(node, dict):
        if isinstance(node.get("properties"), dict):
            found.append(node)
        for key, value in node.items():
            if key != "properties":
                found += _objects(value)
            else:
                for child in value.values():
                    found += _objects(child)
    elif isinstance(node, list):
        for item in node:
            found += _objects(item)
    return found


def test_every_key_of_every_object_in_the_schema_has_a_row_in_its_section() -> None:
    reference = agents_reference()
    sections = reference.split("\n## ")[1:]
    objects = _objects(agents_schema())
    assert len(objects) > 20
    for schema in objects:
        keys = set(schema["properties"])
        holding = [s for s in sections if keys <= {line.split("`")[1] for line in s.splitlines()
                                                     if line.startswith("| `")}]
        assert holding, f"no section of the reference lists every key of {sorted(keys)}"
        description = " ".join(str(schema.get("description", "")).split())
        assert any(description in s for s in holding)


def test_a_key_the_model_adds_shows_up(monkeypatch: Any) -> None:
    """The reference follows the schema: a new key (with its description) is listed without editing anything."""
    import gateway.config.reference as reference

    schema = agents_schema()
    schema["$defs"]["ClientConfig"]["properties"]["team_xyz"] = {"type": "string", "description": "The team."}
    monkeypatch.setattr(reference, "agents_schema", lambda: schema)
    text = reference.agents_reference()
    clients = text.split("\n## clients.<name>\n", 1)[1].split("\n## ", 1)[0]
    assert "| `team_xyz` | string |  | The team. |" in clients
