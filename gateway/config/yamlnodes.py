"""YAML with line numbers and `${VAR}` substitution, for the manifest loader.

`yaml.safe_load` forgets where a value came from and silently keeps the last of two duplicate keys.
Here the document is composed into nodes first (`gateway.config.yamlcompose`), then built into plain Python
values while every key path is mapped to its 1-based line, so each diagnostic can say
`agents.yaml:9: agents.x.model: ...`.

Key paths are tuples of mapping keys (str) and sequence indexes (int); `format_path` renders them as
`agents.reader.tools[1].api`. Mapping keys are always taken literally as strings (`yes:` is the
key "yes", not True), because agent, api and operation names are text.

`${VAR}` and `${VAR:-default}` inside string values read the environment; `$${` stands for a
literal `${`. A plain (unquoted) value that is a single substitution is typed again afterwards, so
`max_iterations: ${MAX_ITER:-40}` gives the int 40.

The document as written (`Document`: values, lines, where variables are read) does not depend on the environment,
so a loader given a cache entry keeps it there, keyed by the text's SHA-256 and this reading's code: a start whose
agents.yaml has not changed reads the document back and substitutes the environment again, without importing
PyYAML (whose import compiles its regular expressions: about a fifth of what `gateway mcp` adds to the MCP SDK's
own start). A document with a mistake is never cached; an entry that does not load is composed again.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..catalog import Diagnostic

KeyPath = tuple[str | int, ...]

_VAR = re.compile(r"\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_ANY_VAR = re.compile(r"\$\{([^}]*)\}?")
_SIMPLE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
RETYPED_TAGS = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:bool")
MAY_RETYPE = frozenset("0123456789+-_.:\nabcdefABCDEFxiIlLnNoOrRsStTuUyY")
"""Every character YAML 1.1's int, float and bool forms are written with (PyYAML's resolver): a substituted value
with any other character is text, decided without importing PyYAML."""
_FORMAT = "gateway-manifest-1"
"""Bump when `Document`'s layout changes; the code that composes one is in the entry's key by itself."""


class _Missing:
    """The value of a scalar whose substitution failed (already reported): checks skip it."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class KeyLines(dict[KeyPath, int]):
    """Each key path's 1-based line; `variables` names the environment variables each value read (a warning
    about an empty value can then say which variable to set)."""

    def __init__(self) -> None:
        super().__init__()
        self.variables: dict[KeyPath, list[str]] = {}

    def variables_under(self, prefix: KeyPath) -> list[str]:
        """The variables read by the values at or under `prefix`, in order, once each."""
        found = [name for path, names in self.variables.items() if path[:len(prefix)] == prefix for name in names]
        return list(dict.fromkeys(found))


def format_path(path: KeyPath) -> str:
    """`("agents", "reader", "tools", 1, "api")` -> `agents.reader.tools[1].api`."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _SIMPLE_KEY.match(part):
            out += f".{part}" if out else part
        else:
            out += f"[{part!r}]"
    return out


class Document:
    """A YAML document as written: its values (a string that reads a variable still as written), each key path's
    line, and in document order `events`: ("variable", path, line, text, plain) where a value reads the
    environment, ("error", path, line, message) for a key that could not be taken (a duplicate, a list as a key)."""

    __slots__ = ("data", "events", "lines")

    def __init__(self, data: Any = None, lines: dict[KeyPath, int] | None = None,
                 events: list[tuple[Any, ...]] | None = None) -> None:
        self.data = data
        self.lines: dict[KeyPath, int] = {} if lines is None else lines
        self.events: list[tuple[Any, ...]] = [] if events is None else events

    def resolve(self, file: str, environ: Mapping[str, str]) -> tuple[Any, KeyLines, list[Diagnostic]]:
        """The values with the environment read into them (consumes the document), their lines, the diagnostics."""
        lines = KeyLines()
        lines.update(self.lines)
        diagnostics: list[Diagnostic] = []
        data = self.data
        for event in self.events:
            if event[0] == "error":
                _, path, line, message = event
                diagnostics.append(Diagnostic(level="error", file=file, pointer=format_path(path), line=line,
                                              message=message))
                continue
            _, path, line, text, plain = event
            value = _substitute(text, plain, path, line, file, environ, lines, diagnostics)
            data = _put(data, path, value)
        return data, lines, diagnostics


def _put(data: Any, path: KeyPath, value: Any) -> Any:
    if not path:
        return value
    parent = data
    for part in path[:-1]:
        parent = parent[part]
    parent[path[-1]] = value
    return data


def _substitute(text: str, plain: bool, path: KeyPath, line: int, file: str, environ: Mapping[str, str],
                lines: KeyLines, diagnostics: list[Diagnostic]) -> Any:
    """`text` with the environment read into it (MISSING when a variable is missing or the text is malformed); a
    plain value that is one substitution typed again."""
    missing: list[str] = []

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$${":
            return "${"
        name, default = match.group(1), match.group(2)
        lines.variables.setdefault(path, []).append(name)
        if name in environ:
            return environ[name]
        if default is not None:
            return default
        missing.append(name)
        return ""

    def error(message: str) -> None:
        diagnostics.append(Diagnostic(level="error", file=file, pointer=format_path(path), line=line, message=message))

    result = _VAR.sub(replace, text)
    for name in missing:
        error(f"environment variable {name} is not set and has no default (write ${{{name}:-default}} to give one)")
    leftover = _ANY_VAR.search(_VAR.sub("", text))
    if leftover:
        error(f"malformed substitution {leftover.group(0)!r}: use ${{NAME}} or ${{NAME:-default}} (NAME: letters, "
              "digits, _)")
        return MISSING
    if missing:
        return MISSING
    if plain and _VAR.fullmatch(text.strip()):
        return _retyped(result)
    return result


def _retyped(text: str) -> Any:
    """A plain `${VAR}`'s value typed as YAML types what is written in its place (`40`: the int 40)."""
    if not text or not MAY_RETYPE.issuperset(text):
        return text  # YAML reads it as text (an empty one as null, which stays the empty text here)
    from .yamlcompose import retype

    return retype(text)


def load_yaml(text: str, *, file: str, environ: Mapping[str, str], cache: Path | None = None,
              ) -> tuple[Any, dict[KeyPath, int], list[Diagnostic]]:
    """Parse one YAML document into plain values, a key path -> line map, and diagnostics.

    A syntax error gives `(None, {}, [error])` with the line YAML reported. `cache`: the file that keeps this
    document as written (`cache_entry`), read when it holds this text's, written when it does not.
    """
    document = _cached(cache, text) if cache is not None else None
    if document is None:
        from .yamlcompose import compose_document

        composed = compose_document(text, file=file)
        if isinstance(composed, Diagnostic):
            return None, {}, [composed]
        document = composed
        if cache is not None and not any(event[0] == "error" for event in document.events):
            _keep(cache, text, document)
    return document.resolve(file, environ)


def cache_entry(directory: Path, path: Path) -> Path:
    """The file in the cache folder `directory` that keeps the document of the agents file at `path`."""
    name = hashlib.sha256(str(Path(path).resolve()).encode()).hexdigest()[:24]
    return Path(directory) / f"agents-{name}.pickle"


def _key(text: str) -> tuple[str, str, str]:
    """The text's digest and the reading's code: a change to either composes the document again."""
    code = hashlib.sha256()
    here = Path(__file__).resolve().parent
    for source in (here / "yamlcompose.py", here / "yamlnodes.py", here.parent / "yamlbounds.py"):
        try:
            code.update(source.read_bytes())
        except OSError:
            code.update(b"missing")
    import importlib.util

    spec = importlib.util.find_spec("yaml")  # PyYAML itself: a new version composes the document again
    try:
        stat = os.stat(spec.origin) if spec is not None and spec.origin else None
    except OSError:
        stat = None
    code.update(repr(stat and (stat.st_size, stat.st_mtime_ns)).encode())
    return _FORMAT, code.hexdigest(), hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _cached(cache: Path, text: str) -> Document | None:
    try:
        with open(cache, "rb") as handle:
            entry = pickle.load(handle)  # noqa: S301 - our own per-user cache folder, as the compiled specs'
        if not isinstance(entry, dict) or entry.get("key") != _key(text):
            return None
        data, lines, events = entry["document"]
        return Document(data, lines, events)
    except Exception:  # noqa: BLE001 - a missing or damaged entry means: compose again
        return None


def _keep(cache: Path, text: str, document: Document) -> None:
    import tempfile

    entry = {"key": _key(text), "document": (document.data, document.lines, document.events)}
    try:
        cache.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        handle, temporary = tempfile.mkstemp(dir=cache.parent, suffix=".tmp")
        with os.fdopen(handle, "wb") as out:
            pickle.dump(entry, out, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(temporary, cache)
    except (OSError, pickle.PicklingError):
        return  # a read-only or full cache folder must not stop the gateway: it composes next time too
