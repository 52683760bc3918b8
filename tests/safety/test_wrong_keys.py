"""Repeated wrong keys are slowed per client address (issue #27), against a real gateway: the guessing address is
refused with 429 before its keys are looked at, on the API's doors and at the console's sign-in; other addresses are
answered as before (loopback has many: the test's clients send from 127.0.0.2 and 127.0.0.3)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from recording_server import RecordingServer
from server_support import LenientLLM

from gateway.safety.wrong_keys import BURST, source_of

from .safety_support import WEATHER_KEY, bearer, safe_gateway


@pytest.fixture
def url(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> Iterator[str]:
    with safe_gateway(tmp_path, llm.url, upstream.url) as (served, _):
        yield served


def _from(url: str, address: str) -> httpx.Client:
    return httpx.Client(base_url=url, timeout=30, transport=httpx.HTTPTransport(local_address=address))


def test_a_guessing_address_is_refused_and_no_other(url: str) -> None:
    with _from(url, "127.0.0.2") as guesser, _from(url, "127.0.0.1") as other:
        for n in range(BURST):
            assert guesser.get("/v1/models", headers=bearer(f"ck-guess-{n:04d}")).status_code == 401
        refused = guesser.get("/v1/models", headers=bearer("ck-guess-last"))
        assert refused.status_code == 429 and refused.json()["error"]["code"] == "too_many_wrong_keys"
        assert int(refused.headers["Retry-After"]) >= 1
        # The right key from there is not looked at either (else a guess would still learn it was right).
        assert guesser.get("/v1/models", headers=bearer(WEATHER_KEY)).status_code == 429
        # Nobody else is locked out: the right key works, and a wrong one is just wrong.
        assert other.get("/v1/models", headers=bearer(WEATHER_KEY)).status_code == 200
        assert other.get("/v1/models", headers=bearer("ck-typo")).status_code == 401
        assert guesser.get("/healthz").status_code == 200  # public paths need no key at all
        assert guesser.get("/v1/models").status_code == 401  # no key is no guess


def test_wrong_keys_at_the_console_sign_in_are_slowed_too(url: str) -> None:
    with _from(url, "127.0.0.3") as guesser, _from(url, "127.0.0.1") as other:
        for n in range(BURST):
            assert guesser.post("/console/signin", json={"key": f"ck-guess-{n:04d}"}).status_code == 401
        assert guesser.post("/console/signin", json={"key": "ck-guess-last"}).status_code == 429
        refused = guesser.post("/console/signin", json={"key": WEATHER_KEY})  # then the right key is not looked at
        assert refused.status_code == 429 and "Retry-After" in refused.headers
        assert "set-cookie" not in refused.headers
        assert guesser.get("/v1/models", headers=bearer(WEATHER_KEY)).status_code == 429  # one count per address
        signed = other.post("/console/signin", json={"key": WEATHER_KEY})
        assert signed.status_code == 200 and "gateway_console" in signed.headers["set-cookie"]


def test_addresses_are_told_apart_by_host_and_ipv6_by_block() -> None:
    assert source_of("127.0.0.2") != source_of("127.0.0.3")
    assert source_of("2001:db8::1") == source_of("2001:db8::ffff:1") == "2001:db8::/64"
    assert source_of("2001:db8:0:1::1") != source_of("2001:db8::1")
    assert source_of("::ffff:10.0.0.7") == "10.0.0.7"
    assert source_of(None) == "unknown"
