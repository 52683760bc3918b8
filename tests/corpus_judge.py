"""The independent judge: every operation of the corpus specs is called with generated arguments against
a recording server, and each recorded request is validated by openapi-core against the original spec.

Run directly for the full report: `python tests/corpus_judge.py [--sample-large N] [spec ...]`.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit
from xml.etree import ElementTree

from argument_generator import Unsatisfiable, generate
from recording_server import Recorded, RecordingServer

from gateway.catalog import Catalog, Tool
from gateway.config.credentials import ApiKeyAuth, AuthConfig, BasicAuth, BearerAuth
from gateway.config.model import ApiConfig, Manifest
from gateway.execution.executor import Executor, validate_arguments
from gateway.http.body import is_binary_type, is_json_type
from gateway.openapi import compile_document

LARGE = 2000
"""Specs with more operations than this are sampled (every n-th operation) unless told otherwise."""


@dataclass
class Verdict:
    spec: str
    tool: str
    outcome: str
    """ok | violation | not_sent | no_arguments"""
    classes: list[str] = field(default_factory=list)
    detail: str = ""
    reasons: list[str] = field(default_factory=list)
    """Why each violation happened, as far as the judge can tell (see `explain`)."""


class _Request:
    """openapi-core's Request protocol over what the recording server received."""

    def __init__(self, recorded: Recorded, host_url: str) -> None:
        from openapi_core.datatypes import RequestParameters
        from werkzeug.datastructures import Headers, ImmutableMultiDict

        self.host_url = host_url
        self.path = unquote(recorded.path)
        self.method = recorded.method.lower()
        self.body = recorded.body or None
        self.content_type = (recorded.header("content-type") or "").lower()
        self.parameters = RequestParameters(
            query=ImmutableMultiDict(parse_qsl(recorded.raw_query, keep_blank_values=True)),
            header=Headers(recorded.headers),
            cookie=ImmutableMultiDict(list(recorded.cookies.items())),
        )


def _server_base(doc: dict[str, Any]) -> str:
    servers = doc.get("servers") or [{"url": "/"}]
    server = servers[0]
    url = server.get("url") or "/"
    for name, var in (server.get("variables") or {}).items():
        url = url.replace("{" + name + "}", str(var.get("default", "")))
    return urlsplit(url).path.rstrip("/")


def _judge_spec_dict(doc: dict[str, Any], base: str) -> dict[str, Any]:
    """The original spec, with its servers pointed at the recording server (nothing else changes)."""
    spec = dict(doc)
    spec["servers"] = [{"url": base}]
    paths = {}
    for path, item in (doc.get("paths") or {}).items():
        if isinstance(item, dict) and (
            "servers" in item or any(isinstance(op, dict) and "servers" in op for op in item.values())
        ):
            item = {k: ({kk: vv for kk, vv in v.items() if kk != "servers"} if isinstance(v, dict) else v)
                    for k, v in item.items() if k != "servers"}
        paths[path] = item
    spec["paths"] = paths
    return spec


def _auth_for(doc: dict[str, Any]) -> list[AuthConfig]:
    schemes = ((doc.get("components") or {}).get("securitySchemes")) or {}
    auth: list[AuthConfig] = []
    http_done = False
    # http schemes first: one Authorization header can carry only one of them, and an operation that
    # allows OAuth2 usually allows the http scheme too, rarely the other way round.
    ordered = sorted((s for s in schemes.values() if isinstance(s, dict)), key=lambda s: s.get("type") != "http")
    for scheme in ordered:
        if not isinstance(scheme, dict):
            continue
        kind = scheme.get("type")
        if kind == "apiKey" and scheme.get("name") and scheme.get("in") in ("header", "query", "cookie"):
            auth.append(ApiKeyAuth(location=scheme["in"], name=scheme["name"],
                                   value="judge-api-key"))
        elif kind in ("oauth2", "openIdConnect") and not http_done:
            http_done = True
            auth.append(BearerAuth(token="judge-token"))
        elif kind == "http" and not http_done:
            http_done = True
            if str(scheme.get("scheme", "")).lower() == "basic":
                auth.append(BasicAuth(username="judge", password="judge-password"))
            else:
                auth.append(BearerAuth(token="judge-token"))
    return auth


def arguments_for(tool: Tool) -> dict[str, Any] | None:
    """Required fields plus every optional parameter (to exercise their styles); None if unsatisfiable."""
    schema = tool.input_schema
    properties = schema.get("properties") or {}
    try:
        base = generate({**schema, "properties": properties}, schema)
    except Unsatisfiable:
        return None
    if not isinstance(base, dict):
        return None
    full = dict(base)
    for argument in tool.arguments:
        if argument.location in ("query", "header", "cookie", "path") and argument.name not in full:
            try:
                full[argument.name] = generate(properties.get(argument.name, {}), schema)
            except Unsatisfiable:
                continue
    if tool.body is not None and tool.body.argument and is_binary_type(tool.body.media_type):
        # Binary bodies travel as base64 text (the executor's documented convention).
        for candidate in (full, base):
            if tool.body.argument in candidate:
                candidate[tool.body.argument] = "YWJj"
    for candidate in (full, base):
        if not validate_arguments(tool, candidate):
            return candidate
    return None


def _classify(error: Exception) -> tuple[str, str]:
    names = [type(error).__name__]
    cause = error.__cause__ or error.__context__
    detail = str(error)
    if cause is not None:
        names.append(type(cause).__name__)
        detail += f" <- {cause}"
        inner = getattr(cause, "schema_errors", None)
        if inner:
            detail += " <- " + "; ".join(str(e.message) for e in list(inner)[:2])
    return "/".join(names), detail[:1500]


async def judge_spec(path: Path, root: Path, server: RecordingServer, *, every: int = 1,
                     compiled: Catalog | None = None) -> list[Verdict]:
    """`compiled`: the whole corpus already compiled (the tests share one); else this spec is compiled here."""
    from openapi_core import OpenAPI
    from openapi_core.configurations import Config

    name = str(path.relative_to(root).with_suffix(""))
    doc = json.loads(path.read_text())
    if compiled is not None and name in compiled.apis:
        catalog = Catalog(compiled.for_api(name), {name: compiled.apis[name]})
    else:
        catalog = compile_document(doc, api=name, file=str(path.relative_to(root)))
    base_path = _server_base(doc)
    base = server.url + base_path
    judged = _judge_spec_dict(doc, base)
    config = Config(spec_validator_cls=None, extra_media_type_deserializers=_json_deserializers(doc))
    manifest = Manifest(apis={name: ApiConfig(name=name, base_url=base, auth=_auth_for(doc), timeout=10)})
    executor = Executor(manifest, catalog)
    verdicts: list[Verdict] = []
    try:
        for index, tool in enumerate(catalog):
            if index % every:
                continue
            arguments = arguments_for(tool)
            if arguments is None:
                verdicts.append(Verdict(name, tool.name, "no_arguments"))
                continue
            server.clear()
            result = await executor.execute(tool, arguments)
            if not server.requests:
                verdicts.append(Verdict(name, tool.name, "not_sent", [result.error_type or "?"], result.error or ""))
                continue
            request = _Request(server.requests[-1], server.url)
            # The spec with only this operation's path item: openapi-core compiles a regex per path for
            # every request, which takes seconds per request on Graph's 6,000 paths. A request that does
            # not match this path is still reported (PathNotFound), so nothing is hidden.
            openapi = OpenAPI.from_dict({**judged, "paths": {tool.path: judged["paths"][tool.path]}}, config=config)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                errors = list(openapi.iter_request_errors(request))
            if not errors:
                verdicts.append(Verdict(name, tool.name, "ok"))
                continue
            classified = [_classify(e) for e in errors]
            recorded = server.requests[-1]
            verdicts.append(Verdict(name, tool.name, "violation", [c for c, _ in classified],
                                    f"{request.method.upper()} {recorded.target[:200]} :: "
                                    + " | ".join(d for _, d in classified),
                                    [explain(tool, doc, recorded, c, d) for c, d in classified]))
    finally:
        await executor.aclose()
    return verdicts


def explain(tool: Tool, doc: dict[str, Any], recorded: Recorded, cls: str, detail: str) -> str:
    """Sort a violation into a known cause, or `unexplained` (those are the ones to fix)."""
    body = tool.body
    media = body.media_type if body else ""
    if "SecurityNotFound" in cls:
        return "judge-config: a security scheme the judge cannot satisfy (e.g. signed requests)"
    nested = b"%5D%5B" in recorded.target.encode() + recorded.body
    if "deepObject" in detail or (nested and ("CastError" in cls or "InvalidParameter" in cls)):
        return ("judge-limit: deepObject openapi-core can't read (array or nested values, undefined by OAS; "
                "or an anyOf schema without `type: object`)")
    if "CastError" in cls and "Query parameter" in detail:
        return "undefined-by-OAS: array of objects in a form query (openapi-core can't cast)"
    if "read-only" in detail:
        return "spec: readOnly on a parameter schema (openapi-core refuses any value)"
    if "is not one of" in detail:
        return "spec: enum values don't match the declared type"
    if body is not None and is_binary_type(media) and "Value b'" in detail:
        return "judge-limit: binary media type (openapi-core checks the raw bytes against the schema's type)"
    if "reference '#/components" in detail:
        return "compiler #2: discriminator mapping not expressed in the tool schema (any `type` value passes)"
    if body is not None and "xml" in media:
        try:
            ElementTree.fromstring(recorded.body)
        except ElementTree.ParseError:
            return "ours: the XML body is not well-formed"
        return "judge-limit: XML body (openapi-core has no XML deserializer; the body was well-formed XML)"
    if "is a required property" in detail and "RequestBody" in cls:
        missing = re.findall(r"'([^']+)' is a required property", detail)
        defined = _body_properties(tool, doc)
        if defined is not None and any(m not in defined for m in missing):
            return "spec: body requires a property it does not define"
        if body is not None and not body.required:
            return "compiler #2: optional body's required fields are not required when the body is sent"
    return "unexplained"


def _body_properties(tool: Tool, doc: dict[str, Any]) -> set[str] | None:
    try:
        operation = doc["paths"][tool.path][tool.method.lower()]
        content = operation["requestBody"]
        if "$ref" in content:
            content = doc["components"]["requestBodies"][content["$ref"].rsplit("/", 1)[-1]]
        schema = next(iter(content["content"].values()))["schema"]
        if "$ref" in schema:
            schema = doc["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
        return set((schema.get("properties") or {}).keys())
    except (KeyError, StopIteration, TypeError, AttributeError):
        return None


def _json_deserializers(doc: dict[str, Any]) -> dict[str, Any]:
    """openapi-core parses only application/json by default: teach it the spec's other JSON media types
    (`+json`, vendor JSON and `*/*`, for which the executor sends JSON)."""
    kinds: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            content = node.get("content")
            if isinstance(content, dict):
                kinds.update(k for k in content if isinstance(k, str))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(doc.get("paths") or {})
    walk((doc.get("components") or {}).get("requestBodies") or {})
    return {k: json.loads for k in kinds if k != "application/json" and (is_json_type(k) or "*" in k)}


def corpus_specs(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.json") if p.is_file())


async def judge_corpus(root: Path, *, sample_large: int | None = LARGE, only: list[str] | None = None,
                       progress: Any = None, compiled: Catalog | None = None) -> list[Verdict]:
    verdicts: list[Verdict] = []
    with RecordingServer() as server:
        for path in corpus_specs(root):
            if only and not any(o in str(path) for o in only):
                continue
            every = 1
            if sample_large:
                size = sum(1 for item in (json.loads(path.read_text()).get("paths") or {}).values()
                           for m in item if m in ("get", "put", "post", "delete", "patch", "head", "options"))
                every = max(1, size // sample_large) if size > sample_large else 1
            started = time.monotonic()
            found = await judge_spec(path, root, server, every=every, compiled=compiled)
            verdicts.extend(found)
            if progress:
                counts = Counter(v.outcome for v in found)
                progress(f"{path.relative_to(root)}: {dict(counts)} every={every} {time.monotonic() - started:.1f}s")
    return verdicts


def summarize(verdicts: list[Verdict]) -> dict[str, Any]:
    outcomes = Counter(v.outcome for v in verdicts)
    classes: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    examples: dict[str, str] = {}
    for verdict in verdicts:
        for index, cls in enumerate(verdict.classes):
            key = f"{verdict.outcome}:{cls}"
            classes[key] += 1
            reason = verdict.reasons[index] if index < len(verdict.reasons) else verdict.outcome
            reasons[reason] += 1
            examples.setdefault(reason, f"{verdict.spec} {verdict.tool}: {verdict.detail[:300]}")
    return {"outcomes": dict(outcomes), "classes": dict(classes.most_common()),
            "reasons": dict(reasons.most_common()), "examples": examples}


def main(argv: list[str]) -> int:
    root = Path(__file__).resolve().parent.parent.parent / "shared" / "corpus"
    sample = LARGE
    if argv[:1] == ["--all"]:
        sample, argv = 0, argv[1:]
    started = time.monotonic()
    verdicts = asyncio.run(judge_corpus(root, sample_large=sample, only=argv or None,
                                        progress=lambda line: print(line, file=sys.stderr)))
    report = summarize(verdicts)
    report["seconds"] = round(time.monotonic() - started, 1)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main(sys.argv[1:]))
