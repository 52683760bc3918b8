"""agents.yaml as data: providers, apis, agents (with their tool selections and policies), clients.

The loader (`load_manifest`) validates the whole file and reports every mistake at once with
file:line and key path; see `gateway.config.loader`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from .observe import Budgets, HookConfig
from .settings import GatewaySettings

ProviderKind = Literal["openai", "openai-responses", "anthropic", "gemini", "ollama"]
Approval = Literal["never", "writes", "always"]
ToolSearch = Literal["auto", "on", "off", "native"]
CodeMode = Literal["on", "off", "only"]

SECRET_HEADER = re.compile(r"auth|key|token|secret|passw|signature|session|cookie", re.IGNORECASE)
"""Header names whose values are credentials (redacted everywhere); the one source of this fact."""


@dataclass(slots=True, kw_only=True)
class ProviderConfig:
    name: str
    kind: ProviderKind
    base_url: str
    """openai: the `/v1` root; anthropic, gemini, ollama: the server root."""
    api_key: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    timeout: float = 120.0
    strict: bool = False
    """openai: send tools in strict mode (closed objects, every property required, optional ones nullable);
    the nulls the model then sends for what it leaves out are dropped before validation."""


@dataclass(slots=True, kw_only=True)
class AuthConfig:
    """One credential. `type`: bearer | basic | api_key | oauth2_client_credentials | token_exchange | user_oauth."""

    type: Literal["bearer", "basic", "api_key", "oauth2_client_credentials", "token_exchange", "user_oauth"]
    token: str | None = None
    username: str | None = None
    password: str | None = None
    location: Literal["header", "query", "cookie"] = "header"
    """api_key: where the key goes (the YAML key is `in`)."""
    name: str | None = None
    """api_key: the header, query parameter or cookie name."""
    value: str | None = None
    token_url: str | None = None
    client_id: str | None = None
    client_secret: str | None = None
    scopes: tuple[str, ...] = ()
    resource: str | None = None
    """token_exchange: the api's resource indicator (RFC 8707)."""
    audience: str | None = None
    """token_exchange: the api's logical name at the authorization server."""
    scope: str | None = None
    """token_exchange: the scopes asked for, space-separated."""
    authorization_url: str | None = None
    """user_oauth: the authorization endpoint (default: the spec's authorization-code flow)."""
    redirect_uri: str | None = None
    """user_oauth: the gateway's `/connections/callback` as registered at the provider (default: under the
    `gateway.auth` audience, when that is the gateway's URL)."""

    def secrets(self) -> list[str]:
        """Every secret value this credential holds (for redaction)."""
        return [s for s in (self.token, self.password, self.value, self.client_secret) if s]


@dataclass(slots=True, kw_only=True)
class ApiConfig:
    name: str
    base_url: str | None = None
    """Overrides the spec's servers."""
    auth: list[AuthConfig] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    timeout: float = 30.0
    max_concurrency: int | None = None
    ca_file: str | None = None
    """PEM certificates trusted for this api besides the default ones (an absolute path once loaded)."""
    client_cert: str | None = None
    """A PEM client certificate (chain) presented to this api (mTLS); an absolute path once loaded."""
    client_key: str | None = None
    """The PEM private key of `client_cert`, when that file does not hold it too."""


@dataclass(slots=True, kw_only=True)
class ToolOverride:
    """Per-tool settings inside a selection entry."""

    rename: str | None = None
    description: str | None = None
    approval: Approval | None = None
    timeout: float | None = None
    max_result_bytes: int | None = None


@dataclass(slots=True, kw_only=True)
class ToolSelection:
    """One entry of an agent's `tools:` list: which operations of one api."""

    api: str
    operations: list[str] | None = None
    """operationIds or tool names, globs allowed; None: all."""
    tags: list[str] | None = None
    methods: list[str] | None = None
    paths: list[str] | None = None
    exclude: list[str] = field(default_factory=list)
    args: dict[str, Any] = field(default_factory=dict)
    """Fixed argument values, hidden from the model, always sent."""
    overrides: dict[str, ToolOverride] = field(default_factory=dict)
    """Per tool (operationId or catalog tool name) overrides (YAML key `override`)."""
    line: int | None = None
    pointer: str = ""
    """The entry's key path in the manifest (`agents.clerk.tools[0]`), for diagnostics."""
    key_lines: dict[str, int] = field(default_factory=dict)
    """Lines of the entry's parts, by relative key path (`operations[1]`, `args.tenant`, `override.getUser`)."""


@dataclass(slots=True, kw_only=True)
class Policy:
    approval: Approval = "never"
    max_iterations: int = 40
    max_consecutive_errors: int = 3
    max_parallel_calls: int = 8
    max_result_bytes: int = 64_000
    timeout: float = 300.0
    """Wall-clock deadline of one run, seconds."""
    tool_timeout: float | None = None
    """Per tool call; None: the api's timeout."""
    max_tool_calls: int = 200
    """Cap on tool calls in one run."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CodeLimits:
    """What one `run_code` script of the agent may use (`code_limits`)."""

    time: float = 30.0
    """Seconds of execution (the time its tool calls take does not count)."""
    memory: int = 256
    """Megabytes of heap."""
    tool_calls: int = 50
    """Tool calls one script may make."""


@dataclass(slots=True, kw_only=True)
class AgentConfig:
    name: str
    model: str
    """`<provider>/<model id>` as written."""
    provider: str
    model_id: str
    instructions: str = ""
    description: str = ""
    tools: list[ToolSelection] = field(default_factory=list)
    policy: Policy = field(default_factory=Policy)
    delegates: list[str] = field(default_factory=list)
    tool_search: ToolSearch = "auto"
    """on: the model starts with `pinned` + `search_tools` and loads what it finds; auto: on when the agent has
    more than 64 tools or more definitions than the request budget (see `gateway.toolsearch`); native: the
    provider's own search (Anthropic's) over every tool sent deferred, `on` where a door has none (MCP)."""
    pinned: list[str] = field(default_factory=list)
    """Tools (agent tool names, operationIds or globs) offered from the start when tool search is on."""
    hooks: list[HookConfig] = field(default_factory=list)
    """The agent's own `hooks:` (run after the global ones)."""
    code_mode: CodeMode = "off"
    """on: the model is offered `run_code` (one script over the tools) beside the tools; only: `run_code` with
    `search_tools` and `describe_tool` (see `gateway.codemode`)."""
    code_limits: CodeLimits = field(default_factory=CodeLimits)
    line: int | None = None


@dataclass(slots=True, kw_only=True)
class ClientConfig:
    name: str
    key: str | None = None
    """None: a client only tokens reach (`claims`, with `gateway.auth`)."""
    agents: list[str] = field(default_factory=list)
    """Agents this client may use; `["*"]` for all."""
    admin: bool = False
    """Sees every agent, the whole audit log and every approval (the console's operators)."""
    claims: dict[str, list[str]] = field(default_factory=dict)
    """With `gateway.auth`: a token whose claims all match (each a value or a list of values) is this client."""


@dataclass(slots=True, kw_only=True)
class Manifest:
    file: str = "agents.yaml"
    providers: dict[str, ProviderConfig] = field(default_factory=dict)
    apis: dict[str, ApiConfig] = field(default_factory=dict)
    agents: dict[str, AgentConfig] = field(default_factory=dict)
    clients: dict[str, ClientConfig] = field(default_factory=dict)
    hooks: list[HookConfig] = field(default_factory=list)
    """The global `hooks:` (every agent's steps)."""
    budgets: Budgets = field(default_factory=Budgets)
    settings: dict[str, Any] = field(default_factory=dict)
    """Gateway-wide settings (YAML key `gateway`) as written; `gateway` is the parsed form."""
    _gateway: GatewaySettings | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def gateway(self) -> GatewaySettings:
        """The `gateway:` settings, parsed once (a ConfigError names a bad key; the loader reports it first)."""
        if self._gateway is None:
            self._gateway = GatewaySettings.parse(self.settings)
        return self._gateway

    @property
    def max_delegation_depth(self) -> int:
        """The bound on delegation chains, checked at load and enforced again at run time."""
        return self.gateway.max_delegation_depth

    def api(self, name: str) -> ApiConfig:
        """The api's configuration, or the defaults when agents.yaml says nothing of it."""
        return self.apis.get(name) or ApiConfig(name=name)

    def secrets(self) -> list[str]:
        """Every secret value in the manifest, for redaction."""
        values: list[str] = []
        for provider in self.providers.values():
            if provider.api_key:
                values.append(provider.api_key)
        for api in self.apis.values():
            for auth in api.auth:
                values.extend(auth.secrets())
        for client in self.clients.values():
            if client.key:
                values.append(client.key)
        # Credentials also travel as plain headers (`X-Api-Key: ${KEY}`, `Authorization: ...`).
        for headers in [p.headers for p in self.providers.values()] + [a.headers for a in self.apis.values()]:
            for name, value in headers.items():
                if value and SECRET_HEADER.search(name):
                    values.append(value)
                    scheme, _, credential = value.partition(" ")  # `Token abc`: the credential alone too
                    if credential.strip() and scheme.isalpha():
                        values.append(credential.strip())
        return values
