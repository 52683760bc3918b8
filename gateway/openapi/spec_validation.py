"""`gateway validate`: the compile report per spec plus full openapi-spec-validator validation.

Full validation is slow (seconds on GitHub's spec), so it lives here and never on the path of
`serve` or `tools`. Its findings are warnings: real specs are often slightly invalid and still
compile. A spec is *unusable* when it cannot be loaded, or has operations and none compiled; it is
*incomplete* when it is usable but something was lost: an operation skipped, or a schema keyword the
compiler could not read (each an error diagnostic with a pointer; `lost` counts them). Diagnostics get
line numbers here (`_lines`), so the compile itself stays as fast as before.
A spec with a `$ref` to a URL or outside the folder is not fully validated (the validator would
follow it); the compiler has already refused that reference.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..catalog import Catalog, Diagnostic
from ._compile import spec_files
from ._documents import Documents, LoadError, RefError, escape_token, parse_bytes
from ._lines import add_lines
from ._validator_walk import MAX_WALK, costly_walk

MAX_VALIDATION_ERRORS = 20
"""Full-validation findings reported per spec (the rest are counted)."""


@dataclass(slots=True, kw_only=True)
class SpecReport:
    file: str
    api: str
    operations: int = 0
    tools: int = 0
    diagnostics: list[Diagnostic] = field(default_factory=list)
    usable: bool = True

    @property
    def lost(self) -> int:
        """Error diagnostics inside a spec that still compiled: skipped operations, unreadable keywords."""
        return sum(d.level == "error" and bool(d.pointer) for d in self.diagnostics) if self.usable else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file, "api": self.api, "operations": self.operations, "tools": self.tools,
            "usable": self.usable, "lost": self.lost,
            "errors": sum(d.level == "error" for d in self.diagnostics),
            "warnings": sum(d.level == "warning" for d in self.diagnostics),
            "diagnostics": [d.to_dict() for d in self.diagnostics],
        }


def spec_reports(specs_dir: Path, catalog: Catalog, *, full: bool = True) -> list[SpecReport]:
    """One report per spec file: counts, the compiler's diagnostics and (with `full`) spec validation."""
    specs_dir = Path(specs_dir)
    reports = {}
    for path in spec_files(specs_dir) if specs_dir.is_dir() else []:
        relative = path.relative_to(specs_dir).as_posix()
        reports[relative] = SpecReport(file=relative, api=relative.rsplit(".", 1)[0])
    for spec in catalog.apis.values():
        report = reports.setdefault(spec.file, SpecReport(file=spec.file, api=spec.name))
        report.operations, report.tools = spec.operation_count, spec.tool_count
    for diagnostic in catalog.diagnostics:
        report = reports.setdefault(diagnostic.file, SpecReport(file=diagnostic.file, api=""))
        report.diagnostics.append(diagnostic)
    for report in reports.values():
        loaded = report.file in {s.file for s in catalog.apis.values()}
        file_error = any(d.level == "error" and not d.pointer for d in report.diagnostics)
        fragment = not loaded and not file_error
        report.usable = not file_error and not (report.operations and not report.tools)
        if full and loaded and not fragment:
            report.diagnostics.extend(validate_spec(specs_dir, report.file))
        add_lines(specs_dir, report.diagnostics)
    return list(reports.values())


def validate_spec(specs_dir: Path, relative: str) -> list[Diagnostic]:
    """Full validation with openapi-spec-validator; findings as warnings."""
    from openapi_spec_validator import OpenAPIV2SpecValidator, OpenAPIV30SpecValidator, OpenAPIV31SpecValidator
    from openapi_spec_validator.validation.exceptions import DuplicateOperationIDError

    path = Path(specs_dir) / relative
    try:
        document = parse_bytes(path.read_bytes(), relative)
    except (OSError, LoadError):
        return []  # already reported by the compiler
    if not isinstance(document, dict):
        return []
    documents = Documents(Path(specs_dir))
    blocked = _blocked_ref(document, documents, relative)
    if blocked:
        return [_note(relative, "", f"full validation skipped: {blocked}")]
    documents.add(relative, document)
    costly = costly_walk(document, documents, relative)
    if costly is not None:
        return [_note(relative, costly, "full validation skipped: the validator would walk this schema's "
                      f"allOf/anyOf/oneOf branches more than {MAX_WALK:,} times (the same schemas reached by "
                      "several branches, level after level)")]
    version = str(document.get("openapi") or document.get("swagger") or "")
    if version.startswith("2"):
        validator_class: Any = OpenAPIV2SpecValidator
    elif version.startswith("3.1"):
        validator_class = OpenAPIV31SpecValidator
    else:
        validator_class = OpenAPIV30SpecValidator
    found = []
    try:
        for index, error in enumerate(validator_class(document, base_uri=path.resolve().as_uri()).iter_errors()):
            if index >= MAX_VALIDATION_ERRORS:
                found.append(_note(relative, "", "more spec validation findings not shown"))
                break
            if isinstance(error, DuplicateOperationIDError):
                continue  # the compiler says it at the operation's pointer, with the name its tool got instead
            place = list(getattr(error, "path", ()))
            message = str(getattr(error, "message", error)).splitlines()[0][:300]
            if _at(document, place, getattr(error, "instance", None)):
                pointer = "".join("/" + escape_token(str(p)) for p in place)
            else:  # a schema object's finding, its path relative to that schema: no place in this file
                pointer, message = "", f"{message} (in a schema object; the validator does not say which)"
            found.append(_note(relative, pointer, f"spec validation: {message}"))
    except Exception as exc:  # noqa: BLE001 - the validator's own failures are findings, not crashes
        ref = getattr(exc, "ref", None)  # referencing's Unresolvable: its text quotes the whole document searched
        what = f"the $ref {ref!r} leads nowhere" if isinstance(ref, str) else str(exc)
        found.append(_note(relative, "", f"spec validation stopped: {type(exc).__name__}: {what}"[:300]))
    return found


def _at(document: Any, path: list[Any], instance: Any) -> bool:
    """Whether `path` leads from the document's root to `instance` (the finding's place is in this document; a
    container is taken as found, since the validator may hand it over in a wrapper of its own)."""
    node = document
    for part in path:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            return False
    return isinstance(instance, dict | list) or bool(node == instance)


def _note(file: str, pointer: str, message: str) -> Diagnostic:
    return Diagnostic(level="warning", file=file, pointer=pointer, message=message)


def _blocked_ref(document: Any, documents: Documents, file: str) -> str | None:
    """The first `$ref` the validator must not follow (a URL, or a file outside the folder), in this document or in
    any file of the folder it leads to (the validator follows those too: redteam46 saw a URL `$ref` in a split
    spec's second file fetched, and a `../../etc/hostname` there read and quoted in a finding); or a `$id` that is
    a URL, against which the validator would resolve the references below it."""
    stack: list[tuple[Any, str]] = [(document, file)]
    seen = {file}
    while stack:
        node, where = stack.pop()
        if isinstance(node, dict):
            ref, base = node.get("$ref"), node.get("$id")
            if isinstance(base, str) and ":" in base.split("/", 1)[0]:
                return f"refused $id {base!r}: the validator would resolve references against it"
            if isinstance(ref, str) and not ref.startswith("#"):
                try:
                    target, _ = documents.split_ref(ref, where)
                except RefError as exc:
                    return str(exc)
                if target not in seen:
                    seen.add(target)
                    try:
                        stack.append((documents.get(target), target))
                    except RefError:  # missing or unreadable: the validator says so in its own words
                        pass
            stack.extend((v, where) for v in node.values() if isinstance(v, dict | list))
        elif isinstance(node, list):
            stack.extend((v, where) for v in node if isinstance(v, dict | list))
    return None
