"""A gateway with `gateway.auth` in front of a real OpenID provider, and an api called with each user's own token.

The provider (tests/identity/oidc.py) issues the gateway's tokens (audience: the gateway's URL) and exchanges them
(RFC 8693) for tokens of the `repos` api (audience `REPOS`), whose upstream on loopback records what arrives.
Users: alice (group eng: may read and write repos), erin (eng, may only read), dave (eng, and the `leads` client by
his `sub`: an approver), bob (group sales: may only read), carol (no group any client maps).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import jwt
from oidc import OpenIDProvider, require_provider
from recording_server import Recorded, RecordingServer, Reply
from server_support import LenientLLM, free_socket, running

from gateway.runtime import RuntimeHolder, load_runtime
from gateway.server import create_app
from gateway.server.supervision import Safety

REPOS = "http://repos.test/"
"""The repos api's resource indicator at the provider (the audience of the tokens it receives)."""
OTHER = "http://other.test/"
OPAQUE = "http://opaque.test/"
"""A resource whose access tokens are opaque (checked by introspection)."""
TRACKER = "http://tracker.test/"
"""The tracker api's resource indicator: users connect their own account to it (`user_oauth`)."""
CONNECTOR = ("gateway-connector", "connector-secret")
"""The gateway's client at the provider for users' connections."""
EXCHANGER = ("gateway-exchanger", "exchanger-secret")
SHORT_APP = "short-app"
"""A public client whose access tokens live three seconds."""
FUTURE_APP = "future-app"
"""A public client whose access tokens are not valid for an hour (`nbf`)."""

TRACKER_SPEC = """\
openapi: 3.1.0
info: {title: Tracker, version: "1"}
servers: [{url: "http://tracker.invalid"}]
components:
  securitySchemes:
    oauth:
      type: oauth2
      flows:
        authorizationCode:
          authorizationUrl: "{issuer}/auth"
          tokenUrl: "{issuer}/token"
          scopes: {tickets: tickets}
security: [{oauth: [tickets]}]
paths:
  /tickets:
    get:
      operationId: listTickets
      responses:
        "200": {description: ok, content: {application/json: {schema: {type: array}}}}
"""

REPOS_SPEC = """\
openapi: 3.1.0
info: {title: Repos, version: "1"}
servers: [{url: "http://repos.invalid"}]
components:
  securitySchemes:
    oauth:
      type: oauth2
      flows:
        authorizationCode:
          authorizationUrl: "{issuer}/auth"
          tokenUrl: "{issuer}/token"
          scopes: {"repo:read": read, "repo:write": write}
paths:
  /repos/{name}:
    get:
      operationId: getRepo
      security: [{oauth: ["repo:read"]}]
      parameters: [{name: name, in: path, required: true, schema: {type: string}}]
      responses:
        "200": {description: ok, content: {application/json: {schema: {type: object}}}}
  /repos/{name}/issues:
    post:
      operationId: createIssue
      security: [{oauth: ["repo:write"]}]
      parameters: [{name: name, in: path, required: true, schema: {type: string}}]
      requestBody:
        required: true
        content: {application/json: {schema: {type: object, properties: {title: {type: string}}}}}
      responses:
        "201": {description: created, content: {application/json: {schema: {type: object}}}}
"""

AGENTS = """\
providers:
  openai: {{kind: openai, base_url: "{llm}/v1", api_key: test-key}}
apis:
  repos:
    base_url: "{upstream}/repos-api"
    auth: {{type: token_exchange, token_url: "{issuer}/token", client_id: {exchanger}, client_secret: {secret},
            resource: "{repos}"}}
  tracker:
    base_url: "{upstream}/tracker-api"
    auth: {{type: user_oauth, client_id: {connector}, client_secret: {connector_secret}, scopes: [tickets],
            resource: "{tracker}"}}
agents:
  coder: {{model: openai/gpt-test, tools: [{{api: repos}}]}}
  seller: {{model: openai/gpt-test, tools: [{{api: repos}}]}}
  planner: {{model: openai/gpt-test, tools: [{{api: tracker}}]}}
  careful: {{model: openai/gpt-test, tools: [{{api: repos}}, {{api: tracker}}], approval: always}}
clients:
  leads: {{agents: [coder, planner, careful], approver: true, claims: {{sub: dave}}}}
  engineers: {{agents: [coder, planner, careful], claims: {{groups: eng}}}}
  sales: {{agents: [seller, planner], claims: {{groups: [sales, marketing]}}}}
  ops: {{key: ops-key, agents: ["*"], admin: true}}
gateway:
  store: "{store}"
  auth: {{issuer: "{issuer}", audience: "{audience}", leeway: 0, scopes: [gateway]}}
"""


def new_provider(audience: str, *, gateway: str | None = None, **options: Any) -> OpenIDProvider:
    """The provider of these tests; `gateway`: the gateway's URL (its callback for users' connections)."""
    public = {"token_endpoint_auth_method": "none", "grant_types": ["authorization_code"],
              "redirect_uris": ["http://127.0.0.1:9/callback"]}
    return OpenIDProvider(
        resources={audience: {"scope": "gateway"}, REPOS: {"scope": "repo:read repo:write", "ttl": 300},
                   OTHER: {"scope": "other"}, TRACKER: {"scope": "tickets", "ttl": 4},
                   OPAQUE: {"scope": "gateway", "format": "opaque"}},
        clients=[{"client_id": EXCHANGER[0], "client_secret": EXCHANGER[1], "response_types": [],
                  "redirect_uris": [], "grant_types": ["urn:ietf:params:oauth:grant-type:token-exchange"]},
                 {**public, "client_id": SHORT_APP}, {**public, "client_id": FUTURE_APP},
                 {"client_id": CONNECTOR[0], "client_secret": CONNECTOR[1],
                  "grant_types": ["authorization_code", "refresh_token"],
                  "redirect_uris": [f"{gateway or audience.rstrip('/')}/connections/callback"]}],
        users={"alice": {"groups": ["eng"], "scopes": "repo:read repo:write"},
               "erin": {"groups": ["eng"], "scopes": "repo:read"},
               "dave": {"groups": ["eng"], "scopes": "repo:read"},
               "bob": {"groups": ["sales"], "scopes": "repo:read"},
               "carol": {"groups": ["visitors"]}},
        subject_audiences=[audience], client_ttl={SHORT_APP: 3, EXCHANGER[0]: 4}, not_before={FUTURE_APP: 3600},
        **options)


def route_repos(upstream: RecordingServer) -> None:
    def repos(request: Recorded) -> Reply:
        if request.method == "POST":
            return Reply(201, {"number": 1})
        return Reply(200, {"name": request.path.rsplit("/", 1)[-1]})

    upstream.route("/repos-api/", repos)
    upstream.route("/tracker-api/", Reply(200, [{"id": 1, "title": "crash"}]))


def write_project(folder: Path, *, llm: str, upstream: str, issuer: str, audience: str,
                  agents: str = AGENTS, store: str = "memory:") -> tuple[Path, Path]:
    specs = folder / "specs"
    specs.mkdir(parents=True, exist_ok=True)
    (specs / "repos.yaml").write_text(REPOS_SPEC.replace("{issuer}", issuer))
    (specs / "tracker.yaml").write_text(TRACKER_SPEC.replace("{issuer}", issuer))
    path = folder / "agents.yaml"
    path.write_text(agents.format(llm=llm, upstream=upstream, issuer=issuer, audience=audience, repos=REPOS,
                                  exchanger=EXCHANGER[0], secret=EXCHANGER[1], tracker=TRACKER,
                                  connector=CONNECTOR[0], connector_secret=CONNECTOR[1], store=store))
    return specs, path


@contextlib.contextmanager
def serving(folder: Path, sock: Any, **project: Any) -> Iterator[tuple[str, Safety]]:
    """The gateway with its safety layer (auth, audit) on `sock`, a real uvicorn in a thread."""
    specs, agents = write_project(folder, **project)
    runtime = load_runtime(specs, agents, use_cache=False)
    safety = Safety.open(runtime)
    app = create_app(RuntimeHolder(runtime), watch=False, **safety.app_options())
    with running(app, sock=sock) as url:
        yield url, safety


def reserve() -> tuple[Any, str]:
    """A bound socket for the gateway and its URL (the audience must be known before the provider starts)."""
    sock = free_socket()
    return sock, f"http://127.0.0.1:{sock.getsockname()[1]}"


def claims_of(token: str, provider: OpenIDProvider, audience: str) -> dict[str, Any]:
    """The claims of a token the provider issued, checked against its published keys (its signature, issuer and
    audience; not its expiry: the exchanged tokens live seconds, and a busy machine may read them later)."""
    keys = jwt.PyJWKSet.from_dict(provider.public_keys())
    kid = jwt.get_unverified_header(token)["kid"]
    key = next(k for k in keys.keys if k.key_id == kid)
    claims: dict[str, Any] = jwt.decode(token, key=key, algorithms=["RS256"], audience=audience,
                                        issuer=provider.issuer, options={"verify_exp": False})
    return claims


def bearer_of(request: Recorded) -> str:
    header = request.header("authorization") or ""
    assert header.startswith("Bearer "), header
    return header.removeprefix("Bearer ")


@contextlib.contextmanager
def signed_in(provider: OpenIDProvider, gateway: str, user: str) -> Iterator[httpx.Client]:
    """A browser signed in to the gateway's console as `user` (with an access token: how a user signs in there)."""
    with httpx.Client(timeout=20) as browser:
        token = provider.token_for(user, audience=gateway + "/")
        answer = browser.post(f"{gateway}/console/signin", json={"key": token})
        assert answer.status_code == 200, answer.text
        yield browser


def follow_link(provider: OpenIDProvider, browser: httpx.Client, user: str, link: str) -> httpx.Response:
    """`browser` opens a connect link: the gateway's start page. When it sends the browser on to the provider, `user`
    signs in and consents there and the browser comes back to the gateway's callback (that answer is returned);
    otherwise the start page's own answer (a refusal, or a redirect to the console's sign-in)."""
    assert "/console/connect?state=" in link, link  # the gateway's start page, never the provider's endpoint
    started = browser.get(link)
    location = started.headers.get("location", "")
    if not location.startswith(provider.issuer + "/auth?"):
        return started
    return return_from_provider(provider, browser, user, location)


def return_from_provider(provider: OpenIDProvider, browser: httpx.Client, user: str, location: str) -> httpx.Response:
    """`user` signs in and consents at the provider's authorization URL `location`; `browser` is sent back with the
    code to the gateway's callback (with whatever cookies it holds for it)."""
    query = {key: values[0] for key, values in parse_qs(urlsplit(location).query).items()}
    assert query["code_challenge_method"] == "S256" and query["client_id"] == CONNECTOR[0]
    callback = query["redirect_uri"]
    back = provider.authorization_response(user, query, callback)
    return browser.get(callback, params=back)


def connect_account(provider: OpenIDProvider, gateway: str, user: str, link: str) -> httpx.Response:
    """The user's own browser, signed in to the console at `gateway` as `user`: the connect link's start page, the
    provider's login and consent, back to the gateway's callback."""
    with signed_in(provider, gateway, user) as browser:
        return follow_link(provider, browser, user, link)


@contextlib.contextmanager
def started(folder: Path, repos: RecordingServer, model: LenientLLM, *, host: str | None = None) -> Iterator[Setup]:
    """The provider and a gateway in front of it. `host`: a name for the gateway's URL (its audience and callback)
    instead of 127.0.0.1, which agents.yaml then allows (a browser mapping that name to loopback sees two sites)."""
    require_provider()
    sock, url = reserve()
    named = url if host is None else url.replace("127.0.0.1", host)
    agents = AGENTS if host is None else AGENTS + f"  allowed_hosts: [{host}]\n"
    provider = new_provider(named + "/").start()
    try:
        with serving(folder, sock, llm=model.url, upstream=repos.url, issuer=provider.issuer, audience=named + "/",
                     agents=agents) as (served, safety):
            setup = Setup(served, provider, safety, repos, model)
            setup.audience = named + "/"
            yield setup
    finally:
        provider.stop()


class Setup:
    """A running provider and gateway: `url`, `provider`, `safety`, `upstream`, `llm`."""

    def __init__(self, url: str, provider: OpenIDProvider, safety: Any, upstream: RecordingServer,
                 llm: LenientLLM) -> None:
        self.url = url
        self.audience = url + "/"
        """The gateway's resource identifier: its URL as an MCP client spells it (a bare origin ends in /)."""
        self.provider = provider
        self.safety = safety
        self.upstream = upstream
        self.llm = llm

    def token(self, user: str, **options: Any) -> str:
        return self.provider.token_for(user, audience=self.audience, **options)
