"""A spec written to hurt the gateway that loads it (redteam46): an API owner's, or one downloaded from a vendor.
Each is loaded by a real `gateway` (uvicorn on 127.0.0.1) in front of a recording upstream, and called on the
direct door as a model's call would be."""

from __future__ import annotations

import concurrent.futures
from pathlib import Path
from typing import Any

import httpx
import pytest
from recording_server import RecordingServer

from gateway.execution import fastschema
from gateway.server import app, routes
from gateway.server.routes import render_agent_tools

from .hostile_support import OK, gets, healthz_while_held, hold, hostile_spec, serving

BACKTRACKING = "^(\\w+\\s?)*$(?!x)"
"""Look-around after a nested quantifier: only a backtracking engine runs it, and on `VALUE` (61 characters)
jsonschema_rs's fancy-regex spent 0.2 s of the event loop before its limit (20 such patterns in an `anyOf`: 2.35 s
of /healthz waiting on one call, 5.5 s on four)."""
VALUE = "an" * 30 + "!"


def test_a_pattern_only_a_backtracking_engine_runs_is_dropped_at_load_and_never_run(tmp_path: Path,
                                                                                    upstream: RecordingServer) -> None:
    name = {"anyOf": [{"type": "string", "pattern": BACKTRACKING + "a" * i} for i in range(20)]}
    body = {"content": {"application/json": {"schema": {"type": "object", "properties": {
        "name": name, "code": {"type": "string", "pattern": "^[a-z]+$"}}}}}}
    spec = hostile_spec({"/tags": {"post": {"operationId": "tag", "requestBody": body, "responses": OK}}})
    with serving(tmp_path, spec, upstream.url) as (url, runtime):
        said = " ".join(d.message for d in runtime.catalog.diagnostics)
        assert "needs a backtracking regex engine" in said and "(?!x)" in said
        answer = httpx.post(f"{url}/agents/a/tools/tag", json={"name": VALUE}, trust_env=False, timeout=60)
        assert answer.status_code == 200, answer.text  # not judged here: the API judges it
        assert upstream.last.json() == {"name": VALUE}
        # A linear pattern is still checked before anything leaves.
        refused = httpx.post(f"{url}/agents/a/tools/tag", json={"code": "A1"}, trust_env=False, timeout=60)
        assert refused.status_code == 422 and "code" in refused.text
    assert len([r for r in upstream.requests if r.path == "/tags"]) == 1


def test_the_judge_never_runs_a_backtracking_engine() -> None:
    assert fastschema.pattern_matches("(a)\\1", "aa") is None  # a back-reference: left to the upstream
    assert fastschema.pattern_matches("^(?=a)a$", "a") is None  # look-ahead
    assert fastschema.pattern_matches("^a+$", "aaa") is True
    assert not fastschema.usable({"type": "string", "pattern": BACKTRACKING})


@pytest.mark.parametrize("path", ["/agents/a/tools", "/agents/a/tools?format=openai", "/openapi.json"])
def test_listing_a_specs_tools_holds_no_other_request(tmp_path: Path, upstream: RecordingServer,
                                                      monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    """A listing is as large as the spec makes it: one of 9.8 MB (20,000 operations sharing one schema of 200 fields)
    listed 577 MB and held /healthz 15 s, its /openapi.json (no key asked) 5.9 s. Here the rendering is held until
    /healthz has answered: it must be worked out off the event loop."""
    held = hold(monkeypatch, render_agent_tools, routes, app)
    with serving(tmp_path, gets("a"), upstream.url) as (url, _):
        listing = healthz_while_held(url, held, lambda: httpx.get(f"{url}{path}", trust_env=False, timeout=60))
    assert listing.status_code == 200


def test_a_schema_that_judges_a_value_exponentially_often_holds_no_other_request(tmp_path: Path,
                                                                                 upstream: RecordingServer) -> None:
    """redteam46's finding, measured on `gateway serve` before the fix (load 11-13): depth 25 held /healthz 17.8 s
    and the call took 29 s; each level doubles it. Now the entry reached 2**5 times at one place is left to the
    upstream, named at load; the levels above it are still judged."""
    depth = 30
    schemas: dict[str, Any] = {f"L{depth}": {"type": "string"}}
    for level in range(depth - 1, -1, -1):
        below = {"$ref": f"#/components/schemas/L{level + 1}"}
        schemas[f"L{level}"] = {"anyOf": [{"type": "array", "items": below, "minItems": 1},
                                          {"type": "array", "items": below, "maxItems": 5}]}
    body = {"content": {"application/json": {"schema": {"type": "object", "properties": {
        "v": {"$ref": "#/components/schemas/L0"}}}}}}
    spec = {**hostile_spec({"/t": {"post": {"operationId": "t", "requestBody": body, "responses": OK}}}),
            "components": {"schemas": schemas}}
    value: Any = 1
    for _ in range(depth):
        value = [value]
    with serving(tmp_path, spec, upstream.url) as (url, runtime):
        told = [d for d in runtime.catalog.diagnostics if "exponentially often" in d.message]
        assert [(d.file, d.pointer) for d in told] == [("hostile.json", "/components/schemas/L5")]
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            call = pool.submit(httpx.post, f"{url}/agents/a/tools/t", json={"v": value}, trust_env=False, timeout=600)
            health = httpx.get(f"{url}/healthz", trust_env=False, timeout=60)  # a hang guard, not a measure
            assert health.status_code == 200
            assert call.result().status_code == 200, call.result().text
        assert upstream.last.json() == {"v": value}
        refused = httpx.post(f"{url}/agents/a/tools/t", json={"v": [["x"]]}, trust_env=False, timeout=60)
        assert refused.status_code == 422, refused.text  # L0 and L1 are judged: "x" is no array
    assert len([r for r in upstream.requests if r.path == "/t"]) == 1
