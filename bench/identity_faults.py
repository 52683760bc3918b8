"""The OpenID provider failing: what a caller meets on each door, and how long, and whether other callers wait.

    python bench/identity_faults.py [--rounds 3] [--hold 40] [--faults jwks-refused,...]
    PYTHONPATH=/tmp/main-export python bench/identity_faults.py     # the gateway of another checkout (before)

The identity tests' provider (panva's oidc-provider under Node; `npm ci` in tests/identity/provider) and a gateway
in this process (uvicorn in a thread, the `gateway` that `PYTHONPATH` finds first) whose key set (`jwks_uri`) and
token endpoint (the `repos` api's token exchange, the `tracker` api's refresh of a user's own connection) are
reached through tests/identity/provider_front.py: a front that forwards to the provider or fails, behind
tests/quiet_proxy.py (refused: the port closed; hung: accepted, never answered). Faults, one per round:

- `jwks-*` (`refused`, `hung`, `slow` 5 s, `garbage` an HTML page, `500`): the provider has rotated to a key the
  gateway has not fetched, and its key set fails; the callers bring tokens signed by the new key;
- `rotation`: the provider rotated and withdrew the old key (nothing fails): the new key's token, and a token of
  the old key the gateway has not seen before;
- `exchange-*` (`refused`, `hung`, `invalid-grant`): the token endpoint fails one user's token exchange;
- `refresh-*` (`refused`, `hung`, `invalid-grant`): the token endpoint fails the refresh of the user's own
  connection (alice connected `tracker`; its tokens live 4 s, so every call past 2 s refreshes);
- `flood`: 100 tokens with made-up `kid`s at once, the provider answering and then hung: how many fetches reach it;
- `slow-throughout`: the provider rotated and answers its key set 5 s late (past the gateway's 3 s) for 20 s, a
  caller every 0.5 s with a token of the new key: when the first is answered 200, and how many fetches it took.

At once, in a round: a tool call on the direct HTTP door, a chat completion whose scripted model calls the tool,
an MCP `tools/call`, and three more direct calls (to see whether callers queue behind one another); meanwhile
bystanders every 100 ms, who need no fetch and no exchange (a static client key's tool listing, and another user's
tool call on an api with no per-user credential, with a token of a key the gateway holds). A door still waiting
after `--hold` seconds ends the fault and is counted "no answer in hold". Then the doors are asked again until they
answer 200: `back` is how long after the fault ended (no restart). Medians over the rounds, each round in brackets,
the load average beside every fault.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "server"), str(ROOT / "tests" / "identity")]

import httpx  # noqa: E402
from cryptography.fernet import Fernet  # noqa: E402
from identity_support import AGENTS, REPOS_SPEC, connect_account, new_provider, route_repos, write_project  # noqa: E402
from oidc import signing_key  # noqa: E402
from provider_front import GARBAGE, INVALID_GRANT, ProviderFront, through_front  # noqa: E402
from recording_server import RecordingServer, Reply  # noqa: E402
from scripted_llm import Call, Recorded, ScriptedLLM  # noqa: E402
from scripted_llm import Reply as LLMReply  # noqa: E402

from bench.support import free_port, python_module, spawned  # noqa: E402

FAULTS = ("jwks-refused", "jwks-hung", "jwks-slow", "jwks-garbage", "jwks-500", "rotation",
          "exchange-refused", "exchange-hung", "exchange-invalid-grant",
          "refresh-refused", "refresh-hung", "refresh-invalid-grant", "flood", "slow-throughout")
DOORS = ("http", "chat", "mcp", "http2", "http3", "http4")
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "MCP-Protocol-Version": "2025-06-18"}
PLAIN = """\
  plain:
    base_url: "{upstream}/repos-api"
"""


class ToolThenText(ScriptedLLM):
    """Calls the agent's getRepo (or its first tool) when the user spoke last; says what the tool answered after."""

    def _next(self, recorded: Recorded) -> LLMReply | None:
        messages = recorded.body.get("messages") or [{}]
        if messages[-1].get("role") == "tool":
            return LLMReply(text=f"the tool said: {str(messages[-1].get('content'))[:300]}")
        names = [tool["function"]["name"] for tool in recorded.body.get("tools") or []]
        name = "getRepo" if "getRepo" in names else names[0]
        return LLMReply(calls=[Call(name, {"name": "x"} if name == "getRepo" else {})])


def load() -> float:
    return os.getloadavg()[0]


def short(answer: httpx.Response | BaseException) -> str:
    if isinstance(answer, BaseException):
        return f"{type(answer).__name__}: {str(answer)[:100]}"
    try:
        body = answer.json()
    except ValueError:
        return f"{answer.status_code} {answer.text[:100]}"
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        error = body["error"]
        return f"{answer.status_code} {error.get('code')}: {str(error.get('message'))[:150]}"
    if isinstance(body, dict) and "choices" in body:
        return f"{answer.status_code} model read: {body['choices'][0]['message']['content'][:150]}"
    if isinstance(body, dict) and "result" in body:
        result = body["result"]
        text = (result.get("content") or [{}])[0].get("text", "")
        return f"{answer.status_code} isError={result.get('isError')}: {text[:150]}"
    return f"{answer.status_code} {json.dumps(body)[:150]}"


def ok(answer: httpx.Response | BaseException) -> bool:
    return isinstance(answer, httpx.Response) and answer.status_code == 200 and "isError=True" not in short(answer) \
        and "the tool said: {\"error\"" not in short(answer)


@dataclass
class Gateway:
    url: str
    front: ProviderFront
    client: httpx.AsyncClient
    """The bystanders' (127.0.0.1)."""
    mcp: dict[str, dict[str, str]] = field(default_factory=dict)
    """agent -> the headers of an MCP session opened for it (as alice)."""
    n: int = 0
    doors: dict[str, httpx.AsyncClient] = field(default_factory=dict)
    """Each door's caller from an address of its own (127.0.2.n): the gateway counts 401s per address, and one
    caller's must not get another refused as a guesser."""

    def door(self, name: str) -> httpx.AsyncClient:
        if name not in self.doors:
            transport = httpx.AsyncHTTPTransport(local_address=f"127.0.2.{len(self.doors) + 1}")
            self.doors[name] = httpx.AsyncClient(transport=transport, timeout=120, trust_env=False)
        return self.doors[name]

    async def open_mcp(self, agent: str, token: str) -> None:
        url = f"{self.url}/mcp/{agent}"
        headers = {**MCP_HEADERS, "Authorization": f"Bearer {token}"}
        opened = await self.client.post(url, headers=headers, json={
            "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
        opened.raise_for_status()
        headers["Mcp-Session-Id"] = opened.headers["mcp-session-id"]
        await self.client.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        self.mcp[agent] = headers

    async def call(self, door: str, agent: str, tool: str, token: str) -> httpx.Response:
        self.n += 1
        bearer = {"Authorization": f"Bearer {token}"}
        arguments: dict[str, Any] = {"name": "x"} if "Repo" in tool else {}
        client = self.door(door)
        if door.startswith("http"):
            return await client.post(f"{self.url}/agents/{agent}/tools/{tool}", json=arguments, headers=bearer)
        if door == "chat":
            return await client.post(f"{self.url}/v1/chat/completions", headers=bearer, json={
                "model": agent, "messages": [{"role": "user", "content": "go"}]})
        response = await client.post(f"{self.url}/mcp/{agent}", headers={**self.mcp[agent], **bearer}, json={
            "jsonrpc": "2.0", "id": 1000 + self.n, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}})
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            for line in response.text.splitlines():
                if line.startswith("data:") and line[5:].strip():
                    return httpx.Response(response.status_code, json=json.loads(line[5:]))
        return response


@dataclass
class Round:
    """One fault: who calls (door -> token), what starts and ends the fault."""

    agent: str
    tool: str
    tokens: dict[str, str]
    begin: Callable[[], None]
    end: Callable[[], None]
    path: str
    recovers: bool = True
    """False: the user must act first (connect their account again), so the doors are not asked again."""


def asked(front: ProviderFront, path: str) -> int:
    """Requests for `path` so far: those that reached the front, and those the silent proxy swallowed (on the
    connections it accepted while silent, and on those open before)."""
    line = (b"GET " if path == "/jwks" else b"POST ") + path.encode() + b" "
    return front.asked(path) + front.proxy.unheard.count(line)


async def bystanders(gw: Gateway, token: str, stop: asyncio.Event, waits: list[float]) -> None:
    """Until `stop`, every 100 ms: a static key's tool listing and `token`'s call of an api with no per-user
    credential (neither needs the provider); each pair's mean time goes into `waits`."""
    asks = (lambda: gw.client.get(f"{gw.url}/agents/coder/tools", headers={"Authorization": "Bearer ops-key"}),
            lambda: gw.client.post(f"{gw.url}/agents/coder/tools/plain_getRepo", json={"name": "x"},
                                   headers={"Authorization": f"Bearer {token}"}))
    while not stop.is_set():
        took = 0.0
        for ask in asks:
            t0 = time.monotonic()
            answer = await ask()
            took += time.monotonic() - t0
            if answer.status_code != 200:
                raise RuntimeError(f"a bystander failed: {short(answer)}")
        waits.append(took / len(asks))
        await asyncio.sleep(0.1)


async def run_round(gw: Gateway, plan: Round, bystander_token: str, hold: float) -> dict[str, Any]:
    asked_before = asked(gw.front, plan.path)
    plan.begin()
    started = time.monotonic()
    waits: list[float] = []
    stop = asyncio.Event()

    async def timed(door: str) -> tuple[str, float, bool]:
        t0 = time.monotonic()
        try:
            answer: httpx.Response | BaseException = await gw.call(door, plan.agent, plan.tool, plan.tokens[door])
        except httpx.HTTPError as exc:
            answer = exc
        return short(answer), time.monotonic() - t0, ok(answer)

    watching = asyncio.ensure_future(bystanders(gw, bystander_token, stop, waits))
    calls = [asyncio.ensure_future(timed(door)) for door in DOORS]
    await asyncio.wait(calls, timeout=hold)
    plan.end()
    ended = time.monotonic()
    results = [await c for c in calls]
    stop.set()
    await watching
    reached = asked(gw.front, plan.path) - asked_before
    back: float | None = None
    while plan.recovers and time.monotonic() - ended < 30:
        answers = [await gw.call(door, plan.agent, plan.tool, plan.tokens[door]) for door in ("http", "chat", "mcp")]
        if all(ok(a) for a in answers):
            back = time.monotonic() - ended
            break
        await asyncio.sleep(0.2)
    out: dict[str, Any] = {"load": load(), "bystander": waits, "back": back, "asked": reached,
                           "recovers": plan.recovers,
                           "held": ended - started}
    for door, (what, seconds, fine) in zip(DOORS, results, strict=True):
        out[door] = (what if seconds < hold else f"no answer in {hold:g} s (then: {what})", seconds, fine)
    return out


def report(name: str, got: list[dict[str, Any]]) -> None:
    print(f"\n== {name} ({len(got)} rounds; load average {got[0]['load']:.1f} -> {got[-1]['load']:.1f})")
    for door in DOORS:
        seconds = statistics.median(g[door][1] for g in got)
        print(f"   {door:6} median {seconds:6.2f} s  [{', '.join(f'{g[door][1]:.2f}' for g in got)}]  "
              f"{got[-1][door][0]}")
    waits = sorted(w for g in got for w in g["bystander"])
    if waits:
        print(f"   bystanders (a key's tool listing; another user's call needing no exchange): {len(waits)} "
              f"requests, p50 {statistics.median(waits) * 1000:.1f} ms, max {waits[-1] * 1000:.1f} ms")
    print(f"   requests that reached the provider's endpoint during the fault: {[g['asked'] for g in got]}")
    backs = [g["back"] for g in got]
    if got[0]["recovers"]:
        print(f"   every door 200 again after the fault, no restart, within: "
              f"{['never (30 s)' if b is None else f'{b:.2f} s' for b in backs]}")


class Bench:
    def __init__(self, folder: Path, provider: Any, front: ProviderFront, url: str, hold: float) -> None:
        self.folder = folder
        self.provider = provider
        self.front = front
        self.url = url
        self.audience = url + "/"
        self.hold = hold
        self.last_rotation = 0.0

    def token(self, user: str) -> str:
        return self.provider.token_for(user, audience=self.audience)

    def rotate(self, *, withdraw: bool = False) -> None:
        """The provider signs with a new key from now on (the old ones published too, unless `withdraw`); at least
        6 s after the last rotation, so the gateway may refetch (it does at most every 5 s)."""
        time.sleep(max(0.0, self.last_rotation + 6 - time.monotonic()))
        keys = [signing_key()] if withdraw else [signing_key(), *self.provider.keys]
        for attempt in range(5):  # its port (the issuer's) may be taken for a moment by another process's client
            try:
                self.provider.restart(keys=keys)
                break
            except RuntimeError:
                if attempt == 4:
                    raise
                time.sleep(1)
        self.last_rotation = time.monotonic()

    def fault(self, name: str) -> tuple[Callable[[], None], str]:
        kind, _, how = name.partition("-")
        path = "/jwks" if kind in ("jwks", "rotation", "flood") else "/token"
        actions: dict[str, Callable[[], None]] = {
            "refused": self.front.proxy.refuse, "hung": self.front.proxy.silence,
            "slow": lambda: self.front.slow(path, 5.0), "garbage": lambda: self.front.fail(path, GARBAGE),
            "500": lambda: self.front.fail(path, Reply(500, "Internal Server Error")),
            "invalid": lambda: self.front.fail(path, INVALID_GRANT), "": lambda: None}
        return actions[how.split("-")[0]], path

    async def plan(self, gw: Gateway, name: str) -> Round:
        begin, path = self.fault(name)
        kind = name.split("-")[0]
        if kind in ("jwks", "rotation"):
            self.rotate(withdraw=kind == "rotation")
            tokens = {door: self.token("alice") for door in DOORS}
            if kind == "rotation":  # the old key's token the gateway has not seen, on the last door
                tokens["http4"] = self.old_token
            return Round("coder", "getRepo", tokens, begin, self.front.heal, path)
        if kind == "exchange":  # fresh tokens: each needs an exchange of its own
            return Round("coder", "getRepo", {door: self.token("alice") for door in DOORS}, begin, self.front.heal,
                         path)
        token = self.token("alice")
        if not self.connected:
            link = (await gw.client.post(f"{self.url}/connections/tracker",
                                         headers={"Authorization": f"Bearer {token}"})).json()["connect_url"]
            answer = await asyncio.to_thread(connect_account, self.provider, self.url, "alice", link)
            assert answer.status_code == 200, answer.text
            self.connected = True
        await asyncio.sleep(2.5)  # the connection's access token (4 s) is due for a refresh after 2 s

        def end() -> None:
            self.front.heal()
            self.connected = not name.endswith("invalid-grant")

        return Round("planner", "listTickets", dict.fromkeys(DOORS, token), begin, end, path,
                     recovers=not name.endswith("invalid-grant"))

    connected = False
    old_token = ""


async def flood(gw: Gateway, bench: Bench, count: int) -> None:
    """`count` tokens with made-up `kid`s at once (an attacker's), with the provider answering, then hung."""
    for hung in (False, True):
        bench.rotate()  # a while since the last fetch: the first unknown kid may refetch
        real = bench.token("alice")
        header, payload, signature = real.split(".")
        forged = []
        for _ in range(count):
            made = json.loads(_b64decode(header))
            made["kid"] = uuid.uuid4().hex[:12]
            forged.append(f"{_b64encode(json.dumps(made).encode())}.{payload}.{signature}")
        before = asked(bench.front, "/jwks")
        if hung:
            bench.front.proxy.silence()
        t0 = time.monotonic()
        bearer = [{"Authorization": f"Bearer {token}"} for token in forged]

        async def one(n: int, headers: dict[str, str]) -> tuple[int, float]:
            # each from an address of its own (127.0.1.n): the wrong-key guard refuses one address's burst
            transport = httpx.AsyncHTTPTransport(local_address=f"127.0.1.{n + 1}")
            started = time.monotonic()
            async with httpx.AsyncClient(transport=transport, timeout=120, trust_env=False) as client:
                try:
                    answer = await client.get(f"{gw.url}/agents", headers=headers)
                    return answer.status_code, time.monotonic() - started
                except httpx.HTTPError:
                    return 0, time.monotonic() - started

        tasks = [asyncio.ensure_future(one(n, h)) for n, h in enumerate(bearer)]
        done, pending = await asyncio.wait(tasks, timeout=bench.hold)
        bench.front.heal()
        results = [await t for t in tasks]
        fetches = asked(bench.front, "/jwks") - before
        took = sorted(seconds for _, seconds in results)
        codes: dict[int, int] = {}
        for code, _ in results:
            codes[code] = codes.get(code, 0) + 1
        print(f"\n== flood, provider {'hung' if hung else 'answering'} (load {load():.1f}): {count} tokens with "
              f"made-up kids at once: fetches of the key set {fetches}; "
              f"answers {codes}; median {statistics.median(took):.2f} s, last {took[-1]:.2f} s "
              f"({len(pending)} unanswered in {bench.hold:g} s; {time.monotonic() - t0:.1f} s in all)")


async def slow_throughout(gw: Gateway, bench: Bench, late: float = 5.0, span: float = 20.0) -> None:
    """The provider answers its key set `late` seconds late for `span` seconds, callers arriving every 0.5 s with a
    token of a key the gateway has not fetched: does a provider slower than the setting ever deliver its keys?"""
    bench.rotate()
    headers = {"Authorization": f"Bearer {bench.token('alice')}"}
    before = asked(bench.front, "/jwks")
    bench.front.slow("/jwks", late)
    client, t0 = gw.door("slow"), time.monotonic()
    answers: list[tuple[float, int, float]] = []  # (sent at, status, seconds waited)

    async def one() -> None:
        sent = time.monotonic()
        answer = await client.get(f"{gw.url}/agents", headers=headers)
        answers.append((sent - t0, answer.status_code, time.monotonic() - sent))

    callers = []
    while time.monotonic() - t0 < span:
        callers.append(asyncio.ensure_future(one()))
        await asyncio.sleep(0.5)
    await asyncio.gather(*callers)
    bench.front.heal()
    first = min((sent + waited for sent, code, waited in answers if code == 200), default=None)
    codes = {code: sum(1 for _, c, _ in answers if c == code) for code in sorted({c for _, c, _ in answers})}
    print(f"\n== slow-throughout (load {load():.1f}): key set {late:g} s late for {span:g} s, {len(answers)} callers: "
          f"first 200 at {'never' if first is None else f'{first:.1f} s'}; answers {codes}; longest wait "
          f"{max(w for _, _, w in answers):.2f} s; fetches of the key set {asked(bench.front, '/jwks') - before}")


def _b64decode(part: str) -> bytes:
    import base64

    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def _b64encode(raw: bytes) -> str:
    import base64

    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


async def measure(bench: Bench, gw: Gateway, names: list[str], rounds: int) -> None:
    bystander = bench.token("erin")
    await gw.open_mcp("coder", bench.token("alice"))
    await gw.open_mcp("planner", bench.token("alice"))
    for name in names:
        if name == "flood":
            await flood(gw, bench, 100)
            continue
        if name == "slow-throughout":
            await slow_throughout(gw, bench)
            continue
        got = []
        for _ in range(rounds):
            if name == "rotation":
                bench.old_token = bench.token("dave")  # signed by the key about to be withdrawn, never shown
            plan = await bench.plan(gw, name)
            got.append(await run_round(gw, plan, bystander, bench.hold))
            bench.last_rotation = time.monotonic()  # the gateway may just have fetched the keys again
            if name.startswith("jwks") or name == "rotation":
                bystander = bench.token("erin")  # the old key may be gone: erin signs in again
                await gw.client.get(f"{gw.url}/agents", headers={"Authorization": f"Bearer {bystander}"})
        report(name, got)


def project_agents(front: str) -> str:
    agents = AGENTS.replace("agents:\n", PLAIN + "agents:\n", 1)
    agents = agents.replace("  coder: {{model: openai/gpt-test, tools: [{{api: repos}}]}}",
                            "  coder: {{model: openai/gpt-test, tools: [{{api: repos}}, {{api: plain}}]}}")
    return through_front(agents, front)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--hold", type=float, default=40.0)
    parser.add_argument("--faults", default=",".join(FAULTS))
    parser.add_argument("--gateway-root", type=Path, default=ROOT, help="the checkout whose gateway runs")
    args = parser.parse_args()
    if shutil.which("node") is None or not (ROOT / "tests/identity/provider/node_modules/oidc-provider").is_dir():
        sys.exit("needs Node.js and `npm ci` in tests/identity/provider")
    root = args.gateway_root.resolve()
    folder = Path(tempfile.mkdtemp(prefix="bench-identity-faults-"))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    provider = new_provider(url + "/").start()
    front = ProviderFront(provider)
    try:
        with front.running(), ToolThenText() as llm, RecordingServer() as upstream:
            route_repos(upstream)
            specs, agents = write_project(folder, llm=llm.url, upstream=upstream.url, issuer=provider.issuer,
                                          audience=url + "/", agents=project_agents(front.url),
                                          store=f"sqlite:///{folder / 'state.db'}")
            (specs / "plain.yaml").write_text(
                REPOS_SPEC.replace("operationId: ", "operationId: plain_").replace("{issuer}", provider.issuer))
            env = {"GATEWAY_CONNECTIONS_KEY": Fernet.generate_key().decode(), "PYTHONPATH": str(root),
                   "GATEWAY_CACHE_DIR": str(folder / "cache")}
            with spawned(python_module("gateway", "serve", "--port", str(port), "--specs", str(specs), "--agents",
                                       str(agents)), f"{url}/healthz", env=env, cwd=root):
                bench = Bench(folder, provider, front, url, args.hold)

                async def go() -> None:
                    async with httpx.AsyncClient(timeout=120, trust_env=False) as client:
                        gw = Gateway(url, front, client)
                        try:
                            await measure(bench, gw, args.faults.split(","), args.rounds)
                        finally:
                            for door in gw.doors.values():
                                await door.aclose()

                asyncio.run(go())
    finally:
        provider.stop()
    print(f"\ngateway from {root}; {os.cpu_count()} cores shared by everything")


if __name__ == "__main__":
    main()
