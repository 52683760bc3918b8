"""Where each effective setting came from: `gateway settings`.

One settings model (`gateway.config.model`) is filled from layers, the later winning: the model's defaults,
agents.yaml (its `${VAR}` substitutions read the environment), and for the process the command line and its
`GATEWAY_*` variables. agents.yaml has no include of other files: what it names (certificates, specs) is read
where it is used, not merged into the settings. `effective_settings` walks the loaded `Manifest` leaf by leaf and
tells each one's layer from what the loader kept: the key paths' lines (`yamlnodes.KeyLines`), the variables each
value read, and pydantic's `model_fields_set` (a key the file left out is a default; one a validator filled from
another key is implied by it).

A secret is never shown: a value the manifest lists as a secret (`Manifest.secrets`, the redactor's source) or a
field that holds one (`api_key`, `token`, `password`, ...) reads `set` or `unset`, and a URL carrying a password
has it replaced by `[set]`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, is_dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from ..catalog import Diagnostic
from .checker import KeySources
from .loader import read_checked, read_text
from .model import SECRET_HEADER, Manifest
from .yamlnodes import KeyLines, KeyPath, format_path

Layer = Literal["default", "agents.yaml", "environment", "command line"]
LAYERS: tuple[Layer, ...] = ("default", "agents.yaml", "environment", "command line")

SECRET_FIELDS = frozenset({"api_key", "key", "previous_key", "token", "password", "client_secret"})
"""Fields whose value is a credential: shown `set` or `unset`, even when empty."""
PROCESS_SECRETS = frozenset({"connections_key"})


@dataclass(frozen=True, slots=True)
class Setting:
    key: str
    """The key path, as diagnostics write it (`agents.triage.max_iterations`); process settings have bare names."""
    value: Any
    """The effective value (a secret: `set` or `unset`)."""
    layer: Layer
    source: str
    """Where exactly: `agents.yaml:14`, `$GATEWAY_MODEL via agents.yaml:26`, `--specs`, `GATEWAY_CACHE_DIR`."""

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def effective_settings(agents: Path, *, environ: Mapping[str, str] | None = None,
                       agent: str | None = None) -> tuple[list[Setting], list[Diagnostic], Manifest]:
    """Every leaf of agents.yaml's settings model with its layer (only those bearing on `agent` when given: its
    own keys, its provider's, its apis', the clients that may call it, and `gateway`), the loader's diagnostics,
    and the manifest read from the file now."""
    environ = os.environ if environ is None else environ
    text, file, unreadable = read_text(agents)
    if unreadable is not None:
        return [], [unreadable], Manifest(file=file)
    manifest, checker, _ = read_checked(text, file=file, catalog=None, environ=environ, base_dir=agents.parent)
    return loaded_settings(manifest, environ=environ, agent=agent), checker.sorted(), manifest


def loaded_settings(manifest: Manifest, *, environ: Mapping[str, str] | None = None,
                    agent: str | None = None) -> list[Setting]:
    """`effective_settings`' rows of a manifest already loaded (a running gateway's: `GET /settings`), each value
    with the line and variables it was loaded from (`Manifest.key_sources`), whatever the file says now."""
    environ = os.environ if environ is None else environ
    sources = manifest.key_sources if isinstance(manifest.key_sources, KeySources) else \
        KeySources(manifest.file, KeyLines())
    walker = _Walker(sources.file, sources.key_lines, sources.file_path, environ, set(manifest.secrets()))
    return [s for s in walker.walk(manifest, (), True) if agent is None or _bears_on(s.key, manifest, agent)]


def process_settings(*, specs: Path | None, agents: Path | None, no_cache: bool,
                     environ: Mapping[str, str] | None = None) -> list[Setting]:
    """The settings of the process rather than of agents.yaml: the command line's, then `GATEWAY_*`, then the
    defaults (`gateway serve`'s own flags are its own: `gateway serve --help`)."""
    environ = os.environ if environ is None else environ
    out: list[Setting] = []
    for key, given, variable, default in (("specs", specs, "GATEWAY_SPECS", "./specs"),
                                          ("agents", agents, "GATEWAY_AGENTS", "./agents.yaml")):
        if given is not None:
            out.append(Setting(key, str(given), "command line", f"--{key}"))
        else:
            out.append(_from_environment(key, variable, default, environ))
    if no_cache:
        out.append(Setting("cache_dir", "off", "command line", "--no-cache"))
    else:
        out.append(_from_environment("cache_dir", "GATEWAY_CACHE_DIR", "~/.cache/gateway", environ))
    out.append(_from_environment("log_format", "GATEWAY_LOG_FORMAT", "text", environ))
    connections = _from_environment("connections_key", "GATEWAY_CONNECTIONS_KEY", "", environ)
    out.append(Setting(connections.key, "set" if connections.value else "unset", connections.layer,
                       connections.source))
    return out


def _from_environment(key: str, variable: str, default: str, environ: Mapping[str, str]) -> Setting:
    if environ.get(variable):
        return Setting(key, environ[variable], "environment", variable)
    return Setting(key, default, "default", f"{variable} unset")


def _bears_on(key: str, manifest: Manifest, agent: str) -> bool:
    config = manifest.agents.get(agent)
    if config is None:
        return False
    prefixes = [f"agents.{agent}.", f"providers.{config.provider}.", "gateway.", "budgets."]
    prefixes += [f"apis.{selection.api}." for selection in config.tools]
    prefixes += [f"clients.{name}." for name, client in manifest.clients.items()
                 if "*" in client.agents or agent in client.agents]  # who may call it
    return any(key.startswith(prefix) for prefix in prefixes)


class _Walker:
    def __init__(self, file: str, lines: KeyLines, file_path: Any, environ: Mapping[str, str],
                 secrets: set[str]) -> None:
        self.file = file
        self.lines = lines
        self.file_path = file_path
        self.environ = environ
        self.secrets = {secret for secret in secrets if secret}

    def walk(self, value: Any, path: KeyPath, written: bool) -> Iterator[Setting]:
        """The leaves under `value` at `path`; `written`: the key was given (not a default)."""
        if isinstance(value, BaseModel):
            fields = type(value).model_fields
            for name, field in fields.items():
                if field.exclude:  # a name or line the loader fills in
                    continue
                child = (*path, field.alias or name)
                yield from self.walk(getattr(value, name), child, written and name in value.model_fields_set)
            return
        if isinstance(value, dict) and value and all(isinstance(v, BaseModel) for v in value.values()):
            for name, entry in value.items():
                yield from self.walk(entry, (*path, name), written)
            return
        if isinstance(value, list) and value and all(isinstance(v, BaseModel) for v in value):
            for index, entry in enumerate(value):
                yield from self.walk(entry, (*path, index), written)
            return
        if isinstance(value, dict) and value and written:  # headers, fixed arguments, claims: one line each
            for name, entry in value.items():
                yield self.leaf(entry, (*path, name), written)
            return
        yield self.leaf(value, path, written)

    def leaf(self, value: Any, path: KeyPath, written: bool) -> Setting:
        key = format_path(path)
        shown = self.shown(value, path)
        if not written:
            return Setting(key, shown, "default", "built in")
        where = self.file_path(path)
        line = self.lines.get(where)
        if line is None:  # one mapping where the model keeps a list (`auth: {...}` is `auth: [{...}]`): no index
            single = tuple(part for n, part in enumerate(where)
                           if not (isinstance(part, int) and where[:n + 1] not in self.lines))
            if single != where and single in self.lines:
                where, line = single, self.lines[single]
        if line is None and value in (None, "", [], {}):  # left out, normalised by a validator: still the default
            return Setting(key, shown, "default", "built in")
        if line is None:  # filled from another key (a provider's kind from its name), or written in a short form
            above = next((where[:n] for n in range(len(where) - 1, 0, -1) if where[:n] in self.lines), None)
            if above is None:
                return Setting(key, shown, "default", "implied")
            if any(other[:len(above)] == above and len(other) > len(above) for other in self.lines):
                return Setting(key, shown, "default", f"implied by {self.file}:{self.lines[above]}")
            where, line = above, self.lines[above]  # a scalar or list there: `tools: [shop]` is `{api: shop}`
        variables = self.lines.variables_under(where)
        read = [name for name in variables if name in self.environ]
        if read:
            return Setting(key, shown, "environment", f"{', '.join('$' + n for n in read)} via {self.file}:{line}")
        unset = "".join(f" (${name} unset: its default)" for name in variables)
        return Setting(key, shown, "agents.yaml", f"{self.file}:{line}{unset}")

    def shown(self, value: Any, path: KeyPath) -> Any:
        if is_dataclass(value) and not isinstance(value, type):  # a parsed value (a rate limit): its fields
            value = {field: round(v, 6) if isinstance(v, float) else v for field, v in asdict(value).items()}
        name = path[-1] if path and isinstance(path[-1], str) else ""
        header = len(path) >= 2 and path[-2] == "headers" and bool(SECRET_HEADER.search(name))
        if name in SECRET_FIELDS or header:
            return "set" if value else "unset"
        if isinstance(value, str):
            if value in self.secrets:
                return "set"
            for secret in self.secrets:
                if secret in value:
                    value = value.replace(secret, "[set]")
            return value
        if isinstance(value, dict | list):
            text = json.dumps(value, default=str)
            if any(secret in text for secret in self.secrets):
                return "set"
        return value
