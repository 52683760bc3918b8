"""Tokens an attacker makes from a real one (redteam45): the provider's real token for a user, its claims kept,
re-signed or re-headed the ways JWT libraries have been fooled. Each must be refused on the chat door and the
MCP door alike, and the refusal must not quote it."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import time
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from identity_support import SHORT_APP, Setup
from jwt.algorithms import RSAAlgorithm
from oidc import signing_key

from gateway.safety.wrong_keys import BURST


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _parts(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    header, payload, _ = token.split(".")
    return (json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4))),
            json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))))


def _hs256(header: dict[str, Any], claims: dict[str, Any], secret: bytes) -> str:
    signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
    signature = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{_b64(signature)}"


def _forgeries(setup: Setup) -> dict[str, str]:
    real = setup.token("alice")
    header, claims = _parts(real)
    public_jwk = next(key for key in setup.provider.public_keys()["keys"] if key["kid"] == header["kid"])
    public = RSAAlgorithm.from_jwk(json.dumps(public_jwk))
    pem = public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    der = public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    mine = signing_key(kid=header["kid"])  # the attacker's own key, under the issuer's key id
    mine_private = RSAAlgorithm.from_jwk(json.dumps(mine))
    mine_public = {k: v for k, v in mine.items() if k in ("kty", "n", "e", "kid", "alg", "use")}
    forged: dict[str, str] = {}
    for alg in ("none", "None", "NONE"):
        forged[f"alg {alg}"] = f"{_b64(json.dumps({**header, 'alg': alg}).encode())}.{real.split('.')[1]}."
    hs = {**header, "alg": "HS256"}
    forged["HS256 with the public PEM"] = _hs256(hs, claims, pem)
    forged["HS256 with the public DER"] = _hs256(hs, claims, der)
    forged["HS256 with the public JWK"] = _hs256(hs, claims, json.dumps(public_jwk).encode())
    forged["HS256 with the modulus"] = _hs256(hs, claims, public_jwk["n"].encode())
    forged["own key under the issuer's kid"] = jwt.encode(claims, mine_private, algorithm="RS256",
                                                          headers={"kid": header["kid"]})
    forged["own key embedded (jwk)"] = jwt.encode(claims, mine_private, algorithm="RS256",
                                                  headers={"kid": "attacker", "jwk": mine_public})
    forged["own key by URL (jku)"] = jwt.encode(claims, mine_private, algorithm="RS256",
                                                headers={"kid": "attacker", "jku": setup.url + "/x.json"})
    forged["kid a path"] = jwt.encode(claims, mine_private, algorithm="RS256",
                                      headers={"kid": "../../../../dev/null"})
    forged["PS256 under an RS256 key"] = jwt.encode(claims, mine_private, algorithm="PS256",
                                                    headers={"kid": header["kid"]})
    return forged


@pytest.mark.parametrize("door", ["agents", "mcp"])
def test_forged_tokens_are_refused_on_every_door(setup: Setup, door: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="gateway.auth")
    forged = _forgeries(setup)
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}}
    for number, (name, token) in enumerate(forged.items()):
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
        # each from an address of its own: wrong tokens are slowed per address, and every one must be judged
        transport = httpx.HTTPTransport(local_address=f"127.0.0.{40 + number}")
        with httpx.Client(base_url=setup.url, transport=transport, timeout=10) as attacker:
            answer = attacker.get("/agents", headers=headers) if door == "agents" else \
                attacker.post("/mcp/coder", json=initialize, headers=headers)
        assert answer.status_code == 401, (name, answer.status_code, answer.text[:300])
        assert token not in answer.text and token not in answer.headers.get("www-authenticate", ""), name
    # each refusal logged with the address it came from (who is trying tokens, with or without the access log)
    refused = [r.getMessage() for r in caplog.records if r.getMessage().startswith("refused a token")]
    assert len(refused) == len(forged) and refused[0].startswith(
        f"refused a token from 127.0.0.40 for {'/agents' if door == 'agents' else '/mcp/coder'}: "), refused
    # and the real one still works
    real = setup.token("alice")
    assert httpx.get(setup.url + "/agents", headers={"Authorization": f"Bearer {real}"}, timeout=10).status_code == 200


def _console(setup: Setup, address: str, token: str, count: int) -> list[int]:
    """`count` console pages asked from `address` with `token` as the console's cookie (what its sign-in sets)."""
    transport = httpx.HTTPTransport(local_address=address)
    with httpx.Client(base_url=setup.url, transport=transport, timeout=10) as browser:
        return [browser.get("/console/agents", headers={"Cookie": f"gateway_console=t.{token}"}).status_code
                for _ in range(count)]


def test_a_made_up_token_in_the_consoles_cookie_is_a_wrong_key(setup: Setup) -> None:
    """redteam45: the doors count a refused token against its address (10 at once, then 429 before any is looked
    at), but the console's cookie carries the token too, and a refused one there only sent the browser to sign in:
    unlimited guesses, each one checked (with introspection, each one a request to the identity provider)."""
    header, payload, signature = setup.token("alice").split(".")
    forged = f"{header}.{payload}.{signature[:-8]}AAAAAAAA"
    codes = _console(setup, "127.0.0.70", forged, BURST + 1)
    assert codes == [303] * BURST + [429], codes
    # the address is refused before its token is looked at, on the console and on the doors
    transport = httpx.HTTPTransport(local_address="127.0.0.70")
    with httpx.Client(base_url=setup.url, transport=transport, timeout=10) as same:
        assert same.get("/agents", headers={"Authorization": f"Bearer {setup.token('alice')}"}).status_code == 429
    # another address with alice's real token reads the console
    assert _console(setup, "127.0.0.71", setup.token("alice"), 1) == [200]


def test_an_expired_token_in_the_consoles_cookie_is_no_guess(setup: Setup) -> None:
    # A user whose token expired while the console was open: its pages and fetches send the user to sign in again
    # as often as they are asked, and must not lock out the user's address (an office behind one).
    tokens = setup.provider.sign_in("alice", resource=setup.audience, scope="gateway", client_id=SHORT_APP)
    time.sleep(3.5)  # the token lives three seconds, and the gateway allows no leeway here
    assert _console(setup, "127.0.0.72", tokens["access_token"], BURST + 3) == [303] * (BURST + 3)


def test_a_retired_client_key_is_told_it_is_no_key_nor_token(setup: Setup) -> None:
    """With sign-in on, a bearer that is no client key is tried as a token: a caller still on a rotated-out key read
    only that its key "is not a JWT access token"."""
    transport = httpx.HTTPTransport(local_address="127.0.0.60")
    with httpx.Client(base_url=setup.url, transport=transport, timeout=10) as caller:
        answer = caller.get("/agents", headers={"Authorization": "Bearer ck-rotated-out-0123456789"})
    assert answer.status_code == 401
    assert "neither a client key of this gateway nor a JWT access token" in answer.json()["error"]["message"]
