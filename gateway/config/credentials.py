"""The `auth:` of an api in agents.yaml as `AuthConfig`s: one credential or a list, defaults from the spec.

A credential whose secrets are all empty strings (`token: ${GITHUB_TOKEN:-}` with the variable unset)
counts as not configured: the operator gave the empty default on purpose. An `api_key` without
`name`/`in` takes them from the spec's only apiKey scheme; an `oauth2_client_credentials` without
`token_url` takes the spec's client-credentials flow.
"""

from __future__ import annotations

from typing import Any, cast

from .checker import Checker
from .model import AuthConfig
from .yamlnodes import KeyPath

AUTH_KEYS = {
    "bearer": ("type", "token"),
    "basic": ("type", "username", "password"),
    "api_key": ("type", "in", "name", "value"),
    "oauth2_client_credentials": ("type", "token_url", "client_id", "client_secret", "scopes"),
    "token_exchange": ("type", "token_url", "client_id", "client_secret", "resource", "audience", "scope"),
    "user_oauth": ("type", "authorization_url", "token_url", "client_id", "client_secret", "scopes", "redirect_uri",
                   "resource"),
}
_AUTH_REQUIRED = {
    "bearer": ("token",),
    "basic": ("username",),  # an empty password is common (Stripe: the key is the username)
    "api_key": ("value",),
    "oauth2_client_credentials": ("client_id", "client_secret"),
    "token_exchange": ("token_url", "client_id", "client_secret"),
    "user_oauth": ("client_id",),
}


def read_auth(c: Checker, value: Any, path: KeyPath, schemes: dict[str, dict[str, Any]]) -> list[AuthConfig]:
    if value is None:
        return []
    entries: list[tuple[Any, KeyPath]]
    if isinstance(value, list):
        entries = [(item, (*path, index)) for index, item in enumerate(value)]
    else:
        entries = [(value, path)]
    out: list[AuthConfig] = []
    for item, item_path in entries:
        m = c.mapping(item, item_path)
        if m is None:
            continue
        kind = c.choice(m, item_path, "type", AUTH_KEYS)
        if kind is None:
            if "type" not in m:
                c.error(item_path, f"'type' is required: one of {', '.join(AUTH_KEYS)}")
            continue
        c.mapping(m, item_path, AUTH_KEYS[kind])
        if all(m.get(key) == "" for key in _AUTH_REQUIRED[kind]):
            continue  # `token: ${TOKEN:-}` with TOKEN unset: the operator chose "no credential" explicitly
        fields = {key: c.string(m, item_path, key, required=key in _AUTH_REQUIRED[kind])
                  for key in AUTH_KEYS[kind] if key != "scopes"}
        auth = AuthConfig(type=cast(Any, kind))
        if kind == "bearer":
            auth.token = fields["token"]
        elif kind == "basic":
            auth.username, auth.password = fields["username"], fields["password"]
        elif kind == "api_key":
            _fill_api_key(c, auth, fields, item_path, schemes)
        elif kind == "token_exchange":
            auth.token_url, auth.client_id, auth.client_secret = (fields["token_url"], fields["client_id"],
                                                                  fields["client_secret"])
            auth.resource, auth.audience, auth.scope = fields["resource"], fields["audience"], fields["scope"]
            if not auth.resource and not auth.audience:
                c.error(item_path, "a token exchange needs `resource` or `audience` (what the token is for)")
        elif kind == "user_oauth":
            auth.client_id, auth.client_secret = fields["client_id"], fields["client_secret"]
            auth.redirect_uri, auth.resource = fields["redirect_uri"], fields["resource"]
            auth.authorization_url = fields["authorization_url"] or _spec_flow_url(schemes, "authorizationUrl")
            auth.token_url = fields["token_url"] or _spec_flow_url(schemes, "tokenUrl")
            for key, value in (("authorization_url", auth.authorization_url), ("token_url", auth.token_url)):
                if value is None:
                    c.error(item_path, f"'{key}' is required (the spec declares no authorization-code flow)")
            auth.scopes = tuple(c.strings(m, item_path, "scopes") or ())
        else:
            auth.client_id, auth.client_secret = fields["client_id"], fields["client_secret"]
            auth.token_url = fields["token_url"] or _spec_token_url(schemes)
            if auth.token_url is None:
                c.error(item_path, "'token_url' is required (the spec declares no client-credentials flow)")
            auth.scopes = tuple(c.strings(m, item_path, "scopes") or ())
        out.append(auth)
    return out


def _fill_api_key(
    c: Checker, auth: AuthConfig, fields: dict[str, str | None], path: KeyPath, schemes: dict[str, dict[str, Any]]
) -> None:
    auth.value = fields["value"]
    declared = [s for s in schemes.values() if isinstance(s, dict) and s.get("type") == "apiKey"]
    location = fields["in"] or (declared[0].get("in") if len(declared) == 1 else None) or "header"
    if location not in ("header", "query", "cookie"):
        c.error((*path, "in"), f"{location!r} is not one of header, query, cookie")
        location = "header"
    auth.location = cast(Any, location)
    auth.name = fields["name"] or (declared[0].get("name") if len(declared) == 1 else None)
    if auth.name is None:
        hint = "the spec declares no apiKey scheme" if not declared else "the spec declares several apiKey schemes"
        c.error(path, f"'name' is required: the header, query parameter or cookie name ({hint})")


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
