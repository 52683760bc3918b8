"""Swagger 2.0 to OpenAPI 3.0, as a thin view over the original document.

Only the parts that differ are rebuilt (servers, parameters, request bodies, responses, security
schemes); schemas are not copied: their `#/definitions/...` references still resolve against the
original document, which stays registered under the file's name. Path and operation keys are kept,
so JSON pointers in diagnostics are the original file's.
"""

from __future__ import annotations

from typing import Any

from ._documents import Documents, RefError

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
_SCHEMA_KEYS = ("type", "format", "items", "enum", "default", "minimum", "maximum", "exclusiveMinimum",
                "exclusiveMaximum", "minLength", "maxLength", "pattern", "minItems", "maxItems", "uniqueItems",
                "multipleOf", "x-nullable")
_COLLECTIONS = {"csv": ("form", False), "ssv": ("spaceDelimited", False), "pipes": ("pipeDelimited", False),
                "multi": ("form", True), "tsv": ("form", False)}


def translate_swagger(spec: dict[str, Any], documents: Documents, file: str, warn: Any) -> dict[str, Any]:
    """An OpenAPI 3.0-shaped view of a Swagger 2.0 document."""
    consumes = _media_list(spec.get("consumes"))
    produces = _media_list(spec.get("produces"))
    paths: dict[str, Any] = {}
    for path, item in (spec.get("paths") or {}).items():
        if not isinstance(item, dict):
            continue
        try:
            item, _, _ = documents.resolve(item, file)
        except RefError as exc:
            warn(f"/paths/{path}", str(exc))
            continue
        shared = _resolve_list(item.get("parameters"), documents, file, warn)
        new_item: dict[str, Any] = {}
        for method in METHODS:
            operation = item.get(method)
            if isinstance(operation, dict):
                new_item[method] = _translate_operation(operation, shared, consumes, produces, documents, file, warn)
        paths[path] = new_item
    result: dict[str, Any] = {
        "openapi": "3.0.3",
        "info": spec.get("info") or {},
        "servers": _servers(spec),
        "paths": paths,
        "components": {"securitySchemes": _security_schemes(spec.get("securityDefinitions"))},
    }
    if "security" in spec:
        result["security"] = spec["security"]
    if "tags" in spec:
        result["tags"] = spec["tags"]
    return result


def _media_list(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _servers(spec: dict[str, Any]) -> list[dict[str, str]]:
    host = spec.get("host")
    base = spec.get("basePath") or ""
    if not isinstance(base, str):
        base = ""
    if not isinstance(host, str) or not host:
        return [{"url": base or "/"}]
    schemes = [s for s in spec.get("schemes") or ["https"] if s in ("https", "http")] or ["https"]
    return [{"url": f"{scheme}://{host}{base}"} for scheme in schemes]


def _security_schemes(definitions: Any) -> dict[str, Any]:
    schemes: dict[str, Any] = {}
    for name, scheme in (definitions or {}).items():
        if not isinstance(scheme, dict):
            continue
        kind = scheme.get("type")
        if kind == "basic":
            schemes[name] = {"type": "http", "scheme": "basic"}
        elif kind == "apiKey":
            schemes[name] = {"type": "apiKey", "name": scheme.get("name"), "in": scheme.get("in")}
        elif kind == "oauth2":
            flow = {"application": "clientCredentials", "accessCode": "authorizationCode",
                    "implicit": "implicit", "password": "password"}.get(scheme.get("flow", ""), "implicit")
            body = {"scopes": scheme.get("scopes") or {}}
            for key in ("authorizationUrl", "tokenUrl"):
                if key in scheme:
                    body[key] = scheme[key]
            schemes[name] = {"type": "oauth2", "flows": {flow: body}}
    return schemes


def _resolve_list(params: Any, documents: Documents, file: str, warn: Any) -> list[dict[str, Any]]:
    resolved = []
    for param in params if isinstance(params, list) else ():
        try:
            target, _, _ = documents.resolve(param, file)
        except RefError as exc:
            warn("", str(exc))
            continue
        if isinstance(target, dict):
            resolved.append(target)
    return resolved


def _translate_operation(operation: dict[str, Any], shared: list[dict[str, Any]], consumes: list[str],
                         produces: list[str], documents: Documents, file: str, warn: Any) -> dict[str, Any]:
    result = {k: v for k, v in operation.items() if k not in ("parameters", "responses", "consumes", "produces")}
    own = _resolve_list(operation.get("parameters"), documents, file, warn)
    merged = {(p.get("name"), p.get("in")): p for p in shared}
    merged.update({(p.get("name"), p.get("in")): p for p in own})
    op_consumes = _media_list(operation.get("consumes")) or consumes
    op_produces = _media_list(operation.get("produces")) or produces or ["application/json"]
    parameters = []
    form: list[dict[str, Any]] = []
    body = None
    for param in merged.values():
        where = param.get("in")
        if where == "body":
            body = param
        elif where == "formData":
            form.append(param)
        else:
            parameters.append(_translate_parameter(param))
    result["parameters"] = parameters
    if body is not None:
        media = op_consumes or ["application/json"]
        schema = body.get("schema", {})
        result["requestBody"] = {"required": bool(body.get("required")), "description": body.get("description", ""),
                                 "content": {m: {"schema": schema} for m in media}}
    elif form:
        result["requestBody"] = _form_body(form, op_consumes)
    responses = {}
    for code, response in (operation.get("responses") or {}).items():
        try:
            response, _, _ = documents.resolve(response, file)
        except RefError as exc:
            warn("", str(exc))
            continue
        if not isinstance(response, dict):
            continue
        new = {"description": response.get("description", "")}
        if "schema" in response:
            new["content"] = {m: {"schema": response["schema"]} for m in op_produces}
        responses[str(code)] = new
    result["responses"] = responses
    return result


def _translate_parameter(param: dict[str, Any]) -> dict[str, Any]:
    where = param.get("in")
    new: dict[str, Any] = {k: param[k] for k in ("name", "in", "description", "required", "deprecated") if k in param}
    new["schema"] = {k: param[k] for k in _SCHEMA_KEYS if k in param}
    collection = param.get("collectionFormat", "csv")
    if param.get("type") == "array" and collection in _COLLECTIONS:
        style, explode = _COLLECTIONS[collection]
        if where in ("path", "header"):
            style = "simple"
        new["style"] = style
        new["explode"] = explode
    return new


def _form_body(form: list[dict[str, Any]], consumes: list[str]) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    required = []
    has_file = False
    for param in form:
        name = param.get("name")
        if not isinstance(name, str):
            continue
        field = {k: param[k] for k in _SCHEMA_KEYS if k in param}
        if "description" in param:
            field["description"] = param["description"]
        has_file = has_file or param.get("type") == "file"
        properties[name] = field
        if param.get("required"):
            required.append(name)
    if has_file or "multipart/form-data" in consumes and "application/x-www-form-urlencoded" not in consumes:
        media = "multipart/form-data"
    else:
        media = "application/x-www-form-urlencoded"
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return {"required": bool(required), "content": {media: {"schema": schema}}}
