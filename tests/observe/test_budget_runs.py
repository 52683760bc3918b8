"""Budgets stop runs: a looping run ends at its token limit (an error, or the summary call when configured), an
agent's window refuses the next run, and the answer and the audit row say so; the run's usage and cost travel
in the `gateway` extension."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
from recording_server import RecordingServer
from scripted_llm import Call, Reply
from server_support import AGENTS_YAML, LenientLLM

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "safety"))
from safety_support import CLIENTS_YAML, WEATHER_KEY, bearer, safe_gateway  # noqa: E402

FORECAST = Call("getForecast", {"latitude": 52.52, "longitude": 13.41, "current": ["temperature_2m"]})
OPS_KEY = "ck-ops-budgets-7c6b5a49"
"""An admin key: /metrics is the operator's."""
LOOPING = (AGENTS_YAML.replace("max_iterations: 4", "max_iterations: 20") + CLIENTS_YAML
           + f"  ops: {{{{key: {OPS_KEY}, admin: true}}}}\n")


def budgets(yaml: str) -> str:
    return LOOPING + "budgets:\n" + yaml.replace("{", "{{").replace("}", "}}")


def chat(url: str) -> httpx.Response:
    return httpx.post(f"{url}/v1/chat/completions", headers=bearer(WEATHER_KEY), timeout=30, json={
        "model": "weather", "messages": [{"role": "user", "content": "Weather, again and again?"}]})


def chat_rows(url: str) -> list[dict[str, object]]:
    rows = httpx.get(f"{url}/audit", headers=bearer(WEATHER_KEY), timeout=30).json()["data"]
    return [r for r in rows if r.get("kind") == "chat" or r.get("tool") in (None, "")]


def test_a_looping_run_stops_at_its_token_limit(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> None:
    # Each model call uses 15 tokens: calls at 0, 15 and 30 tokens run; the fourth (at 45 of 40) is refused.
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=budgets("  run: {tokens: 40}\n")) as (url, _):
        llm.script(*[Reply(calls=[FORECAST], usage=(10, 5)) for _ in range(10)])
        answer = chat(url)
        rows = chat_rows(url)
    assert answer.status_code == 429
    error = answer.json()["error"]
    assert error["code"] == "budget_exceeded"
    assert "this run used 45 of 40 tokens" in error["message"]
    assert "no further model call was made. Before this, 3 tool call(s) were sent" in error["message"]  # 2 sentences
    assert len(llm.requests) == 3 and len(upstream.requests) == 3
    assert any(r["status"] == "error" and "budget_exceeded" in str(r["error"]) for r in rows), rows


def test_with_on_exceed_summary_the_run_ends_with_a_summary(tmp_path: Path, llm: LenientLLM,
                                                            upstream: RecordingServer) -> None:
    yaml = "  on_exceed: summary\n  run: {tokens: 40}\n  prices: {openai/gpt-test: {input: 1000, output: 2000}}\n"
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=budgets(yaml)) as (url, _):
        llm.script(*[Reply(calls=[FORECAST], usage=(10, 5)) for _ in range(3)], Reply(text="So far: 3.5 °C."))
        answer = chat(url)
        rows = chat_rows(url)
    assert answer.status_code == 200
    body = answer.json()
    assert body["choices"][0]["message"]["content"] == "So far: 3.5 °C."
    extension = body["gateway"]
    assert extension["cut"] is True and "token budget exceeded" in extension["budget_exceeded"]
    assert extension["usage"]["input_tokens"] == 40 and extension["usage"]["output_tokens"] == 20
    assert extension["cost"] == (40 * 1000 + 20 * 2000) / 1_000_000
    assert "tools" not in llm.bodies()[-1]  # the summary call offers no tools
    assert any(r["status"] == "budget_exceeded" for r in rows), rows


def test_an_agents_window_refuses_the_next_run(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> None:
    yaml = "  agent: {tokens: 20, window: 1h}\n"
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=budgets(yaml)) as (url, _):
        llm.script(Reply(text="one", usage=(10, 5)), Reply(text="two", usage=(10, 5)))
        assert chat(url).status_code == 200  # 15 of 20
        assert chat(url).status_code == 200  # started at 15: allowed, now 30
        refused = chat(url)
        scraped = httpx.get(f"{url}/metrics", headers=bearer(OPS_KEY)).text
    assert refused.status_code == 429
    assert "agent 'weather' in the last 1h used 30 of 20 tokens" in refused.json()["error"]["message"]
    assert len(llm.requests) == 2
    assert 'gateway_budget_exceeded_total{scope="agent"} 1.0' in scraped
