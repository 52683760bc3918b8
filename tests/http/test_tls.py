"""TLS to upstreams: certificates are verified on the executor's pyreqwest client, and `apis.<name>.ca_file`
adds a private CA for one api (a real HTTPS server on 127.0.0.1 with a certificate from a throwaway CA)."""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import trustme
from executor_helpers import executor_for, make_tool

from gateway.config.credentials import ClientCredentialsAuth
from gateway.config.loader import load_manifest

pytestmark = pytest.mark.anyio


class _Hello(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._answer({"hello": "tls", "authorization": self.headers.get("Authorization")})

    def do_POST(self) -> None:  # noqa: N802 - an OAuth token endpoint
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._answer({"access_token": "tls-token", "token_type": "Bearer", "expires_in": 600})

    def _answer(self, document: dict[str, object]) -> None:
        body = json.dumps(document).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        return  # a handshake the client refuses (the point of one test) is not worth a traceback


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def https_url(ca: trustme.CA) -> Iterator[str]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    server = _QuietServer(("127.0.0.1", 0), _Hello)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"https://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


async def _get(url: str, **settings: object):  # type: ignore[no-untyped-def]
    tool = make_tool()
    executor = executor_for(url, tool, **settings)
    try:
        return await executor.execute(tool, {}, timeout=10)
    finally:
        await executor.aclose()


async def test_a_certificate_from_an_unknown_ca_is_refused(https_url: str) -> None:
    result = await _get(https_url)
    assert result.ok is False and result.error_type == "transport_error"
    assert "invalid peer certificate" in (result.error or "")


async def test_ca_file_trusts_a_private_ca_for_that_api(https_url: str, ca: trustme.CA, tmp_path: Path) -> None:
    bundle = tmp_path / "private-ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    result = await _get(https_url, ca_file=str(bundle))
    assert result.ok and result.status == 200 and result.body == {"hello": "tls", "authorization": None}


async def test_ca_file_also_trusts_the_private_ca_for_oauth_token_requests(
        https_url: str, ca: trustme.CA, tmp_path: Path) -> None:
    # Token requests go through the api's httpx client, not the executor's wire: the same trust store.
    bundle = tmp_path / "private-ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    oauth = ClientCredentialsAuth(token_url=f"{https_url}/token", client_id="i",
                       client_secret="s")
    result = await _get(https_url, ca_file=str(bundle), auth=[oauth])
    # The upstream got the token (the echo shows it, redacted on its way back to the model).
    assert result.ok and result.body == {"hello": "tls", "authorization": "Bearer [REDACTED]"}
    refused = await _get(https_url, auth=[oauth])  # without the CA, the token request is refused too
    assert refused.ok is False and "invalid peer certificate" in (refused.error or "")


def test_ca_file_is_relative_to_agents_yaml_and_checked_at_load(ca: trustme.CA, tmp_path: Path) -> None:
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    manifest_file = tmp_path / "agents.yaml"
    manifest_file.write_text("apis:\n  good: {ca_file: ca.pem}\n  bad:\n    ca_file: missing.pem\n"
                             "  junk: {ca_file: agents.yaml}\n")
    manifest, diagnostics = load_manifest(manifest_file)
    assert manifest.apis["good"].ca_file == str((tmp_path / "ca.pem").resolve())
    errors = {d.line: d.message for d in diagnostics if d.level == "error"}
    assert set(errors) == {4, 5}, diagnostics
    assert "apis.bad.ca_file" in str([d for d in diagnostics if d.line == 4][0])
    assert "missing.pem" in errors[4] and "No such file" in errors[4]
    assert "cannot load CA certificates" in errors[5]
