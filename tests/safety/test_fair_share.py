"""One client cannot hold an api's concurrency slots against the others: a real gateway (uvicorn on 127.0.0.1)
with two client keys, an upstream that holds each answer until the test releases it, and the direct door.

The order in which calls reach the upstream is asserted, never how long anything took."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from recording_server import Recorded, RecordingServer, Reply
from scripted_llm import ScriptedLLM
from server_support import FORECAST, running, write_project

from gateway.catalog import AgentTool, Tool
from gateway.config.model import ApiConfig, Manifest
from gateway.kernel.calls import Invocation
from gateway.messages import ToolCall, ToolResult
from gateway.safety.breaker import Breakers, GuardApi
from gateway.safety.fair_slots import FairSlots

from .safety_support import bearer, build_app

KEY_A = "ck-team-a-0f1e2d3c4b5a6978"
KEY_B = "ck-team-b-8a7b6c5d4e3f2011"
LATITUDE = {KEY_A: 10, KEY_B: 20}
"""Each team's calls carry their own latitude: the upstream tells them apart by it."""

AGENTS_YAML = """\
providers:
  openai: {{kind: openai, base_url: "{llm}/v1", api_key: test-key}}
apis:
  open-meteo: {{base_url: "{upstream}/meteo", max_concurrency: 3%s}}
agents:
  weather:
    model: openai/gpt-test
    tools: [{{api: open-meteo}}]
clients:
  team-a: {{key: %s, agents: [weather]}}
  team-b: {{key: %s, agents: [weather]}}
"""


class HeldUpstream:
    """Open-Meteo's forecast, each answer held until the test releases that request (by order of arrival)."""

    def __init__(self) -> None:
        self.arrived: list[tuple[str, threading.Event]] = []
        self._changed = threading.Condition()
        self._open = False

    def __call__(self, request: Recorded) -> Reply:
        team = "a" if dict(request.query)["latitude"].startswith(str(LATITUDE[KEY_A])) else "b"
        gate = threading.Event()
        with self._changed:
            self.arrived.append((team, gate))
            if self._open:
                gate.set()
            self._changed.notify_all()
        gate.wait(60)
        return Reply(200, FORECAST)

    def teams(self, count: int) -> list[str]:
        """The teams of the first `count` requests to arrive, once they have."""
        with self._changed:
            assert self._changed.wait_for(lambda: len(self.arrived) >= count, timeout=60), self.teams_so_far()
            return [team for team, _ in self.arrived[:count]]

    def teams_so_far(self) -> list[str]:
        return [team for team, _ in self.arrived]

    def release(self, index: int) -> None:
        self.arrived[index][1].set()

    def release_all(self) -> None:
        with self._changed:
            self._open = True
            for _, gate in self.arrived:
                gate.set()


def _until(condition: Callable[[], bool]) -> None:
    """Poll the gateway's own state until `condition` holds (a hang guard, not a measure)."""
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, "the gateway never got there"
        time.sleep(0.005)


@contextmanager
def _teams_gateway(tmp_path: Path, llm: ScriptedLLM, upstream: RecordingServer,
                   cap: str = "") -> Iterator[tuple[str, HeldUpstream, FairSlots]]:
    """The gateway, the held upstream and the open-meteo api's slots as the gateway's guard stage holds them."""
    held = HeldUpstream()
    upstream.route("/meteo/v1/forecast", held)
    write_project(tmp_path, llm.url, upstream.url, AGENTS_YAML % (cap, KEY_A, KEY_B))
    app, safety = build_app(tmp_path, store=tmp_path / "state.db")
    guard = next(stage for stage in app.state.gateway.generation.pipeline.stages if isinstance(stage, GuardApi))
    try:
        with running(app) as url:
            try:
                yield url, held, guard.slots("open-meteo")
            finally:
                held.release_all()
    finally:
        safety.store.close()


def _call(url: str, key: str) -> httpx.Response:
    return httpx.post(f"{url}/agents/weather/tools/getForecast", headers=bearer(key), timeout=60,
                      json={"latitude": LATITUDE[key], "longitude": 1})


def test_a_second_clients_call_gets_the_next_freed_slot_before_the_first_clients_queued_calls(
        tmp_path: Path, llm: ScriptedLLM, upstream: RecordingServer) -> None:
    with _teams_gateway(tmp_path, llm, upstream) as (url, held, slots), ThreadPoolExecutor(8) as pool:
        calls: list[Future[httpx.Response]] = [pool.submit(_call, url, KEY_A) for _ in range(3)]
        assert held.teams(3) == ["a", "a", "a"]  # one client alone reaches max_concurrency
        calls += [pool.submit(_call, url, KEY_A) for _ in range(2)]
        _until(lambda: slots.waiting == 2)
        calls.append(pool.submit(_call, url, KEY_B))
        _until(lambda: slots.waiting == 3)  # b queued behind a's two
        held.release(0)
        assert held.teams(4) == ["a", "a", "a", "b"]  # the freed slot went to b, who held none
        held.release_all()
        answers = [call.result() for call in calls]
    assert [answer.status_code for answer in answers] == [200] * 6
    assert all(answer.json()["ok"] for answer in answers)
    assert held.teams_so_far().count("a") == 5
    assert (slots.free, slots.waiting, slots.held("team-a"), slots.held("team-b")) == (3, 0, 0, 0)


def test_with_a_cap_per_client_another_clients_call_runs_at_once_while_the_first_holds_its_cap(
        tmp_path: Path, llm: ScriptedLLM, upstream: RecordingServer) -> None:
    with _teams_gateway(tmp_path, llm, upstream, cap=", max_concurrency_per_client: 2") as (url, held, slots), \
            ThreadPoolExecutor(8) as pool:
        calls = [pool.submit(_call, url, KEY_A) for _ in range(3)]
        assert held.teams(2) == ["a", "a"]
        _until(lambda: slots.waiting == 1)  # a's third waits for a's own slot ...
        assert slots.free == 1  # ... while the api has one free
        calls.append(pool.submit(_call, url, KEY_B))
        assert held.teams(3) == ["a", "a", "b"]  # b's call ran without any slot given back
        assert slots.waiting == 1 and slots.held("team-a") == 2
        held.release(0)
        assert held.teams(4) == ["a", "a", "b", "a"]  # a's slot back to a's waiting call
        held.release_all()
        answers = [call.result() for call in calls]
    assert [answer.status_code for answer in answers] == [200] * 4
    assert (slots.free, slots.waiting, slots.held("team-a"), slots.held("team-b")) == (3, 0, 0, 0)


def test_past_its_waiting_calls_cap_a_clients_call_is_refused_at_once_unsent_and_audited(
        tmp_path: Path, llm: ScriptedLLM, upstream: RecordingServer) -> None:
    """`gateway.max_waiting_calls_per_client: 1` in one process (no Redis): a holds the api's 3 slots and has one call
    waiting; its next is refused at once (429 rate_limited, audited, never sent) while b's still waits its turn."""
    held = HeldUpstream()
    upstream.route("/meteo/v1/forecast", held)
    yaml = AGENTS_YAML % ("", KEY_A, KEY_B) + "gateway: {{max_waiting_calls_per_client: 1}}\n"
    write_project(tmp_path, llm.url, upstream.url, yaml)
    app, safety = build_app(tmp_path, store=tmp_path / "state.db")
    guard = next(stage for stage in app.state.gateway.generation.pipeline.stages if isinstance(stage, GuardApi))
    try:
        with running(app) as url, ThreadPoolExecutor(8) as pool:
            slots = guard.slots("open-meteo")
            calls = [pool.submit(_call, url, KEY_A) for _ in range(4)]
            assert held.teams(3) == ["a", "a", "a"]
            _until(lambda: slots.waiting == 1)
            refused = _call(url, KEY_A)
            calls.append(pool.submit(_call, url, KEY_B))
            _until(lambda: slots.waiting == 2)  # b's call waits: another client's room is its own
            rows = httpx.get(f"{url}/audit", params={"status": "rate_limited"}, headers=bearer(KEY_A)).json()["data"]
            held.release_all()
            answers = [call.result() for call in calls]
    finally:
        held.release_all()
        safety.store.close()  # type: ignore[attr-defined]
    assert refused.status_code == 429, refused.text
    assert "(1: gateway.max_waiting_calls_per_client)" in refused.json()["error"]["message"]
    assert [(r["tool"], r["client"]) for r in rows] == [("getForecast", "team-a")]
    assert [answer.status_code for answer in answers] == [200] * 5
    assert held.teams_so_far().count("a") == 4  # the refused call was never sent


# -- the stage itself: what a capped call is told, and a probe that leaves while it waits -------------------

def _invocation(client: str | None, timeout: float) -> Invocation:
    tool = Tool(name="op", api="slow", operation_id="op", method="GET", path="/x", description="", input_schema={})
    agent_tool = AgentTool(name="op", description="", input_schema={}, tool=tool, timeout=timeout)
    return Invocation(agent="clerk", agent_tool=agent_tool, tool=tool, call=ToolCall(id="c1", name="op", arguments={}),
                      arguments={}, client=client)


class Hold:
    """A `proceed` that holds every call until `open` is set."""

    def __init__(self) -> None:
        self.open = asyncio.Event()
        self.running = 0

    async def __call__(self, invocation: Invocation) -> ToolResult:
        self.running += 1
        await self.open.wait()
        return ToolResult(ok=True, status=200)


@pytest.mark.anyio
async def test_a_call_over_its_clients_cap_is_told_so_when_its_wait_runs_out() -> None:
    manifest = Manifest(apis={"slow": ApiConfig(name="slow", max_concurrency=4, max_concurrency_per_client=1)})
    guard, hold = GuardApi(manifest, Breakers()), Hold()
    first = asyncio.ensure_future(guard(_invocation("team-a", 30), hold))
    await asyncio.sleep(0)
    refused = await guard(_invocation("team-a", 0.001), hold)
    assert refused.error_type == "timeout"
    assert refused.error == ("The slow API is busy (this client's 1 concurrent calls to it in use for 0.001 s); "
                             "try again later.")
    assert (await asyncio.gather(guard(_invocation("team-b", 0.001), _answer)))[0].ok  # another client is not capped
    hold.open.set()
    assert (await first).ok and guard.slots("slow").free == 4


async def _answer(invocation: Invocation) -> ToolResult:
    return ToolResult(ok=True, status=200)


@pytest.mark.anyio
async def test_a_probe_cancelled_while_it_waits_for_a_slot_lets_the_next_call_probe() -> None:
    manifest = Manifest(apis={"slow": ApiConfig(name="slow", max_concurrency=1)})
    breakers = Breakers()
    guard, hold = GuardApi(manifest, breakers), Hold()
    breaker = breakers.get("slow", "team-b")
    for _ in range(breaker.failures):
        breaker.record(False)
    breaker.reset_after = 0  # half open: the next call is the probe
    holder = asyncio.ensure_future(guard(_invocation("team-a", 30), hold))
    await asyncio.sleep(0)
    probe = asyncio.ensure_future(guard(_invocation("team-b", 30), hold))
    await asyncio.sleep(0)
    assert guard.slots("slow").waiting == 1
    probe.cancel()
    with pytest.raises(asyncio.CancelledError):
        await probe
    hold.open.set()
    await holder
    assert (await guard(_invocation("team-b", 30), _answer)).ok  # on main the breaker stayed held by the probe
    assert breaker.state == "closed" and guard.slots("slow").free == 1
