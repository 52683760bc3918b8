"""`apis.<name>.auth` of agents.yaml: one credential or a list, each a mapping told apart by its `type`.

A credential whose secrets all come out empty (`token: ${GITHUB_TOKEN:-}` with the variable unset) counts as
not configured: the operator gave the empty default on purpose (`ApiConfig` drops it). An `api_key` without
`name`/`in` takes them from the spec's only apiKey scheme, an `oauth2_client_credentials` without `token_url`
the spec's client-credentials flow (`fill_from_spec`, once the catalog is known).

`token_exchange` (RFC 8693, per user) and `user_oauth` (each user's own connection) are typed here so `validate`
and `schema` know them; the identity layer gives them their behaviour.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, model_validator

from .fields import HttpUrl, Names, Section, at_key, doc


def _type_is_required(schema: dict[str, Any]) -> None:
    """The tag has a default for Python callers (`BearerAuth(token=...)`), yet the file must write it."""
    schema["required"] = ["type", *[key for key in schema.get("required", []) if key != "type"]]


class _Credential(Section):
    model_config = ConfigDict(json_schema_extra=_type_is_required)

    def secrets(self) -> list[str]:
        """Every secret value this credential holds (for redaction)."""
        return []

    def unset(self) -> bool:
        """Whether every secret came out empty (an explicit empty default): no credential then."""
        return False


class BearerAuth(_Credential):
    """`Authorization: Bearer <token>` on every request."""

    type: Literal["bearer"] = doc("A static bearer token.", "bearer")
    token: str = doc("The token (write `${VAR}` to read it from the environment).")

    def secrets(self) -> list[str]:
        return [self.token] if self.token else []

    def unset(self) -> bool:
        return self.token == ""


class BasicAuth(_Credential):
    """HTTP basic authentication."""

    type: Literal["basic"] = doc("HTTP basic authentication.", "basic")
    username: str = doc("The user name (some APIs take the key here, with an empty password).")
    password: str | None = doc("The password; may be empty.", None)

    def secrets(self) -> list[str]:
        return [self.password] if self.password else []

    def unset(self) -> bool:
        return self.username == ""


class ApiKeyAuth(_Credential):
    """A key sent as a header, a query parameter or a cookie."""

    type: Literal["api_key"] = doc("An API key.", "api_key")
    location: Literal["header", "query", "cookie"] | None = doc(
        "Where the key goes (default: the spec's apiKey scheme, else header).", None, alias="in")
    name: str | None = doc("The header, query parameter or cookie name (default: the spec's apiKey scheme).", None)
    value: str = doc("The key (write `${VAR}`).")

    def secrets(self) -> list[str]:
        return [self.value] if self.value else []

    def unset(self) -> bool:
        return self.value == ""


class ClientCredentialsAuth(_Credential):
    """OAuth 2.0 client credentials: a token fetched from `token_url`, cached until it expires."""

    type: Literal["oauth2_client_credentials"] = doc("OAuth 2.0 client credentials.", "oauth2_client_credentials")
    token_url: HttpUrl | None = doc("The token endpoint (default: the spec's clientCredentials flow).", None)
    client_id: str = doc("The client id.")
    client_secret: str = doc("The client secret (write `${VAR}`).")
    scopes: Names = doc("Scopes asked for (sent space-separated).", default=[])

    def secrets(self) -> list[str]:
        return [self.client_secret] if self.client_secret else []

    def unset(self) -> bool:
        return self.client_id == "" and self.client_secret == ""


class TokenExchangeAuth(_Credential):
    """RFC 8693 token exchange: for each call, the caller's token is exchanged for one issued to that user for this
    api."""

    type: Literal["token_exchange"] = doc("Per-user token exchange (RFC 8693).", "token_exchange")
    token_url: HttpUrl = doc("The authorization server's token endpoint.")
    client_id: str = doc("The gateway's client id at that server.")
    client_secret: str = doc("The gateway's client secret (write `${VAR}`).")
    resource: str | None = doc("The api's resource indicator (RFC 8707); this or `audience`.", None)
    audience: str | None = doc("The api's logical name at the server; this or `resource`.", None)
    scope: str | None = doc("The scope asked for (space-separated).", None)

    @model_validator(mode="after")
    def _names_the_api(self) -> TokenExchangeAuth:
        if not self.resource and not self.audience:
            raise at_key("resource", "a token exchange needs `resource` or `audience` (what the token is for)")
        return self

    def secrets(self) -> list[str]:
        return [self.client_secret] if self.client_secret else []

    def unset(self) -> bool:
        return self.client_id == "" and self.client_secret == ""


class UserOAuth(_Credential):
    """Each user connects their own account once (authorization code with PKCE); their token is sent for them."""

    type: Literal["user_oauth"] = doc("Each user's own OAuth connection.", "user_oauth")
    authorization_url: HttpUrl | None = doc("The authorization endpoint (default: the spec's flow).", None)
    token_url: HttpUrl | None = doc("The token endpoint (default: the spec's flow).", None)
    client_id: str | None = doc("The gateway's client id at the api's authorization server.", None)
    client_secret: str | None = doc("The gateway's client secret (write `${VAR}`).", None)
    scopes: Names = doc("Scopes asked for.", default=[])
    redirect_uri: HttpUrl | None = doc("The gateway's `/connections/callback` as registered at the provider "
                                       "(default: under `gateway.auth.audience`, when that is the gateway's URL).",
                                       None)
    resource: str | None = doc("A resource indicator (RFC 8707) for the user's token, when the provider wants one.",
                               None)

    def secrets(self) -> list[str]:
        return [self.client_secret] if self.client_secret else []


AuthConfig = Annotated[BearerAuth | BasicAuth | ApiKeyAuth | ClientCredentialsAuth | TokenExchangeAuth | UserOAuth,
                       Field(discriminator="type")]
"""One credential of an api, told apart by `type`."""
AUTH_TYPES = ("bearer", "basic", "api_key", "oauth2_client_credentials", "token_exchange", "user_oauth")


def fill_from_spec(auth: list[Any], schemes: dict[str, dict[str, Any]],
                   report: Callable[[int, str], None]) -> None:
    """Complete each credential from the spec's security schemes; `report(index, message)` what is still missing."""
    for index, credential in enumerate(auth):
        if isinstance(credential, ApiKeyAuth):
            declared = [s for s in schemes.values() if isinstance(s, dict) and s.get("type") == "apiKey"]
            only = declared[0] if len(declared) == 1 else {}
            location = credential.location or only.get("in") or "header"
            credential.location = location if location in ("header", "query", "cookie") else "header"
            credential.name = credential.name or only.get("name")
            if credential.name is None:
                hint = "the spec declares no apiKey scheme" if not declared else \
                    "the spec declares several apiKey schemes"
                report(index, f"'name' is required: the header, query parameter or cookie name ({hint})")
        elif isinstance(credential, UserOAuth):
            credential.authorization_url = credential.authorization_url or _spec_flow_url(schemes, "authorizationUrl")
            credential.token_url = credential.token_url or _spec_flow_url(schemes, "tokenUrl")
            for key in ("authorization_url", "token_url", "client_id"):
                if getattr(credential, key) is None:
                    why = "" if key == "client_id" else " (the spec declares no authorization-code flow)"
                    report(index, f"'{key}' is required{why}")
        elif isinstance(credential, ClientCredentialsAuth) and credential.token_url is None:
            credential.token_url = _spec_token_url(schemes)
            if credential.token_url is None:
                report(index, "'token_url' is required (the spec declares no client-credentials flow)")


def _spec_flow_url(schemes: dict[str, dict[str, Any]], key: str) -> str | None:
    """`authorizationUrl` or `tokenUrl` of the spec's authorization-code flow (Swagger 2.0: `flow: accessCode`)."""
    for scheme in schemes.values():
        if not isinstance(scheme, dict) or scheme.get("type") != "oauth2":
            continue
        flows = scheme.get("flows") or {}
        flow = flows.get("authorizationCode") if isinstance(flows, dict) else None
        if isinstance(flow, dict) and isinstance(flow.get(key), str):
            return str(flow[key])
        if scheme.get("flow") == "accessCode" and isinstance(scheme.get(key), str):
            return str(scheme[key])
    return None


def _spec_token_url(schemes: dict[str, dict[str, Any]]) -> str | None:
    for scheme in schemes.values():
        if not isinstance(scheme, dict) or scheme.get("type") != "oauth2":
            continue
        flows = scheme.get("flows") or {}
        if isinstance(flows, dict) and isinstance(flows.get("clientCredentials"), dict):
            url = flows["clientCredentials"].get("tokenUrl")
            if isinstance(url, str):
                return url
        if scheme.get("flow") == "application" and isinstance(scheme.get("tokenUrl"), str):  # Swagger 2.0
            return str(scheme["tokenUrl"])
    return None
