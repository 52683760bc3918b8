"""A spec document, or a folder of them, to a `Catalog`; diagnostics instead of exceptions."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..catalog import ApiSpec, Catalog, Diagnostic, Tool
from . import _cache
from ._documents import SPEC_SUFFIXES, Documents, LoadError, RefError, parse_bytes
from ._names import base_name, prefix_colliding, unique_in_spec

DEFAULT_MAX_DESCRIPTION = 1024
"""Characters of summary + description kept in a tool's description (notes on deprecation and scopes kept).
`compile_specs` reads `GATEWAY_MAX_DESCRIPTION` from the environment when no size is passed."""


def _description_size(value: int | None) -> int:
    if value is not None:
        return value
    configured = os.environ.get("GATEWAY_MAX_DESCRIPTION", "")
    return int(configured) if configured.isdigit() and int(configured) > 0 else DEFAULT_MAX_DESCRIPTION


def compile_document(document: Any, *, api: str, file: str = "", documents: Documents | None = None,
                     max_description: int = DEFAULT_MAX_DESCRIPTION) -> Catalog:
    """Compile one parsed spec. File `$ref`s are followed only when `documents` has a specs folder."""
    tools, spec, diagnostics = _compile_one(document, api=api, file=file, documents=documents,
                                            max_description=max_description)
    return Catalog(tools, {api: spec} if spec else {}, diagnostics)


def _compile_one(document: Any, *, api: str, file: str, documents: Documents | None,
                 max_description: int) -> tuple[list[Tool], ApiSpec | None, list[Diagnostic]]:
    # The compiler proper (and jsonschema-rs, which checks a spec's own values) is imported here, for the first
    # spec compiled: a catalog read from the cache (`gateway mcp`'s start) needs none of it, nor the search index's
    # builder (the index comes with the cached entry).
    from ..offer.index import build_index
    from ..offer.tag_text import tag_descriptions
    from ._operations import METHODS, OperationCompiler, OperationError, operation_pointer
    from ._schema import SchemaError, SchemaTranslator
    from ._swagger import translate_swagger

    diagnostics: list[Diagnostic] = []

    def warn(pointer: str, message: str) -> None:
        diagnostics.append(Diagnostic(level="warning", file=file, pointer=pointer, message=message))

    def error(pointer: str, message: str) -> None:
        diagnostics.append(Diagnostic(level="error", file=file, pointer=pointer, message=message))

    def warn_at(where: str, pointer: str, message: str) -> None:  # in a file the spec refers to, too
        diagnostics.append(Diagnostic(level="warning", file=where, pointer=pointer, message=message))

    def error_at(where: str, pointer: str, message: str) -> None:
        diagnostics.append(Diagnostic(level="error", file=where, pointer=pointer, message=message))

    skipped: dict[str, Diagnostic] = {}

    def skip(pointer: str, operation: dict[str, Any], method: str, path: str, reason: str) -> None:
        error(pointer, f"operation skipped: {reason}")
        operation_id = operation.get("operationId")
        key = operation_id if isinstance(operation_id, str) and operation_id else base_name(None, method, path)
        skipped.setdefault(key, diagnostics[-1])

    if not isinstance(document, dict):
        error("", "not an OpenAPI document (the top level is not a mapping)")
        return [], None, diagnostics
    documents = documents or Documents(None)
    documents.add(file, document)
    version = str(document.get("openapi") or document.get("swagger") or "")
    if document.get("swagger") == "2.0" or version.startswith("2."):
        view = translate_swagger(document, documents, file, warn)
    elif version.startswith("3."):
        view = document
    else:
        error("", "not an OpenAPI document: no `openapi: 3.x` or `swagger: \"2.0\"` field")
        return [], None, diagnostics
    raw_info = document.get("info")
    info: dict[str, Any] = raw_info if isinstance(raw_info, dict) else {}
    translator = SchemaTranslator(documents, file, warn_at, error_at, broken=warn_at)
    compiler = OperationCompiler(view, documents, file, api, translator, warn, max_description)
    tools: list[Tool] = []
    taken: set[str] = set()
    by_operation_id: dict[str, str] = {}  # operationId -> `METHOD path` of the first operation that has it
    operations = 0
    paths = view.get("paths")
    if paths is not None and not isinstance(paths, dict):
        error("/paths", "paths must be a mapping")
        paths = {}
    for path, item in (paths or {}).items():
        try:
            item = documents.resolve(item, file)[0]
        except RefError as exc:
            error(operation_pointer(path, "")[:-1], str(exc))
            continue
        if not isinstance(item, dict):
            continue
        for method in METHODS:
            operation = item.get(method)
            if not isinstance(operation, dict):
                continue
            operations += 1
            pointer = operation_pointer(path, method)
            try:
                tool = compiler.compile(path, method, item, operation, pointer)
            except (OperationError, SchemaError, RefError) as exc:
                skip(pointer, operation, method, path, str(exc))
                continue
            except RecursionError:
                skip(pointer, operation, method, path, "schema nesting too deep")
                continue
            except Exception as exc:  # noqa: BLE001 - bad input must never end the whole compile
                skip(pointer, operation, method, path, f"unexpected {type(exc).__name__}: {exc}")
                continue
            name = base_name(tool.operation_id, method, path)
            tool.name = unique_in_spec(name, method.upper(), path, taken)
            taken.add(tool.name)
            tools.append(tool)
            if tool.operation_id:
                first = by_operation_id.setdefault(tool.operation_id, f"{method.upper()} {path}")
                if first != f"{method.upper()} {path}":
                    # Said here, where the pointer and line are known: the tool still exists, under a name the
                    # spec's author did not write, which agents.yaml's `operations:` must then use.
                    warn(f"{pointer}/operationId", f"operationId {tool.operation_id!r} is also that of {first}: "
                         f"this operation's tool is named {tool.name!r}; give each operation its own operationId")
    translator.check_values()
    spec = ApiSpec(
        name=api, file=file, openapi_version=version,
        title=str(info.get("title", "")), version=str(info.get("version", "")),
        servers=compiler.servers,
        security_schemes=_security_schemes(view, documents, file),
        operation_count=operations, tool_count=len(tools), skipped=skipped,
        tag_descriptions=tag_descriptions(view),
    )
    spec.search_index = build_index(tools, spec.tag_descriptions)
    return tools, spec, diagnostics


def _security_schemes(view: dict[str, Any], documents: Documents, file: str) -> dict[str, dict[str, Any]]:
    schemes = (view.get("components") or {}).get("securitySchemes") or {}
    result = {}
    for name, scheme in schemes.items() if isinstance(schemes, dict) else ():
        try:
            scheme = documents.resolve(scheme, file)[0]
        except RefError:
            continue
        if isinstance(scheme, dict):
            result[str(name)] = scheme
    return result


def spec_files(specs_dir: Path) -> list[Path]:
    """Every spec file under the folder, any depth, in a stable order; hidden files and folders skipped."""
    found = []
    for path in specs_dir.rglob("*"):
        relative = path.relative_to(specs_dir)
        if path.suffix.lower() in SPEC_SUFFIXES and not any(p.startswith(".") for p in relative.parts):
            if path.is_file():
                found.append(path)
    return sorted(found, key=lambda p: p.relative_to(specs_dir).as_posix())


def compile_specs(specs_dir: Path, *, cache_dir: Path | None = None, use_cache: bool = True,
                  progress: Callable[[str], None] | None = None,
                  max_description: int | None = None, digests: Mapping[Path, str | None] | None = None) -> Catalog:
    """Compile every spec under `specs_dir` into one catalog; never raises for bad specs.

    Args:
        specs_dir: the folder; the api name of a file is its relative path without extension.
        cache_dir: where compiled specs are kept (default `$GATEWAY_CACHE_DIR` or `~/.cache/gateway`).
        use_cache: False compiles everything again and does not touch the cache.
        progress: called with a short line per spec (the CLI shows it on a terminal).
        max_description: characters kept of each operation's summary + description
            (default `$GATEWAY_MAX_DESCRIPTION`, else 1024).
        digests: the SHA-256 (hex) of spec files' bytes the caller has read already (`gateway.runtime`'s reload
            fingerprint): a spec cached under its digest is then neither read nor hashed again.
    """
    specs_dir = Path(specs_dir)
    max_description = _description_size(max_description)
    if not specs_dir.is_dir():
        problem = Diagnostic(level="error", file=str(specs_dir), message="the specs folder does not exist")
        return Catalog((), {}, [problem])
    cache = _cache.CatalogCache(cache_dir or _cache.default_dir(), max_description) if use_cache else None
    files = spec_files(specs_dir)
    results: list[tuple[list[Tool], ApiSpec | None, list[Diagnostic]]] = []
    apis: dict[str, str] = {}
    for index, path in enumerate(files, 1):
        relative = path.relative_to(specs_dir).as_posix()
        api = relative.rsplit(".", 1)[0]
        if api in apis:
            message = f"api name {api!r} is already taken by {apis[api]}: file skipped"
            results.append(([], None, [Diagnostic(level="error", file=relative, message=message)]))
            continue
        apis[api] = relative
        known = digests.get(path) if digests is not None else None
        cached = cache.load(relative, known, specs_dir) if cache and known else None
        if cached is None:
            try:
                data = path.read_bytes()
            except OSError as exc:
                results.append(([], None, [Diagnostic(level="error", file=relative, message=f"unreadable: {exc}")]))
                continue
            digest = hashlib.sha256(data).hexdigest()
            if cache and digest != known:  # changed since the caller read it (or not read by the caller)
                cached = cache.load(relative, digest, specs_dir)
        if cached is not None:
            if progress:
                progress(f"[{index}/{len(files)}] {relative}: cached")
            results.append(cached)
            continue
        if progress:
            progress(f"[{index}/{len(files)}] {relative}: compiling ({len(data) // 1024} KiB)")
        result, dependencies = _compile_file(data, relative, api, specs_dir, max_description)
        if result[1] is not None:
            result[1].content_hash = digest
        results.append(result)
        if cache:
            cache.store(relative, digest, dependencies, result)
    return _merge(results)


def _compile_file(data: bytes, relative: str, api: str, specs_dir: Path,
                  max_description: int) -> tuple[tuple[list[Tool], ApiSpec | None, list[Diagnostic]], dict[str, bytes]]:
    try:
        document = parse_bytes(data, relative)
    except LoadError as exc:
        return ([], None, [Diagnostic(level="error", file=relative, message=str(exc), line=exc.line)]), {}
    if isinstance(document, dict) and "openapi" not in document and "swagger" not in document:
        # A fragment other specs point into (components in their own file): not an api of its own.
        note = "not an OpenAPI document (no `openapi`/`swagger` field): skipped as a spec"
        return ([], None, [Diagnostic(level="warning", file=relative, message=note)]), {}
    documents = Documents(specs_dir)
    result = _compile_one(document, api=api, file=relative, documents=documents, max_description=max_description)
    return result, documents.dependencies


def _merge(results: list[tuple[list[Tool], ApiSpec | None, list[Diagnostic]]]) -> Catalog:
    final = prefix_colliding((tool.api, tool.name) for tools, _, _ in results for tool in tools)
    tools: list[Tool] = []
    apis: dict[str, ApiSpec] = {}
    diagnostics: list[Diagnostic] = []
    for spec_tools, spec, spec_diagnostics in results:
        for tool in spec_tools:
            tool.name = final[(tool.api, tool.name)]
            tools.append(tool)
        if spec is not None:
            apis[spec.name] = spec
        diagnostics.extend(spec_diagnostics)
    return Catalog(tools, apis, diagnostics)
