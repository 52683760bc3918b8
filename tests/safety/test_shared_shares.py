"""With `gateway.redis`, a client's share of chat runs (`gateway.max_runs_per_client`) is one share across every
instance: two gateways behind one balancer refuse the run past it whichever serves it, a resume from the terminal
(its own process) counts in it too, a run that lasts longer than its place's lease keeps its place (renewed while
it lives), and a place held by an instance that died comes back when its lease ends.

Real parts: two uvicorn gateways on one real redis-server (Debian's; skipped, saying so, when it is not installed),
a scripted LLM whose streamed answer waits at a gate (a run in flight), a recording upstream, `gateway approvals` as
the terminal runs it. No timing: the tests assert who was refused and who was served."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import httpx
import pytest
from recording_server import Recorded, RecordingServer, Reply
from scripted_llm import GATE_LIMIT, Call
from scripted_llm import Reply as LLMReply
from server_support import AGENTS_YAML, ISSUE, LenientLLM, running, write_project
from shared_servers import RedisServer

from gateway.cli.commands import main
from gateway.errors import OverShare
from gateway.safety.shared_shares import PREFIX, SharedShares
from gateway.safety.shares import RUNS
from gateway.store.lease_keeper import LeaseKeeper
from gateway.store.redis_counters import RedisCounters

from .counted_writes import close_store
from .instances import GatewayProcess
from .safety_support import bearer, build_app
from .test_client_shares import A_KEY, B_KEY, CLIENTS, held_stream, run_code

BOSS_KEY = "ck-boss-8888999900001111"
COMMENT = Call("createIssueComment", {"owner": "acme", "repo": "app", "issue_number": 7, "body": "On it."})


def _yaml(redis_url: str) -> str:
    return AGENTS_YAML + CLIENTS + f"  boss: {{{{key: {BOSS_KEY}, agents: [triage], approver: true}}}}\n" + \
        f"gateway: {{{{max_runs_per_client: 1, redis: {redis_url}}}}}\n"


def _chat(url: str, key: str) -> httpx.Response:
    return httpx.post(f"{url}/v1/chat/completions", headers=bearer(key), timeout=60,
                      json={"model": "weather", "messages": [{"role": "user", "content": "Berlin?"}]})


@contextmanager
def two_gateways(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, redis_server: RedisServer, *,
                 lease: float | None = None, yaml: str | None = None) -> Iterator[tuple[str, str]]:
    """Two uvicorn gateways on one Redis, their URLs; `lease`: their places leased for that many seconds (renewed
    every third of it) instead of 30; `yaml`: their agents.yaml (default: one run per client)."""
    gateways = []
    for name in ("a", "b"):
        folder = tmp_path / name
        write_project(folder, llm.url, upstream.url, yaml or _yaml(redis_server.url))
        gateways.append(build_app(folder, store=folder / "state.db"))
        if lease is not None:
            gateways[-1][0].state.gateway.runs.keeper.lease = lease
    try:
        with running(gateways[0][0]) as first, running(gateways[1][0]) as second:
            yield first, second
    finally:
        for _, safety in gateways:
            close_store(safety)


def test_two_gateways_on_redis_keep_one_share_of_runs_per_client(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, redis_server: RedisServer) -> None:
    gate = threading.Event()
    llm.script(LLMReply(text="a on the first", gate=gate), LLMReply(text="b on the second"),
               LLMReply(text="a on the second"))
    with two_gateways(tmp_path, llm, upstream, redis_server) as (first, second):
        with held_stream(first, A_KEY) as held:
            refused = _chat(second, A_KEY)  # its one run is in flight on the other instance
            served = _chat(second, B_KEY)
            gate.set()
        again = _chat(second, A_KEY)
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "too_many_runs", refused.text
    assert refused.headers["retry-after"] == "1"
    assert served.status_code == 200 and served.json()["choices"][0]["message"]["content"] == "b on the second"
    assert held[0] == 200
    assert again.status_code == 200 and again.json()["choices"][0]["message"]["content"] == "a on the second"


def test_a_run_that_outlasts_its_lease_keeps_its_place_across_instances(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, redis_server: RedisServer) -> None:
    """A run held three leases long on one gateway still holds its client's one place: the other refuses the
    client's next run until the first ends (its place renewed while it lives, given back when it ends)."""
    gate = threading.Event()
    llm.script(LLMReply(text="a holds its place", gate=gate), LLMReply(text="a on the second"))
    with two_gateways(tmp_path, llm, upstream, redis_server, lease=0.6) as (first, second):
        with held_stream(first, A_KEY) as held:
            time.sleep(3 * 0.6)  # three leases: an unrenewed place would have ended twice over
            refused = _chat(second, A_KEY)
            gate.set()
        again = _chat(second, A_KEY)
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "too_many_runs", refused.text
    assert held[0] == 200 and '"finish_reason":"stop"' in held[1]
    assert again.status_code == 200 and again.json()["choices"][0]["message"]["content"] == "a on the second"


def test_two_gateways_on_redis_keep_one_share_of_sandboxes_per_client(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, redis_server: RedisServer) -> None:
    """`max_code_workers_per_client` across instances: a's script holding a sandbox on one gateway (its call held
    at the upstream) gets a's next script refused on the other (`gateway serve`, a process of its own: the sandboxes
    of one process are counted together anyway), b's served; once it ends, a's runs there."""
    entered, release = threading.Event(), threading.Event()

    def held_issue(request: Recorded) -> Reply:
        entered.set()
        release.wait(GATE_LIMIT)
        return Reply(200, ISSUE)

    upstream.route("/github/repos/acme/app/issues/7", held_issue)
    yaml = AGENTS_YAML.replace("    approval: writes\n", "    approval: writes\n    code_mode: on\n") + CLIENTS + \
        f"gateway: {{{{max_code_workers_per_client: 1, redis: {redis_server.url}}}}}\n"
    for name in ("a", "b"):
        write_project(tmp_path / name, llm.url, upstream.url, yaml)
    app, safety = build_app(tmp_path / "a", store=tmp_path / "a" / "state.db")
    served_apart = GatewayProcess(tmp_path / "b", "b")
    first: list[tuple[bool, str]] = []
    try:
        with running(app) as one:
            other = served_apart.wait_ready().url
            holder = threading.Thread(target=lambda: first.append(anyio.run(
                run_code, one, A_KEY, 'getIssue(owner="acme", repo="app", issue_number=7)["title"]')), daemon=True)
            holder.start()
            assert entered.wait(GATE_LIMIT)
            refused = anyio.run(run_code, other, A_KEY, "1 + 1")
            served = anyio.run(run_code, other, B_KEY, "2 + 2")
            release.set()
            holder.join(GATE_LIMIT + 30)
            again = anyio.run(run_code, other, A_KEY, "3 + 3")
    finally:
        served_apart.stop()
        close_store(safety)
    assert refused[0] and "gateway.max_code_workers_per_client" in refused[1] and "retry after 1 s" in refused[1]
    assert served == (False, "4")
    assert first == [(False, "Crash on start")]
    assert again == (False, "6")


def test_a_resume_from_the_terminal_counts_in_the_share_a_server_holds(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, redis_server: RedisServer,
        capsys: pytest.CaptureFixture[str]) -> None:
    """`gateway approvals approve` resumes the run in its own process: with Redis it sees the server's runs."""
    write_project(tmp_path, llm.url, upstream.url, _yaml(redis_server.url))
    store = tmp_path / ".gateway" / "state.db"
    gate = threading.Event()
    llm.script(LLMReply(calls=[COMMENT]), LLMReply(text="a holds its share", gate=gate))
    app, safety = build_app(tmp_path, store=store)
    cli = ["approvals", "approve", "--specs", str(tmp_path / "specs"), "--agents", str(tmp_path / "agents.yaml"),
           "--no-cache", "--store", str(store)]
    try:
        with running(app) as url:
            paused = httpx.post(f"{url}/v1/chat/completions", headers=bearer(A_KEY), timeout=60,
                                json={"model": "triage", "messages": [{"role": "user", "content": "triage #7"}]})
            (pending,) = paused.json()["gateway"]["pending_approvals"]
            with held_stream(url, A_KEY):
                refused = main([*cli[:2], pending["id"], *cli[2:]])
                said = capsys.readouterr().err
                gate.set()
            llm.script(LLMReply(text="Commented on #7."))
            approved = main([*cli[:2], pending["id"], *cli[2:]])
            shown = capsys.readouterr().out
    finally:
        close_store(safety)
    assert refused == 1 and "gateway.max_runs_per_client" in said and "pending again" in said, said
    assert approved == 0 and "Commented on #7." in shown
    assert [r.method for r in upstream.requests] == ["POST"]  # the comment, once: after the second decision


_DYING_INSTANCE = """
import asyncio, sys
from gateway.store.lease_keeper import LeaseKeeper
from gateway.safety.shared_shares import SharedShares
from gateway.safety.shares import RUNS
from gateway.store.redis_counters import RedisCounters

async def main():
    counters = RedisCounters(sys.argv[1])
    book = SharedShares(counters.client, counters.url, RUNS, LeaseKeeper(counters.client, counters.url, lease=0.3))
    await book.take("a-bot", 1)
    print("held", flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""


@pytest.mark.anyio
async def test_a_place_comes_back_when_its_lease_ends_and_no_cap_counts_nothing(redis_url: str) -> None:
    """An instance killed mid-run (SIGKILL) renews and gives back nothing: its place ends with its lease (0.3 s
    here), while a live instance's place, renewed, holds the share for many leases until it is given back."""
    dying = await asyncio.create_subprocess_exec(sys.executable, "-c", _DYING_INSTANCE, redis_url,
                                                 stdout=asyncio.subprocess.PIPE)
    alive, later = RedisCounters(redis_url), RedisCounters(redis_url)
    try:
        assert dying.stdout is not None
        assert await asyncio.wait_for(dying.stdout.readline(), 30) == b"held\n"
        other = SharedShares(alive.client, alive.url, RUNS, LeaseKeeper(alive.client, alive.url, lease=0.3))
        with pytest.raises(OverShare, match="gateway.max_runs_per_client"):
            await other.take("a-bot", 1)
        await asyncio.sleep(1.2)  # four leases: the live instance renews its place
        with pytest.raises(OverShare):
            await other.take("a-bot", 1)
        dying.kill()
        await dying.wait()
        for _ in range(100):  # at most 10 s: the lease ends 0.3 s after the last renewal
            try:
                held = await other.take("a-bot", 1)
                break
            except OverShare:
                await asyncio.sleep(0.1)
        else:
            raise AssertionError("the dead instance's place never came back")
        third = SharedShares(later.client, later.url, RUNS, LeaseKeeper(later.client, later.url, lease=0.3))
        await asyncio.sleep(1.2)  # four leases: this one's place is renewed, not lost
        with pytest.raises(OverShare):
            await third.take("a-bot", 1)
        await held.release()
        await held.release()  # once, however often
        again = await third.take("a-bot", 1)
        await again.release()
        uncapped = [await other.take("a-bot", None) for _ in range(3)]
        assert await alive.client.keys(PREFIX + "*") == []  # released, and nothing counted without a cap
        for place in uncapped:
            await place.release()
    finally:
        if dying.returncode is None:
            dying.kill()
            await dying.wait()
        await alive.aclose()
        await later.aclose()


def test_redis_lost_mid_run_keeps_the_runs_answer_and_refuses_the_next_run_with_503(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, redis_server: RedisServer) -> None:
    """A run whose place cannot be given back still answers (the lease returns the place); a run whose place cannot
    be counted is refused at once, naming Redis, rather than let past the share or left hanging."""
    gate = threading.Event()
    llm.script(LLMReply(text="held", gate=gate), LLMReply(text="Redis is back"))
    write_project(tmp_path, llm.url, upstream.url, _yaml(redis_server.url))
    app, safety = build_app(tmp_path, store=tmp_path / "state.db")
    try:
        with running(app) as url:
            try:
                with held_stream(url, A_KEY) as held:
                    redis_server.halt()
                    refused = _chat(url, B_KEY)
                    gate.set()
            finally:
                redis_server.start()
            after = _chat(url, A_KEY)
    finally:
        close_store(safety)
    assert held[0] == 200 and '"finish_reason":"stop"' in held[1]
    assert refused.status_code == 503 and refused.json()["error"]["code"] == "store_unavailable", refused.text
    assert "Redis" in refused.json()["error"]["message"]
    assert after.status_code == 200 and after.json()["choices"][0]["message"]["content"] == "Redis is back"
