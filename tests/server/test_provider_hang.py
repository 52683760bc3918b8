"""A model provider that hung once: the chat it hung is answered 502 at the provider's `timeout`, and the next chat
is answered at once, while the hung request is still held by the provider (no pooled connection, breaker or queue
makes it wait for that one). A real `gateway serve`, a scripted LLM on 127.0.0.1 whose first request is held
unanswered until the test ends, the official `openai` client.

Measured when this was looked into (session 18): the next chat 0.08-0.17 s after the hung one, streamed or not,
and after a connection that went silent (tests/quiet_proxy.py) too; the 9.8 s recovery was the authorization
server's (`gateway.identity.asking`, tests/identity/test_asking.py)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from scripted_llm import Recorded
from scripted_llm import Reply as LLMReply
from serve_process import SLOW_AGENTS, start_serve, write_slow_project
from server_support import LenientLLM


class HangsOnce(LenientLLM):
    """Its first request held unanswered until `released`; the later ones answered at once."""

    def __init__(self) -> None:
        super().__init__()
        self.released = threading.Event()

    def _next(self, recorded: Recorded) -> LLMReply | None:
        reply = super()._next(recorded)
        if len(self.requests) == 1:
            self.released.wait(60)
        return reply


@pytest.fixture
def hangs_once() -> Iterator[HangsOnce]:
    with HangsOnce() as llm:
        try:
            yield llm
        finally:
            llm.released.set()


@pytest.mark.parametrize("stream", [False, True])
def test_the_chat_after_a_hung_one_is_answered_while_the_hung_request_is_still_held(
        tmp_path: Path, hangs_once: HangsOnce, stream: bool) -> None:
    agents = SLOW_AGENTS.replace('base_url: "http://127.0.0.1:9/v1"}', f'base_url: "{hangs_once.url}/v1", timeout: 1}}')
    write_slow_project(tmp_path, "http://127.0.0.1:9", agents)
    process, port = start_serve(tmp_path)
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0, timeout=60)
    try:
        if stream:
            with pytest.raises(openai.APIError, match="no answer from .* within 1.0s"):
                for _ in client.chat.completions.create(model="ops", messages=[{"role": "user", "content": "a"}],
                                                        stream=True):
                    pass
            chunks = client.chat.completions.create(model="ops", messages=[{"role": "user", "content": "b"}],
                                                    stream=True)
            text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
        else:
            with pytest.raises(openai.APIStatusError, match="no answer from .* within 1.0s") as hung:
                client.chat.completions.create(model="ops", messages=[{"role": "user", "content": "a"}])
            assert hung.value.status_code == 502
            answer = client.chat.completions.create(model="ops", messages=[{"role": "user", "content": "b"}])
            text = answer.choices[0].message.content or ""
        assert text == "fine"
        assert len(hangs_once.requests) == 2 and not hangs_once.released.is_set()  # the hung one still held
    finally:
        process.kill()
