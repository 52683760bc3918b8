"""agents.yaml as one typed settings model: providers, apis, agents, clients, hooks, budgets, gateway.

`Manifest` is the root. The loader (`gateway.config.loader`) validates the whole file against it and reports
every mistake at once with file:line and key path; `gateway schema` prints its JSON Schema. The sections live
beside it: `agents` (agents, tool selections, run policy), `credentials` (`apis.<name>.auth`), `hooks_budgets`,
`settings` (`gateway:`).

```yaml
providers:
  NAME: {kind: openai|openai-responses|anthropic|gemini|ollama, base_url, api_key, headers: {}, timeout, strict: false}
apis:                                   # keyed by the spec's path under specs/ without extension
  NAME: {base_url, auth: AUTH | [AUTH, ...], headers: {}, timeout, max_concurrency, max_concurrency_per_client,
         ca_file, client_cert, client_key, output_check: enforce|warn|off, reuse_connections: true}
agents: {NAME: {...}}                   # gateway.config.agents
hooks: [...]                            # gateway.config.hooks_budgets
budgets: {...}
clients:
  NAME: {key: ${CI_BOT_KEY}, agents: [clerk], admin: false, approver: false, claims: {sub: ...}}
gateway: {...}                          # gateway.config.settings
```
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, ConfigDict, Field, field_validator, model_validator
from pydantic.json_schema import SkipJsonSchema

from ..catalog import origin_of_url
from ..kernel.redaction import url_password, url_secrets
from .agents import (
    AgentConfig,
    Approval,
    CodeLimits,
    CodeMode,
    OutputCheckSwitch,
    Policy,
    ToolOverride,
    ToolSelection,
)
from .credentials import AuthConfig
from .fields import (
    AGENT_NAME,
    PROVIDER_NAME,
    AlsoShort,
    Count,
    Flag,
    HttpUrl,
    KindEndpoint,
    Names,
    Seconds,
    Section,
    TextMap,
    at_key,
    defaults,
    derived,
    doc,
    filled,
)
from .hooks_budgets import Budgets, HookConfig
from .settings import GatewaySettings

ProviderKind = Literal["openai", "openai-responses", "anthropic", "gemini", "ollama"]
PROVIDER_KINDS: tuple[ProviderKind, ...] = ("openai", "openai-responses", "anthropic", "gemini", "ollama")
DEFAULT_BASE_URLS = {
    "openai": "https://api.openai.com/v1",
    "openai-responses": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
    "gemini": "https://generativelanguage.googleapis.com",
    "ollama": "http://127.0.0.1:11434",
}

SECRET_HEADER = re.compile(r"auth|key|token|secret|passw|signature|session|cookie", re.IGNORECASE)
"""Header names whose values are credentials (redacted everywhere); the one source of this fact for headers. A
fixed argument's name is read by whole words instead (`_names_a_credential`): its value is redacted wherever it
appears, so `sort_key: created_at` taken for a secret would blank that word in every answer."""

__all__ = ["AgentConfig", "ApiConfig", "Approval", "AuthConfig", "ClientConfig", "CodeLimits", "CodeMode", "Manifest",
           "Policy", "ProviderConfig", "ToolOverride", "ToolSelection"]


def _kind_is_optional(schema: dict[str, Any]) -> None:
    schema["required"] = [key for key in schema.get("required", []) if key != "kind"]


class ProviderConfig(KindEndpoint):
    """An LLM provider the agents' models are reached through."""

    default_base_urls = DEFAULT_BASE_URLS

    model_config = ConfigDict(json_schema_extra=_kind_is_optional)

    kind: ProviderKind = doc("The wire format (default: the provider's name, when that is a kind).")
    base_url: HttpUrl = filled("openai, openai-responses: the `/v1` root; anthropic, gemini, ollama: the server "
                               "root (default: the kind's public one); ollama also takes `OLLAMA_HOST`'s forms "
                               "(`host`, `host:port`: http, port 11434).")
    api_key: str | None = doc("The provider's key (write `${VAR}`); empty: none.", None)
    headers: TextMap = doc("Extra headers on every request to the provider.", default={})
    timeout: Seconds = doc("Seconds one model request may take (a streamed one: each read of it).", 120.0)
    stream_idle_timeout: Seconds | None = doc(
        "Seconds a streamed answer may send nothing but keep-alives (SSE comments, blank lines) before it is cut "
        "off with an error (default: `timeout`).", None)
    stream_timeout: Seconds = doc("Seconds a whole streamed answer may take before it is cut off with an error.",
                                  1800.0)
    strict: Flag = doc("openai: send tools in strict mode (closed objects, every property required, optional ones "
                       "nullable); the nulls the model sends for what it leaves out are dropped.", False)
    name: SkipJsonSchema[str] = derived("")


def _one_or_many(value: Any) -> Any:
    return [value] if isinstance(value, dict) else value


class ApiConfig(Section):
    """How the gateway reaches one api (its spec under specs/ says what the api is)."""

    base_url: HttpUrl | None = doc(
        "Overrides the spec's servers, an operation's own too: the whole URL, base path included "
        "(`http://127.0.0.1:8000/api` for a server `https://example.com/api`). Without it: the first server, its "
        "variables at their defaults; the model never chooses the host.", None)
    auth: Annotated[list[AuthConfig], BeforeValidator(_one_or_many), AlsoShort("item")] = doc(
        "The api's credentials, all sent at once: one mapping or a list.", default=[])
    headers: TextMap = doc("Extra headers on every request to the api.", default={})
    timeout: Seconds = doc("Seconds one request may take.", 30.0)
    max_concurrency: Count | None = doc("Calls in flight at once (default: gateway.max_concurrency).", None)
    max_concurrency_per_client: Count | None = doc(
        "The most of those one client holds at once, at most `max_concurrency` (default: "
        "gateway.max_concurrency_per_client).", None)
    ca_file: str | None = doc("PEM certificates trusted for this api besides the default ones (a private CA), "
                              "relative to agents.yaml's folder.", None)
    client_cert: str | None = doc("A PEM client certificate (chain) presented to this api (mTLS), relative to "
                                  "agents.yaml's folder.", None)
    client_key: str | None = doc("The PEM private key of `client_cert`, when that file does not hold it too.", None)
    output_check: OutputCheckSwitch = doc("The upstream answer against the operation's declared response schema: "
                                          "enforce (a mismatch is a tool error), warn (passed on, with a warning), "
                                          "off.", "enforce")
    reuse_connections: Flag = doc("Keep connections for the next request (keep-alive). false: a connection of its "
                                  "own for each request, for an upstream that sends answers nobody asked for "
                                  "(HTTP/1.1 would read one as the next request's answer).", True)
    trusted_origins: Names = doc(
        "Origins besides the api's own (base_url's, else the spec's first server) whose operations get its "
        "credentials, headers and client certificate too: an operation whose own server is another origin is called "
        "without them "
        "(`https://uploads.github.com` beside `https://api.github.com`).", default=[])
    name: SkipJsonSchema[str] = derived("")

    @field_validator("trusted_origins")
    @classmethod
    def _origins(cls, origins: list[str]) -> list[str]:
        for origin in origins:
            if origin_of_url(origin) is None:
                raise ValueError(f"{origin!r} is not an http(s) origin (write `https://host[:port]`)")
        return origins

    @field_validator("auth")
    @classmethod
    def _configured(cls, auth: list[AuthConfig]) -> list[AuthConfig]:
        """`token: ${TOKEN:-}` with TOKEN unset: the operator chose "no credential" explicitly."""
        return [credential for credential in auth if not credential.unset()]


class ClientConfig(Section):
    """A caller of the gateway: a key (or, with `gateway.auth`, a token whose claims match)."""

    key: str | None = doc("The caller's bearer key (write `${VAR}`); each client its own. A client with `claims` "
                          "needs none (tokens reach it).", None, min_length=1)
    previous_key: str | None = doc("A rotation: the client's former key, still taken beside `key` while its callers "
                                   "move to the new one (each request that sends it is logged, once a minute per "
                                   "client); remove it when none does. Console sessions are signed with `key`.",
                                   None, min_length=1)
    agents: Names = doc("Agents this client may use; `*` for all.", default=["*"])
    admin: Flag = doc("Sees every agent, the whole audit log and every approval (the console's operators); "
                      "implies `approver`.", False)
    approver: Flag = doc("May decide the pending calls of its agents.", False)
    claims: dict[str, Names] = doc("With `gateway.auth`: a token whose claims all match (each a value or a list "
                                   "of values) is this client.", default={})
    name: SkipJsonSchema[str] = derived("")

    @model_validator(mode="after")
    def _key_or_claims(self) -> ClientConfig:
        if self.previous_key is not None and self.key is None:
            raise at_key("previous_key", "a former key needs the new one: set `key` as well")
        if self.key is None and not self.claims:
            raise at_key("key", "'key' is required (or `claims`, for a client that tokens reach)")
        return self


ProviderName = Annotated[str, Field(pattern=PROVIDER_NAME)]
AgentName = Annotated[str, Field(pattern=AGENT_NAME)]


class Manifest(Section):
    """agents.yaml: which models, which apis, which agents see which of their operations, who may call."""

    model_config = ConfigDict(title="agents.yaml")

    providers: dict[ProviderName, ProviderConfig] = doc("LLM providers, by name.", default={})
    apis: dict[str, ApiConfig] = doc("How to reach each api, keyed by its spec's path under specs/ without "
                                     "extension (optional: an api without an entry uses its spec's servers).",
                                     default={})
    agents: dict[AgentName, AgentConfig] = doc("The agents, by name (the chat endpoint's `model`).",
                                               default={})
    clients: dict[str, ClientConfig] = doc("Callers and their keys; with any, every door requires one.",
                                           default={})
    hooks: list[HookConfig] = doc("Hooks around every agent's model and tool calls.", default=[])
    budgets: Budgets = doc("Token and cost budgets.", default_factory=defaults(Budgets))
    gateway: GatewaySettings = doc("Gateway-wide settings.", default_factory=defaults(GatewaySettings))
    file: SkipJsonSchema[str] = derived("agents.yaml")
    key_sources: SkipJsonSchema[Any] = derived(None)
    """The `gateway.config.checker.KeySources` the loader read this manifest's values from (their lines then, the
    `${VAR}`s they read), or None for one not read from a file: a running gateway's settings name the line each
    value was loaded from, whatever the file says now."""

    @field_validator("providers", mode="before")
    @classmethod
    def _kind_from_name(cls, providers: Any) -> Any:
        """`openai: {}` is `openai: {kind: openai}`."""
        if not isinstance(providers, dict):
            return providers
        return {name: {**value, "kind": name} if isinstance(value, dict) and "kind" not in value
                and name in PROVIDER_KINDS else value for name, value in providers.items()}

    @model_validator(mode="after")
    def _named(self) -> Manifest:
        for section in (self.providers, self.apis, self.agents, self.clients):
            for name, entry in section.items():
                entry.name = name
        for name, agent in self.agents.items():
            agent.hooks = [hook.model_copy(update={"agent": name}) for hook in agent.hooks]
        return self

    @property
    def max_delegation_depth(self) -> int:
        """The bound on delegation chains, checked at load and enforced again at run time."""
        return self.gateway.max_delegation_depth

    def api(self, name: str) -> ApiConfig:
        """The api's configuration, or the defaults when agents.yaml says nothing of it."""
        return self.apis.get(name) or ApiConfig.model_construct(name=name)

    def secrets(self) -> list[str]:
        """Every secret value in the manifest, for redaction."""
        values: list[str] = []
        for provider in self.providers.values():
            if provider.api_key:
                values.append(provider.api_key)
            values.extend(url_secrets(str(provider.base_url)))  # `?key=...`, `https://user:pass@...`
        for api in self.apis.values():
            for auth in api.auth:
                values.extend(auth.secrets())
            values.extend(url_secrets(str(api.base_url)) if api.base_url else [])
        # The stores' URLs carry their passwords (postgresql://gw:PASSWORD@db/gateway, rediss://:PASSWORD@cache);
        # their user names are no secret (`postgresql://gateway@db`: redacting "gateway" would blank every line).
        for store_url in (self.gateway.store, self.gateway.redis):
            values.extend(url_password(store_url) if store_url and "://" in store_url else [])
        for client in self.clients.values():
            values.extend(key for key in (client.key, client.previous_key) if key)
        introspection = self.gateway.auth.introspection if self.gateway.auth else None
        if introspection is not None:
            values.append(introspection.client_secret)
        headers = [p.headers for p in self.providers.values()] + [a.headers for a in self.apis.values()]
        # Hooks and the embeddings endpoint are written here too, credentials in their URLs and headers.
        for hook in [*self.hooks, *(h for agent in self.agents.values() for h in agent.hooks)]:
            values.extend(url_secrets(hook.url) if hook.url else [])
            headers.append(hook.headers)
        embeddings = self.gateway.search_embeddings
        if embeddings is not None:
            values.extend([embeddings.api_key] if embeddings.api_key else [])
            values.extend(url_secrets(embeddings.base_url))
            headers.append(embeddings.headers)
        # A spec that declares its key as a plain parameter gets it as a fixed argument (`args: {api_key: ${KEY}}`):
        # one whose name says credential is a secret like one under `auth` (an upstream may echo it to the model).
        for agent in self.agents.values():
            for selection in agent.tools:
                values.extend(_credential_values(selection.args))
        # Credentials also travel as plain headers (`X-Api-Key: ${KEY}`, `Authorization: ...`).
        for mapping in headers:
            for name, value in mapping.items():
                if value and SECRET_HEADER.search(name):
                    values.append(value)
                    scheme, _, credential = value.partition(" ")  # `Token abc`: the credential alone too
                    if credential.strip() and scheme.isalpha():
                        values.append(credential.strip())
        return values


def _credential_values(args: dict[str, Any]) -> list[str]:
    """The text values of fixed arguments (and of objects in them) whose names say credential."""
    values: list[str] = []
    for name, value in args.items():
        if isinstance(value, dict):
            values.extend(_credential_values(value))
        elif isinstance(value, str) and value and _names_a_credential(str(name)):
            values.append(value)
    return values


_CREDENTIAL_WORDS = frozenset({"token", "secret", "password", "passwd", "pwd", "auth", "authorization", "signature",
                               "credential", "credentials", "session", "cookie", "apikey", "appid"})
_KEY_KINDS = frozenset({"api", "access", "secret", "private", "app", "subscription", "client", "auth", "license",
                        "developer", "consumer", "x"})


def _names_a_credential(name: str) -> bool:
    """`api_key`, `apiKey`, `X-Api-Key`, `key`, `access_token`, `password`: yes; `keyword`, `sort_key`, `tenant`: no.
    By whole words, not the header rule's substrings: a fixed value is redacted wherever it appears, so a
    `sort_key: created_at` taken for a secret would blank that word in every result."""
    words = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()
    parts = [part for part in re.split(r"[^a-z0-9]+", words) if part]
    if any(part in _CREDENTIAL_WORDS for part in parts):
        return True
    return "key" in parts and (parts == ["key"] or any(part in _KEY_KINDS for part in parts))
