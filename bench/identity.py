"""What a caller's access token costs beside a client key, and what a per-user upstream token costs.

    python bench/identity.py [--requests 300]

Starts the identity tests' OpenID provider (panva's oidc-provider under Node; `npm ci` in
tests/identity/provider first) and a gateway on loopback with `gateway.auth`. Printed, as medians over sequential
requests from one client (a busy machine shifts them; compare the rows of one run):
- the in-process check of one JWT (`TokenVerifier.verify`, keys fetched): the first time, and again (kept);
- `GET /agents` with a client key, and with a user's access token;
- a direct tool call with a static bearer credential upstream, and with a token exchanged per user (cached after
  the first call; the first exchange is printed on its own).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "server"), str(ROOT / "tests" / "identity")]

import httpx  # noqa: E402
from identity_support import new_provider, reserve, route_repos, serving  # noqa: E402
from recording_server import RecordingServer  # noqa: E402
from server_support import LenientLLM  # noqa: E402

from gateway.http.client import new_client  # noqa: E402
from gateway.identity.keys import IssuerKeys  # noqa: E402
from gateway.identity.verify import TokenVerifier  # noqa: E402

STATIC = """\
  static:
    base_url: "{upstream}/repos-api"
    auth: {{type: bearer, token: static-upstream-token}}
"""


def _median_ms(run: Callable[[], object], count: int) -> float:
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        run()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def _interleaved(first: Callable[[], object], second: Callable[[], object], count: int) -> tuple[float, float]:
    """Medians of two requests taken turn about (a machine growing busier shifts both alike)."""
    samples: tuple[list[float], list[float]] = ([], [])
    for _ in range(count):
        for run, kept in ((first, samples[0]), (second, samples[1])):
            started = time.perf_counter()
            run()
            kept.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples[0]), statistics.median(samples[1])


async def _verify_us(issuer: str, audience: str, token: str, count: int) -> tuple[float, float]:
    """Medians (us) of checking the token the first time (signature and claims; the keys fetched already) and
    again (kept)."""
    async with new_client() as http:
        keys = IssuerKeys(http, issuer)
        await TokenVerifier(keys, audience).verify(token)  # keys fetched once
        first, again = [], []
        for _ in range(count):
            verifier = TokenVerifier(keys, audience)
            for samples in (first, again):
                started = time.perf_counter()
                await verifier.verify(token)
                samples.append((time.perf_counter() - started) * 1e6)
    return statistics.median(first), statistics.median(again)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args()
    if shutil.which("node") is None or not (ROOT / "tests/identity/provider/node_modules/oidc-provider").is_dir():
        sys.exit("needs Node.js and `npm ci` in tests/identity/provider")
    folder = Path(tempfile.mkdtemp(prefix="bench-identity-"))
    sock, url = reserve()
    audience = url + "/"
    provider = new_provider(audience).start()
    from identity_support import AGENTS, REPOS_SPEC

    agents = AGENTS.replace("agents:\n", STATIC + "agents:\n", 1).replace(
        "  coder: {{model: openai/gpt-test, tools: [{{api: repos}}]}}",
        "  coder: {{model: openai/gpt-test, tools: [{{api: repos}}, {{api: static}}]}}")
    try:
        with LenientLLM() as llm, RecordingServer() as upstream:
            route_repos(upstream)
            # the static api: the same operations under other names, with a static credential
            (folder / "specs").mkdir(parents=True)
            (folder / "specs" / "static.yaml").write_text(
                REPOS_SPEC.replace("operationId: ", "operationId: static_").replace("{issuer}", provider.issuer))
            with serving(folder, sock, llm=llm.url, upstream=upstream.url, issuer=provider.issuer,
                         audience=audience, agents=agents) as (gateway, _):
                token = provider.token_for("alice", audience=audience)
                user = {"Authorization": f"Bearer {token}"}
                key = {"Authorization": "Bearer ops-key"}
                verify_us = asyncio.run(_verify_us(provider.issuer, audience, token, args.requests))
                with httpx.Client(base_url=gateway, timeout=30) as client:
                    client.get("/agents", headers=key)  # warm: the first requests build the listings
                    client.get("/agents", headers=user)
                    key_ms, token_ms = _interleaved(lambda: client.get("/agents", headers=key),
                                                    lambda: client.get("/agents", headers=user), args.requests)
                    rows = {"GET /agents, client key": key_ms, "GET /agents, access token": token_ms}
                    started = time.perf_counter()
                    client.post("/agents/coder/tools/getRepo", json={"name": "x"}, headers=user)
                    first_exchange = (time.perf_counter() - started) * 1000
                    rows["tool call, token exchanged (cached)"] = _median_ms(
                        lambda: client.post("/agents/coder/tools/getRepo", json={"name": "x"}, headers=user),
                        args.requests)
                    rows["tool call, static upstream credential"] = _median_ms(
                        lambda: client.post("/agents/coder/tools/static_getRepo", json={"name": "x"},
                                            headers=user), args.requests)
    finally:
        provider.stop()
    print(f"JWT check in process, first time (keys fetched): median {verify_us[0]:.0f} us; "
          f"again (kept): {verify_us[1]:.1f} us")
    for name, value in rows.items():
        print(f"{name:<42} median {value:6.2f} ms")
    print(f"{'tool call, first exchange':<42}        {first_exchange:6.2f} ms (one request)")


if __name__ == "__main__":
    main()
