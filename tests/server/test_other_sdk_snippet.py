"""docs/http-api.md's snippet for an agent on Anthropic's SDK, run as written against a running gateway: the tool
definitions it takes from `GET /agents/{agent}/tools` are a list the SDK accepts, and each tool_use it runs as a
direct call reaches the api. (The answer's definitions sit under `data`; passing the answer itself fails.)"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from recording_server import RecordingServer
from scripted_llm import Call, Reply
from server_support import ROOT, LenientLLM


def _snippet() -> str:
    page = (ROOT / "docs" / "http-api.md").read_text()
    [block] = [b for b in re.findall(r"```python\n(.*?)```", page, re.S) if "anthropic.Anthropic()" in b]
    return block


def test_the_anthropic_sdk_snippet_runs_the_agents_tools(gw: tuple[str, Any], llm: LenientLLM,
                                                         upstream: RecordingServer,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    url, _ = gw
    monkeypatch.setenv("ANTHROPIC_BASE_URL", llm.url)  # the SDK's own variables: the snippet is run unchanged
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    llm.script(Reply(calls=[Call("getForecast", {"latitude": 38.72, "longitude": -9.14})]))
    scope: dict[str, Any] = {}
    exec(_snippet().replace("http://127.0.0.1:8080", url), scope)  # noqa: S102  (the documented code, as written)
    assert [tool["name"] for tool in llm.bodies()[0]["tools"]] == ["getForecast"]
    [result] = scope["results"]
    answer = json.loads(result["content"])
    assert answer["ok"] is True and answer["status"] == 200
    assert [r.target for r in upstream.requests] == ["/meteo/v1/forecast?latitude=38.72&longitude=-9.14"]
