"""With `gateway.redis`, calls waiting for an api's slot (`max_concurrency`) wait in one queue across instances: a
freed slot goes to the waiters in the order one process keeps (`FairSlots`: the client holding the fewest, then
first come), a waiter that leaves (its client gone) leaves the queue at once, `max_concurrency_per_client` is
counted across instances, and a killed instance's tickets end with their lease.

Real parts: two uvicorn gateways on one real redis-server (Debian's; skipped, saying so, when it is not installed),
a recording upstream whose answers wait at gates, httpx as the callers; a `python` process holding a ticket,
SIGKILLed. No timing: the tests wait for what Redis holds (each wait bounded) and assert who was served in which
order."""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from recording_server import Recorded, RecordingServer, Reply
from scripted_llm import GATE_LIMIT
from server_support import AGENTS_YAML, ISSUE, LenientLLM
from shared_servers import RedisServer

from gateway.store.redis_slot_queue import PREFIX

from .safety_support import bearer
from .test_client_shares import A_KEY, B_KEY, CLIENTS
from .test_shared_shares import two_gateways

pytestmark = pytest.mark.anyio

QUEUE = PREFIX + "queue:github"
TICKETS = PREFIX + "tickets:github"
SLOTS = PREFIX + "slots:github"


class GatedIssues:
    """The upstream's issues: records the order the calls reached it; an issue with a gate waits at it."""

    def __init__(self, *gated: int) -> None:
        self.order: list[int] = []
        self.gates = {number: threading.Event() for number in gated}
        self.entered = {number: threading.Event() for number in gated}

    def __call__(self, request: Recorded) -> Reply:
        number = int(request.path.rsplit("/", 1)[1])
        self.order.append(number)
        if number in self.gates:
            self.entered[number].set()
            self.gates[number].wait(GATE_LIMIT)
        return Reply(200, {**ISSUE, "number": number})

    def open(self) -> None:
        for gate in self.gates.values():
            gate.set()


def _yaml(redis_url: str, limit: int, per_client: int | None = None, timeout: float = 30,
          waiting: int | None = None) -> str:
    caps = f"    max_concurrency: {limit}\n    timeout: {timeout}\n"
    if per_client is not None:
        caps += f"    max_concurrency_per_client: {per_client}\n"
    auth = "    auth: {{type: bearer, token: gh-secret-token}}\n"
    most = f", max_waiting_calls_per_client: {waiting}" if waiting is not None else ""
    return AGENTS_YAML.replace(auth, auth + caps) + CLIENTS + f"gateway: {{{{redis: {redis_url}{most}}}}}\n"


@asynccontextmanager
async def callers() -> AsyncIterator[tuple[Any, list[asyncio.Task[httpx.Response]]]]:
    """`call(url, key, issue)` starts a call to getIssue on the direct door (a task); every task is awaited at the
    end."""
    tasks: list[asyncio.Task[httpx.Response]] = []
    async with httpx.AsyncClient(timeout=GATE_LIMIT + 30, trust_env=False) as client:
        def call(url: str, key: str, issue: int) -> asyncio.Task[httpx.Response]:
            tasks.append(asyncio.create_task(client.post(
                f"{url}/agents/triage/tools/getIssue", headers=bearer(key),
                json={"owner": "acme", "repo": "app", "issue_number": issue})))
            return tasks[-1]

        try:
            yield call, tasks
        finally:
            for task in tasks:
                if not task.done():
                    task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


@asynccontextmanager
async def one_held(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, redis_server: RedisServer,
                   yaml: str) -> AsyncIterator[tuple[str, str, GatedIssues, Any, list[asyncio.Task[httpx.Response]]]]:
    """Two gateways with `yaml` on an emptied Redis, and a's call for issue 1 held at the upstream (through the
    first): (first, second, the issues, `call`, the calls' tasks)."""
    redis_server.flush()
    issues = GatedIssues(1)
    upstream.route("/github/repos/acme/app/issues/", issues)
    with two_gateways(tmp_path, llm, upstream, redis_server, yaml=yaml) as (first, second):
        async with callers() as (call, tasks):
            call(first, A_KEY, 1)
            await _entered(issues, 1)
            yield first, second, issues, call, tasks


async def until(what: str, holds: Any) -> None:
    """Wait for `holds()` (what Redis or the upstream holds), at most GATE_LIMIT seconds."""
    deadline = asyncio.get_running_loop().time() + GATE_LIMIT
    while not holds():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"never: {what}")
        await asyncio.sleep(0.02)


_peeks: dict[str, redis.Redis] = {}


def _peek(redis_url: str) -> redis.Redis:
    """A client that reads what Redis holds (one per server: the waits above read it often)."""
    if redis_url not in _peeks:
        _peeks[redis_url] = redis.Redis.from_url(redis_url)
    return _peeks[redis_url]


def _queued(redis_url: str, key: str = QUEUE) -> int:
    return int(_peek(redis_url).zcard(key))


def _lease_ended(redis_url: str, ticket: bytes) -> bool:
    """Whether `ticket`'s lease has ended by Redis's clock (the one the scripts go by)."""
    client = _peek(redis_url)
    seconds, micros = client.time()
    score = client.zscore(TICKETS, ticket)
    return score is None or score <= seconds + micros / 1_000_000


async def _entered(issues: GatedIssues, number: int) -> None:
    await until(f"issue {number} reached the upstream", issues.entered[number].is_set)


async def test_waiters_across_two_instances_are_served_in_the_order_they_came(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, redis_server: RedisServer) -> None:
    """One slot, held; five calls of one client queue behind it, alternately on each instance: once it is given
    back they reach the upstream in the order they came (polling Redis served whoever asked first after a
    release)."""
    yaml = _yaml(redis_server.url, limit=1)
    async with one_held(tmp_path, llm, upstream, redis_server, yaml) as (first, second, issues, call, tasks):
        for n, issue in enumerate((2, 3, 4, 5, 6), start=1):
            call((first, second)[issue % 2], A_KEY, issue)
            await until(f"{n} calls queued", lambda n=n: _queued(redis_server.url) == n)
        issues.open()
        answers = await asyncio.gather(*tasks)
    assert [a.status_code for a in answers] == [200] * 6, [a.text for a in answers]
    assert issues.order == [1, 2, 3, 4, 5, 6]


async def test_a_freed_slot_goes_to_the_client_holding_fewest_across_instances(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, redis_server: RedisServer) -> None:
    """Two slots, both a's; a queues two more calls, then b one: the first slot a gives back goes to b, who holds
    none, though a's waiters came first (as `FairSlots` hands them over in one process); then a's, in order."""
    redis_server.flush()
    issues = GatedIssues(1, 2)
    upstream.route("/github/repos/acme/app/issues/", issues)
    with two_gateways(tmp_path, llm, upstream, redis_server, yaml=_yaml(redis_server.url, limit=2)) as (first, second):
        async with callers() as (call, tasks):
            call(first, A_KEY, 1)
            await _entered(issues, 1)
            call(second, A_KEY, 2)
            await _entered(issues, 2)
            for n, (url, key, issue) in enumerate([(first, A_KEY, 3), (second, A_KEY, 4), (first, B_KEY, 5)], 1):
                call(url, key, issue)
                await until(f"{n} calls queued", lambda n=n: _queued(redis_server.url) == n)
            issues.gates[1].set()
            await until("the queue served", lambda: _queued(redis_server.url) == 0)
            issues.open()
            answers = await asyncio.gather(*tasks)
    assert [a.status_code for a in answers] == [200] * 5, [a.text for a in answers]
    assert issues.order == [1, 2, 5, 3, 4]


async def test_a_clients_cap_is_counted_across_instances_and_its_waiter_queues(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, redis_server: RedisServer) -> None:
    """`max_concurrency_per_client: 1` of 2 slots: a's call held on one instance makes a's next call on the other
    wait (it was served at once when each instance counted only the api's slots), while b's is served."""
    yaml = _yaml(redis_server.url, limit=2, per_client=1)
    async with one_held(tmp_path, llm, upstream, redis_server, yaml) as (_, second, issues, call, tasks):
        waiting = call(second, A_KEY, 2)
        await until("a's second call queued", lambda: _queued(redis_server.url) == 1)
        served = await call(second, B_KEY, 3)
        assert not waiting.done()
        issues.open()
        answers = await asyncio.gather(*tasks)
    assert served.status_code == 200 and [a.status_code for a in answers] == [200] * 3
    assert issues.order == [1, 3, 2]


async def test_a_clients_waiting_calls_are_capped_across_instances_and_one_more_is_refused_unsent(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, redis_server: RedisServer) -> None:
    """`gateway.max_waiting_calls_per_client: 2`, the one slot held: a's next two calls wait, one on each instance;
    a's third is refused at once, neither sent nor queued (429 rate_limited, with its audit row), while b's call
    still queues; once the slot comes back every queued call is served (before, one client could queue any number,
    each lengthening every hand-over)."""
    yaml = _yaml(redis_server.url, limit=1, waiting=2)
    async with one_held(tmp_path, llm, upstream, redis_server, yaml) as (first, second, issues, call, tasks):
        call(first, A_KEY, 2)
        await until("a's call queued", lambda: _queued(redis_server.url) == 1)
        call(second, A_KEY, 3)
        await until("a's second call queued", lambda: _queued(redis_server.url) == 2)
        refused = await call(first, A_KEY, 4)
        call(second, B_KEY, 5)
        await until("b's call queued", lambda: _queued(redis_server.url) == 3)
        async with httpx.AsyncClient(base_url=first, headers=bearer(A_KEY), trust_env=False) as audit:
            rows = (await audit.get("/audit", params={"status": "rate_limited"})).json()["data"]
        issues.open()
        answers = await asyncio.gather(*tasks)
    assert refused.status_code == 429, refused.text
    error = refused.json()["error"]
    assert error["code"] == "rate_limited"
    assert "as many calls waiting for the github API as it may (2: gateway.max_waiting_calls_per_client)" \
        in error["message"]
    assert [(r["tool"], r["arguments"]["issue_number"]) for r in rows] == [("getIssue", 4)]
    assert [a.status_code for a in answers] == [200, 200, 200, 429, 200], [a.text for a in answers]
    assert sorted(issues.order) == [1, 2, 3, 5]  # the refused call never reached the upstream


async def test_a_waiter_whose_client_goes_away_leaves_the_queue_at_once(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, redis_server: RedisServer) -> None:
    """A call queued on one instance whose client hangs up leaves the queue then, not when its ticket's lease (30 s)
    ends: the next waiter, on the other instance, is served once the slot comes back. Had the slot gone to the
    departed ticket, it would stand for that ticket's lease, past the waiter's timeout (10 s): a 504, not a 200."""
    yaml = _yaml(redis_server.url, limit=1, timeout=10)
    async with one_held(tmp_path, llm, upstream, redis_server, yaml) as (first, second, issues, call, tasks):
        gone = call(first, A_KEY, 2)
        await until("the call queued", lambda: _queued(redis_server.url) == 1)
        gone.cancel()  # its connection closes: the gateway cancels the call
        await until("the call left the queue", lambda: _queued(redis_server.url) == 0)
        nxt = call(second, A_KEY, 3)
        await until("the next call queued", lambda: _queued(redis_server.url) == 1)
        issues.open()
        answer = await nxt
        first_answer = await tasks[0]
    assert first_answer.status_code == 200
    assert answer.status_code == 200, answer.text
    assert issues.order == [1, 3]


_DYING_WAITER = """
import asyncio, sys
from gateway.store.redis_counters import RedisCounters

async def main():
    counters = RedisCounters(sys.argv[1])
    counters.keeper.lease = float(sys.argv[2])
    await counters.guards.enter("github", reset_after=30, limit=1, wait=600, group="a-bot")

asyncio.run(main())
"""


async def test_a_killed_instances_tickets_end_with_their_lease(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, redis_server: RedisServer) -> None:
    """A process queued first (its ticket leased for 1 s, renewed while it lives) holds its place over three
    leases; SIGKILLed, its ticket ends with its lease: once it has (by Redis's clock), the slot given back goes to
    the waiter behind it, on a gateway (a queue held by the dead ticket for as long as it would wait, 600 s here,
    would have left it a 504 after its timeout, 50 s). A slot handed to a ticket that has just died is
    test_redis_guards.py's (it ends with the ticket's lease, and the waiter looks for itself)."""
    yaml = _yaml(redis_server.url, limit=1, timeout=50)  # the held call outlasts the dying process's start
    async with one_held(tmp_path, llm, upstream, redis_server, yaml) as (first, _, issues, call, tasks):
        dying = await asyncio.create_subprocess_exec(sys.executable, "-c", _DYING_WAITER, redis_server.url, "1.0")
        try:
            await until("the dying process queued", lambda: _queued(redis_server.url) == 1)
            await asyncio.sleep(3.0)  # three leases: a live process's ticket is renewed, still first in the queue
            (dead,) = _peek(redis_server.url).zrange(QUEUE, 0, -1)
            call(first, A_KEY, 2)
            await until("the waiter queued behind it", lambda: _queued(redis_server.url) == 2)
        finally:
            if dying.returncode is None:
                dying.kill()
                await dying.wait()
        await until("the dead ticket's lease ended", lambda: _lease_ended(redis_server.url, dead))
        issues.open()
        answers = await asyncio.gather(*tasks)
    assert [a.status_code for a in answers] == [200, 200], [a.text for a in answers]
    assert issues.order == [1, 2]
    assert _queued(redis_server.url) == 0 and _queued(redis_server.url, SLOTS) == 0
