"""A call refused by an api's open circuit breaker, on every door of one server: its own type (`circuit_open`),
not `transport_error` (user44's left item: nothing was sent, and the breaker says when it lets a call through).

The upstream answers 500 (not retried); with `breaker: {failures: 1}` one failure opens the breaker of the
callers without a key, which the server's doors share: then the chat's step, the direct call's 503 (with
Retry-After, as a rate limit's 429) and the official `mcp` client's tool error all say `circuit_open`, and the
audit has each refusal as `circuit_open` (not sent).
"""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx
from mcp import Client
from recording_server import RecordingServer
from recording_server import Reply as UpstreamReply
from scripted_llm import Call, Reply
from server_support import LenientLLM

from .safety_support import safe_gateway
from .test_every_door import ARGS, _yaml

OPEN = "  breaker:\n    failures: 1\n    reset_after: 600\n"


def test_an_open_breakers_refusal_is_circuit_open_on_every_door(tmp_path: Path, llm: LenientLLM,
                                                                upstream: RecordingServer) -> None:
    upstream.route("/meteo/v1/forecast", UpstreamReply(500, {"error": "down"}))
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=_yaml(OPEN), store=tmp_path / "state.db") \
            as (url, _), httpx.Client(base_url=url, timeout=30) as client:
        failed = client.post("/agents/weather/tools/getForecast", json=ARGS)
        assert failed.status_code == 502 and failed.json()["result"]["error_type"] == "upstream_error"

        direct = client.post("/agents/weather/tools/getForecast", json=ARGS)
        assert direct.status_code == 503, direct.text
        error = direct.json()["error"]
        assert error["code"] == "circuit_open" and direct.json()["result"]["error_type"] == "circuit_open"
        assert "circuit breaker is open" in error["message"] and "not sent" in error["message"]
        assert 590 <= int(direct.headers["retry-after"]) <= 600  # when the breaker lets one call through

        llm.script(Reply(calls=[Call("getForecast", ARGS)]), Reply(text="done"))
        chat = client.post("/v1/chat/completions", json={"model": "weather",
                                                         "messages": [{"role": "user", "content": "go"}]})
        assert chat.status_code == 200, chat.text
        (step,) = chat.json()["gateway"]["steps"]
        assert (step["ok"], step["error_type"]) == (False, "circuit_open")

        async def mcp_call() -> object:
            async with Client(f"{url}/mcp/weather") as mcp:
                return await mcp.call_tool("getForecast", ARGS)

        result = anyio.run(mcp_call)
        assert result.is_error and result.content[0].text.startswith("Error (circuit_open)")  # type: ignore[attr-defined]

        assert len([r for r in upstream.requests if r.path == "/meteo/v1/forecast"]) == 1  # only the first sent
        rows = client.get("/audit", params={"limit": 100, "tool": "getForecast"}).json()["data"]
        assert [r["status"] for r in reversed(rows)] == ["upstream_error", *["circuit_open"] * 3]
