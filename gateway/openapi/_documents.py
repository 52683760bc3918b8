"""Reading spec files and resolving `$ref`s, inside the specs folder only.

A `Documents` registry reads each file once (orjson for JSON, libyaml for YAML) and resolves references
lazily: nothing is copied or expanded up front. A reference is `(file, pointer)`; the file part may only
name another file under the specs root. URLs (`http:`, `file:`, ...) and paths that leave the root are
refused with a `RefError`, never fetched.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import orjson
import yaml

from ..yamlbounds import DocumentTooLarge, check_size, load_bounded

try:  # libyaml is ~10x faster than the pure-Python loader
    _BaseLoader: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - depends on how PyYAML was built
    _BaseLoader = yaml.SafeLoader


class _YamlLoader(_BaseLoader):  # type: ignore[misc]
    """Safe YAML that yields JSON data only: timestamps stay strings, mapping keys become strings
    (`200:` as a response code, `2024-01-01` as a default), so schemas and examples serialize as JSON."""


def _construct_text(loader: Any, node: Any) -> str:
    return str(loader.construct_scalar(node))


def _construct_mapping(loader: Any, node: Any) -> dict[str, Any]:
    loader.flatten_mapping(node)
    return {k if isinstance(k, str) else _key_text(k): v for k, v in loader.construct_pairs(node, deep=True)}


def _key_text(key: Any) -> str:
    if isinstance(key, bool):
        return "true" if key else "false"
    return "null" if key is None else str(key)


_YamlLoader.add_constructor("tag:yaml.org,2002:timestamp", _construct_text)
_YamlLoader.add_constructor("tag:yaml.org,2002:map", _construct_mapping)

SPEC_SUFFIXES = (".json", ".yaml", ".yml")


class RefError(Exception):
    """A `$ref` that cannot be followed (missing, refused, cyclic alias)."""


class LoadError(Exception):
    """A file that cannot be read or parsed; `line` (1-based) where the parser stopped, when it says."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line


def parse_bytes(data: bytes, name: str) -> Any:
    """Parse JSON or YAML; JSON files go through orjson, the rest through libyaml.

    Both within `gateway.yamlbounds`' limits: a file over the byte cap, or YAML whose aliases would
    expand it past the budget (an alias bomb), is a `LoadError`.
    """
    try:
        if name.endswith(".json"):
            check_size(len(data))
            try:
                return orjson.loads(data)
            except orjson.JSONDecodeError as exc:
                where = f"line {exc.lineno}, column {exc.colno}"
                raise LoadError(f"invalid JSON: {exc.msg} ({where})", exc.lineno) from None
        try:
            return load_bounded(data, _YamlLoader)
        except yaml.MarkedYAMLError as exc:
            raise _yaml_error(exc) from None
        except yaml.YAMLError as exc:
            raise LoadError(f"invalid YAML: {exc}".replace("\n", " ")) from None
        except ValueError as exc:  # a scalar the constructor can't make: an integer of 5,000 digits (redteam47)
            raise LoadError(f"invalid YAML: {exc}".split(";", 1)[0]) from None
    except DocumentTooLarge as exc:
        raise LoadError(f"refused: {exc}") from None


def _yaml_error(exc: yaml.MarkedYAMLError) -> LoadError:
    """What the parser met, where, and what it was reading: PyYAML's own text names the stream "<byte string>"
    and puts no line where `gateway validate` shows one."""
    mark = exc.problem_mark or exc.context_mark
    line = mark.line + 1 if mark is not None else None
    message = f"invalid YAML: {exc.problem or exc.context}"
    if mark is not None:
        message += f" (line {line}, column {mark.column + 1}"
        if exc.context and exc.problem and exc.context_mark is not None:
            message += f"; {exc.context} that starts at line {exc.context_mark.line + 1}"
        message += ")"
    return LoadError(message, line)


def escape_token(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _unescape_token(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def walk_pointer(document: Any, pointer: str) -> Any:
    """The node at `pointer` (`/a/b/0`), or raise KeyError."""
    node = document
    if not pointer:
        return node
    if not pointer.startswith("/"):
        raise KeyError(pointer)
    for raw in pointer[1:].split("/"):
        token = _unescape_token(raw)
        if isinstance(node, dict):
            node = node[token]
        elif isinstance(node, list) and token.isdigit():
            node = node[int(token)]
        else:
            raise KeyError(pointer)
    return node


class Documents:
    """Files under one root, loaded on demand, and `$ref` resolution between them.

    Args:
        root: the specs folder; no reference may leave it. None: file references are refused.
    """

    def __init__(self, root: Path | None) -> None:
        self.root = root.resolve() if root is not None else None
        self._docs: dict[str, Any] = {}
        self.dependencies: dict[str, bytes] = {}
        """Files read to follow references, relative name -> content (for the cache key)."""

    def add(self, name: str, document: Any) -> None:
        self._docs[name] = document

    def get(self, name: str) -> Any:
        document = self._docs.get(name)
        if document is None and name not in self._docs:
            document = self._load(name)
        return document

    def _load(self, name: str) -> Any:
        if self.root is None:
            raise RefError(f"cannot follow a reference to file {name!r}: no specs folder")
        path = self.root / name
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise RefError(f"cannot read referenced file {name!r}: {exc.strerror}") from None
        try:
            document = parse_bytes(data, name)
        except LoadError as exc:
            raise RefError(f"referenced file {name!r}: {exc}") from None
        self._docs[name] = document
        self.dependencies[name] = data
        return document

    def split_ref(self, ref: str, current: str) -> tuple[str, str]:
        """`(file, pointer)` of a `$ref` string met in file `current`."""
        if not isinstance(ref, str):
            raise RefError(f"$ref must be a string, not {type(ref).__name__}")
        target, _, fragment = ref.partition("#")
        pointer = unquote(fragment)
        if pointer and not pointer.startswith("/"):
            raise RefError(f"unsupported $ref {ref!r} (anchors are not supported)")
        if not target:
            return current, pointer
        if ":" in target.split("/", 1)[0] or target.startswith("//"):
            raise RefError(f"refused $ref {ref!r}: only files inside the specs folder are followed, never URLs")
        if self.root is None:
            raise RefError(f"refused $ref {ref!r}: file references need a specs folder")
        base = (self.root / current).parent
        resolved = Path(os.path.normpath(base / unquote(target)))
        try:
            relative = resolved.relative_to(self.root)
        except ValueError:
            raise RefError(f"refused $ref {ref!r}: it leaves the specs folder") from None
        # A symlink inside the folder may still point outside it.
        real = resolved.resolve()
        if real != resolved and not real.is_relative_to(self.root):
            raise RefError(f"refused $ref {ref!r}: it leaves the specs folder") from None
        return relative.as_posix(), pointer

    def lookup(self, file: str, pointer: str) -> Any:
        try:
            return walk_pointer(self.get(file), pointer)
        except (KeyError, IndexError, TypeError):
            raise RefError(f"$ref target {file}#{pointer} does not exist") from None

    def resolve(self, node: Any, file: str) -> tuple[Any, str, str]:
        """Follow `$ref` chains from `node` (met in `file`): `(target, file, pointer)`.

        The pointer is "" when `node` was not a reference.
        """
        pointer = ""
        seen: set[tuple[str, str]] = set()
        while isinstance(node, dict) and "$ref" in node:
            file, pointer = self.split_ref(node["$ref"], file)
            if (file, pointer) in seen:
                raise RefError(f"$ref cycle at {file}#{pointer}")
            seen.add((file, pointer))
            node = self.lookup(file, pointer)
        return node, file, pointer
