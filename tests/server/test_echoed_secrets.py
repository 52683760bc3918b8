"""An upstream that echoes the request (a debug endpoint, an error page) hands back the api's key in whatever form
it writes it; none of those the model could decode reaches a caller of a real uvicorn gateway: percent-escapes in
lower case (some servers write them so), base64url."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import unquote

import httpx
import pytest
from recording_server import Recorded, RecordingServer, Reply
from server_support import running

from gateway.runtime import RuntimeHolder, load_runtime
from gateway.server import create_app

KEY = "sk-AB/cd+ef=gh12345_echoed~~~"  # its base64 holds a `+`: base64url writes `-`
SPEC = {"openapi": "3.0.3", "info": {"title": "echo", "version": "1"},
        "components": {"securitySchemes": {"key": {"type": "apiKey", "in": "query", "name": "api_key"}}},
        "security": [{"key": []}],
        "paths": {"/echo": {"get": {"operationId": "echo", "responses": {"200": {"description": "ok"}}}}}}
AGENTS = """\
apis:
  echo: {{base_url: "{upstream}", auth: {{type: api_key, in: query, name: api_key, value: "{key}"}}}}
agents:
  clerk: {{model: openai/none, tools: [{{api: echo}}]}}
providers:
  openai: {{kind: openai, base_url: "http://127.0.0.1:9/v1", api_key: unused}}
"""


@contextmanager
def _gateway(folder: Path, upstream: RecordingServer) -> Iterator[str]:
    (folder / "specs").mkdir()
    (folder / "specs" / "echo.json").write_text(json.dumps(SPEC))
    (folder / "agents.yaml").write_text(AGENTS.format(upstream=upstream.url, key=KEY))
    runtime = load_runtime(folder / "specs", folder / "agents.yaml", use_cache=False)
    with running(create_app(RuntimeHolder(runtime), watch=False)) as url:
        yield url


def _lower_escapes(request: Recorded) -> Reply:
    return Reply(200, {"you_sent": re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), request.raw_query)})


def _base64url(request: Recorded) -> Reply:
    key = dict(request.query)["api_key"]
    return Reply(200, {"token": base64.urlsafe_b64encode(key.encode()).decode()}, headers={"X": "y"})


@pytest.mark.parametrize("echo", [_lower_escapes, _base64url])
def test_an_echoed_key_reaches_no_caller_in_a_form_it_could_decode(tmp_path: Path, echo: object) -> None:
    with RecordingServer() as upstream, _gateway(tmp_path, upstream) as url:
        upstream.route("/echo", echo)  # type: ignore[arg-type]
        result = httpx.post(f"{url}/agents/clerk/tools/echo", json={}, timeout=10).json()
    assert upstream.last.query == [("api_key", KEY)]  # the key went out
    shown = json.dumps(result)
    assert "[REDACTED]" in shown
    for text in (shown, unquote(shown)):
        assert KEY not in text
    assert base64.urlsafe_b64encode(KEY.encode()).decode() not in shown
