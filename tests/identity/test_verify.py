"""The identity layer's parts against the real provider, in-process: discovery, introspection of opaque tokens,
claim rules, the scopes an operation asks for."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from identity_support import EXCHANGER, OPAQUE, new_provider
from oidc import OpenIDProvider, require_provider

from gateway.errors import AuthServerUnavailable, TokenRejected
from gateway.http.client import new_client
from gateway.identity.claims import ClaimRules
from gateway.identity.exchange import required_scopes
from gateway.identity.keys import IssuerKeys, discover
from gateway.identity.verify import Introspection, TokenVerifier

pytestmark = pytest.mark.anyio


@pytest.fixture
async def provider() -> AsyncIterator[OpenIDProvider]:
    require_provider()
    started = new_provider("http://gateway.test/").start()
    try:
        yield started
    finally:
        started.stop()


async def test_discovery_names_the_keys_and_endpoints(provider: OpenIDProvider) -> None:
    async with new_client() as http:
        metadata = await discover(http, provider.issuer + "/")  # a trailing slash in the configuration is fine
    assert metadata.issuer == provider.issuer
    assert metadata.jwks_uri == provider.issuer + "/jwks"
    assert metadata.introspection_endpoint == provider.issuer + "/token/introspection"


async def test_opaque_tokens_are_introspected(provider: OpenIDProvider) -> None:
    token = provider.token_for("alice", audience=OPAQUE)
    assert token.count(".") != 2  # opaque indeed
    async with new_client() as http:
        verifier = TokenVerifier(IssuerKeys(http, provider.issuer), OPAQUE,
                                 introspection=Introspection(url=None, client_id=EXCHANGER[0],
                                                             client_secret=EXCHANGER[1]))
        checked = await verifier.verify(token)
        assert checked.subject == "alice" and "gateway" in checked.scopes
        with pytest.raises(TokenRejected, match="not active"):
            await verifier.verify("made-up-opaque-token")
        other = TokenVerifier(IssuerKeys(http, provider.issuer), "http://gateway.test/",
                              introspection=Introspection(url=None, client_id=EXCHANGER[0],
                                                          client_secret=EXCHANGER[1]))
        with pytest.raises(TokenRejected, match="another audience"):
            await other.verify(token)
        assert (await verifier.verify(token)).subject == "alice"  # kept: answered without the provider
        provider.stop()
        assert (await verifier.verify(token)).subject == "alice"


async def test_an_unreachable_issuer_is_unavailable_not_a_rejection(provider: OpenIDProvider) -> None:
    token = provider.token_for("alice", audience="http://gateway.test/")
    provider.stop()
    async with new_client() as http:
        verifier = TokenVerifier(IssuerKeys(http, provider.issuer), "http://gateway.test/")
        with pytest.raises(TokenRejected, match="well-formed"):  # refused without asking anyone
            await verifier.verify("a.b.c")
        with pytest.raises(AuthServerUnavailable, match="unreachable"):
            await verifier.verify(token)


def test_claim_rules_match_values_and_lists_all_claims_first_client_wins() -> None:
    rules = ClaimRules([("admins", {"sub": "ann", "groups": ["ops"]}), ("eng", {"groups": ["eng", "qa"]}),
                        ("realm", {"realm_access.roles": "reader"}), ("none", {})])
    assert rules.client_for({"sub": "ann", "groups": ["ops", "eng"]}) == "admins"
    assert rules.client_for({"sub": "bob", "groups": ["ops", "eng"]}) == "eng"  # sub must match too for admins
    assert rules.client_for({"sub": "cy", "groups": "qa"}) == "eng"
    assert rules.client_for({"sub": "di", "realm_access": {"roles": ["reader"]}}) == "realm"
    assert rules.client_for({"sub": "ed", "groups": []}) is None


def test_required_scopes_come_from_the_first_oauth_alternative() -> None:
    schemes = {"key": {"type": "apiKey"}, "oauth": {"type": "oauth2"}, "oidc": {"type": "openIdConnect"}}
    assert required_scopes([{"key": []}, {"oauth": ["b", "a"], "oidc": ["c"]}], schemes) == ["a", "b", "c"]
    assert required_scopes([{"key": []}], schemes) == []
    assert required_scopes([], schemes) == []
