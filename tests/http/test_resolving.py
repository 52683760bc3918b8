"""gateway.http.resolving: a spec's server named by a host name that resolves to a link-local address (a cloud's
metadata service) gets nothing, also when the name's DNS answer changes between lookups (rebinding); a name that
resolves elsewhere goes to the very address that was checked. A real server on 127.0.0.1; the resolver is
injected, as no DNS here answers `api.invalid` (which is how the test knows the pinned address was used)."""

from __future__ import annotations

import ipaddress
import socket

import httpx
import pytest
from pyreqwest.http import Url
from recording_server import RecordingServer

import gateway.http.resolving as resolving
from gateway.config.model import ApiConfig, Manifest
from gateway.errors import ApiSetupError
from gateway.execution.executor import Executor
from gateway.http.library import ClientOptions
from gateway.http.resolving import PinnedClients
from gateway.http.wire import ReqwestWire
from gateway.openapi import compile_document

pytestmark = pytest.mark.anyio


class _Dns:
    """Answers every name with the next of `answers` (the last one over and over)."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.asked: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        return [self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]]


async def _get(wire: ReqwestWire, url: str) -> int:
    response = await wire.send("GET", url, [], None, timeout=5)
    await response.aclose()
    return int(response.status_code)


async def test_a_name_goes_to_the_address_that_was_checked() -> None:
    with RecordingServer() as server:
        port = server.url.rsplit(":", 1)[1]
        wire = ReqwestWire(pins=PinnedClients(ClientOptions(), resolver=_Dns("127.0.0.1")))
        try:
            assert await _get(wire, f"http://api.invalid:{port}/x") == 200
            assert server.last.header("host") == f"api.invalid:{port}"
        finally:
            await wire.aclose()


@pytest.mark.parametrize("address", ["169.254.169.254", "fe80::1", "fd00:ec2::254", "::ffff:169.254.169.254"])
async def test_a_name_that_resolves_to_a_metadata_address_gets_nothing(address: str) -> None:
    wire = ReqwestWire(pins=PinnedClients(ClientOptions(), resolver=_Dns(address)))
    try:
        with pytest.raises(ApiSetupError, match="link-local.*the request was not sent"):
            await _get(wire, "http://metadata.invalid/latest/meta-data/iam/security-credentials/")
    finally:
        await wire.aclose()


@pytest.mark.parametrize("second", ["api.invalid", "other.invalid"])
async def test_a_name_rebound_or_another_name_on_the_port_is_checked_where_it_resolves(
        monkeypatch: pytest.MonkeyPatch, second: str) -> None:
    # The same name rebound to a metadata address (resolved again at once), or another name on the same port (its
    # own lookup, never the first name's pin, whatever URL of the port's came first).
    if second == "api.invalid":
        monkeypatch.setattr(resolving, "RESOLVE_SECONDS", 0.0)  # each answer's time is up at once
    dns = _Dns("127.0.0.1", "169.254.169.254")
    with RecordingServer() as server:
        port = server.url.rsplit(":", 1)[1]
        wire = ReqwestWire(pins=PinnedClients(ClientOptions(), resolver=dns))
        try:
            assert await _get(wire, f"http://api.invalid:{port}/first") == 200
            with pytest.raises(ApiSetupError, match="169.254.169.254"):
                await _get(wire, f"http://{second}:{port}/second")
        finally:
            await wire.aclose()
    assert [r.path for r in server.requests] == ["/first"] and dns.asked == ["api.invalid", second]


_URLS = ["http://h.test/x", "https://h.test/x", "http://h.test:8080/x?y=/z", "http://h.test?y=/z", "http://h.test#/z",
         "http://h.test?y=1", "http://user:p%40ss@h.test:81/x", "http://[::1]:8080/x", "http://[::1]/x",
         "http://H.Test./x", "http://h.test", "https://h.test:443", "http://h.test:8080?q=//other.test/x"]

_SCHEMES = ("http", "https", "HTTP", "HtTpS")
_USERINFO = ("", "u@", "u:p@", "a%40b:c%3Ad@", "evil.test%5C@", "a@b@")
_HOSTS = ("h.test", "H.TEST", "h.test.", "H.Test.", "a.b.c.h.test", "api-1.internal", "127.0.0.1", "[::1]",
          "[FE80::1]", "[::ffff:127.0.0.1]", "[2001:DB8::1]", "xn--bcher-kva.example", "bücher.example",
          "%68.test", "h%2Etest", "%48.TEST.")
_PORTS = ("", ":", ":80", ":443", ":8080", ":0443", ":65535")
_TAILS = ("", "/", "/a/b", "?q=/x", "#f/x", "/p?x=//other.test/#y", "?@other.test/")
_DEFAULT_PORTS = {"http": 80, "https": 443}


def _httpx_origin(url: str) -> tuple[str, int, str]:
    """httpx's own parse: the host as it sends it (`raw_host`: IDNA-encoded, case folded), the port written or
    the scheme's."""
    parsed = httpx.URL(url)
    return parsed.raw_host.decode("ascii"), parsed.port or _DEFAULT_PORTS[parsed.scheme], parsed.scheme


def _sent_to(url: str) -> tuple[str, int, str]:
    """Where the client library the gateway sends with connects: pyreqwest's own `Url` (the WHATWG URL parser the
    request is built with)."""
    parsed = Url(url)
    host = parsed.host_str or ""
    return host.strip("[]"), parsed.port_or_known_default or 0, parsed.scheme


def _same_host(one: str, other: str) -> bool:
    """Equal names, or equal addresses however written (`FE80::1` and `fe80::1`; `::ffff:127.0.0.1`)."""
    try:
        return ipaddress.ip_address(one) == ipaddress.ip_address(other)
    except ValueError:
        return one == other


def test_a_urls_origin_is_where_the_client_sends_it_whichever_url_of_that_origin_came_first() -> None:
    """Differential: `_origin` against httpx.URL's parse and the sending library's, over 18,842 URLs (schemes in
    any case, userinfo, IPv6 literals, IDNA, trailing dots, percent-encoded hosts, default ports written out,
    queries and fragments before any `/`), each split alone and among others of its origin in both orders (the
    split is remembered by the text before the path). A wrong origin pins a call to another name's client: its
    host is then looked up by the library, unchecked. Before: `H.Test.` was pinned as `h.test` while the library
    connected to `h.test.` (and looked it up itself), `%68.test` was resolved as written while the library sent to
    `h.test`."""
    urls = [f"{scheme}://{userinfo}{host}{port}{tail}" for scheme in _SCHEMES for userinfo in _USERINFO
            for host in _HOSTS for port in _PORTS for tail in _TAILS]
    urls += [*_URLS, *(url + "/more?a=b" for url in _URLS)]
    together, backwards = PinnedClients(ClientOptions()), PinnedClients(ClientOptions())
    differs: set[str] = set()
    for url in urls:
        alone = PinnedClients(ClientOptions())._origin(url)
        assert alone == together._origin(url), url
        expected = _sent_to(url)
        assert alone[1:] == expected[1:] and _same_host(alone[0], expected[0]), url
        # httpx reads the same origin but for a host's escapes, which it keeps and the library decodes (`%68`).
        seen_by_httpx = _httpx_origin(url)
        if not (seen_by_httpx[1:] == alone[1:] and _same_host(seen_by_httpx[0], alone[0])):
            differs.add(url)
            assert "%" in seen_by_httpx[0], (url, seen_by_httpx, alone)
    for url in reversed(urls):
        assert backwards._origin(url) == together._origin(url), url
    # A head that alone is no URL of its origin (the library drops a tab anywhere: `http://`) is not remembered.
    assert together._origin("http:/\t/h.test/x") == ("h.test", 80, "http") == _sent_to("http:/\t/h.test/x")
    assert together._origin("http:/x/y") == ("x", 80, "http")
    assert differs and all("%" in _httpx_origin(url)[0] for url in differs)


@pytest.mark.parametrize("written", ["api.invalid.", "API.Invalid.", "%61pi.invalid", "api%2Einvalid."])
async def test_a_name_written_otherwise_goes_to_the_address_that_was_checked(written: str) -> None:
    """A trailing dot, upper case, a percent-encoded host: the name the library connects to is the one resolved,
    checked and pinned (before: a trailing dot or an escape pinned another name, and the library looked the host
    up itself: the call failed here, where no DNS knows `api.invalid`; elsewhere it went where a second lookup
    said, unchecked)."""
    with RecordingServer() as server:
        port = server.url.rsplit(":", 1)[1]
        dns = _Dns("127.0.0.1")
        wire = ReqwestWire(pins=PinnedClients(ClientOptions(), resolver=dns))
        try:
            assert await _get(wire, f"http://{written}:{port}/x") == 200
            assert dns.asked == [_sent_to(f"http://{written}/")[0]]
        finally:
            await wire.aclose()


async def test_an_address_as_host_is_not_resolved() -> None:
    dns = _Dns("169.254.169.254")
    with RecordingServer() as server:
        wire = ReqwestWire(pins=PinnedClients(ClientOptions(), resolver=dns))
        try:
            assert await _get(wire, f"{server.url}/x") == 200
        finally:
            await wire.aclose()
    assert dns.asked == []


@pytest.mark.parametrize("host", ["2852039166", "0xa9fea9fe", "169.254.43518", "[::ffff:a9fe:a9fe]"])
async def test_a_metadata_address_in_any_form_the_library_reads_gets_nothing(host: str) -> None:
    """An address written as the library reads it is not resolved, and not sent when it is a metadata address (a
    spec's server is refused so before it gets here: `gateway.http.request`; this holds without that too, as the
    system resolver's answer for the same text did)."""
    dns = _Dns("127.0.0.1")
    pins = PinnedClients(ClientOptions(), resolver=dns)
    try:
        with pytest.raises(ApiSetupError, match=r"is (::ffff:a9fe:a9fe|169\.254\.169\.254), a link-local.*not sent"):
            await pins.client_for(f"http://{host}/latest/meta-data")
    finally:
        await pins.aclose()
    assert dns.asked == []


def _executor(server: str) -> Executor:
    spec = {"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "servers": [{"url": server}],
            "paths": {"/creds": {"get": {"operationId": "creds", "responses": {"200": {"description": "ok"}}}}}}
    catalog = compile_document(spec, api="meta", file="meta.json")
    config = ApiConfig.model_validate({"name": "meta", "auth": {"type": "bearer", "token": "s3cret"}})
    return Executor(Manifest(apis={"meta": config}), catalog)


async def test_a_specs_server_whose_name_resolves_to_metadata_is_a_tool_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    async def metadata(host: str, port: int) -> list[str]:
        return ["169.254.169.254"]

    monkeypatch.setattr(resolving, "system_resolver", metadata)
    async with _executor("http://instance-data.invalid/latest") as executor:
        result = await executor.execute(executor.catalog.get("creds"), {})
    assert result.error_type == "configuration_error"
    assert "instance-data.invalid resolves to 169.254.169.254" in (result.error or "")


async def test_a_name_no_resolver_knows_is_a_transport_error_like_any_failed_connect(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A lookup that fails (no network, a typo, a DNS outage) is a connection that could not be made, as it was
    before names were resolved here: `transport_error`, nothing sent; not the operator's configuration."""
    async def unknown(host: str, port: int) -> list[str]:
        raise socket.gaierror(-2, "Name or service not known")

    monkeypatch.setattr(resolving, "system_resolver", unknown)
    async with _executor("http://api.example.invalid/v1") as executor:
        result = await executor.execute(executor.catalog.get("creds"), {})
    assert result.error_type == "transport_error"
    assert "cannot resolve api.example.invalid" in (result.error or "")
    assert "not sent" in (result.error or "")


async def test_a_real_name_that_resolves_to_loopback_is_called() -> None:
    with RecordingServer() as server:
        port = server.url.rsplit(":", 1)[1]
        async with _executor(f"http://localhost:{port}/api") as executor:
            result = await executor.execute(executor.catalog.get("creds"), {})
    assert result.ok, result.error
    assert server.last.header("authorization") == "Bearer s3cret"


async def test_calls_that_find_a_name_unresolved_share_one_lookup() -> None:
    import asyncio

    dns = _Dns("127.0.0.1")
    with RecordingServer() as server:
        port = server.url.rsplit(":", 1)[1]
        wire = ReqwestWire(pins=PinnedClients(ClientOptions(), resolver=dns))
        try:
            statuses = await asyncio.gather(*(_get(wire, f"http://api.invalid:{port}/{i}") for i in range(20)))
        finally:
            await wire.aclose()
    assert statuses == [200] * 20
    assert dns.asked == ["api.invalid"]  # one worker thread a name, however many calls wait for it


async def test_a_name_whose_first_address_refuses_connections_is_tried_at_its_next() -> None:
    async def two(host: str, port: int) -> list[str]:
        return ["127.0.0.2", "127.0.0.1"]  # the server listens on 127.0.0.1 only (as `localhost` may be ::1 first)

    with RecordingServer() as server:
        port = server.url.rsplit(":", 1)[1]
        wire = ReqwestWire(pins=PinnedClients(ClientOptions(), resolver=two))
        try:
            with pytest.raises(httpx.ConnectError, match="the request was not sent"):
                await _get(wire, f"http://api.invalid:{port}/first")
            assert await _get(wire, f"http://api.invalid:{port}/second") == 200
        finally:
            await wire.aclose()
    assert [r.path for r in server.requests] == ["/second"]


async def test_an_idempotent_call_is_retried_at_the_next_address(monkeypatch: pytest.MonkeyPatch) -> None:
    async def two(host: str, port: int) -> list[str]:
        return ["127.0.0.2", "127.0.0.1"]

    monkeypatch.setattr(resolving, "system_resolver", two)
    with RecordingServer() as server:
        port = server.url.rsplit(":", 1)[1]
        async with _executor(f"http://api.invalid:{port}/api") as executor:
            result = await executor.execute(executor.catalog.get("creds"), {})
    assert result.ok, result.error
    assert server.last.header("authorization") == "Bearer s3cret"


async def test_a_lookup_that_never_ends_ends_with_the_calls_deadline() -> None:
    import asyncio

    async def silent(host: str, port: int) -> list[str]:
        await asyncio.sleep(3600)  # a DNS server that never answers
        return []

    wire = ReqwestWire(pins=PinnedClients(ClientOptions(), resolver=silent))
    try:
        with pytest.raises(httpx.ConnectTimeout, match="no address for api.invalid within 0.2 s; the request was not"):
            await wire.send("GET", "http://api.invalid/x", [], None, timeout=0.2)
    finally:
        await wire.aclose()
