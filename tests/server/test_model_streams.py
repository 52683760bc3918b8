"""A hostile model server keeps a chat's stream open with keep-alives: the caller of a real uvicorn gateway is
told which setting cut it off (gateway.providers.pacing). (A request that is not streamed is bounded
by the provider's `timeout` as a whole already.)"""

from __future__ import annotations

from pathlib import Path

import httpx
from endless_server import endless
from server_support import running

from gateway.runtime import RuntimeHolder, load_runtime
from gateway.server import create_app

AGENTS = """\
providers:
  llm: {{kind: openai, base_url: "{llm}/v1", api_key: k, stream_idle_timeout: 0.5}}
agents:
  talker: {{model: llm/m}}
"""


def test_a_chat_caller_is_told_why_the_answer_stopped(tmp_path: Path) -> None:
    (tmp_path / "specs").mkdir()
    with endless("text/event-stream", b": keep-alive\n\n") as llm:
        (tmp_path / "agents.yaml").write_text(AGENTS.format(llm=llm))
        app = create_app(RuntimeHolder(load_runtime(tmp_path / "specs", tmp_path / "agents.yaml", use_cache=False)),
                         watch=False)
        with running(app) as url:
            body = {"model": "talker", "messages": [{"role": "user", "content": "hi"}]}
            streamed = httpx.post(f"{url}/v1/chat/completions", json={**body, "stream": True}, timeout=30)
    assert "nothing but keep-alives for 0.5 s (providers.llm.stream_idle_timeout)" in streamed.text
