"""The `gateway:` settings of agents.yaml, parsed once into a typed object.

`GatewaySettings.parse(raw)` reads every key the gateway itself knows (store, audit retention, rate limits,
breaker, concurrency, delegation depth) and raises a `ConfigError` naming the bad key; the loader turns that
into a diagnostic, so `gateway validate` reports what `serve` would refuse. `Manifest.gateway` holds the parsed
object; the safety layer, the store and the delegation check read it instead of parsing the raw mapping again.
Keys of later features stay in `raw` until they get a field here.

```yaml
gateway:
  store: .gateway/state.db        # a SQLite path (relative to agents.yaml's folder), sqlite:///path, memory:
  audit_retention_days: 30        # 0 or null keeps rows forever
  conversation_retention_days: 30 # stored Responses answers, handed-back turns, finished approval runs
  rate_limits: {tool: 120/min, tools: {createIssue: {rate: 1/s, burst: 5}}}
  breaker: {failures: 5, reset_after: 30}
  max_concurrency: 16             # per api (apis.<name>.max_concurrency overrides)
  max_delegation_depth: 3
  mcp: {...}                      # session caps and idle timeout (gateway.config.mcp_limits)
  search_embeddings: {...}        # tool search blends BM25 with embeddings (gateway.config.search_embeddings)
```
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ..errors import ConfigError
from .mcp_limits import SessionLimits
from .search_embeddings import SearchEmbeddings

T = TypeVar("T")

DEFAULT_STORE = ".gateway/state.db"
DEFAULT_RETENTION_DAYS = 30.0
DEFAULT_MAX_CONCURRENCY = 16
DEFAULT_MAX_DELEGATION_DEPTH = 3
"""How many agents deep a delegation chain may go (lead -> sub -> sub-sub is 2)."""

_WINDOWS = {"s": 1.0, "sec": 1.0, "second": 1.0, "m": 60.0, "min": 60.0, "minute": 60.0, "h": 3600.0,
            "hour": 3600.0}
_LIMIT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*/\s*([a-z]+)\s*$")


@dataclass(slots=True, frozen=True)
class Limit:
    rate: float
    """Tokens per second."""
    burst: float


@dataclass(slots=True, kw_only=True)
class RateLimits:
    client: Limit | None = None
    agent: Limit | None = None
    tool: Limit | None = None
    clients: dict[str, Limit] = field(default_factory=dict)
    agents: dict[str, Limit] = field(default_factory=dict)
    tools: dict[str, Limit] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return any((self.client, self.agent, self.tool, self.clients, self.agents, self.tools))

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any] | None) -> RateLimits:
        """Parse `gateway.rate_limits`; a ConfigError names the bad key."""
        raw = (settings or {}).get("rate_limits") or {}
        if not isinstance(raw, Mapping):
            raise ConfigError("agents.yaml: gateway.rate_limits must be a mapping")
        unknown = set(raw) - {"client", "agent", "tool", "clients", "agents", "tools"}
        if unknown:
            raise ConfigError(f"agents.yaml: gateway.rate_limits: unknown key(s) {', '.join(sorted(unknown))}")
        limits = cls()
        for key in ("client", "agent", "tool"):
            if raw.get(key) is not None:
                setattr(limits, key, parse_limit(raw[key], f"gateway.rate_limits.{key}"))
        for key in ("clients", "agents", "tools"):
            entries = raw.get(key) or {}
            if not isinstance(entries, Mapping):
                raise ConfigError(f"agents.yaml: gateway.rate_limits.{key} must map names to limits")
            setattr(limits, key, {name: parse_limit(v, f"gateway.rate_limits.{key}.{name}")
                                  for name, v in entries.items()})
        return limits


def parse_limit(value: Any, where: str) -> Limit:
    """`"60/min"` or `{rate: "1/s", burst: 5}` as a Limit."""
    if isinstance(value, Mapping):
        if "rate" not in value:
            raise ConfigError(f"agents.yaml: {where}: needs `rate` (e.g. 10/s)")
        base = parse_limit(value["rate"], f"{where}.rate")
        burst = value.get("burst", base.burst)
        if not isinstance(burst, int | float) or isinstance(burst, bool) or burst < 1:
            raise ConfigError(f"agents.yaml: {where}.burst must be a number >= 1")
        return Limit(rate=base.rate, burst=float(burst))
    match = _LIMIT.match(value) if isinstance(value, str) else None
    if match is None or match.group(2) not in _WINDOWS or float(match.group(1)) <= 0:
        raise ConfigError(f"agents.yaml: {where}: expected a limit like 60/min or 10/s, got {value!r}")
    count = float(match.group(1))
    return Limit(rate=count / _WINDOWS[match.group(2)], burst=max(1.0, count))


@dataclass(slots=True, frozen=True)
class GuardSettings:
    failures: int = 5
    reset_after: float = 30.0
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any] | None) -> GuardSettings:
        settings = settings or {}
        breaker = settings.get("breaker") or {}
        if not isinstance(breaker, Mapping):
            raise ConfigError("agents.yaml: gateway.breaker must be a mapping (failures, reset_after)")
        defaults = cls()
        values = {
            "failures": breaker.get("failures", defaults.failures),
            "reset_after": breaker.get("reset_after", defaults.reset_after),
            "max_concurrency": settings.get("max_concurrency", defaults.max_concurrency),
        }
        for key, value in values.items():
            if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
                where = f"gateway.{key}" if key == "max_concurrency" else f"gateway.breaker.{key}"
                raise ConfigError(f"agents.yaml: {where} must be a positive number, got {value!r}")
        return cls(failures=int(values["failures"]), reset_after=float(values["reset_after"]),
                   max_concurrency=int(values["max_concurrency"]))


def retention_days(settings: Mapping[str, Any] | None, key: str = "audit_retention_days") -> float | None:
    """`gateway.<key>` in days (default 30); None: keep forever (0 or null)."""
    value = (settings or {}).get(key, DEFAULT_RETENTION_DAYS)
    if value is None or value == 0:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
        raise ConfigError(f"agents.yaml: gateway.{key} must be a number of days, got {value!r}")
    return float(value)


def conversation_retention_days(settings: Mapping[str, Any] | None) -> float | None:
    """How long what a conversation goes on from is kept: Responses answers (`previous_response_id`), turns
    handed back to a caller's tools, finished approval runs. 30 days by default, as OpenAI keeps stored responses."""
    return retention_days(settings, "conversation_retention_days")


def redis_location(settings: Mapping[str, Any] | None) -> str | None:
    """`gateway.redis` from the manifest: a `redis://`, `rediss://` or `unix://` URL, or None (absent or empty)."""
    location = (settings or {}).get("redis")
    if location is None or location == "":
        return None
    if not isinstance(location, str) or not location.startswith(("redis://", "rediss://", "unix://")):
        raise ConfigError(f"agents.yaml: gateway.redis must be a redis:// URL, not {location!r}")
    return location


def store_location(settings: Mapping[str, Any] | None, base_dir: Path | None = None) -> str:
    """Where the store lives: `gateway.store` from the manifest, relative to agents.yaml's folder."""
    location = (settings or {}).get("store") or DEFAULT_STORE
    if not isinstance(location, str):
        raise ConfigError(f"agents.yaml: gateway.store must be a path or URL, not {type(location).__name__}")
    if location in ("memory:", ":memory:") or "://" in location:
        return location
    path = Path(location).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    return str(path)


@dataclass(slots=True, frozen=True, kw_only=True)
class GatewaySettings:
    """Everything `gateway:` says, parsed (see the module docstring)."""

    store: str | None = None
    """`gateway.store` as written (`store_location` resolves it against agents.yaml's folder)."""
    redis: str | None = None
    """`gateway.redis`: rate-limit buckets, breakers and budgets counted there across instances."""
    audit_retention_days: float | None = DEFAULT_RETENTION_DAYS
    conversation_retention_days: float | None = DEFAULT_RETENTION_DAYS
    rate_limits: RateLimits = field(default_factory=lambda: RateLimits())
    guard: GuardSettings = field(default_factory=lambda: GuardSettings())
    max_delegation_depth: int = DEFAULT_MAX_DELEGATION_DEPTH
    mcp: SessionLimits = field(default_factory=lambda: SessionLimits())
    """MCP session caps and idle timeout (`gateway.mcp`, parsed by `gateway.config.mcp_limits`)."""
    search_embeddings: SearchEmbeddings | None = None
    """The embeddings endpoint tool search blends with BM25 (`gateway.search_embeddings`); None: BM25 alone."""
    raw: Mapping[str, Any] = field(default_factory=dict)
    """The mapping as written (keys of features that parse their own, e.g. `tool_budget`)."""

    @classmethod
    def parse(cls, raw: Mapping[str, Any] | None) -> GatewaySettings:
        """The settings; a ConfigError names the first bad key."""
        settings, problems = cls.read(raw)
        if problems:
            raise problems[0]
        return settings

    @classmethod
    def read(cls, raw: Mapping[str, Any] | None) -> tuple[GatewaySettings, list[ConfigError]]:
        """The settings with every problem (each naming its key); a bad key keeps its default."""
        raw = dict(raw or {})
        problems: list[ConfigError] = []

        def part(parse: Callable[[Mapping[str, Any]], T], default: T) -> T:
            try:
                return parse(raw)
            except ConfigError as exc:
                problems.append(exc)
                return default

        retention: float | None = DEFAULT_RETENTION_DAYS
        settings = cls(store=part(_store, None), redis=part(redis_location, None),
                       audit_retention_days=part(retention_days, retention),
                       conversation_retention_days=part(conversation_retention_days, retention),
                       rate_limits=part(RateLimits.from_settings, RateLimits()),
                       guard=part(GuardSettings.from_settings, GuardSettings()),
                       max_delegation_depth=part(_delegation_depth, DEFAULT_MAX_DELEGATION_DEPTH),
                       mcp=part(SessionLimits.from_settings, SessionLimits()),
                       search_embeddings=part(SearchEmbeddings.from_settings, None), raw=raw)
        return settings, problems

    def store_location(self, base_dir: Path | None = None) -> str:
        return store_location(self.raw, base_dir)


def _delegation_depth(raw: Mapping[str, Any]) -> int:
    depth = raw.get("max_delegation_depth", DEFAULT_MAX_DELEGATION_DEPTH)
    if not isinstance(depth, int) or isinstance(depth, bool) or depth < 1:
        raise ConfigError(f"agents.yaml: gateway.max_delegation_depth must be a whole number >= 1, got {depth!r}")
    return depth


def _store(raw: Mapping[str, Any]) -> str | None:
    store_location(raw)  # its type check, with its message
    store = raw.get("store")
    return store if isinstance(store, str) else None
