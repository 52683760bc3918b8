"""A project whose one tool is a numbered write (POST /write {"n": N}) to a recording upstream, and the check every
store fault test ends with: nothing the upstream received is missing from the audit log."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from recording_server import RecordingServer

WRITE_SPEC = """\
openapi: 3.0.3
info: {title: Counter, version: "1"}
servers: [{url: "http://127.0.0.1:1"}]
paths:
  /write:
    post:
      operationId: write
      requestBody:
        required: true
        content: {application/json: {schema: {type: object, properties: {n: {type: integer}}, required: [n]}}}
      responses: {"201": {description: created}}
"""

AGENTS = """\
providers:
  openai: {{kind: openai, base_url: "{llm}/v1", api_key: test-key}}
apis:
  counter: {{base_url: "{upstream}", timeout: 5}}
agents:
  writer:
    model: openai/gpt-test
    tools: [{{api: counter}}]
{extra}"""


def write_counter_project(folder: Path, llm_url: str, upstream_url: str, extra: str = "") -> Path:
    """specs/counter.yaml and agents.yaml in `folder` (`extra`: more YAML at the end, e.g. a `gateway:` block)."""
    specs = folder / "specs"
    specs.mkdir(parents=True, exist_ok=True)
    (specs / "counter.yaml").write_text(WRITE_SPEC)
    agents = folder / "agents.yaml"
    agents.write_text(AGENTS.format(llm=llm_url, upstream=upstream_url, extra=extra))
    return agents


def received(upstream: RecordingServer) -> Counter[int]:
    """How often the upstream received each numbered write."""
    return Counter(int(json.loads(r.body)["n"]) for r in upstream.requests if r.path == "/write")


def audited(rows: list[dict[str, Any]]) -> dict[int, str]:
    """The numbered writes the audit rows (`GET /audit` items or `AuditRow.to_dict()`s) record, with their status."""
    return {int(row["arguments"]["n"]): row["status"] for row in rows
            if row.get("kind") == "tool" and row.get("tool") == "write" and isinstance(row.get("arguments"), dict)}


def sent_without_a_row(upstream: RecordingServer, rows: list[dict[str, Any]]) -> list[int]:
    """The writes the upstream received that no audit row records (must be empty)."""
    recorded = audited(rows)
    return sorted(n for n in received(upstream) if n not in recorded)


def close_store(safety: Any) -> None:
    """Close a test gateway's SQLite store (inside a `CountedStore` with `gateway.redis`) from outside its loop."""
    store = safety.store
    getattr(store, "inner", store).close()
