"""The `gateway:` section of agents.yaml: settings of the gateway itself, typed like every other section.

```yaml
gateway:
  store: .gateway/state.db        # a SQLite path (relative to agents.yaml's folder), sqlite:///path, memory:,
                                  # or postgresql://... (several instances)
  redis: redis://127.0.0.1:6379/0 # rate-limit buckets, breakers, budgets, runs counted across instances
  shared_state_timeout: 2         # seconds a request waits for PostgreSQL or Redis to answer; then 503
  auth_server_timeout: 3          # seconds a request waits for an authorization server (keys, token exchange,
                                  # a user's token refresh); then 503 auth_unavailable
  audit_retention_days: 30        # 0 or null keeps rows forever
  conversation_retention_days: 30 # stored Responses answers, handed-back turns, finished approval runs
  max_stored_conversations_per_client: 10000 # of those, one client's; one more removes its oldest (null: no cap)
  rate_limits: {tool: 120/min, tools: {createIssue: {rate: 1/s, burst: 5}}}
  breaker: {failures: 5, reset_after: 30}
  max_concurrency: 16             # per api (apis.<name>.max_concurrency overrides)
  max_concurrency_per_client: 4   # of those, the most one client holds at once (default: no cap)
  max_waiting_calls_per_client: 100 # calls of one client waiting for one api's slots; one more: 429 (null: no cap)
  max_runs_per_client: 8          # chat runs one client has in flight at once; one more: 429 (default: no cap)
  max_code_workers_per_client: 4  # of the 16 code-mode sandboxes, the most one client holds (default: no cap)
  max_delegation_depth: 3
  tool_budget: 4000               # tokens one tool's view may take
  tool_definitions_budget: 20000  # tokens of tool definitions one request may carry
  allowed_hosts: [gw.example.com] # Host names the HTTP doors answer to besides loopback (gateway.server.hosts)
  allowed_origins: []             # browser origins allowed to call state-changing doors
  mcp: {...}                      # session caps and idle timeout (gateway.config.mcp_limits)
  search_embeddings: {...}        # tool search blends BM25 with embeddings (gateway.config.embeddings_endpoint)
  auth: {issuer, audience}        # every door an OAuth 2.1 resource server
```

Parsed once with the rest of the file; the safety layer, the store, tool search, the host policy, the MCP door
and the delegation check read `Manifest.gateway`.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import PlainValidator, WithJsonSchema, field_validator

from .checker import suggest
from .embeddings_endpoint import SearchEmbeddings
from .fields import REDIS_URL, Count, HttpUrl, Names, NonNegative, Seconds, Section, TokenBudget, at_key, defaults, doc
from .mcp_limits import SessionLimits

DEFAULT_STORE = ".gateway/state.db"
POSTGRES_SCHEMES = ("postgresql://", "postgres://")
"""A `gateway.store` that starts with one of these is PostgreSQL."""
POSTGRES_MODULES = ("psycopg", "psycopg_pool")
REDIS_MODULES = ("redis",)
INSTALL_SHARED = "pip install 'gateway[shared]'"

DEFAULT_RETENTION_DAYS = 30.0
DEFAULT_SHARED_STATE_TIMEOUT = 2.0
"""Seconds a request waits for the PostgreSQL store or Redis to answer (`gateway.shared_state_timeout`): long for a
part that answers (milliseconds), short enough that a caller hears "did not answer" before it gives up itself."""
DEFAULT_AUTH_SERVER_TIMEOUT = 3.0
"""Seconds a request waits for an authorization server (`gateway.auth_server_timeout`): its keys, metadata and token
endpoint answer in milliseconds; past this the caller hears that it did not answer instead of waiting on."""
DEFAULT_KEYS_MAX_AGE = 300.0
"""Seconds the issuer's signing keys are used before they are fetched again (`gateway.auth.keys_max_age`), as
PyJWT's own `PyJWKClient` keeps them: a withdrawn key stops working within that, for one request in five minutes."""
DEFAULT_MAX_CONCURRENCY = 16
DEFAULT_MAX_DELEGATION_DEPTH = 3
"""How many agents deep a delegation chain may go (lead -> sub -> sub-sub is 2)."""
DEFAULT_MAX_PENDING_APPROVALS = 100
DEFAULT_MAX_WAITING_CALLS = 100
"""Calls one client may have waiting at once for one api's slots: several times `max_concurrency`'s default 16 (a
burst waits its turn), far fewer than a flood that makes every hand-over and every waiter's wake-up its own."""
DEFAULT_MAX_STORED_CONVERSATIONS = 10_000
"""Calls one client may have waiting for approval: more than a reviewer works through in a sitting, far fewer than
fill an approver's listing of 1,000 (redteam44: one client's 1,000 hid every other client's)."""
CODE_WORKERS = 16
"""Code-mode sandboxes one process runs at once (`gateway.codemode.sandbox`: one worker process each)."""

_WINDOWS = {"s": 1.0, "sec": 1.0, "second": 1.0, "m": 60.0, "min": 60.0, "minute": 60.0, "h": 3600.0,
            "hour": 3600.0}
_LIMIT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*/\s*([a-z]+)\s*$")
_LIMIT_SCHEMA = r"^\s*\d+(\.\d+)?\s*/\s*(s|sec|second|m|min|minute|h|hour)\s*$"


@dataclass(slots=True, frozen=True)
class Limit:
    """A token bucket: `rate` tokens per second, at most `burst` at once."""

    rate: float
    burst: float


def parse_limit(value: Any) -> Limit:
    """`"60/min"` or `{rate: "1/s", burst: 5}` as a Limit; ValueError saying what was expected."""
    if isinstance(value, dict):
        unknown = sorted(set(value) - {"rate", "burst"})
        if unknown:
            raise at_key(unknown[0], f"unknown key {unknown[0]!r}" + suggest(unknown[0], ("rate", "burst")))
        if "rate" not in value:
            raise ValueError("needs `rate` (e.g. 10/s)")
        base = parse_limit(value["rate"])
        burst = value.get("burst", base.burst)
        if not isinstance(burst, int | float) or isinstance(burst, bool) or burst < 1:
            raise ValueError(f"`burst` must be a number >= 1, got {burst!r}")
        return Limit(rate=base.rate, burst=float(burst))
    match = _LIMIT.match(value) if isinstance(value, str) else None
    if match is None or match.group(2) not in _WINDOWS or float(match.group(1)) <= 0:
        raise ValueError(f"expected a limit like 60/min or 10/s, got {value!r}")
    count = float(match.group(1))
    return Limit(rate=count / _WINDOWS[match.group(2)], burst=max(1.0, count))


RateLimit = Annotated[Limit, PlainValidator(parse_limit), WithJsonSchema({"anyOf": [
    {"type": "string", "pattern": _LIMIT_SCHEMA, "description": "calls per window: `60/min`, `10/s`, `1000/hour`"},
    {"type": "object", "additionalProperties": False, "required": ["rate"], "properties": {
        "rate": {"type": "string", "pattern": _LIMIT_SCHEMA, "description": "calls per window, e.g. `1/s`"},
        "burst": {"type": "number", "minimum": 1, "description": "calls at once (default: the rate's count)"}}},
]})]
"""`60/min`, `10/s`, or `{rate: 1/s, burst: 5}`."""


def missing_extra(what: str, modules: tuple[str, ...]) -> str | None:
    """Why `what` cannot run here (None: it can): modules of the `shared` extra that are not installed."""
    missing = [module for module in modules if importlib.util.find_spec(module) is None]
    if not missing:
        return None
    verb = "is" if len(missing) == 1 else "are"
    return f"{what} needs {' and '.join(missing)}, which {verb} not installed: {INSTALL_SHARED}"


class RateLimits(Section):
    """Token buckets per client key, per agent and per tool; none set, no limit."""

    client: RateLimit | None = doc("Each client key's limit (unless `clients` names it).", None)
    agent: RateLimit | None = doc("Each agent's limit (unless `agents` names it).", None)
    tool: RateLimit | None = doc("Each tool's limit (unless `tools` names it).", None)
    clients: dict[str, RateLimit] = doc("Limits of single clients, by name.", default={})
    agents: dict[str, RateLimit] = doc("Limits of single agents, by name.", default={})
    tools: dict[str, RateLimit] = doc("Limits of single tools, by tool name or operationId.", default={})

    def __bool__(self) -> bool:
        return any((self.client, self.agent, self.tool, self.clients, self.agents, self.tools))


class Breaker(Section):
    """Each api's circuit breaker."""

    failures: Count = doc("Failures in a row that pause the api.", 5)
    reset_after: Seconds = doc("Seconds the api stays paused before one call may try again.", 30.0)


@dataclass(slots=True, frozen=True)
class GuardSettings:
    """What the breaker-and-concurrency stage reads: `gateway.breaker`, `gateway.max_concurrency`,
    `gateway.max_concurrency_per_client` and `gateway.max_waiting_calls_per_client` together."""

    failures: int = 5
    reset_after: float = 30.0
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY
    max_concurrency_per_client: int | None = None
    max_waiting_calls_per_client: int | None = DEFAULT_MAX_WAITING_CALLS


class Introspection(Section):
    """Token introspection (RFC 7662) for opaque access tokens."""

    url: HttpUrl | None = doc("The introspection endpoint (default: the issuer's, from its metadata).", None)
    client_id: str = doc("The gateway's client id there.")
    client_secret: str = doc("The gateway's client secret (write `${VAR}`).")


class GatewayAuth(Section):
    """Every door an OAuth 2.1 resource server: bearer tokens of this issuer for this audience."""

    issuer: HttpUrl = doc("The authorization server (OIDC discovery finds its keys).")
    audience: str = doc("This gateway's resource identifier, the tokens' required audience (RFC 8707).")
    jwks_uri: HttpUrl | None = doc("The issuer's signing keys, when discovery does not find them.", None)
    introspection: Introspection | None = doc("Introspection for opaque tokens.", None)
    scopes: Names = doc("Scopes the gateway names in its protected-resource metadata (`scopes_supported`: what "
                        "MCP clients ask the provider for); advertised only: a token's `scope` is not checked.",
                        default=[])
    leeway: float = doc("Seconds of clock skew allowed on a token's expiry and not-before.", 30.0, ge=0)
    keys_max_age: float = doc(
        "Seconds the issuer's signing keys are used once fetched; past that they are fetched again at the next "
        "token (checked meanwhile with the keys held, which are kept if the issuer does not answer), so a key the "
        "issuer withdrew stops working within this time, and so do the tokens it signed that were checked before.",
        DEFAULT_KEYS_MAX_AGE, gt=0)


def _retention(days: float | None) -> float | None:
    return None if days is None or days == 0 else days


class GatewaySettings(Section):
    """Gateway-wide settings: state, limits, budgets of what a model is offered, the doors' policies."""

    store: str | None = doc("Where approvals, audit rows, runs and rate-limit buckets live: a SQLite path "
                            "(relative to agents.yaml's folder; default `.gateway/state.db`), `sqlite:///path`, "
                            "`memory:`, or `postgresql://...` shared by several instances. Read at start.", None)
    redis: str | None = doc("`redis://`, `rediss://` or `unix://`: rate-limit buckets, breakers, concurrency, "
                            "budgets and each client's chat runs and sandboxes counted across instances. Empty: "
                            "none. Read at start.", None,
                            pattern=REDIS_URL)
    shared_state_timeout: Seconds = doc(
        "Seconds a request waits for the PostgreSQL store or Redis to answer, each time it asks one of them; past "
        "that it is refused with 503 naming the part (\"Redis at redis://... did not answer within 2 s\"; "
        "`store_unavailable`, or `audit_unavailable` when the audit's store cannot record the call): the tool call "
        "is not sent, and in a chat the model reads the error as its tool's result. Nothing to restart once the part "
        "answers again. Read at start.", DEFAULT_SHARED_STATE_TIMEOUT)
    auth_server_timeout: Seconds = doc(
        "Seconds a request waits for an authorization server to answer, each time it asks: the issuer's discovery "
        "and key set when a token names a key not fetched yet, introspection, a token exchange, a user's token "
        "refresh. Past that, or when the server refuses the connection or fails, the caller gets 503 "
        "`auth_unavailable` (\"the authorization server did not answer within 3 s ...\"; in a chat the model reads "
        "it as its tool's result) and nothing is sent upstream; for the next 2 s other callers needing the same "
        "answer are told at once, then the server is asked again (nothing to restart). A key set, discovery or "
        "refresh request still under way when its callers stop waiting goes on, up to three times this, and its "
        "answer serves the callers after it. Read at start.",
        DEFAULT_AUTH_SERVER_TIMEOUT)
    audit_retention_days: NonNegative | None = doc("Days audit rows are kept; 0 or null: forever.",
                                                  DEFAULT_RETENTION_DAYS)
    conversation_retention_days: NonNegative | None = doc(
        "Days stored Responses answers (`previous_response_id`), handed-back turns and finished approval runs are "
        "kept; 0 or null: forever. Paused runs stay until decided.", DEFAULT_RETENTION_DAYS)
    rate_limits: RateLimits = doc("Token buckets per client, agent and tool.", default_factory=defaults(RateLimits))
    breaker: Breaker = doc("Each api's circuit breaker.", default_factory=defaults(Breaker))
    max_concurrency: Count = doc("Calls in flight per api (apis.<name>.max_concurrency overrides).",
                                 DEFAULT_MAX_CONCURRENCY)
    max_concurrency_per_client: Count | None = doc(
        "The most of an api's concurrent calls one client holds at once (callers without a key count as one "
        "client; apis.<name>.max_concurrency_per_client overrides). Default: no cap, every slot may go to one "
        "client while nobody else waits; either way a freed slot goes first to the waiting client holding the "
        "fewest.", None)
    max_waiting_calls_per_client: Count | None = doc(
        "Calls of one client waiting at once for one api's concurrent calls (all taken, or its "
        "`max_concurrency_per_client`): per process, or with `redis` across every instance (callers without a key "
        "count as one client). One more is refused at once, unsent and unqueued (`rate_limited`: 429 on the direct "
        "door, the tool's result in a chat, the tool's error over MCP) and audited. Null: no cap.",
        DEFAULT_MAX_WAITING_CALLS)
    max_runs_per_client: Count | None = doc(
        "Chat runs (chat completions, Responses, the console's chat; a delegation called on the direct or MCP "
        "door, which runs the sub-agent's loop) one client has in flight at once: per "
        "process, or with `redis` across every instance and worker (each run's place renewed while the run "
        "lives, however long; a killed instance's come back 30 s after it died at most); one more is refused "
        "with 429 and Retry-After (callers without a key count as one client). A run resumed after an approval "
        "counts as one of its owner's runs while it goes on (whoever decided); "
        "past the share it is not resumed: the decision is taken back (503 approval_reopened), to be made again. "
        "Default: no cap.", None)
    max_code_workers_per_client: Count | None = doc(
        f"Of the process's {CODE_WORKERS} code-mode sandboxes, the most one client's `run_code` scripts hold at "
        "once: per process, or with `redis` across every instance and worker (as `max_runs_per_client`'s places); "
        "one more script is refused (`rate_limited`, saying when to try again). Default: no cap.", None)
    max_pending_approvals_per_client: Count | None = doc(
        "Calls of one client waiting for a human's approval at once (direct and MCP calls, scripts, a chat's "
        "paused calls; callers without a key count as one client). One more is refused unsent and unqueued "
        "(`rate_limited`: the model reads it as the tool's result; 429 on the direct door), so one client's flood "
        "of waiting calls cannot bury another's. Null: no cap.", DEFAULT_MAX_PENDING_APPROVALS)
    max_stored_conversations_per_client: Count | None = doc(
        "Stored conversations one client keeps (with `auth`: one signed-in user; callers without a key count as "
        "one client): Responses answers kept with `store` (the default), handed-back turns and resumed runs' "
        "answers. Saving one more removes that client's oldest (a `previous_response_id` naming it is then "
        "answered 404 `response_not_found`, as one past `conversation_retention_days`), and the removal is an "
        "audit row (kind `conversation`, status `evicted`). Null: no cap.", DEFAULT_MAX_STORED_CONVERSATIONS)
    max_delegation_depth: Count = doc("How many agents deep a delegation chain may go.", DEFAULT_MAX_DELEGATION_DEPTH)
    tool_budget: TokenBudget | None = doc("Tokens one tool's view may take (what the model is shown of its schema; "
                                  "default 4000).", None)
    tool_definitions_budget: TokenBudget | None = doc("Tokens of tool definitions one request may carry, counted as "
                                              "the request carries them (the provider's format; MCP: the listing's); "
                                              "tool search turns on above it (default 20000).", None)
    allowed_hosts: Names = doc("`Host` names the HTTP doors answer to besides loopback (`gw.example.com`, "
                               "`name:port`, `*.example.com`, `*` for any).", default=[])
    allowed_origins: Names = doc("Browser origins (`https://console.example.com`) allowed to make state-changing "
                                 "requests besides the gateway's own.", default=[])
    mcp: SessionLimits = doc("The MCP door's session limits. Read at start.",
                             default_factory=defaults(SessionLimits))
    search_embeddings: SearchEmbeddings | None = doc(
        "An embeddings endpoint tool search blends with BM25; absent: BM25 alone, nothing sent anywhere.", None)
    auth: GatewayAuth | None = doc("OAuth 2.1 resource server on every door (tokens map onto `clients` by "
                                   "their `claims`).", None)

    @field_validator("audit_retention_days", "conversation_retention_days")
    @classmethod
    def _zero_keeps_forever(cls, days: float | None) -> float | None:
        return _retention(days)

    @field_validator("redis")
    @classmethod
    def _empty_is_none(cls, url: str | None) -> str | None:
        return url or None  # `${GATEWAY_REDIS:-}` unset: no Redis

    @field_validator("allowed_hosts", "allowed_origins")
    @classmethod
    def _no_blank_names(cls, names: list[str]) -> list[str]:
        if any(not name.strip() for name in names):
            raise ValueError("expected host names, got an empty one")
        return names

    @property
    def guard(self) -> GuardSettings:
        return GuardSettings(failures=self.breaker.failures, reset_after=self.breaker.reset_after,
                             max_concurrency=self.max_concurrency,
                             max_concurrency_per_client=self.max_concurrency_per_client,
                             max_waiting_calls_per_client=self.max_waiting_calls_per_client)

    def store_location(self, base_dir: Path | None = None) -> str:
        return store_location(self.store, base_dir)


READ_AT_START = ("store", "redis", "shared_state_timeout", "auth_server_timeout", "mcp")
"""`gateway:` settings a serving process reads once, when it starts (its store and Redis connections, their timeout,
the identity provider's; the MCP door's session ledger, when its first request comes): a reload takes the rest of
agents.yaml, not these."""


def differ_from_start(started: GatewaySettings, now: GatewaySettings) -> list[str]:
    """The `READ_AT_START` settings whose value in agents.yaml is no longer the one the process started with."""
    return [name for name in READ_AT_START if getattr(started, name) != getattr(now, name)]


def store_location(store: str | None, base_dir: Path | None = None) -> str:
    """Where the store lives: `gateway.store` (default `.gateway/state.db`), a path relative to `base_dir`."""
    location = store or DEFAULT_STORE
    if location in ("memory:", ":memory:") or "://" in location:
        return location
    path = Path(location).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    return str(path)

