"""Secrets written into agents.yaml outside `auth:` (issue #27): credentials in a hook's URL (userinfo or query) and
the tool-search embeddings key never reach the caller, the model, the audit log or the process's log, against a real
gateway whose hook and embeddings endpoint fail with answers that echo what they were sent."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import httpx
import pytest
from recording_server import Recorded, RecordingServer
from recording_server import Reply as UpstreamReply
from scripted_llm import Call, Reply
from server_support import AGENTS_YAML, LenientLLM

from gateway.offer.embeddings import forget_failures

from .safety_support import safe_gateway

HOOK_PASSWORD = "hook-pass-7Qx2Lm9Vz"
HOOK_TOKEN = "hook-query-token-4Kp8Wd3Rt"
EMBEDDINGS_KEY = "sk-embed-9Jv3Nc5Hq2"
ARGS = {"latitude": 52.52, "longitude": 13.41}


def _echo(request: Recorded) -> UpstreamReply:
    """An endpoint that fails and says what it was sent (as real ones do in their error messages)."""
    return UpstreamReply(500, {"error": f"refused {request.target} with {request.header('authorization')}"})


def _everything(llm: LenientLLM, caplog: pytest.LogCaptureFixture, answers: list[str], rows: object) -> str:
    return "\n".join([*answers, json.dumps(llm.bodies()), json.dumps(rows), caplog.text])


def test_credentials_in_a_hook_url_reach_no_one(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer,
                                                caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with RecordingServer() as hook:
        hook.route("/", _echo)
        base = hook.url.replace("http://", f"http://hooker:{HOOK_PASSWORD}@")
        yaml = AGENTS_YAML + f'hooks:\n  - {{{{on: before_tool_call, url: "{base}/hook?token={HOOK_TOKEN}"}}}}\n'
        with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=yaml) as (url, safety), \
                httpx.Client(base_url=url, timeout=30) as client:
            direct = client.post("/agents/weather/tools/getForecast", json=ARGS)
            llm.script(Reply(calls=[Call("getForecast", ARGS)]), Reply(text="The hook said no."))
            chat = client.post("/v1/chat/completions",
                               json={"model": "weather", "messages": [{"role": "user", "content": "Weather?"}]})
            rows = client.get("/audit").json()["data"]
        assert hook.requests, "the hook was asked"
        assert hook.requests[0].query == [("token", HOOK_TOKEN)]  # the hook itself still gets its credentials
    assert "hook_denied" in direct.text and "hook_denied" in chat.text  # on_error: deny, as configured
    seen = _everything(llm, caplog, [direct.text, chat.text], rows)
    assert "/hook" in seen  # the hook is named ...
    assert HOOK_PASSWORD not in seen and HOOK_TOKEN not in seen  # ... without its credentials


def test_the_embeddings_key_is_never_logged(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer,
                                            caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    forget_failures()
    with RecordingServer() as embeddings:
        embeddings.route("/", _echo)
        yaml = AGENTS_YAML + (f"gateway:\n  search_embeddings: {{{{kind: openai, model: m, base_url: "
                              f"\"{embeddings.url}/v1\", api_key: {EMBEDDINGS_KEY}}}}}\n")
        with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=yaml) as (url, _), \
                httpx.Client(base_url=url, timeout=30) as client:
            found = client.get("/agents/triage/tools/search", params={"q": "comment on an issue"})
        assert embeddings.requests, "the embeddings endpoint was asked"
    forget_failures()
    assert found.status_code == 200 and found.json()["data"]  # BM25 alone answered
    assert "embeddings failed" in caplog.text
    assert EMBEDDINGS_KEY not in caplog.text and EMBEDDINGS_KEY not in found.text


def test_what_a_url_holds_and_how_it_is_shown() -> None:
    from gateway.kernel.redaction import url_secrets, url_without_credentials

    url = "https://bot:p%40ss-word@hooks.example:8443/v1/judge?sig=abc123&format=json&ticket=0123456789abcdefgh#x"
    assert set(url_secrets(url)) >= {"p%40ss-word", "p@ss-word", "bot:p%40ss-word", "abc123", "0123456789abcdefgh"}
    assert "json" not in url_secrets(url)  # a short value of a plain name stays readable
    assert url_secrets("https://ghp_tokenonly@hooks.example/x") == ["ghp_tokenonly", "ghp_tokenonly"]
    assert url_secrets("http://127.0.0.1:9/hook") == [] and url_secrets(None) == []
    assert url_without_credentials(url) == "https://hooks.example:8443/v1/judge"
    assert url_without_credentials("http://u:p@[::1]:80/h?t=1") == "http://[::1]:80/h"
