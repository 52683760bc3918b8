"""Load agents.yaml into a `Manifest`, reporting every mistake at once with file:line and key path.

    agents.yaml:9: agents.reader.tools[1].api: no spec named 'nosuchapi' (known: github, shop)

The format is the one DESIGN.md fixes; this loader extends it:

```yaml
providers:
  NAME: {kind: openai|openai-responses|anthropic|gemini|ollama, base_url, api_key, headers: {}, timeout, strict: false}
        # kind defaults to NAME when NAME is a kind; base_url to the kind's public root;
        # strict (openai only): tools in OpenAI's strict mode
apis:                                   # keyed by the spec's path under specs/ without extension
  NAME: {base_url, auth: AUTH | [AUTH, ...], headers: {}, timeout, max_concurrency, ca_file, client_cert, client_key}
        # ca_file: PEM certificates to trust for this api besides the usual ones (a private CA),
        #          relative to agents.yaml's folder
        # client_cert, client_key: a PEM client certificate (and its key, unless the same file holds it)
        #          presented to this api (mTLS), relative to agents.yaml's folder
        # AUTH: {type: bearer, token} | {type: basic, username, password}
        #     | {type: api_key, in: header|query|cookie, name, value}   (name/in default from the spec)
        #     | {type: oauth2_client_credentials, token_url, client_id, client_secret, scopes}
agents:
  NAME:                                 # letters, digits, _ and -; at most 58 (the `ask_NAME` tool fits 64)
    model: PROVIDER/MODEL_ID            # split at the first '/'; PROVIDER must be under providers
    instructions: ...                   # the system prompt
    description: ...                    # shown to a lead agent that delegates to this one
    tools:                              # the union of the entries; an entry may also be just the api's name
      - api: shop
        operations: [listItems, "get*"] # operationIds or catalog tool names, globs (fnmatch, case-sensitive)
        tags: [items]                   # any of these tags (globs)
        methods: [GET]
        paths: ["/items/*"]             # path templates, globs (`*` also crosses `/`)
        exclude: [deleteItem]           # operationIds or tool names, globs
        args: {tenant: acme}            # fixed values: hidden from the model, always sent
        override:                       # per-tool overrides, keyed by operationId or tool name
          getItem: {rename: fetch_item, description: ..., approval: always, timeout: 5, max_result_bytes: 10000}
    approval: never|writes|always       # writes: anything but GET, HEAD, OPTIONS
    max_iterations: 40
    max_consecutive_errors: 3
    max_parallel_calls: 8
    max_result_bytes: 64000
    timeout: 300                        # seconds for a whole run
    tool_timeout: 30                    # seconds per tool call (default: the api's timeout)
    max_tool_calls: 200
    delegates: [auditor]                # one `ask_<agent>` tool each; cycles are refused
    tool_search: auto|on|off|native     # native: the provider's own search (anthropic, openai-responses)
    pinned: [users/get-authenticated]   # offered from the start (never deferred) when tool search is on
    hooks: [...]                        # the agent's own hooks (see gateway.config.observe)
    code_mode: off|on|only              # run_code: one Python script over the tools (see gateway.codemode)
    code_limits: {time: 30, memory: 256, tool_calls: 50}   # per script: seconds of execution, MB, tool calls
hooks: [...]                            # hooks around every agent's model and tool calls
budgets: {...}                          # token and cost budgets (see gateway.config.observe)
clients:
  NAME: {key: ${CI_BOT_KEY}, agents: [clerk]}   # agents omitted: all ("*")
gateway:                                # gateway-wide settings, free-form for the other modules;
  max_delegation_depth: 3               # the only key checked here
```

`${VAR}` and `${VAR:-default}` are read from the environment at load time, in any string value (write
`$${` for a literal `${`); a missing variable without a default is an error naming the variable and the
key (see `gateway._yamlnodes`). A credential whose secrets all come out empty (`token: ${TOKEN:-}`) counts
as not configured. With a `catalog`, the api names, security and every tool selection are checked
against the compiled specs too. Diagnostics come sorted by line.
"""

from __future__ import annotations

import os
import re
import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ..catalog import Catalog, Diagnostic, Tool
from .checker import Checker, suggest
from .credentials import read_auth
from .delegation import check_delegation
from .model import (
    AgentConfig,
    ApiConfig,
    ClientConfig,
    CodeLimits,
    Manifest,
    Policy,
    ProviderConfig,
    ToolOverride,
    ToolSelection,
)
from .observe import read_budgets, read_hooks
from .settings import GatewaySettings
from .yamlnodes import MISSING, KeyPath, format_path, load_yaml

if TYPE_CHECKING:
    from ..toolsets import Toolset

PROVIDER_KINDS = ("openai", "openai-responses", "anthropic", "gemini", "ollama")
DEFAULT_BASE_URLS = {
    "openai": "https://api.openai.com/v1",
    "openai-responses": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
    "gemini": "https://generativelanguage.googleapis.com",
    "ollama": "http://127.0.0.1:11434",
}
# A base_url ending like this most likely includes the part the adapter appends itself.
_WRONG_SUFFIXES = {
    "openai": ("/chat/completions",),
    "openai-responses": ("/responses",),
    "anthropic": ("/v1/messages", "/v1"),
    "gemini": ("/v1beta", ":generateContent", "/models"),
    "ollama": ("/api/chat", "/api", "/v1"),
}
_APPENDED = {
    "openai": "/chat/completions",
    "openai-responses": "/responses",
    "anthropic": "/v1/messages",
    "gemini": "/v1beta/models/{model}:generateContent",
    "ollama": "/api/chat",
}
HTTP_METHODS = ("GET", "PUT", "POST", "DELETE", "OPTIONS", "HEAD", "PATCH", "TRACE")
APPROVALS = ("never", "writes", "always")
TOP_KEYS = ("providers", "apis", "agents", "clients", "gateway", "hooks", "budgets")
PROVIDER_KEYS = ("kind", "base_url", "api_key", "headers", "timeout", "strict")
API_KEYS = ("base_url", "auth", "headers", "timeout", "max_concurrency", "ca_file", "client_cert", "client_key")
POLICY_KEYS = (
    "approval", "max_iterations", "max_consecutive_errors", "max_parallel_calls", "max_result_bytes", "timeout",
    "tool_timeout", "max_tool_calls",
)
AGENT_KEYS = ("model", "instructions", "description", "tools", "delegates", "tool_search", "pinned", "hooks",
              "code_mode", "code_limits", *POLICY_KEYS)
TOOL_SEARCH = ("auto", "on", "off", "native")
CODE_MODES = ("on", "off", "only")
CODE_LIMIT_KEYS = ("time", "memory", "tool_calls")
SELECTION_KEYS = ("api", "operations", "tags", "methods", "paths", "exclude", "args", "override")
OVERRIDE_KEYS = ("rename", "description", "approval", "timeout", "max_result_bytes")
CLIENT_KEYS = ("key", "agents", "admin", "claims")
AGENT_NAME = re.compile(r"^[A-Za-z0-9_-]{1,58}$")
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def load_manifest(
    path: Path, *, catalog: Catalog | None = None, environ: Mapping[str, str] | None = None
) -> tuple[Manifest, list[Diagnostic]]:
    """Read and validate `path`; never raises for bad content.

    Returns the manifest (the usable parts of it) and every diagnostic, sorted by line. The manifest is
    unusable when any diagnostic is an error. With `catalog`, apis and tool selections are checked
    against the compiled specs (including the warnings of `gateway.toolsets.build_toolsets`).
    """
    manifest, _, diagnostics = load_configuration(path, catalog=catalog, environ=environ)
    return manifest, diagnostics


def load_configuration(
    path: Path, *, catalog: Catalog | None = None, environ: Mapping[str, str] | None = None
) -> tuple[Manifest, dict[str, Toolset], list[Diagnostic]]:
    """`load_manifest`, and the agents' toolsets its checks built (empty without `catalog`): a load builds them
    once, for the checks and for serving."""
    path = Path(path)
    file = path.name
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return Manifest(file=file), {}, [Diagnostic(level="error", file=file, message=f"cannot read: {exc}")]
    return _parse(text, file=file, catalog=catalog, environ=environ, base_dir=path.parent)


def parse_manifest(
    text: str, *, file: str = "agents.yaml", catalog: Catalog | None = None, environ: Mapping[str, str] | None = None,
    base_dir: Path | None = None,
) -> tuple[Manifest, list[Diagnostic]]:
    """`load_manifest` on a string; relative file names in it are taken from `base_dir` (default: the current
    folder)."""
    manifest, _, diagnostics = _parse(text, file=file, catalog=catalog, environ=environ, base_dir=base_dir)
    return manifest, diagnostics


def _parse(
    text: str, *, file: str, catalog: Catalog | None, environ: Mapping[str, str] | None, base_dir: Path | None,
) -> tuple[Manifest, dict[str, Toolset], list[Diagnostic]]:
    data, lines, diagnostics = load_yaml(text, file=file, environ=os.environ if environ is None else environ)
    manifest = Manifest(file=file)
    toolsets: dict[str, Toolset] = {}
    if data is None:
        return manifest, toolsets, diagnostics
    c = Checker(file, lines)
    c.diagnostics.extend(diagnostics)
    root = c.mapping(data, (), TOP_KEYS)
    if root is not None:
        _read_settings(c, root, manifest)
        manifest.providers = _read_providers(c, root)
        manifest.apis = _read_apis(c, root, catalog, base_dir or Path.cwd())
        manifest.agents = _read_agents(c, root, manifest.providers, catalog)
        manifest.clients = _read_clients(c, root, manifest.agents)
        manifest.hooks = read_hooks(c, root.get("hooks"), ("hooks",))
        manifest.budgets = read_budgets(c, root.get("budgets"))
        check_delegation(c, manifest)
        if catalog is not None:
            _check_security(c, manifest, catalog)
            from ..toolsets import build_toolsets

            toolsets, toolset_diagnostics = build_toolsets(manifest, catalog)
            c.diagnostics.extend(toolset_diagnostics)
            _check_tool_counts(c, manifest, toolsets)
    c.diagnostics.sort(key=lambda d: d.line or 0)
    return manifest, toolsets, c.diagnostics


def _check_tool_counts(c: Checker, manifest: Manifest, toolsets: Mapping[str, Any]) -> None:
    """An agent whose tools its provider would refuse is worth knowing before its first chat fails."""
    from ..offer.toolsearch import pinned_tools
    from ..providers.anthropic import MAX_DEFERRED_TOOLS
    from ..providers.openai import OPENAI_MAX_TOOLS, refuses_tool_count

    for name, agent in manifest.agents.items():
        provider = manifest.providers.get(agent.provider)
        count = len(toolsets.get(name) or ())
        if agent.tool_search == "native" and provider is not None and provider.kind == "anthropic" and \
                count > MAX_DEFERRED_TOOLS and count - len(pinned_tools(agent, toolsets[name])) > MAX_DEFERRED_TOOLS:
            c.error(("agents", name, "tools"), f"{count} tools, but Anthropic's tool search takes at most "
                    f"{MAX_DEFERRED_TOOLS} deferred ones: select fewer, pin some, or use `tool_search: on`")
        if agent.tool_search != "off":
            continue  # tool search offers a few tools at a time (gateway.toolsearch)
        if provider is not None and refuses_tool_count(provider, count):
            c.warning(("agents", name, "tools"), f"{count} tools, but OpenAI accepts at most {OPENAI_MAX_TOOLS} in "
                      "one request: chat will be refused until `tools:` selects fewer (MCP and direct calls work)")


def _read_settings(c: Checker, root: dict[str, Any], manifest: Manifest) -> None:
    settings = c.mapping(root.get("gateway"), ("gateway",))
    if settings is None:
        return
    manifest.settings = dict(settings)
    depth = c.number(settings, ("gateway",), "max_delegation_depth", integer=True, minimum=1)
    if depth is not None:
        manifest.settings["max_delegation_depth"] = depth
    else:
        manifest.settings.pop("max_delegation_depth", None)
    for key in ("tool_budget", "tool_definitions_budget"):  # tokens: one tool's view; one request's definitions
        budget = c.number(settings, ("gateway",), key, integer=True, minimum=200)
        if budget is not None:
            manifest.settings[key] = budget
        else:
            manifest.settings.pop(key, None)
    _check_gateway_settings(c, manifest)
    _check_auth(c, settings, manifest)


AUTH_KEYS = ("issuer", "audience", "jwks_uri", "introspection", "scopes", "leeway")


def _check_auth(c: Checker, settings: dict[str, Any], manifest: Manifest) -> None:
    """`gateway.auth` (gateway.identity.resource): a mapping with `issuer` and `audience`, reported at its line."""
    if "auth" not in settings:
        if any(client.claims for client in manifest.clients.values()):
            c.warning(("clients",), "clients with `claims` are reached only with `gateway.auth` (a token's issuer)")
        return
    path: KeyPath = ("gateway", "auth")
    auth = c.mapping(settings["auth"], path, AUTH_KEYS)
    if auth is None:
        return
    for key in ("issuer", "audience"):
        c.string(auth, path, key, required=True)
    if "introspection" in auth:
        inner = c.mapping(auth["introspection"], (*path, "introspection"), ("url", "client_id", "client_secret"))
        for key in ("client_id", "client_secret"):
            if inner is not None:
                c.string(inner, (*path, "introspection"), key, required=True)
    c.number(auth, path, "leeway", minimum=0)
    c.strings(auth, path, "scopes")


def _check_gateway_settings(c: Checker, manifest: Manifest) -> None:
    """Parse `gateway:` once (`gateway.config.settings`), so `gateway validate` reports what `serve` would refuse."""
    settings, problems = GatewaySettings.read(manifest.settings)
    manifest._gateway = settings  # noqa: SLF001 - the parsed form, kept (a bad key is an error below)
    for exc in problems:
        # The parser's messages name the key path: "gateway.breaker.failures must be ...", "gateway.x.y: expected ..."
        message = str(exc).removeprefix("agents.yaml: ")
        path, _, rest = message.partition(": ") if message.startswith("gateway.") and ": " in message else (
            "", "", message)
        key = re.match(r"gateway\.([A-Za-z_]+)", message)
        where = ("gateway", key.group(1)) if key else ("gateway",)
        c.diagnostics.append(Diagnostic(level="error", file=c.file, pointer=path, line=c.line(where), message=rest))


def _read_providers(c: Checker, root: dict[str, Any]) -> dict[str, ProviderConfig]:
    providers: dict[str, ProviderConfig] = {}
    section = c.mapping(root.get("providers"), ("providers",))
    for name, value in (section or {}).items():
        path: KeyPath = ("providers", name)
        m = c.mapping(value, path, PROVIDER_KEYS)
        if m is None:
            continue
        if "/" in name or not name:
            c.error(path, "a provider name must not contain '/' (the agent's model is '<provider>/<model id>')")
        kind = c.choice(m, path, "kind", PROVIDER_KINDS)
        if kind is None and "kind" not in m:
            if name in PROVIDER_KINDS:
                kind = name
            else:
                c.error(path, f"'kind' is required: one of {', '.join(PROVIDER_KINDS)}")
        base_url = _read_url(c, m, path, "base_url")
        if kind and base_url:
            _check_provider_url(c, (*path, "base_url"), kind, base_url)
        api_key = c.string(m, path, "api_key")
        headers = c.string_map(m, path, "headers")
        timeout = c.number(m, path, "timeout", minimum=0, exclusive=True)
        strict = m.get("strict", False)
        if not isinstance(strict, bool):
            c.error((*path, "strict"), f"expected true or false, got {strict!r}")
            strict = False
        elif strict and kind not in (None, "openai", "openai-responses"):
            c.warning((*path, "strict"), f"strict mode is OpenAI's; a {kind} provider ignores it")
        if kind is None:
            continue
        providers[name] = ProviderConfig(
            name=name, kind=cast(Any, kind), base_url=base_url or DEFAULT_BASE_URLS[kind],
            api_key=api_key or None, headers=headers, timeout=float(timeout or 120.0), strict=strict,
        )
    return providers


def _read_url(c: Checker, m: dict[str, Any], path: KeyPath, key: str) -> str | None:
    url = c.string(m, path, key)
    if url is None:
        return None
    if not re.match(r"^https?://[^/\s]+", url):
        c.error((*path, key), f"expected an http:// or https:// URL, got {url!r}")
        return None
    return url.rstrip("/")


def _check_provider_url(c: Checker, path: KeyPath, kind: str, url: str) -> None:
    for suffix in _WRONG_SUFFIXES[kind]:
        if url.endswith(suffix):
            root = "the /v1 root" if kind.startswith("openai") else "the server root"
            hint = ""
            if kind == "ollama" and suffix == "/v1":
                hint = " (for Ollama's OpenAI-compatible /v1 use kind: openai)"
            c.warning(path, f"for kind {kind}, base_url is {root}; {_APPENDED[kind]} is appended to it, "
                            f"so {url!r} probably ends one part too far{hint}")
            return


def _read_apis(c: Checker, root: dict[str, Any], catalog: Catalog | None, base_dir: Path) -> dict[str, ApiConfig]:
    apis: dict[str, ApiConfig] = {}
    section = c.mapping(root.get("apis"), ("apis",))
    known = _known_apis(catalog)
    for name, value in (section or {}).items():
        path: KeyPath = ("apis", name)
        m = c.mapping(value, path, API_KEYS)
        if m is None:
            continue
        if catalog is not None and name not in known:
            c.error(path, _unknown_api(name, known, catalog))
        spec = catalog.apis.get(name) if catalog is not None else None
        schemes = spec.security_schemes if spec is not None else {}
        auth = read_auth(c, m.get("auth"), (*path, "auth"), schemes)
        timeout = c.number(m, path, "timeout", minimum=0, exclusive=True)
        concurrency = c.number(m, path, "max_concurrency", integer=True, minimum=1)
        apis[name] = ApiConfig(
            name=name, base_url=_read_url(c, m, path, "base_url"), auth=auth, headers=c.string_map(m, path, "headers"),
            timeout=float(timeout or 30.0), max_concurrency=cast(int | None, concurrency),
            ca_file=_read_ca_file(c, m, path, base_dir),
            **_read_client_cert(c, m, path, base_dir),
        )
    return apis


def _read_ca_file(c: Checker, m: dict[str, Any], path: KeyPath, base_dir: Path) -> str | None:
    """The api's extra CA certificates (absolute path), checked now: a bad file fails the load, not each call."""
    name = c.string(m, path, "ca_file")
    if not name:
        return None
    file = (base_dir / Path(name).expanduser()).resolve()
    try:
        ssl.create_default_context(cafile=str(file))
    except (OSError, ssl.SSLError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__
        c.error((*path, "ca_file"), f"cannot load CA certificates from {file}: {reason}")
        return None
    return str(file)


def _read_client_cert(c: Checker, m: dict[str, Any], path: KeyPath, base_dir: Path) -> dict[str, str]:
    """The api's client certificate and key (absolute paths), loaded once now so a bad pair fails the load."""
    cert, key = c.string(m, path, "client_cert"), c.string(m, path, "client_key")
    if not cert:
        if key:
            c.error((*path, "client_key"), "`client_key` needs `client_cert` (the certificate it belongs to)")
        return {}
    files = {"client_cert": str((base_dir / Path(cert).expanduser()).resolve())}
    if key:
        files["client_key"] = str((base_dir / Path(key).expanduser()).resolve())
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_cert_chain(files["client_cert"], files.get("client_key"))
    except (OSError, ssl.SSLError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__
        c.error((*path, "client_cert"), f"cannot load the client certificate {files['client_cert']}"
                f"{' with its key ' + files['client_key'] if key else ''}: {reason}")
        return {}
    return files


def _unknown_api(name: str, known: set[str], catalog: Catalog) -> str:
    """Say why: no such file, or a file of that name that did not compile (then its first error)."""
    for diagnostic in catalog.diagnostics:
        if diagnostic.level == "error" and diagnostic.file.rsplit(".", 1)[0] == name:
            return f"no spec named {name!r}: {diagnostic.file} did not compile ({diagnostic.message})"
    return f"no spec named {name!r}" + suggest(name, known, what="specs")


def _known_apis(catalog: Catalog | None) -> set[str]:
    if catalog is None:
        return set()
    return set(catalog.apis) | {tool.api for tool in catalog}


def _read_agents(
    c: Checker, root: dict[str, Any], providers: dict[str, ProviderConfig], catalog: Catalog | None
) -> dict[str, AgentConfig]:
    agents: dict[str, AgentConfig] = {}
    section = c.mapping(root.get("agents"), ("agents",))
    for name, value in (section or {}).items():
        path: KeyPath = ("agents", name)
        m = c.mapping(value, path, AGENT_KEYS)
        if m is None:
            continue
        if not AGENT_NAME.match(name):
            c.error(path, "an agent name is 1-58 letters, digits, '_' or '-' (it becomes the tool name ask_<name>)")
        model = c.string(m, path, "model", required=True) or ""
        provider, _, model_id = model.partition("/")
        if model and (not model_id or not provider):
            c.error((*path, "model"), f"expected '<provider>/<model id>', got {model!r}")
        elif model and provider not in providers and ("providers", provider) not in c.lines:
            hint = suggest(provider, providers, what="providers")
            c.error((*path, "model"), f"no provider named {provider!r}{hint}")
        tools = [
            selection
            for index, entry in enumerate(c.list_of(m.get("tools"), (*path, "tools")) or [])
            if (selection := _read_selection(c, entry, (*path, "tools", index), catalog)) is not None
        ]
        agents[name] = AgentConfig(
            name=name, model=model, provider=provider, model_id=model_id,
            instructions=c.string(m, path, "instructions") or "", description=c.string(m, path, "description") or "",
            tools=tools, policy=_read_policy(c, m, path), delegates=c.strings(m, path, "delegates") or [],
            tool_search=_read_tool_search(c, m, path),
            pinned=c.strings(m, path, "pinned") or [],
            hooks=read_hooks(c, m.get("hooks"), (*path, "hooks"), agent=name),
            code_mode=_read_code_mode(c, m, path), code_limits=_read_code_limits(c, m, path), line=c.line(path),
        )
        _check_native_search(c, agents[name], providers, path)
    return agents


def _read_tool_search(c: Checker, m: dict[str, Any], path: KeyPath) -> Any:
    value = m.get("tool_search")
    if isinstance(value, bool):  # YAML reads an unquoted `on` / `off` as a boolean
        return "on" if value else "off"
    return c.choice(m, path, "tool_search", TOOL_SEARCH) or "auto"


def _read_code_mode(c: Checker, m: dict[str, Any], path: KeyPath) -> Any:
    value = m.get("code_mode")
    if isinstance(value, bool):  # YAML reads an unquoted `on` / `off` as a boolean
        value = "on" if value else "off"
    else:
        value = c.choice(m, path, "code_mode", CODE_MODES) or "off"
    if value != "off":
        from ..codemode.sandbox import available

        if not available():
            c.error((*path, "code_mode"), "code mode runs scripts in the pydantic-monty sandbox, which is not "
                    "installed: pip install 'gateway[codemode]'")
    return value


def _read_code_limits(c: Checker, m: dict[str, Any], path: KeyPath) -> CodeLimits:
    where = (*path, "code_limits")
    section = c.mapping(m.get("code_limits"), where, CODE_LIMIT_KEYS) if "code_limits" in m else None
    if section is None:
        return CodeLimits()
    time = c.number(section, where, "time", minimum=0, exclusive=True)
    memory = c.number(section, where, "memory", integer=True, minimum=1)
    tool_calls = c.number(section, where, "tool_calls", integer=True, minimum=1)
    defaults = CodeLimits()
    return CodeLimits(time=float(time) if time is not None else defaults.time,
                      memory=int(memory) if memory is not None else defaults.memory,
                      tool_calls=int(tool_calls) if tool_calls is not None else defaults.tool_calls)


def _check_native_search(c: Checker, agent: AgentConfig, providers: Mapping[str, ProviderConfig],
                         path: KeyPath) -> None:
    from ..providers import ADAPTERS

    provider = providers.get(agent.provider)
    if agent.tool_search != "native" or provider is None:
        return
    native = [kind for kind, adapter in ADAPTERS.items() if adapter.native_tool_search]  # the adapters say
    if provider.kind not in native:
        c.error((*path, "tool_search"), f"provider {provider.name!r} (kind {provider.kind}) has no native tool "
                f"search; use a provider of kind {' or '.join(native)}, or `tool_search: on` (the gateway's own)")


def _read_policy(c: Checker, m: dict[str, Any], path: KeyPath) -> Policy:
    policy = Policy()
    if (approval := c.choice(m, path, "approval", APPROVALS)) is not None:
        policy.approval = cast(Any, approval)
    for key in ("max_iterations", "max_consecutive_errors", "max_parallel_calls", "max_result_bytes", "max_tool_calls"):
        if (number := c.number(m, path, key, integer=True, minimum=1)) is not None:
            setattr(policy, key, number)
    for key in ("timeout", "tool_timeout"):
        if (seconds := c.number(m, path, key, minimum=0, exclusive=True)) is not None:
            setattr(policy, key, float(seconds))
    return policy


def _read_selection(c: Checker, value: Any, path: KeyPath, catalog: Catalog | None) -> ToolSelection | None:
    if isinstance(value, str):  # `- shop` is `- api: shop`
        value = {"api": value}
        c.lines.setdefault((*path, "api"), c.line(path) or 0)
    m = c.mapping(value, path, SELECTION_KEYS)
    if m is None:
        return None
    api = c.string(m, path, "api", required=True)
    if api is None:
        return None
    known = _known_apis(catalog)
    if catalog is not None and api not in known:
        c.error((*path, "api"), _unknown_api(api, known, catalog))
    methods = c.strings(m, path, "methods")
    if methods is not None:
        for index, method in enumerate(methods):
            if method.upper() not in HTTP_METHODS:
                c.error((*path, "methods", index), f"{method!r} is not an HTTP method ({', '.join(HTTP_METHODS)})")
        methods = [method.upper() for method in methods]
    args = c.mapping(m.get("args"), (*path, "args")) or {}
    args = {key: value for key, value in args.items() if not _holds_missing(value)}  # already reported
    selection = ToolSelection(
        api=api, operations=c.strings(m, path, "operations"), tags=c.strings(m, path, "tags"), methods=methods,
        paths=c.strings(m, path, "paths"), exclude=c.strings(m, path, "exclude") or [], args=dict(args),
        overrides=_read_overrides(c, m, path), line=c.line(path), pointer=format_path(path),
    )
    prefix = len(path)
    selection.key_lines = {format_path(key[prefix:]): line for key, line in c.lines.items() if key[:prefix] == path}
    return selection


def _holds_missing(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_holds_missing(item) for item in value.values())
    if isinstance(value, list):
        return any(_holds_missing(item) for item in value)
    return value is MISSING


def _read_overrides(c: Checker, m: dict[str, Any], path: KeyPath) -> dict[str, ToolOverride]:
    overrides: dict[str, ToolOverride] = {}
    section = c.mapping(m.get("override"), (*path, "override"))
    for tool, value in (section or {}).items():
        opath: KeyPath = (*path, "override", tool)
        o = c.mapping(value, opath, OVERRIDE_KEYS)
        if o is None:
            continue
        rename = c.string(o, opath, "rename")
        if rename is not None and not TOOL_NAME.match(rename):
            c.error((*opath, "rename"), f"{rename!r} is not a valid tool name (1-64 letters, digits, '_' or '-')")
            rename = None
        max_bytes = c.number(o, opath, "max_result_bytes", integer=True, minimum=1)
        timeout = c.number(o, opath, "timeout", minimum=0, exclusive=True)
        overrides[tool] = ToolOverride(
            rename=rename, description=c.string(o, opath, "description"),
            approval=cast(Any, c.choice(o, opath, "approval", APPROVALS)),
            timeout=float(timeout) if timeout is not None else None, max_result_bytes=cast(int | None, max_bytes),
        )
    return overrides


def _read_clients(c: Checker, root: dict[str, Any], agents: dict[str, AgentConfig]) -> dict[str, ClientConfig]:
    clients: dict[str, ClientConfig] = {}
    section = c.mapping(root.get("clients"), ("clients",))
    owners: dict[str, str] = {}
    for name, value in (section or {}).items():
        path: KeyPath = ("clients", name)
        m = c.mapping(value, path, CLIENT_KEYS)
        if m is None:
            continue
        claims = _read_claims(c, m, path)
        key = c.string(m, path, "key", required=not claims)
        allowed = c.strings(m, path, "agents")
        for index, agent in enumerate(allowed or []):
            if agent != "*" and agent not in agents and ("agents", agent) not in c.lines:
                c.error((*path, "agents", index), f"no agent named {agent!r}" + suggest(agent, agents, what="agents"))
        if key is None and not claims:
            continue
        if key is not None and key in owners:
            c.error((*path, "key"), f"the same key as client {owners[key]!r}: each caller needs its own key")
        if key is not None:
            owners[key] = name
        admin = m.get("admin", False)
        if not isinstance(admin, bool):
            c.error((*path, "admin"), f"must be true or false, not {admin!r}")
            admin = False
        clients[name] = ClientConfig(name=name, key=key, agents=allowed if allowed is not None else ["*"],
                                     admin=admin, claims=claims)
    return clients


def _read_claims(c: Checker, m: dict[str, Any], path: KeyPath) -> dict[str, list[str]]:
    section = c.mapping(m.get("claims"), (*path, "claims")) if "claims" in m else None
    claims: dict[str, list[str]] = {}
    for claim, value in (section or {}).items():
        values = value if isinstance(value, list) else [value]
        if not values or not all(isinstance(v, (str, int, bool)) for v in values):
            c.error((*path, "claims", claim), "expected a value or a list of values")
            continue
        claims[str(claim)] = [str(v).lower() if isinstance(v, bool) else str(v) for v in values]
    return claims


def _check_security(c: Checker, manifest: Manifest, catalog: Catalog) -> None:
    """Warn once per used api when selected operations demand credentials and none are configured."""
    from ..toolsets import select_tools

    used: dict[str, tuple[KeyPath, dict[str, Tool]]] = {}
    for agent in manifest.agents.values():
        for index, selection in enumerate(agent.tools):
            where, selected = used.setdefault(selection.api, (("agents", agent.name, "tools", index, "api"), {}))
            selected.update((tool.name, tool) for tool in select_tools(selection, catalog))
    for api, (where, selected) in used.items():
        if manifest.api(api).auth:
            continue
        # Security alternatives: one empty alternative means anonymous access is allowed too.
        needing = [tool for tool in selected.values() if tool.security and all(tool.security)]
        if not needing:
            continue
        schemes = sorted({name for tool in needing for alternative in tool.security for name in alternative})
        names = ", ".join(tool.name for tool in needing[:5]) + (", ..." if len(needing) > 5 else "")
        path = ("apis", api) if api in manifest.apis else where
        c.warning(path, f"{len(needing)} selected operation(s) of {api!r} require credentials ({', '.join(schemes)}: "
                        f"{names}) but apis.{api}.auth is not configured; those calls will likely be refused")
