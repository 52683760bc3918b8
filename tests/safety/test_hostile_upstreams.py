"""An upstream that answers as an attacker would (redteam46), in front of a real gateway (uvicorn on 127.0.0.1),
called on the direct door as a model's call would be: what the caller and the model are shown, and that the
gateway stays itself."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from recording_server import Recorded, RecordingServer, Reply
from server_support import running

from gateway.execution import executor
from gateway.http.reading import shape
from gateway.runtime import RuntimeHolder, load_runtime
from gateway.server import create_app

from .hostile_support import gets, healthz_while_held, hold, serving

TEXT = "-ba" * 50
"""As `charset=punycode` it decodes to other text (in quadratic time: 400 KB of it held the event loop 26 s)."""


@pytest.mark.parametrize("charset", ["punycode", "idna", "undefined", "base64"])
def test_a_charset_python_has_but_no_web_answer_means_is_read_as_utf8(tmp_path: Path, upstream: RecordingServer,
                                                                       charset: str) -> None:
    upstream.route("/text", Reply(200, TEXT.encode(), {"Content-Type": f"text/plain; charset={charset}"}))
    with serving(tmp_path, gets("text"), upstream.url) as (url, _):
        answer = httpx.post(f"{url}/agents/a/tools/text", json={}, trust_env=False, timeout=60)
    assert answer.status_code == 200, answer.text  # idna and undefined raised: a 502 naming the gateway's failure
    assert answer.json()["body"] == TEXT


def test_a_web_charset_is_still_decoded_as_named(tmp_path: Path, upstream: RecordingServer) -> None:
    upstream.route("/text", Reply(200, "Grüße €".encode("cp1252"), {"Content-Type": "text/plain; charset=latin1"}))
    with serving(tmp_path, gets("text"), upstream.url) as (url, _):
        answer = httpx.post(f"{url}/agents/a/tools/text", json={}, trust_env=False, timeout=60)
    assert answer.json()["body"] == "Grüße €"  # latin1 is windows-1252 on the web, as browsers read it


def test_an_echoed_credential_in_json_that_claims_another_charset_is_redacted(tmp_path: Path,
                                                                               upstream: RecordingServer) -> None:
    def echo(request: Recorded) -> Reply:
        body = json.dumps({"you_sent": request.header("authorization")}).encode()
        return Reply(200, body, {"Content-Type": "application/json; charset=utf-16"})

    upstream.route("/echo", echo)
    with serving(tmp_path, gets("echo"), upstream.url, "auth: {type: bearer, token: sekrit-token-123}") as (url, _):
        answer = httpx.post(f"{url}/agents/a/tools/echo", json={}, trust_env=False, timeout=60)
        audit = httpx.get(f"{url}/audit?limit=5", trust_env=False, timeout=60)
    assert upstream.last.header("authorization") == "Bearer sekrit-token-123"  # it was sent, and echoed
    assert answer.status_code == 200 and "sekrit" not in answer.text, answer.text
    assert "sekrit" not in audit.text


def test_a_large_answer_is_shaped_off_the_event_loop(tmp_path: Path, upstream: RecordingServer,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Its size is the upstream's to choose, up to the read cap (4 MiB): 500,000 small objects took 0.75-0.83 s of
    the event loop to parse, redact and cut, each call. Here shaping is held until /healthz has answered."""
    held = hold(monkeypatch, shape, executor)
    upstream.route("/big", Reply(200, [{"a": 1}] * 20_000))  # 160 KB
    with serving(tmp_path, gets("big"), upstream.url) as (url, _):
        answer = healthz_while_held(url, held, lambda: httpx.post(f"{url}/agents/a/tools/big", json={},
                                                                  trust_env=False, timeout=60)).json()
    assert answer["ok"] is True and answer["truncated"] is True and answer["body"][0] == {"a": 1}


def test_a_model_answer_trickled_a_byte_a_second_ends_at_the_providers_timeout(tmp_path: Path,
                                                                               upstream: RecordingServer) -> None:
    """`providers.<name>.timeout` is the seconds one model request may take; the client timed each read, so an
    answer read whole but sent a few bytes a second, forever, held the chat past 120 s (the caller gave up first)."""
    upstream.route("/v1/chat/completions", Reply(200, b"", {"Content-Type": "application/json"}, endless=True,
                                                 trickle=1.0))
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "hostile.json").write_text(json.dumps(gets("a")))
    (tmp_path / "agents.yaml").write_text(f"""
providers: {{llm: {{kind: openai, base_url: "{upstream.url}/v1", api_key: k, timeout: 2}}}}
agents: {{a: {{model: llm/m, tools: [{{api: hostile}}]}}}}
apis: {{hostile: {{base_url: "{upstream.url}"}}}}
""")
    runtime = load_runtime(specs, tmp_path / "agents.yaml", use_cache=False)
    with running(create_app(RuntimeHolder(runtime), watch=False)) as url:
        answer = httpx.post(f"{url}/v1/chat/completions", json={"model": "a", "messages": [
            {"role": "user", "content": "hi"}]}, trust_env=False, timeout=60)  # a hang guard, not a measure
    assert answer.status_code == 502 and "within 2.0s" in answer.json()["error"]["message"], answer.text
