"""Client certificates (mTLS): an api's `client_cert`/`client_key` in agents.yaml are presented to a real TLS
upstream on 127.0.0.1 that requires one (certificates from a throwaway trustme CA)."""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import trustme
from executor_helpers import make_tool

from gateway.catalog import Catalog
from gateway.config.loader import load_manifest
from gateway.execution.executor import Executor

pytestmark = pytest.mark.anyio


class _WhoAreYou(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        peer = self.connection.getpeercert()  # type: ignore[attr-defined]
        body = json.dumps({"client": dict(peer["subjectAltName"])["email"] if peer else None}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        return  # the handshake refused on purpose in one test


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def mtls_url(ca: trustme.CA) -> Iterator[str]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    ca.configure_trust(context)
    context.verify_mode = ssl.CERT_REQUIRED  # no certificate from the client, no answer
    server = _QuietServer(("127.0.0.1", 0), _WhoAreYou)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"https://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _project(tmp_path: Path, ca: trustme.CA, url: str, *, cert: bool, same_file: bool = False) -> Path:
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    issued = ca.issue_cert("clerk@gateway.test")
    lines = [f"apis:\n  demo:\n    base_url: {url}\n    ca_file: ca.pem\n"]
    if cert and same_file:
        issued.private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "client.pem"))
        lines.append("    client_cert: client.pem\n")
    elif cert:
        (tmp_path / "certs").mkdir()
        issued.cert_chain_pems[0].write_to_path(str(tmp_path / "certs" / "client.crt"))
        issued.private_key_pem.write_to_path(str(tmp_path / "certs" / "client.key"))
        lines.append("    client_cert: certs/client.crt\n    client_key: certs/client.key\n")
    (tmp_path / "agents.yaml").write_text("".join(lines))
    return tmp_path / "agents.yaml"


async def _call(agents_yaml: Path):  # type: ignore[no-untyped-def]
    manifest, diagnostics = load_manifest(agents_yaml)
    assert not [d for d in diagnostics if d.level == "error"], diagnostics
    tool = make_tool()
    async with Executor(manifest, Catalog([tool])) as executor:
        return await executor.execute(tool, {}, timeout=10)


@pytest.mark.parametrize("same_file", [False, True])
async def test_the_client_certificate_of_agents_yaml_is_presented(
        mtls_url: str, ca: trustme.CA, tmp_path: Path, same_file: bool) -> None:
    result = await _call(_project(tmp_path, ca, mtls_url, cert=True, same_file=same_file))
    assert result.ok and result.body == {"client": "clerk@gateway.test"}, result.error


async def test_without_a_client_certificate_the_upstream_refuses(mtls_url: str, ca: trustme.CA,
                                                                 tmp_path: Path) -> None:
    result = await _call(_project(tmp_path, ca, mtls_url, cert=False))
    assert result.ok is False and result.error_type == "transport_error"
    assert "127.0.0.1" in (result.error or "")


def test_a_bad_client_certificate_fails_the_load(tmp_path: Path) -> None:
    (tmp_path / "junk.pem").write_text("not a certificate")
    (tmp_path / "agents.yaml").write_text("apis:\n  demo:\n    client_cert: junk.pem\n  lone:\n    client_key: k.pem\n")
    _, diagnostics = load_manifest(tmp_path / "agents.yaml")
    errors = sorted(str(d) for d in diagnostics if d.level == "error")
    assert len(errors) == 2, diagnostics
    assert any("apis.demo.client_cert" in e and "cannot load the client certificate" in e for e in errors)
    assert any("apis.lone.client_key" in e and "needs `client_cert`" in e for e in errors)


def _tls_server(ca: trustme.CA, *, required: bool) -> _QuietServer:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    ca.configure_trust(context)
    context.verify_mode = ssl.CERT_REQUIRED if required else ssl.CERT_OPTIONAL  # optional: says what it was shown
    server = _QuietServer(("127.0.0.1", 0), _WhoAreYou)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.mark.parametrize("trusted", [False, True])
async def test_the_client_certificate_is_not_shown_to_an_operations_foreign_origin(
        ca: trustme.CA, tmp_path: Path, trusted: bool) -> None:
    """redteam47 withholds an api's credentials and headers from an operation whose own `servers:` name another
    origin, unless `apis.<name>.trusted_origins` names it; the client certificate was still presented there. Two
    TLS servers on 127.0.0.1 (two ports: two origins), the api's requiring a certificate."""
    from gateway.runtime import load_runtime

    own, other = _tls_server(ca, required=True), _tls_server(ca, required=False)
    try:
        own_url, other_url = (f"https://127.0.0.1:{s.server_address[1]}" for s in (own, other))
        answer = {"200": {"description": "ok", "content": {"application/json": {"schema": {"type": "object"}}}}}
        (tmp_path / "specs").mkdir()
        (tmp_path / "specs" / "demo.json").write_text(json.dumps({
            "openapi": "3.0.3", "info": {"title": "demo", "version": "1"}, "servers": [{"url": own_url}],
            "paths": {"/mine": {"get": {"operationId": "mine", "responses": answer}},
                      "/theirs": {"servers": [{"url": other_url}],
                                  "get": {"operationId": "theirs", "responses": answer}}}}))
        agents = _project(tmp_path, ca, own_url, cert=True)
        text = agents.read_text().replace(f"    base_url: {own_url}\n", "")  # the spec's servers: the api's origin
        agents.write_text(text + (f"    trusted_origins: ['{other_url}']\n" if trusted else ""))
        runtime = load_runtime(tmp_path / "specs", agents, use_cache=False)
        async with Executor(runtime.manifest, runtime.catalog) as executor:
            mine = await executor.execute(runtime.catalog.get("mine"), {}, timeout=10)
            theirs = await executor.execute(runtime.catalog.get("theirs"), {}, timeout=10)
            again = await executor.execute(runtime.catalog.get("mine"), {}, timeout=10)
    finally:
        for server in (own, other):
            server.shutdown()
            server.server_close()
    assert mine.ok and mine.body == {"client": "clerk@gateway.test"} and again.body == mine.body, mine.error
    assert theirs.ok, theirs.error
    assert theirs.body == {"client": "clerk@gateway.test" if trusted else None}
