"""The maintained HTTP client under every upstream request: pyreqwest (Rust reqwest on hyper and rustls).

Why this library (the measurements are in bench/README.md): it pools keep-alive connections,
reads `HTTP_PROXY`/`HTTPS_PROXY`/`NO_PROXY` from the environment, verifies TLS against the system's trust store
(rustls-platform-verifier) plus an api's `ca_file`, presents an api's client certificate (mTLS), decodes gzip,
deflate, brotli and zstd as the body streams (so a reader that stops at its cap stops the decoding too), never
reuses a connection whose answer was malformed, and keeps one deadline from the wait for a pool slot to the
body's last byte.

This module builds one such client per api (`build_client`) and translates the library's errors into httpx's
exception classes at the boundary (`translate_error`), with a message that names the host and says whether
the request may have reached it. The rest of `gateway.http` (and the providers) catch httpx's classes only.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import httpx
from pyreqwest import exceptions as reqwest_errors
from pyreqwest.client import Client, ClientBuilder

USER_AGENT = "gateway/0.1"
CONNECT_TIMEOUT = 10.0
POOL_IDLE_SECONDS = 4.0
"""Idle connections are dropped before the 5 s after which uvicorn's and Node's servers close theirs."""
IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientOptions:
    """How one api's (or provider's) connections are made.

    Args:
        max_connections: requests in flight at once; more wait for a slot (within their deadline).
        ca_file: PEM certificates trusted besides the system's (a private CA).
        client_cert: PEM certificate (chain) presented to the server (mTLS).
        client_key: the PEM private key of `client_cert` (omitted when `client_cert` holds it too).
        read_timeout: seconds any one read (and the wait for a connection) may take, for clients whose
            requests carry no deadline of their own (an LLM's answer streams for as long as it streams).
        reuse_connections: keep idle connections for the next request (keep-alive). False for an upstream
            that sends answers nobody asked for: HTTP/1.1 pairs answers with requests by their order on a
            connection, so an unasked answer left on a kept connection would be read as the next request's
            (the library has no setting to detect one); a new connection per request costs a handshake each.
    """

    max_connections: int = 20
    ca_file: str | None = None
    client_cert: str | None = None
    client_key: str | None = None
    read_timeout: float | None = None
    reuse_connections: bool = True


def build_client(options: ClientOptions, *, pinned: tuple[str, str, int] | None = None) -> Client:
    """A pooled client that follows no redirect (the caller's policy decides) and keeps no cookie.

    `pinned`: (host name, address, port): that name connects to that address only, never looked up again
    (`gateway.http.resolving`)."""
    builder = (
        ClientBuilder()
        .follow_redirects(False)
        .referer(False)
        .user_agent(USER_AGENT)
        .max_connections(options.max_connections)
        # No idle connection kept: each request gets a connection of its own, closed after its answer.
        .pool_max_idle_per_host(options.max_connections if options.reuse_connections else 0)
        .pool_idle_timeout(timedelta(seconds=POOL_IDLE_SECONDS))
        .connect_timeout(timedelta(seconds=CONNECT_TIMEOUT))
    )
    if pinned is not None:
        builder = builder.resolve(*pinned)
    if options.read_timeout is not None:
        builder = builder.read_timeout(timedelta(seconds=options.read_timeout))
        builder = builder.pool_timeout(timedelta(seconds=options.read_timeout))
    if options.ca_file:
        builder = builder.add_root_certificate_pem(Path(options.ca_file).read_bytes())
    identity = client_identity(options.client_cert, options.client_key)
    if identity is not None:
        builder = builder.identity_pem(identity)
    return builder.build()


def client_identity(cert: str | None, key: str | None) -> bytes | None:
    """The PEM bytes reqwest wants for a client certificate: the key and the certificate chain together."""
    if not cert:
        return None
    pem = Path(cert).read_bytes()
    if key:
        pem = Path(key).read_bytes().rstrip(b"\n") + b"\n" + pem
    return pem


def host_of(url: str) -> str:
    """`host:port` of a URL, for messages (never its path, query or credentials)."""
    parts = urlsplit(url)
    host = parts.hostname or "?"
    shown = f"[{host}]" if ":" in host else host
    try:
        port = parts.port
    except ValueError:
        port = None
    return f"{shown}:{port}" if port else shown


def _causes(error: reqwest_errors.PyreqwestError) -> list[str]:
    details = getattr(error, "details", None)
    causes = details.get("causes") if isinstance(details, dict) else None
    return [str(cause.get("message") or "") for cause in causes or ()]


def translate_error(error: reqwest_errors.PyreqwestError, url: str, timeout: float | None = None) -> httpx.HTTPError:
    """httpx's exception for a pyreqwest error, naming the host; the message says whether the request may
    have run.

    The library's own classes don't tell: a connection closed after the request went out is a `ConnectError`
    and a silent server a `ConnectTimeoutError`. Its causes do: `client error (Connect)` (or a DNS or TCP
    connect error) means no connection was made, so nothing was sent.
    """
    host = host_of(url)
    causes = _causes(error)
    cause = causes[-1] if causes else error.message
    connecting = any(c in ("client error (Connect)", "tcp connect error", "dns error") for c in causes)
    within = f" within {timeout:g} s" if timeout is not None else ""
    if isinstance(error, reqwest_errors.PoolTimeoutError):
        return httpx.PoolTimeout(f"no free connection to {host}{within}; the request was not sent")
    if isinstance(error, reqwest_errors.RequestTimeoutError):
        if connecting:
            return httpx.ConnectTimeout(f"no connection to {host}{within}; the request was not sent")
        return httpx.ReadTimeout(f"no complete answer from {host}{within}; the request may have run")
    if isinstance(error, reqwest_errors.ConnectError) and connecting:
        return httpx.ConnectError(f"cannot connect to {host}: {cause}; the request was not sent")
    if isinstance(error, reqwest_errors.DecodeError):
        # The library's "decode" errors also cover a malformed answer and a body cut short.
        if any("reading a body" in c for c in causes):
            return httpx.RemoteProtocolError(f"the answer from {host} broke off: {cause}; the request may have run")
        if "error decoding response body" in causes:
            return httpx.DecodingError(f"the answer from {host} is not what its Content-Encoding says: {cause}")
        return httpx.RemoteProtocolError(f"the answer from {host} is malformed: {cause}; the request may have run")
    if isinstance(error, reqwest_errors.WriteError):
        return httpx.WriteError(f"the connection to {host} broke while sending: {cause}; the request may have run")
    if isinstance(error, reqwest_errors.ReadError):
        return httpx.ReadError(f"the connection to {host} broke: {cause}; the request may have run")
    if isinstance(error, reqwest_errors.BuilderError):
        return httpx.LocalProtocolError(f"the request to {host} can't be sent as built: {cause}")
    return httpx.RemoteProtocolError(f"the exchange with {host} failed: {cause}; the request may have run")
