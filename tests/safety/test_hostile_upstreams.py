"""An upstream that answers as an attacker would (redteam46), in front of a real gateway (uvicorn on 127.0.0.1),
called on the direct door as a model's call would be: what the caller and the model are shown, and that the
gateway stays itself."""

from __future__ import annotations

import concurrent.futures
import json
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from recording_server import Recorded, RecordingServer, Reply

from gateway.execution import executor
from gateway.http.reading import shape

from .hostile_support import gets, serving

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
    entered, release = threading.Event(), threading.Event()

    def held(*args: Any) -> Any:
        entered.set()
        release.wait(30)
        return shape(*args)

    monkeypatch.setattr(executor, "shape", held)
    upstream.route("/big", Reply(200, [{"a": 1}] * 20_000))  # 160 KB
    with serving(tmp_path, gets("big"), upstream.url) as (url, _):
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            call = pool.submit(httpx.post, f"{url}/agents/a/tools/big", json={}, trust_env=False, timeout=60)
            assert entered.wait(30)
            try:
                health = httpx.get(f"{url}/healthz", trust_env=False, timeout=10)  # a hang guard, not a measure
            finally:
                release.set()
            assert health.status_code == 200
            answer = call.result().json()
    assert answer["ok"] is True and answer["truncated"] is True and answer["body"][0] == {"a": 1}
