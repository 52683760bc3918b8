"""Budgets hold under parallel chats: a model call is reserved before it is made and settled after, so 30 chats at
once against a 100-token client budget make about as many model calls as the budget pays for, not 30; with
`gateway.redis` two gateways share the window. Real uvicorn, a scripted LLM (15 tokens a call), real Redis."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from recording_server import RecordingServer
from server_support import LenientLLM, running
from shared_servers import RedisServer

from .counted_writes import close_store, write_counter_project
from .safety_support import bearer, build_app

KEY = "ck-bot-0123456789abcdef"
BUDGET = f"""\
clients:
  bot: {{key: {KEY}, agents: [writer]}}
budgets:
  client: {{tokens: 100, window: 1h}}
"""
CALL_TOKENS = 15
"""What the scripted LLM reports for each answer (10 in, 5 out)."""


def _chats(urls: list[str], count: int) -> list[int]:
    def chat(n: int) -> int:
        answer = httpx.post(f"{urls[n % len(urls)]}/v1/chat/completions", headers=bearer(KEY), timeout=60,
                            json={"model": "writer", "messages": [{"role": "user", "content": f"hello {n}"}]})
        return answer.status_code

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(chat, range(count)))


def _model_calls(llm: LenientLLM) -> int:
    return sum(1 for r in llm.requests if r.path.endswith("/chat/completions"))


def test_parallel_chats_stop_at_the_client_budget(tmp_path: Path, llm: LenientLLM,
                                                  upstream: RecordingServer) -> None:
    write_counter_project(tmp_path, llm.url, upstream.url, BUDGET)
    app, safety = build_app(tmp_path, store=tmp_path / "state.db")
    try:
        with running(app) as url:
            statuses = _chats([url], 30)
    finally:
        close_store(safety)
    calls = _model_calls(llm)
    # The budget pays for ceil(100 / 15) = 7 calls; each call in flight holds what the previous one used.
    assert calls <= 100 // CALL_TOKENS + 1, f"{calls} model calls against a 100-token budget"
    assert statuses.count(200) == calls and statuses.count(429) == 30 - calls


def test_two_gateways_on_redis_share_the_client_budget(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer,
                                                       redis_server: RedisServer) -> None:
    gateways = []
    for name in ("a", "b"):
        folder = tmp_path / name
        write_counter_project(folder, llm.url, upstream.url, BUDGET + f"gateway:\n  redis: {redis_server.url}\n")
        gateways.append(build_app(folder, store=folder / "state.db"))
    try:
        with running(gateways[0][0]) as first, running(gateways[1][0]) as second:
            statuses = _chats([first, second], 30)
            later = _chats([second], 1)
    finally:
        for _, safety in gateways:
            close_store(safety)
    calls = _model_calls(llm)
    assert calls <= 100 // CALL_TOKENS + 1, f"{calls} model calls against one 100-token budget on two gateways"
    assert statuses.count(200) == calls
    assert later == [429]  # the window is spent for both
