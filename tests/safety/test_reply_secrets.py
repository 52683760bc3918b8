"""A credential the gateway injects, in each form a maintained encoder writes it, reaches neither the model (in a
tool result) nor the caller (in the model's reply, streamed or not): a real gateway on 127.0.0.1, the scripted LLM,
a real upstream echoing the form as text.

Before: the model's reply was not redacted at all (the raw password went to the caller), and in a tool result the
forms the redactor did not know went to the model: base64 in MIME's lines, the JSON string's escapes, HTML's."""

from __future__ import annotations

import base64
import html
import json
import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote, quote_plus

import httpx
import pytest
from recording_server import RecordingServer, Reply
from scripted_llm import Call
from scripted_llm import Reply as LLMReply
from server_support import LenientLLM, running

from gateway.kernel.redaction import MARKER, HeldText, Redactor
from gateway.runtime import RuntimeHolder, load_runtime
from gateway.server import create_app
from gateway.server.supervision import Safety

USER = "svc-bot"
PASSWORD = 'pw/ä+"q"\\&<x>-0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFGHIJ'
"""A slash, a plus, quotes, a backslash, HTML's characters, a non-ASCII letter; long enough for MIME to split its
base64 over lines."""
PAIR = f"{USER}:{PASSWORD}"

FORMS: dict[str, Callable[[], str]] = {
    "as written": lambda: PASSWORD,
    "base64 of user:pass (the Basic header's)": lambda: base64.b64encode(PAIR.encode()).decode(),
    "base64 of user:pass in MIME lines (LF)": lambda: base64.encodebytes(PAIR.encode()).decode().strip(),
    "base64 of user:pass in MIME lines (CRLF)":
        lambda: base64.encodebytes(PAIR.encode()).decode().strip().replace("\n", "\r\n"),
    "base64 of the password in MIME lines": lambda: base64.encodebytes(PASSWORD.encode()).decode().strip(),
    "percent-encoded": lambda: quote(PASSWORD, safe=""),
    "form-encoded": lambda: quote_plus(PASSWORD),
    "in a JSON string (ASCII)": lambda: json.dumps(PASSWORD)[1:-1],
    "in a JSON string (UTF-8)": lambda: json.dumps(PASSWORD, ensure_ascii=False)[1:-1],
    "in a JSON string, slash escaped (PHP)": lambda: json.dumps(PASSWORD)[1:-1].replace("/", "\\/"),
    "user:pass in a JSON string": lambda: json.dumps(PAIR)[1:-1],
    "HTML-escaped": lambda: html.escape(PASSWORD),
    "in Go's HTML-safe JSON (encoding/json)": lambda: _html_safe(json.dumps(PASSWORD, ensure_ascii=False)[1:-1]),
    "in Jinja's tojson (Flask's)": lambda: _html_safe(json.dumps(PASSWORD)[1:-1]),
}


def _html_safe(escaped: str) -> str:
    """As Go's encoding/json (and Jinja's `tojson`) write `<`, `>` and `&` inside a JSON string."""
    return escaped.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
SPEC = {"openapi": "3.0.3", "info": {"title": "echo", "version": "1"},
        "components": {"securitySchemes": {"b": {"type": "http", "scheme": "basic"}}}, "security": [{"b": []}],
        "paths": {"/text": {"get": {"operationId": "text", "responses": {"200": {"description": "ok"}}}}}}
AGENTS = """\
providers:
  openai: {{kind: openai, base_url: "{llm}/v1", api_key: unused-key}}
apis:
  echo: {{base_url: "{upstream}", auth: {{type: basic, username: "{user}", password: '{password}'}}}}
agents:
  clerk: {{model: openai/x, tools: [{{api: echo}}]}}
"""


@pytest.mark.parametrize("stream", [False, True], ids=["answer", "streamed"])
@pytest.mark.parametrize("form", list(FORMS))
def test_a_credential_in_any_encoders_form_reaches_neither_the_model_nor_the_caller(
        tmp_path: Path, llm: LenientLLM, caplog: pytest.LogCaptureFixture, form: str, stream: bool) -> None:
    caplog.set_level(logging.DEBUG)
    shown = FORMS[form]()
    answer, result, text = _echo_chat(tmp_path, llm, echoed=shown, reply=f"the key is {shown} ok", stream=stream,
                                      audited=True)
    assert answer.status_code == 200, answer.text
    # The tool result the model was sent: the echo, scrubbed.
    assert shown not in result and result == f"seen {MARKER} here", result
    # The model's reply, as the caller reads it.
    assert text == f"the key is {MARKER} ok", text
    rows = repr(sqlite3.connect(tmp_path / "state.db").execute("SELECT * FROM audit").fetchall())
    for seen in (answer.text, rows, caplog.text):
        assert shown not in seen and PASSWORD not in seen


def test_streamed_text_is_held_only_while_it_could_be_a_secret() -> None:
    """`HeldText` passes on at once every piece whose end could start no secret, holds only a tail that starts one
    of its forms, and redacts a secret split over any pieces whole (the stream joined is the whole text redacted)."""
    secret = "tok-0123456789abcdef"
    redactor = Redactor([secret])
    text = f"first {secret} middle {quote(secret)} then tok-01 and tok end"
    for size in (1, 2, 5, 7, 40, 100):
        held = HeldText(redactor)
        pieces = [held.feed(text[i:i + size]) for i in range(0, len(text), size)]
        assert "".join(pieces) + held.flush() == redactor.text(text) \
            == f"first {MARKER} middle {MARKER} then tok-01 and tok end"
    held = HeldText(redactor)
    assert held.feed("plain words, then more plain words.") == "plain words, then more plain words."
    assert held.feed(" and then to") == " and then "  # `to` may start the token: held
    assert held.feed("day") == "today" and held.flush() == ""
    assert held.feed("ends on tok-0123") == "ends on " and held.flush() == "tok-0123"
    assert HeldText(Redactor()).feed("anything") == "anything"  # no secret: nothing held


PAYLOAD_BYTES = 60
"""What stands before the password in the payload (plus 0, 1 or 2 bytes: its three alignments in base64)."""


@pytest.mark.parametrize("stream", [False, True], ids=["answer", "streamed"])
@pytest.mark.parametrize("before", [0, 1, 2])
def test_a_credential_inside_a_larger_payloads_base64_reaches_neither_the_model_nor_the_caller(
        tmp_path: Path, llm: LenientLLM, before: int, stream: bool) -> None:
    """An upstream that answers a JSON document in base64 (a file's content, a config blob) with the credential
    inside, at any of the three alignments; the model repeats it. The characters that stand for the password's
    bytes alone are gone from both, and every other character is kept: the rest of the payload can still be
    decoded, the password cannot. Before: the blob passed whole (only the base64 of the password alone was known)."""
    payload = ("x" * (PAYLOAD_BYTES + before) + PASSWORD + "y" * 30).encode()
    blob = base64.b64encode(payload).decode()
    start = -(-8 * (PAYLOAD_BYTES + before) // 6)  # the first character with none of the prefix's bits
    end = 8 * (PAYLOAD_BYTES + before + len(PASSWORD.encode())) // 6  # past the last with none of the suffix's
    expected = f"{blob[:start]}{MARKER}{blob[end:]}"
    answer, result, text = _echo_chat(tmp_path, llm, echoed=blob, reply=f"the file is {blob} ok", stream=stream)
    assert answer.status_code == 200, answer.text
    assert result == f"seen {expected} here", result
    assert text == f"the file is {expected} ok", text


def _echo_chat(tmp_path: Path, llm: LenientLLM, *, echoed: str, reply: str, stream: bool,
               audited: bool = False) -> tuple[httpx.Response, str, str]:
    """One chat through a real gateway whose upstream (Basic auth with `PASSWORD`) answers `seen <echoed> here` and
    whose model then replies `reply`: the answer, the tool result the model was sent, and the reply's text as the
    caller reads it (streamed or not). `audited`: with the audit's store in tmp_path/state.db."""
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "echo.json").write_text(json.dumps(SPEC))
    with RecordingServer() as upstream:
        (tmp_path / "agents.yaml").write_text(AGENTS.format(llm=llm.url, upstream=upstream.url, user=USER,
                                                            password=PASSWORD.replace("'", "''")))
        upstream.route("/text", lambda _: Reply(200, f"seen {echoed} here", headers={"content-type": "text/plain"}))
        runtime = load_runtime(tmp_path / "specs", tmp_path / "agents.yaml", use_cache=False)
        safety = Safety.open(runtime, store=str(tmp_path / "state.db")) if audited else None
        app = create_app(RuntimeHolder(runtime), watch=False, **(safety.app_options() if safety else {}))
        llm.script(LLMReply(calls=[Call("text")]), LLMReply(text=reply, chunks=9))
        request = {"model": "clerk", "messages": [{"role": "user", "content": "go"}], "stream": stream}
        with running(app) as url:
            answer = httpx.post(f"{url}/v1/chat/completions", json=request, timeout=30)
        if safety is not None:
            safety.store.close()  # type: ignore[attr-defined]
    assert upstream.requests[0].header("authorization") == "Basic " + base64.b64encode(PAIR.encode()).decode()
    [result] = [m["content"] for m in llm.bodies()[1]["messages"] if m["role"] == "tool"]
    if stream:
        events = [json.loads(line[6:]) for line in answer.text.splitlines()
                  if line.startswith("data: {") and '"choices"' in line]
        text = "".join(event["choices"][0]["delta"].get("content") or "" for event in events if event["choices"])
    else:
        text = answer.json()["choices"][0]["message"]["content"] if answer.status_code == 200 else ""
    return answer, result, text
