"""A real OpenID provider on loopback for the identity tests: panva's oidc-provider under Node, configured by
tests/identity/provider/provider.mjs from a JSON file this module writes.

`.ci/run` installs it (`npm ci` in tests/identity/provider); without Node or the package the fixtures skip and say
why. Users sign in through the provider's own login and consent forms (its development interactions), driven over
HTTP by `sign_in`: the tokens are the provider's, never minted here.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import json
import secrets
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm
from shared_servers import free_port

PROVIDER_DIR = Path(__file__).resolve().parent / "provider"
REDIRECT_URI = "http://127.0.0.1:9/callback"
"""Where the test application's sign-ins are sent back: never fetched (the code is read off the redirect)."""
APP_CLIENT = "test-app"
"""A public client with PKCE, as an MCP client or a script signs a user in."""


def signing_key(kid: str | None = None) -> dict[str, Any]:
    """A fresh RS256 private JWK for the provider's keystore."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk: dict[str, Any] = RSAAlgorithm.to_jwk(key, as_dict=True)
    jwk.update(kid=kid or uuid.uuid4().hex[:12], alg="RS256", use="sig")
    return jwk


def require_provider() -> None:
    """Skip, saying why, unless Node.js runs the provider's packages (installed by `npm ci`)."""
    reason = _missing_provider()
    if reason is not None:
        pytest.skip(reason)


@functools.cache
def _missing_provider() -> str | None:
    node = shutil.which("node")
    if node is None:
        return "Node.js is not installed: the identity tests run panva's oidc-provider under it"
    if not (PROVIDER_DIR / "node_modules" / "oidc-provider").is_dir():
        return "oidc-provider is not installed: run `npm ci` in tests/identity/provider (.ci/run does)"
    # Installed is not enough: this Node must load them (an older Node than the packages support fails here).
    try:
        loaded = subprocess.run([node, "--input-type=module", "-e",
                                 "await import('oidc-provider'); await import('jose')"],
                                cwd=PROVIDER_DIR, capture_output=True, timeout=60)
    except subprocess.TimeoutExpired:
        return "Node.js took over a minute to load oidc-provider"
    if loaded.returncode != 0:
        errors = [line for line in loaded.stderr.decode(errors="replace").splitlines() if line.strip()]
        why = next((line for line in errors if "Error" in line), errors[-1] if errors else "no message")
        return f"Node.js cannot load oidc-provider from tests/identity/provider: {why.strip()[:300]}"
    return None


class OpenIDProvider:
    """oidc-provider on 127.0.0.1:<port>; `restart` keeps the port (and so the issuer).

    Args:
        resources: resource indicator -> {scope, ttl?, format?, audience?} (the APIs and the gateway it issues for).
        clients: extra oidc-provider client metadata besides the test application `APP_CLIENT`.
        not_before / client_ttl: per client id, `nbf` that many seconds ahead / access tokens that short-lived.
        users: account id -> {groups?, scopes?}.
        subject_audiences: audiences whose tokens the token exchange accepts as subject tokens.
        keys: the signing keys (the first signs); a fresh one by default.
        port: a fixed port (a second provider for the wrong-issuer case gets its own).
    """

    def __init__(self, *, resources: dict[str, dict[str, Any]], clients: list[dict[str, Any]] | None = None,
                 users: dict[str, dict[str, Any]] | None = None, subject_audiences: list[str] | None = None,
                 keys: list[dict[str, Any]] | None = None, not_before: dict[str, int] | None = None,
                 client_ttl: dict[str, int] | None = None, port: int | None = None) -> None:
        require_provider()
        self.port = port or free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.keys = keys or [signing_key()]
        self.folder = Path(tempfile.mkdtemp(prefix="gateway-oidc-"))
        self.config: dict[str, Any] = {
            "port": self.port,
            "resources": resources,
            "clients": [{"client_id": APP_CLIENT, "token_endpoint_auth_method": "none",
                         "redirect_uris": [REDIRECT_URI], "grant_types": ["authorization_code", "refresh_token"]},
                        *(clients or [])],
            "users": users or {},
            "exchange": {"subject_audiences": subject_audiences or []},
            "not_before": not_before or {},
            "client_ttl": client_ttl or {},
        }
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def token_url(self) -> str:
        return f"{self.issuer}/token"

    def start(self) -> OpenIDProvider:
        self.config["keys"] = self.keys
        path = self.folder / "config.json"
        path.write_text(json.dumps(self.config))
        log = open(self.folder / "provider.log", "ab")  # noqa: SIM115 - the process holds it
        self.process = subprocess.Popen(["node", str(PROVIDER_DIR / "provider.mjs"), str(path)],
                                        stdout=subprocess.PIPE, stderr=log, cwd=PROVIDER_DIR)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()  # the script prints one line once it listens (or dies)
        if not line.startswith(b"listening"):
            self.stop()
            raise RuntimeError(f"oidc-provider did not start: {(self.folder / 'provider.log').read_text()[-2000:]}")
        return self

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None

    def restart(self, *, keys: list[dict[str, Any]] | None = None) -> None:
        """Stop and start on the same port (new keys: a rotation; sessions and grants are gone)."""
        self.stop()
        if keys is not None:
            self.keys = keys
        self.start()

    def sign_in(self, user: str, *, resource: str, scope: str, client_id: str = APP_CLIENT,
                redirect_uri: str = REDIRECT_URI) -> dict[str, Any]:
        """`user` signs in at the provider's login form and consents; the token response for `resource`."""
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        state = secrets.token_urlsafe(12)
        query = {"client_id": client_id, "response_type": "code", "redirect_uri": redirect_uri, "scope": scope,
                 "resource": resource, "code_challenge": challenge, "code_challenge_method": "S256", "state": state}
        code = self.authorize(user, query, redirect_uri)
        with httpx.Client(timeout=10) as client:
            answer = client.post(self.token_url, data={
                "grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri,
                "code_verifier": verifier, "client_id": client_id, "resource": resource})
        answer.raise_for_status()
        tokens: dict[str, Any] = answer.json()
        return tokens

    def authorize(self, user: str, query: dict[str, str], redirect_uri: str) -> str:
        """Follow an authorization request through login and consent as `user`; the code it ends with."""
        return self.authorization_response(user, query, redirect_uri)["code"]

    def authorization_response(self, user: str, query: dict[str, str], redirect_uri: str) -> dict[str, str]:
        """The parameters the provider sends the user back with (`code`, `state`, `iss`) after `user` signed in
        at its login form and consented."""
        with httpx.Client(timeout=10, follow_redirects=False) as browser:
            url = f"{self.issuer}/auth"
            answer = browser.get(url, params=query)
            for _ in range(10):
                location = answer.headers.get("location")
                if location is None:
                    raise AssertionError(f"the provider answered {answer.status_code}: {answer.text[:500]}")
                location = urljoin(url, location)
                if location.startswith(redirect_uri):
                    params = {key: values[0] for key, values in parse_qs(urlsplit(location).query).items()}
                    if "code" not in params:
                        raise AssertionError(f"the provider refused: {params}")
                    return params
                if "/interaction/" in location:
                    page = browser.get(location)
                    prompt = "login" if 'name="login"' in page.text else "consent"
                    form = {"prompt": prompt, "login": user, "password": "any"}
                    answer = browser.post(location, data=form)
                else:
                    answer = browser.get(location)
                url = location
        raise AssertionError("the sign-in did not end in a redirect to the application")

    def token_for(self, user: str, *, audience: str, scope: str = "gateway") -> str:
        return str(self.sign_in(user, resource=audience, scope=scope)["access_token"])

    def client_credentials(self, client_id: str, secret: str, *, resource: str, scope: str) -> str:
        with httpx.Client(timeout=10) as client:
            answer = client.post(self.token_url, auth=(client_id, secret), data={
                "grant_type": "client_credentials", "resource": resource, "scope": scope})
        answer.raise_for_status()
        return str(answer.json()["access_token"])

    def public_keys(self) -> dict[str, Any]:
        with httpx.Client(timeout=10) as client:
            answer = client.get(f"{self.issuer}/jwks")
        answer.raise_for_status()
        keys: dict[str, Any] = answer.json()
        return keys


@contextlib.contextmanager
def running(provider: OpenIDProvider) -> Iterator[OpenIDProvider]:
    provider.start()
    try:
        yield provider
    finally:
        provider.stop()


def wait_until(predicate: Any, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.05)
