"""The official MCP client signing its user in by itself (the OAuth provider of the `mcp` SDK), for the identity
tests."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
from identity_support import Setup
from mcp import Client
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

REDIRECT = "http://127.0.0.1:9/callback"


class MemoryStorage(TokenStorage):
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


@contextlib.asynccontextmanager
async def signed_in_mcp(setup: Setup, user: str, agent: str) -> AsyncIterator[tuple[Client, MemoryStorage]]:
    """The official MCP client on `agent`'s endpoint, signing `user` in by itself: its OAuth provider reads the
    401's protected-resource metadata, registers at the provider, and sends the user (here: their browser, driven
    over HTTP through the provider's login and consent forms) to sign in with PKCE and a resource indicator."""
    redirected: list[dict[str, str]] = []

    async def redirect_handler(url: str) -> None:
        query = {key: values[0] for key, values in parse_qs(urlsplit(url).query).items()}
        assert query["resource"] == setup.audience and query["code_challenge_method"] == "S256"
        redirected.append(await anyio.to_thread.run_sync(
            lambda: setup.provider.authorization_response(user, query, REDIRECT)))

    async def callback_handler() -> AuthorizationCodeResult:
        back = redirected[-1]
        return AuthorizationCodeResult(code=back["code"], state=back.get("state"), iss=back.get("iss"))

    storage = MemoryStorage()
    auth = OAuthClientProvider(
        server_url=f"{setup.url}/mcp/{agent}",
        client_metadata=OAuthClientMetadata(redirect_uris=[REDIRECT], grant_types=["authorization_code"],
                                            response_types=["code"], token_endpoint_auth_method="none",
                                            client_name="gateway test"),
        storage=storage, redirect_handler=redirect_handler, callback_handler=callback_handler)
    async with httpx2.AsyncClient(auth=auth, timeout=30) as http:
        async with Client(streamable_http_client(f"{setup.url}/mcp/{agent}", http_client=http)) as client:
            yield client, storage
