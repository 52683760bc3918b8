"""The safety layer of a gateway that serves users: `Safeguards`, and the users' own connections.

`gateway mcp` opens a `ServingSafeguards`; `gateway serve` opens `gateway.server.supervision.Safety`, which extends
it with the HTTP half (client keys, wrong keys, the OAuth resource server, the routes and middleware). What it adds
to `Safeguards` is each user's own connection to the `user_oauth` apis (`gateway.identity.connections`):

- the key their tokens are stored encrypted with (`GATEWAY_CONNECTIONS_KEY`) is checked when the layer opens, so a
  bad key stops the start with a clear error, as a store that will not open does;
- the connections and the HTTP client their token requests go out on are built when first asked for: by a call's
  executor, which a generation builds at its first call under `gateway mcp` (importing them imports httpx, which
  nothing before the first listing needs), or at once by `Safety`.
"""

from __future__ import annotations

import logging
from functools import cached_property
from typing import TYPE_CHECKING, Any

from ..config.model import Manifest
from ..errors import ApiSetupError, ConfigError
from ..identity.sealing import cipher_from_environment
from ..store import Store
from .guards import Safeguards

if TYPE_CHECKING:
    import httpx

    from ..identity.connections import Connections, UserOAuthSettings

logger = logging.getLogger("gateway.safety")


class ServingSafeguards(Safeguards):
    def __init__(self, store: Store, manifest: Manifest, **options: Any) -> None:
        """The safety layer on `store` for the manifest (and its reloads), with users' connections.

        Parameters:
            store: approvals, audit rows and rate-limit buckets (users' connections too).
            manifest: the current agents.yaml.
            options: as `Safeguards` takes them.

        ConfigError when `GATEWAY_CONNECTIONS_KEY` holds no Fernet keys.
        """
        try:
            self._cipher = cipher_from_environment()
        except ApiSetupError as exc:
            raise ConfigError(str(exc)) from None
        self._connections_client: httpx.AsyncClient | None = None
        super().__init__(store, manifest, **options)

    @cached_property
    def connections(self) -> Connections:
        """Users' own connections to the `user_oauth` apis of the current manifest, built on first use."""
        from ..identity.connections import Connections

        assert self._manifest is not None  # set by `sync` in `__init__`
        connections = Connections(self.store, self._connections_http(), self._cipher,
                                  timeout=self._manifest.gateway.auth_server_timeout)
        connections.configure(self._user_oauth_apis(self._manifest))
        return connections

    def sync(self, manifest: Manifest) -> None:
        """Rebuild what depends on agents.yaml, when it changed (cheap to call on every request)."""
        changed = manifest is not self._manifest
        super().sync(manifest)
        if changed and "connections" in self.__dict__:  # built already: follows the reload (else built from it)
            self.connections.configure(self._user_oauth_apis(manifest))

    def _connections_http(self) -> httpx.AsyncClient:
        """The client users' token requests go out on: one of their own here (closed with the layer)."""
        from ..http.client import new_client

        self._connections_client = new_client()
        return self._connections_client

    def _audience(self, manifest: Manifest) -> str | None:
        """The gateway's resource identifier (`gateway.auth.audience`): the default callback's origin."""
        auth = manifest.gateway.auth
        return auth.audience if auth is not None else None

    def _user_oauth_apis(self, manifest: Manifest) -> dict[str, UserOAuthSettings]:
        """The `user_oauth` apis of the manifest; one that lacks a setting is logged and left out."""
        from ..identity.connections import CALLBACK_PATH, UserOAuthSettings

        audience = self._audience(manifest)
        default_redirect = audience.rstrip("/") + CALLBACK_PATH if audience and audience.startswith("http") else None
        apis: dict[str, UserOAuthSettings] = {}
        for name, api in manifest.apis.items():
            for auth in api.auth:
                if auth.type != "user_oauth":
                    continue
                redirect = auth.redirect_uri or default_redirect
                if not (auth.authorization_url and auth.token_url and auth.client_id and redirect):
                    logger.error("apis.%s.auth: user_oauth needs authorization_url, token_url, client_id and "
                                 "redirect_uri (or gateway.auth.audience as the gateway's URL)", name)
                    continue
                apis[name] = UserOAuthSettings(
                    api=name, authorization_url=auth.authorization_url, token_url=auth.token_url,
                    client_id=auth.client_id, client_secret=auth.client_secret, redirect_uri=redirect,
                    scopes=tuple(auth.scopes), resource=auth.resource)
        return apis

    async def aclose(self) -> None:
        if self._connections_client is not None:
            await self._connections_client.aclose()
        await super().aclose()
