"""No caller can stall the gateway for everyone: while each hostile request runs, `/healthz` answers.

A real gateway (uvicorn on 127.0.0.1) over a small spec, a recording upstream, the scripted LLM. Each test sends
one request that used to hold the event loop for seconds (a chat of 60,000 tiny messages, 100,000 wrong-typed
array items on the direct and MCP doors, a spec `pattern` that backtracks in an argument or an answer, a
synchronous hook that blocks) while
another connection polls `/healthz`: every poll must be answered (a poll that waits `PATIENCE` seconds, fifty
times the goal of 100 ms, means the loop was held) and the hostile request gets its own clear answer. Nor can a
caller hold connections half-sent (slowloris: the tests at the end).
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import stall_hooks
from mcp import Client
from recording_server import RecordingServer, Reply
from server_support import LenientLLM, running

from gateway.runtime import RuntimeHolder, load_runtime
from gateway.server import bounded_head, create_app

PATIENCE = 5.0
"""Seconds a `/healthz` poll may wait before the test calls the loop held."""

PATTERN = r"^(\w+\s?)*$"
SPEC = {
    "openapi": "3.0.3",
    "info": {"title": "stall", "version": "1"},
    "paths": {
        "/numbers": {"post": {
            "operationId": "putNumbers",
            "requestBody": {"required": True, "content": {"application/json": {"schema": {
                "type": "object", "required": ["numbers"],
                "properties": {"numbers": {"type": "array", "items": {"type": "integer"}}}}}}},
            "responses": {"200": {"description": "ok"}}}},
        "/words": {"get": {
            "operationId": "findWords",
            "parameters": [{"name": "q", "in": "query", "required": True,
                            "schema": {"type": "string", "pattern": PATTERN}}],
            "responses": {"200": {"description": "ok"}}}},
        "/hooked": {"get": {"operationId": "hooked", "responses": {"200": {"description": "ok"}}}},
        "/echo": {"get": {"operationId": "readEcho", "responses": {"200": {
            "description": "ok", "content": {"application/json": {"schema": {
                "type": "object", "properties": {"q": {"type": "string", "pattern": PATTERN}}}}}}}}},
    },
}
AGENTS = """\
providers:
  openai: {{kind: openai, base_url: "{llm}/v1", api_key: chat-key}}
apis:
  stall: {{base_url: "{upstream}"}}
agents:
  clerk:
    model: openai/gpt-test
    tools: [{{api: stall}}]
    hooks:
      - {{on: before_tool_call, call: "stall_hooks:held", tools: [hooked], timeout: 0.5, on_error: deny}}
"""


_POLLER = """
import http.client, sys, time
host, port, patience = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
connection = http.client.HTTPConnection(host, port, timeout=patience)
print("ready", flush=True)
while True:
    try:
        connection.request("GET", "/healthz")
        response = connection.getresponse()
        response.read()
        print("answered" if response.status == 200 else f"status {response.status}", flush=True)
    except TimeoutError:
        print("late", flush=True)
        connection.close()
        connection = http.client.HTTPConnection(host, port, timeout=patience)
    time.sleep(0.01)
"""


class HealthWatch:
    """Polls `/healthz` every 10 ms from a process of its own (a wait on the gateway's GIL must not stop the
    poller's clock too); `late` counts polls that waited `PATIENCE`."""

    def __init__(self, url: str) -> None:
        host, port = url.removeprefix("http://").split(":")
        self._process = subprocess.Popen([sys.executable, "-c", _POLLER, host, port, str(PATIENCE)],
                                         stdout=subprocess.PIPE, text=True)
        self.lines: list[str] = []

    def __enter__(self) -> HealthWatch:
        assert self._process.stdout is not None
        assert self._process.stdout.readline().strip() == "ready"
        return self

    def __exit__(self, *exc: object) -> None:
        time.sleep(0.05)  # a poll after the hostile request too
        self._process.terminate()
        out, _ = self._process.communicate(timeout=PATIENCE * 2)
        self.lines = out.split()
        late = self.lines.count("late")
        assert late == 0, f"{late} /healthz poll(s) waited {PATIENCE:g} s: the event loop was held"
        assert "answered" in self.lines and set(self.lines) == {"answered"}, self.lines


@pytest.fixture
def served(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer,
           monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("GATEWAY_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "stall.json").write_text(json.dumps(SPEC))
    (tmp_path / "agents.yaml").write_text(AGENTS.format(llm=llm.url, upstream=upstream.url))
    upstream.route("/", Reply(200, {}))
    runtime = load_runtime(tmp_path / "specs", tmp_path / "agents.yaml", use_cache=False)
    with running(create_app(RuntimeHolder(runtime), watch=False)) as url:
        yield url


def _post(url: str, body: Any) -> httpx.Response:
    return httpx.post(url, content=json.dumps(body).encode(), headers={"content-type": "application/json"},
                      timeout=300)


def test_a_chat_of_sixty_thousand_messages_is_refused_with_the_limit(served: str, llm: LenientLLM) -> None:
    with HealthWatch(served):
        answer = _post(f"{served}/v1/chat/completions",
                       {"model": "clerk", "messages": [{"role": "user", "content": "x"}] * 60_000})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert (error["code"], error["param"]) == ("array_above_max_length", "messages")
    assert "maximum length 4096" in error["message"] and "length 60000" in error["message"]
    assert llm.requests == []


def test_responses_input_is_capped_the_same_way(served: str, llm: LenientLLM) -> None:
    with HealthWatch(served):
        answer = _post(f"{served}/v1/responses",
                       {"model": "clerk", "input": [{"role": "user", "content": "x"}] * 60_000})
    assert answer.status_code == 400
    assert (answer.json()["error"]["code"], answer.json()["error"]["param"]) == ("array_above_max_length", "input")
    assert llm.requests == []


def test_a_wrong_message_after_thousands_of_good_ones_is_named(served: str, llm: LenientLLM) -> None:
    messages = [{"role": "user", "content": "x"}] * 4095 + [{"role": "user", "content": "x", "name": 1}]
    with HealthWatch(served):
        answer = _post(f"{served}/v1/chat/completions", {"model": "clerk", "messages": messages})
    assert answer.status_code == 400
    assert answer.json()["error"]["param"] == "messages[4095].name"
    assert llm.requests == []


def test_a_direct_call_with_a_hundred_thousand_wrong_items_words_the_first(served: str,
                                                                          upstream: RecordingServer) -> None:
    with HealthWatch(served):
        answer = _post(f"{served}/agents/clerk/tools/putNumbers", {"numbers": ["x"] * 100_000})
    assert answer.status_code == 422
    lines = answer.json()["error"]["message"].splitlines()
    assert lines[1:] == [f'- numbers[{i}]: expected integer, got string "x"' for i in range(8)]
    assert upstream.requests == []


def test_an_mcp_call_with_a_hundred_thousand_wrong_items_words_the_first(served: str,
                                                                        upstream: RecordingServer) -> None:
    async def call() -> Any:
        async with Client(f"{served}/mcp/clerk") as client:
            return await client.call_tool("putNumbers", {"numbers": ["x"] * 100_000})

    with HealthWatch(served):
        result = asyncio.run(call())
    assert result.is_error is True
    text = result.content[0].text
    assert "invalid_arguments" in text and 'numbers[7]: expected integer, got string "x"' in text
    assert "numbers[8]" not in text
    assert upstream.requests == []


def test_a_backtracking_pattern_is_never_run_by_a_backtracking_engine(served: str, upstream: RecordingServer) -> None:
    with HealthWatch(served):  # Python's `re` takes minutes on this argument, doubling with each character
        answer = _post(f"{served}/agents/clerk/tools/findWords", {"q": "a" * 27 + "!"})
        fine = _post(f"{served}/agents/clerk/tools/findWords", {"q": "two words"})
    assert answer.status_code == 422
    assert f"q: expected a string matching {PATTERN!r}" in answer.json()["error"]["message"]
    assert fine.status_code == 200
    assert [r.path for r in upstream.requests] == ["/words"]


def test_an_answer_breaking_a_backtracking_output_pattern_is_judged_at_once(served: str,
                                                                           upstream: RecordingServer) -> None:
    upstream.route("/echo", Reply(200, {"q": "a" * 27 + "!"}))
    with HealthWatch(served):
        answer = _post(f"{served}/agents/clerk/tools/readEcho", {})
    assert answer.status_code == 502
    result = answer.json()["result"]
    assert result["error_type"] == "invalid_output"
    assert f"q: expected a string matching {PATTERN!r}" in result["error"]


def test_a_synchronous_hook_runs_off_the_loop_and_its_timeout_holds(served: str, upstream: RecordingServer) -> None:
    stall_hooks.RELEASE.clear()
    stall_hooks.ENTERED.clear()
    try:
        with HealthWatch(served):
            started = time.monotonic()
            answer = _post(f"{served}/agents/clerk/tools/hooked", {})
            waited = time.monotonic() - started
        assert stall_hooks.ENTERED.is_set()
        assert answer.status_code == 403
        assert "timed out" in answer.json()["error"]["message"]
        assert waited < 30  # the hook's own timeout (0.5 s) ended the wait, not its release (60 s)
        assert upstream.requests == []
    finally:
        stall_hooks.RELEASE.set()


def _send_head(url: str, header_bytes: int) -> bytes:
    """A GET whose one header value is `header_bytes` long, written in 64 KB pieces; what the gateway answered
    (empty when it closed the connection without a word)."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=300) as connection:
        try:
            connection.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Long: ")
            piece = b"a" * 65536
            for _ in range(header_bytes // len(piece)):
                connection.sendall(piece)
            connection.sendall(b"\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused part-way, as it should be: read what it said
        return _read_all(connection)


def _read_all(connection: socket.socket) -> bytes:
    """Everything the gateway writes on `connection` until it closes it (or resets it)."""
    answer = b""
    try:
        while chunk := connection.recv(65536):
            answer += chunk
    except ConnectionResetError:
        pass
    return answer


def test_a_header_of_many_megabytes_is_refused_before_it_is_parsed(served: str) -> None:
    # Joined piece by piece by the parser, 128 MB held the loop for over 20 s before the envelope's 431; the
    # protocol `gateway serve` runs counts the head's bytes and refuses it as they arrive.
    with HealthWatch(served):
        answer = _send_head(served, 128 * 1024 * 1024)
    assert answer == b"" or answer.startswith(b"HTTP/1.1 431 "), answer[:200]
    assert httpx.get(f"{served}/healthz", timeout=10).status_code == 200  # and it goes on serving


def test_a_head_just_under_the_limit_reaches_the_envelope(served: str) -> None:
    answer = _send_head(served, 512 * 1024)  # past the envelope's 32 KB, under the protocol's bound
    assert answer.startswith(b"HTTP/1.1 431 ") and b"header fields" in answer, answer[:300]


def test_an_oversized_head_pipelined_behind_a_request_waits_for_its_answer(served: str,
                                                                          upstream: RecordingServer) -> None:
    # Written at once, the 431 would land inside (or before) the answer to the request before it.
    upstream.route("/echo", Reply(200, {"q": "slow"}, delay=1.0))
    host, port = served.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=60) as connection:
        connection.sendall(b"POST /agents/clerk/tools/readEcho HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                           b"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")

        def send_oversized_head() -> None:
            try:
                connection.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Long: ")
                for _ in range(48):
                    connection.sendall(b"a" * 65536)  # 3 MB: past the bound while the first is answered
            except OSError:
                pass  # refused part-way, as it should be

        sender = threading.Thread(target=send_oversized_head)
        sender.start()
        answer = _read_all(connection)
        sender.join(timeout=60)
    head, _, rest = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 "), answer[:300]
    length = int(next(line.split(b":", 1)[1] for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length")))
    assert b'"slow"' in rest[:length], rest[:length]  # the whole first answer, then the refusal
    assert rest[length:] == b"" or rest[length:].startswith(b"HTTP/1.1 431 "), rest[length:length + 200]


# Slowloris on every door: a connection that says nothing, half a request head, or less body than it announced is
# closed by the gateway (the head with a 408), not held for ever. The deadlines are shortened here; the test waits
# for the close itself (the socket's timeout far above them only keeps a broken run from hanging).
@pytest.fixture
def short_deadlines(served: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(bounded_head, "HEAD_SECONDS", 0.5)
    monkeypatch.setattr(bounded_head, "BODY_SECONDS", 0.5)
    return served


def _connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=60)


@pytest.mark.parametrize("door", ["/v1/chat/completions", "/v1/responses", "/agents/clerk/tools/readEcho",
                                  "/mcp/clerk", "/approvals/apr_x", "/console/"])
def test_half_a_head_is_answered_408_and_closed(short_deadlines: str, door: str) -> None:
    with _connect(short_deadlines) as connection:
        connection.sendall(f"POST {door} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl".encode())
        answer = _read_all(connection)
    assert answer.startswith(b"HTTP/1.1 408 ") and b"request_timeout" in answer, answer[:200]
    assert httpx.get(f"{short_deadlines}/healthz", timeout=10).status_code == 200


def test_a_connection_that_never_speaks_is_closed(short_deadlines: str) -> None:
    with _connect(short_deadlines) as connection:
        assert _read_all(connection) == b""


@pytest.mark.parametrize("door", ["/v1/chat/completions", "/agents/clerk/tools/readEcho", "/mcp/clerk"])
def test_a_body_shorter_than_announced_is_not_waited_for_for_ever(short_deadlines: str, door: str) -> None:
    with _connect(short_deadlines) as connection:
        connection.sendall(f"POST {door} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                           "Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{\"a\"".encode())
        assert b"HTTP/1.1 200" not in _read_all(connection)
    assert httpx.get(f"{short_deadlines}/healthz", timeout=10).status_code == 200


def test_a_kept_alive_connection_serves_request_after_request(short_deadlines: str) -> None:
    # The head's deadline starts at each head's first byte, not once per connection.
    with httpx.Client(base_url=short_deadlines, timeout=10) as client:
        for _ in range(3):
            assert client.get("/healthz").status_code == 200
