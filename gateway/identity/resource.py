"""The gateway as an OAuth 2.1 resource server: `gateway.auth` of agents.yaml.

```yaml
gateway:
  auth:
    issuer: https://login.example.com          # OIDC discovery (or RFC 8414) finds its keys
    audience: https://gateway.example.com       # this gateway's resource identifier: every token's `aud` names it
    jwks_uri: https://login.example.com/jwks    # optional: instead of discovery
    introspection: {client_id: gateway, client_secret: ${SECRET}}   # optional: opaque tokens (RFC 7662)
    scopes: [gateway]                           # optional: advertised in the protected-resource metadata only
    leeway: 30                                  # optional: seconds of clock skew on exp and nbf
clients:
  engineers: {agents: [triage], claims: {groups: eng}}
```

`ResourceServer.authenticate(token)` checks a bearer token and finds its client by the clients' `claims`
(`gateway.identity.claims`). `protected_resource_metadata` is the RFC 9728 document the doors publish at
`/.well-known/oauth-protected-resource` (and per MCP agent), and `challenge` the `WWW-Authenticate` value of a 401
that points a client at it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from ..config.settings import DEFAULT_KEYS_MAX_AGE
from ..errors import ConfigError, NoClient
from .claims import ClaimRules
from .keys import DEFAULT_TIMEOUT, IssuerKeys
from .verify import Introspection, TokenVerifier, VerifiedToken

METADATA_PATH = "/.well-known/oauth-protected-resource"


@dataclass(slots=True, frozen=True)
class ResourceSettings:
    """`gateway.auth`, checked."""

    issuer: str
    audience: str
    jwks_uri: str | None = None
    introspection: Introspection | None = None
    scopes: tuple[str, ...] = ()
    leeway: float = 30.0
    keys_max_age: float = DEFAULT_KEYS_MAX_AGE
    timeout: float = DEFAULT_TIMEOUT
    """`gateway.auth_server_timeout`: seconds each request to the issuer waits."""
    clients: tuple[tuple[str, tuple[tuple[str, tuple[str, ...]], ...]], ...] = field(default=(), compare=False)
    """(client, ((claim, values), ...)) in agents.yaml's order: who a token is."""

    @classmethod
    def from_manifest(cls, manifest: Any) -> ResourceSettings | None:
        """The manifest's `gateway.auth` (None when it has none); ConfigError naming a bad key."""
        raw: Any = manifest.gateway.auth
        if raw is None:
            return None
        clients = tuple((name, tuple((claim, tuple(values if isinstance(values, (list, tuple)) else [values]))
                                     for claim, values in (client.claims or {}).items()))
                        for name, client in manifest.clients.items() if client.claims)
        return cls.parse(raw, clients, timeout=manifest.gateway.auth_server_timeout)

    @classmethod
    def parse(cls, raw: Any, clients: tuple[Any, ...] = (), *, timeout: float = DEFAULT_TIMEOUT) -> ResourceSettings:
        def get(key: str) -> Any:
            return raw.get(key) if isinstance(raw, Mapping) else getattr(raw, key, None)

        if not isinstance(raw, Mapping) and not hasattr(raw, "issuer"):
            raise ConfigError("agents.yaml: gateway.auth: expected a mapping with `issuer` and `audience`")
        for key in ("issuer", "audience"):
            if not isinstance(get(key), str) or not get(key):
                raise ConfigError(f"agents.yaml: gateway.auth.{key}: required (a URL)")
        introspection = get("introspection")
        checked = None
        if introspection is not None:
            def part(key: str) -> Any:
                return introspection.get(key) if isinstance(introspection, Mapping) else \
                    getattr(introspection, key, None)

            if not part("client_id") or not part("client_secret"):
                raise ConfigError("agents.yaml: gateway.auth.introspection: `client_id` and `client_secret` are "
                                  "required")
            checked = Introspection(url=part("url"), client_id=str(part("client_id")),
                                    client_secret=str(part("client_secret")))
        leeway, max_age = get("leeway"), get("keys_max_age")
        return cls(issuer=str(get("issuer")), audience=str(get("audience")), jwks_uri=get("jwks_uri") or None,
                   introspection=checked, scopes=tuple(get("scopes") or ()),
                   leeway=float(leeway) if isinstance(leeway, (int, float)) else 30.0,
                   keys_max_age=float(max_age) if isinstance(max_age, (int, float)) else DEFAULT_KEYS_MAX_AGE,
                   timeout=timeout, clients=clients)


class ResourceServer:
    """Checks callers' tokens for one `gateway.auth` and tells which client each is.

    Args:
        settings: the checked `gateway.auth` (and the clients' claim rules).
        http: the client discovery, key and introspection requests go out on.
    """

    def __init__(self, settings: ResourceSettings, http: httpx.AsyncClient) -> None:
        self.settings = settings
        self.keys = IssuerKeys(http, settings.issuer, jwks_uri=settings.jwks_uri, timeout=settings.timeout,
                               max_age=settings.keys_max_age)
        self.verifier = TokenVerifier(self.keys, settings.audience, leeway=settings.leeway,
                                      introspection=settings.introspection)
        self.rules = ClaimRules((name, dict(claims)) for name, claims in settings.clients)

    def with_clients(self, settings: ResourceSettings) -> ResourceServer:
        """This server (its cached keys kept) for a reloaded agents.yaml with the same `gateway.auth`."""
        self.settings = settings
        self.rules = ClaimRules((name, dict(claims)) for name, claims in settings.clients)
        return self

    async def authenticate(self, token: str) -> tuple[str, VerifiedToken]:
        """(client name, checked token); TokenRejected, NoClient or AuthServerUnavailable."""
        verified = await self.verifier.verify(token)
        client = self.rules.client_for(verified.claims)
        if client is None:
            raise NoClient("The token is valid, but no client of this gateway matches its claims.")
        return client, verified

    def protected_resource_metadata(self) -> dict[str, Any]:
        """RFC 9728: where to sign in for this gateway, and what to ask for."""
        document: dict[str, Any] = {
            "resource": self.settings.audience,
            "authorization_servers": [self.settings.issuer],
            "bearer_methods_supported": ["header"],
            "resource_name": "gateway",
        }
        if self.settings.scopes:
            document["scopes_supported"] = list(self.settings.scopes)
        return document


def metadata_url(base_url: str, path: str = "") -> str:
    """The protected-resource metadata of `path` (RFC 9728 inserts the well-known part before the path)."""
    return base_url.rstrip("/") + METADATA_PATH + ("/" + path.strip("/") if path.strip("/") else "")


def challenge(metadata: str, error: str | None = None, description: str | None = None) -> str:
    """A `WWW-Authenticate` value (RFC 6750 / RFC 9728) pointing at the metadata."""
    parts = []
    if error:
        parts.append(f'error="{error}"')
    if description:
        parts.append('error_description="{}"'.format(description.replace("\\", "").replace('"', "'")))
    parts.append(f'resource_metadata="{metadata}"')
    return "Bearer " + ", ".join(parts)
