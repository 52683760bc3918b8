"""What agents.yaml's settings model cannot see alone: names that refer to each other, files, the compiled specs.

Each check reads the typed manifest and reports on the loader's `Checker` (file:line:key): an agent's provider,
a client's agents, the apis and their credentials against the specs, certificate files, provider URLs that go
one part too far, hooks whose module is missing. A name is taken as known when the file has it, even when its
entry was left out for a mistake of its own (already reported), so one mistake is not reported twice.
"""

from __future__ import annotations

import importlib.util
import re
import ssl
from pathlib import Path

from ..catalog import Catalog
from ..kernel.caller import STDIO_CLIENT, TERMINAL_CLIENT
from .agents import MODEL, AgentConfig
from .checker import Checker, suggest
from .credentials import TokenExchangeAuth, UserOAuth, fill_from_spec
from .embeddings_endpoint import local_model_problem
from .hooks_budgets import HookConfig
from .model import ApiConfig, Manifest, ProviderConfig
from .settings import CODE_WORKERS, POSTGRES_MODULES, POSTGRES_SCHEMES, REDIS_MODULES, missing_extra
from .yamlnodes import KeyLines, KeyPath, format_path

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


def check_manifest(c: Checker, manifest: Manifest, catalog: Catalog | None, base_dir: Path) -> None:
    """Every check of this module, in file order of the sections."""
    for provider in manifest.providers.values():
        _check_provider(c, provider)
    for api in manifest.apis.values():
        _check_api(c, api, catalog, base_dir)
    for agent in manifest.agents.values():
        _check_agent(c, agent, manifest, catalog)
    _check_clients(c, manifest)
    _check_user_credentials(c, manifest)
    _check_hooks(c, manifest.hooks, ("hooks",))
    _check_local_model(c, manifest)
    _check_shared_extra(c, manifest)
    _check_concurrency(c, manifest)
    if manifest.budgets.costs_without_prices():
        c.warning(("budgets", "prices"), "a budget in cost needs a price table; without one every call costs 0")


def _check_provider(c: Checker, provider: ProviderConfig) -> None:
    path: KeyPath = ("providers", provider.name)
    if provider.strict and provider.kind not in ("openai", "openai-responses"):
        c.warning((*path, "strict"), f"strict mode is OpenAI's; a {provider.kind} provider ignores it")
    for suffix in _WRONG_SUFFIXES[provider.kind]:
        if provider.base_url.endswith(suffix):
            root = "the /v1 root" if provider.kind.startswith("openai") else "the server root"
            hint = " (for Ollama's OpenAI-compatible /v1 use kind: openai)" if provider.kind == "ollama" and \
                suffix == "/v1" else ""
            c.warning((*path, "base_url"), f"for kind {provider.kind}, base_url is {root}; "
                      f"{_APPENDED[provider.kind]} is appended to it, so {provider.base_url!r} probably ends one "
                      f"part too far{hint}")
            return


def _check_api(c: Checker, api: ApiConfig, catalog: Catalog | None, base_dir: Path) -> None:
    path: KeyPath = ("apis", api.name)
    if catalog is not None and api.name not in known_apis(catalog):
        c.error(path, unknown_api(api.name, catalog))
    spec = catalog.apis.get(api.name) if catalog is not None else None
    schemes = spec.security_schemes if spec is not None else {}
    many = (*path, "auth", 0) in c.lines
    fill_from_spec(api.auth, schemes, lambda index, message: c.error((*path, "auth", index) if many else
                                                                     (*path, "auth"), message))
    api.ca_file = _ca_file(c, api, path, base_dir)
    api.client_cert, api.client_key = _client_cert(c, api, path, base_dir)


def _ca_file(c: Checker, api: ApiConfig, path: KeyPath, base_dir: Path) -> str | None:
    """The api's extra CA certificates (absolute path), checked now: a bad file fails the load, not each call."""
    if not api.ca_file:
        return None
    file = (base_dir / Path(api.ca_file).expanduser()).resolve()
    try:
        ssl.create_default_context(cafile=str(file))
    except (OSError, ssl.SSLError, ValueError) as exc:
        c.error((*path, "ca_file"), f"cannot load CA certificates from {file}: {_reason(exc)}")
        return None
    return str(file)


def _client_cert(c: Checker, api: ApiConfig, path: KeyPath, base_dir: Path) -> tuple[str | None, str | None]:
    """The api's client certificate and key (absolute paths), loaded once now so a bad pair fails the load."""
    if not api.client_cert:
        if api.client_key:
            c.error((*path, "client_key"), "`client_key` needs `client_cert` (the certificate it belongs to)")
        return None, None
    cert = str((base_dir / Path(api.client_cert).expanduser()).resolve())
    key = str((base_dir / Path(api.client_key).expanduser()).resolve()) if api.client_key else None
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_cert_chain(cert, key)
    except (OSError, ssl.SSLError, ValueError) as exc:
        c.error((*path, "client_cert"), f"cannot load the client certificate {cert}"
                f"{' with its key ' + key if key else ''}: {_reason(exc)}")
        return None, None
    return cert, key


def _reason(exc: BaseException) -> str:
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__


def unknown_api(name: str, catalog: Catalog) -> str:
    """Say why: no such file, or a file of that name that did not compile (then its first error)."""
    for diagnostic in catalog.diagnostics:
        if diagnostic.level == "error" and diagnostic.file.rsplit(".", 1)[0] == name:
            return f"no spec named {name!r}: {diagnostic.file} did not compile ({diagnostic.message})"
    return f"no spec named {name!r}" + suggest(name, known_apis(catalog), what="specs")


def known_apis(catalog: Catalog) -> set[str]:
    return set(catalog.apis) | {tool.api for tool in catalog}


def _check_agent(c: Checker, agent: AgentConfig, manifest: Manifest, catalog: Catalog | None) -> None:
    path: KeyPath = ("agents", agent.name)
    agent.line = c.line(path)
    if not re.match(MODEL, agent.model):
        c.error((*path, "model"), f"expected '<provider>/<model id>', got {agent.model!r}{_read_from(c, path)}"
                                  f"{_providers_named(manifest, agent.model)}")
    elif agent.provider not in manifest.providers and ("providers", agent.provider) not in c.lines:
        hint = suggest(agent.provider, manifest.providers, what="providers")
        c.error((*path, "model"), f"no provider named {agent.provider!r}{hint}{_read_from(c, path)}")
    for index, selection in enumerate(agent.tools):
        where: KeyPath = (*path, "tools", index)
        selection.line, selection.pointer = c.line(where), format_path(where)
        selection.key_lines = {format_path(key[len(where):]): line for key, line in c.lines.items()
                               if key[:len(where)] == where and len(key) > len(where)}
        if catalog is not None and selection.api not in known_apis(catalog):
            c.error((*where, "api"), unknown_api(selection.api, catalog))
    _check_native_search(c, agent, manifest, path)
    _check_hooks(c, agent.hooks, (*path, "hooks"))
    # found, not imported (as every other extra here): the config layer sits below code mode
    if agent.code_mode != "off" and _module_missing("pydantic_monty"):
        c.error((*path, "code_mode"), "code mode runs scripts in the pydantic-monty sandbox, which is not "
                "installed: pip install 'gateway[codemode]'")


def _read_from(c: Checker, agent: KeyPath) -> str:
    """` (from GATEWAY_MODEL)` when the model was read from the environment: the variable is what to fix."""
    variables = c.lines.variables_under((*agent, "model")) if isinstance(c.lines, KeyLines) else []
    return f" (from {', '.join(variables)})" if variables else ""


def _providers_named(manifest: Manifest, model: str) -> str:
    """How the model would be written with each provider agents.yaml defines (`openai/gpt-4o`)."""
    if not manifest.providers:
        return ""
    return f"; the providers are {', '.join(manifest.providers)}, e.g. '{next(iter(manifest.providers))}/{model}'"


def _check_native_search(c: Checker, agent: AgentConfig, manifest: Manifest, path: KeyPath) -> None:
    provider = manifest.providers.get(agent.provider)
    if agent.tool_search != "native" or provider is None:
        return
    from ..providers import ADAPTERS  # only here: the adapters (and the HTTP client) are heavy to import

    native = [kind for kind, adapter in ADAPTERS.items() if adapter.native_tool_search]  # the adapters say
    if provider.kind not in native:
        c.error((*path, "tool_search"), f"provider {provider.name!r} (kind {provider.kind}) has no native tool "
                f"search; use a provider of kind {' or '.join(native)}, or `tool_search: on` (the gateway's own)")


def _check_hooks(c: Checker, hooks: list[HookConfig], path: KeyPath) -> None:
    for index, hook in enumerate(hooks):
        module = (hook.call or "").partition(":")[0]
        if module and _module_missing(module):
            c.warning((*path, index, "call"), f"no module {module!r} on the gateway's path (PYTHONPATH); every "
                                              "call of this hook will count as its on_error")


def _check_local_model(c: Checker, manifest: Manifest) -> None:
    embeddings = manifest.gateway.search_embeddings
    if embeddings is None or embeddings.kind != "local":
        return
    problem = local_model_problem(embeddings.model)
    if problem is not None:
        path: KeyPath = ("gateway", "search_embeddings")
        c.error((*path, "model") if (*path, "model") in c.lines else (*path, "kind"), problem)


def _check_shared_extra(c: Checker, manifest: Manifest) -> None:
    """PostgreSQL and Redis run on the `shared` extra: without it `serve` could not open its store."""
    store, redis = manifest.gateway.store, manifest.gateway.redis
    if store and store.startswith(POSTGRES_SCHEMES):
        problem = missing_extra("the PostgreSQL store", POSTGRES_MODULES)
        if problem is not None:
            c.error(("gateway", "store"), problem)
    if redis:
        problem = missing_extra("Redis", REDIS_MODULES)
        if problem is not None:
            c.error(("gateway", "redis"), problem)


def _check_concurrency(c: Checker, manifest: Manifest) -> None:
    """A client's cap is a share of the api's slots: at most their number. The gateway-wide cap is checked against
    the gateway-wide count only; an api with fewer slots of its own than that cap simply has no cap. (With
    gateway.redis the cap is counted across instances, as the slots are: nothing to warn of.)"""
    settings = manifest.gateway
    if settings.max_concurrency_per_client is not None and \
            settings.max_concurrency_per_client > settings.max_concurrency:
        c.error(("gateway", "max_concurrency_per_client"), f"at most gateway.max_concurrency "
                                                           f"({settings.max_concurrency}), got "
                                                           f"{settings.max_concurrency_per_client}")
    for api in manifest.apis.values():
        if api.max_concurrency_per_client is None:
            continue
        limit = api.max_concurrency or settings.max_concurrency
        if api.max_concurrency_per_client > limit:
            where = f"apis.{api.name}.max_concurrency" if api.max_concurrency else "gateway.max_concurrency"
            c.error(("apis", api.name, "max_concurrency_per_client"),
                    f"at most the api's max_concurrency ({limit}, {where}), got {api.max_concurrency_per_client}")
    if settings.max_code_workers_per_client is not None and settings.max_code_workers_per_client > CODE_WORKERS:
        c.error(("gateway", "max_code_workers_per_client"), f"at most the {CODE_WORKERS} sandboxes of a process, "
                                                           f"got {settings.max_code_workers_per_client}")


def _module_missing(module: str) -> bool:
    """Whether `module` cannot be found (without running it: only its parent packages are imported)."""
    try:
        return importlib.util.find_spec(module) is None
    except (ImportError, ValueError):
        return True


def _check_clients(c: Checker, manifest: Manifest) -> None:
    owners: dict[str, str] = {}
    if manifest.gateway.auth is None and any(client.claims for client in manifest.clients.values()):
        c.warning(("clients",), "clients with `claims` are reached only by tokens, and without `gateway.auth` no "
                                "token is taken")
    for name, client in manifest.clients.items():
        path: KeyPath = ("clients", name)
        if name == TERMINAL_CLIENT:  # the terminal's own name: its calls and this client's would share one audit name
            c.warning(path, f"{TERMINAL_CLIENT!r} is the name the audit gives calls and decisions made from a "
                            "terminal (`gateway call`, `gateway chat`, `gateway approvals`): rename this client, "
                            "else the audit cannot tell its calls from the terminal's and its key owns the "
                            "terminal's pending calls and shares their limits")
        if name.split(":", 1)[0] == STDIO_CLIENT:  # likewise for the calls of `gateway mcp` (stdio)
            c.warning(path, f"{STDIO_CLIENT!r} (and {STDIO_CLIENT + ':'!r} before a name) is what the audit calls "
                            "the calls of `gateway mcp AGENT` over stdio: rename this client, else the audit cannot "
                            "tell its calls from theirs and it shares their limits and pending calls")
        for index, agent in enumerate(client.agents):
            if agent != "*" and agent not in manifest.agents and ("agents", agent) not in c.lines:
                c.error((*path, "agents", index) if (*path, "agents", index) in c.lines else (*path, "agents"),
                        f"no agent named {agent!r}" + suggest(agent, manifest.agents, what="agents"))
        for field, key in (("key", client.key), ("previous_key", client.previous_key)):
            if key is None:
                continue
            if key in owners:
                c.error((*path, field), f"the same key as client {owners[key]!r}: each caller needs its own key"
                        if owners[key] != name else "the same key as this client's `key`: a rotation needs a new one")
            owners.setdefault(key, name)


def _check_user_credentials(c: Checker, manifest: Manifest) -> None:
    """Credentials that act as the signed-in user need `gateway.auth` (no caller is one without it), and a user's
    connection needs the address the provider sends them back to."""
    audience = manifest.gateway.auth.audience if manifest.gateway.auth is not None else ""
    for api in manifest.apis.values():
        for index, credential in enumerate(api.auth):
            if not isinstance(credential, TokenExchangeAuth | UserOAuth):
                continue
            path: KeyPath = ("apis", api.name, "auth", index)
            if path not in c.lines:
                path = path[:-1]
            if manifest.gateway.auth is None:
                c.warning(path, f"{credential.type} acts as the signed-in user, and without `gateway.auth` no caller "
                                "is one: every call of this api is refused")
            elif isinstance(credential, TokenExchangeAuth) and _is_audience(credential, audience):
                key = "resource" if credential.resource else "audience"
                c.warning((*path, key) if (*path, key) in c.lines else path,
                          f"the token exchange asks for tokens for the gateway's own audience ({audience}): each "
                          f"call would send {api.name} a token the gateway itself accepts, so the api could call "
                          "every door as the user; name the api's own resource indicator")
            elif isinstance(credential, UserOAuth) and credential.redirect_uri is None and \
                    not audience.startswith(("http://", "https://")):
                c.error(path, "'redirect_uri' is required (the gateway's /connections/callback as registered at the "
                              "provider): gateway.auth.audience is not the gateway's URL to put it under")


def _is_audience(credential: TokenExchangeAuth, audience: str) -> bool:
    """The exchange's target is the gateway's audience (a trailing slash aside, as the gateway compares issuers)."""
    target = credential.resource or credential.audience or ""
    return target.rstrip("/") == audience.rstrip("/")
