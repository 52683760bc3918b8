"""One OpenAPI operation to one `Tool`: its input schema and the binding of every argument.

Input schema rules:
- Path-level and operation-level parameters are merged; the operation's wins by name + location.
- Left out: headers the HTTP layer owns (Host, Content-Length, Transfer-Encoding, Connection,
  Authorization, and Accept / Content-Type, which OpenAPI says to ignore), and parameters matching an
  `apiKey` security scheme (name + location): credentials come from the manifest, never the model.
- Same-name parameters in different locations: the first by priority path > query > header > cookie
  keeps the name, the others become `<location>_<name>` (then `_2`, `_3` if still taken).
- An object request body (JSON, form-urlencoded or multipart) whose root is a plain object with
  `properties` is spread: each property is a top-level argument (location `body`), unless a property
  name collides with a parameter, in which case the whole body is one argument `body` (or
  `request_body` when a parameter is called `body`). Arrays, strings, binaries and composed roots
  (`allOf`/`oneOf`/...) are always one `body` argument. Body properties of an optional body are not
  required at the top level; its required properties become `dependentRequired` instead (every body
  property requires them), so once any body property is given, the body is complete. The executor sends
  an optional spread body only when at least one of its properties is given.
"""

from __future__ import annotations

import re
from typing import Any, cast

from ..catalog import OWNED_HEADERS, Argument, BodyBinding, Encoding, Location, Tool
from ._ambiguity import ExcessCheck, unjudged
from ._documents import Documents, RefError, escape_token
from ._schema import SchemaError, SchemaTranslator
from ._servers import operation_servers, read_servers
from ._xml import is_xml_media, xml_mapping

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
LOCATIONS = ("path", "query", "header", "cookie")
_COMPOSED = ("allOf", "anyOf", "oneOf", "not", "if", "$ref")
_PLACEHOLDER = re.compile(r"\{[^{}]+\}")
"""A path parameter's place in a template (as `gateway.http.request` fills it)."""


class OperationError(Exception):
    """The operation cannot become a tool."""


def is_json_media(media: str) -> bool:
    base = media.split(";", 1)[0].strip().lower()
    return base == "application/json" or base.endswith("+json") or base.endswith("/json") or base == "*/*"


def _pick_body_media(content: dict[str, Any]) -> str:
    medias = list(content)
    for test in (lambda m: m.split(";")[0].strip().lower() == "application/json", is_json_media,
                 lambda m: m.startswith("application/x-www-form-urlencoded"),
                 lambda m: m.startswith("multipart/form-data")):
        for media in medias:
            if test(media):
                return media
    return medias[0]


class OperationCompiler:
    """Compiles the operations of one spec (an OpenAPI 3-shaped view) into tools with provisional names."""

    def __init__(self, view: dict[str, Any], documents: Documents, file: str, api: str,
                 translator: SchemaTranslator, warn: Any, max_description: int) -> None:
        self.view = view
        self.documents = documents
        self.file = file
        self.api = api
        self.translator = translator
        self.warn = warn
        self.max_description = max_description
        self.servers = read_servers(view.get("servers"))
        self.security = view.get("security")
        schemes = (view.get("components") or {}).get("securitySchemes") or {}
        self.credentials: set[tuple[str, str]] = set()
        self.excess = ExcessCheck()
        self.unjudged_told: set[str] = set()
        for scheme in schemes.values() if isinstance(schemes, dict) else ():
            try:
                scheme = documents.resolve(scheme, file)[0]
            except RefError:
                continue
            if isinstance(scheme, dict) and scheme.get("type") == "apiKey" and isinstance(scheme.get("name"), str):
                name = scheme["name"].lower() if scheme.get("in") == "header" else scheme["name"]
                self.credentials.add((scheme.get("in", ""), name))

    def _resolve(self, node: Any) -> Any:
        try:
            return self.documents.resolve(node, self.file)[0]
        except RefError as exc:
            raise OperationError(str(exc)) from None

    def compile(self, path: str, method: str, item: dict[str, Any], operation: dict[str, Any], pointer: str) -> Tool:
        fault = template_fault(path)
        if fault is not None:
            raise OperationError(fault)
        refs: set[str] = set()
        properties: dict[str, Any] = {}
        required: list[str] = []
        conditions: dict[str, list[str]] = {}
        arguments = self._parameters(path, item, operation, pointer, refs, properties, required)
        body = self._request_body(operation, pointer, refs, properties, required, arguments, conditions)
        input_schema: dict[str, Any] = {"type": "object", "properties": properties}
        if required:
            input_schema["required"] = required
        if conditions:
            input_schema["dependentRequired"] = conditions
        input_schema["additionalProperties"] = False
        if refs:
            input_schema["$defs"] = self.translator.collect_defs(refs, "in")
        judged_schema = self._judged(input_schema)
        output_schema, media_types = self._output(operation, pointer)
        security = operation.get("security", self.security) or ()
        alternatives = tuple(
            {str(k): tuple(str(s) for s in (v or ())) for k, v in alt.items()}
            for alt in security if isinstance(alt, dict)
        )
        summary = _text(operation.get("summary"))
        description = _text(operation.get("description"))
        deprecated = operation.get("deprecated") is True
        operation_id = operation.get("operationId")
        servers = operation_servers(self.servers, operation, item, pointer, self.warn, self.api)
        return Tool(
            name=operation_id if isinstance(operation_id, str) else "",
            api=self.api,
            operation_id=operation_id if isinstance(operation_id, str) else None,
            method=method.upper(),
            path=path,
            description=describe(summary, description, deprecated, alternatives, self.max_description),
            input_schema=input_schema,
            output_schema=output_schema,
            arguments=tuple(arguments),
            body=body,
            servers=servers,
            response_media_types=media_types,
            security=alternatives,
            tags=tuple(t for t in _as_list(operation.get("tags")) if isinstance(t, str)),
            deprecated=deprecated,
            summary=summary.strip(),
            source=self.file,
            pointer=pointer,
            judged_schema=judged_schema,
        )

    def _judged(self, input_schema: dict[str, Any]) -> dict[str, Any] | None:
        """What the arguments are judged by when not `input_schema` (`_ambiguity`); each entry left unjudged is told
        once, where it is written."""
        names = self.excess.excessive_defs(input_schema)
        if not names:
            return None
        for name in names:
            if name in self.unjudged_told:
                continue
            self.unjudged_told.add(name)
            self.translator.warn_at_definition(name, "a value could be judged by this schema exponentially often: "
                                               "two or more anyOf/oneOf/allOf branches lead to it at one place of a "
                                               "value, level after level (nested 25 deep: 2**25 checks), so the "
                                               "gateway does not judge values by it (the API still does; the model "
                                               "still sees it as written)")
        return unjudged(input_schema, names)

    # -- parameters -----------------------------------------------------------------------------

    def _parameters(self, path: str, item: dict[str, Any], operation: dict[str, Any], pointer: str,
                    refs: set[str], properties: dict[str, Any], required: list[str]) -> list[Argument]:
        merged: dict[tuple[str, str], dict[str, Any]] = {}
        written: dict[tuple[str, str], str] = {}  # where each parameter is written (for diagnostics)
        item_pointer = pointer.rsplit("/", 1)[0]
        for base, source in ((item_pointer, item.get("parameters")), (pointer, operation.get("parameters"))):
            for index, raw in enumerate(source if isinstance(source, list) else ()):
                try:
                    param, _, target = self.documents.resolve(raw, self.file)
                except RefError as exc:
                    raise OperationError(str(exc)) from None
                name, where = (param.get("name"), param.get("in")) if isinstance(param, dict) else (None, None)
                if not isinstance(name, str) or where not in LOCATIONS:
                    self.warn(f"{base}/parameters/{index}", "parameter without a valid name/in: skipped")
                    continue
                merged[(name, where)] = param
                written[(name, where)] = target or f"{base}/parameters/{index}"
        for name in _template_names(path):
            if (name, "path") not in merged:
                self.warn(pointer, f"path parameter {name!r} is not declared: added as a required string")
                merged[(name, "path")] = {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
        kept = []
        for (name, where), param in merged.items():
            if where == "header" and name.lower() in OWNED_HEADERS:
                continue
            if (where, name.lower() if where == "header" else name) in self.credentials:
                continue
            kept.append((name, where, param))
        kept.sort(key=lambda entry: LOCATIONS.index(entry[1]))
        arguments = []
        for name, where, param in kept:
            arg_name = _free_name(name, where, properties)
            schema, content_type = self._parameter_schema(param, written.get((name, where), pointer), refs)
            is_required = where == "path" or param.get("required") is True
            default_style = "simple" if where in ("path", "header") else "form"
            style = param.get("style") if isinstance(param.get("style"), str) else default_style
            explode = param.get("explode")
            properties[arg_name] = schema
            if is_required:
                required.append(arg_name)
            arguments.append(Argument(
                name=arg_name, location=cast(Location, where), wire_name=name, required=is_required,
                style=style, explode=explode if isinstance(explode, bool) else style == "form",
                allow_reserved=param.get("allowReserved") is True, content_type=content_type,
            ))
        return arguments

    def _parameter_schema(self, param: dict[str, Any], pointer: str, refs: set[str]) -> tuple[Any, str | None]:
        content_type = None
        raw = param.get("schema")
        content = param.get("content")
        if raw is None and isinstance(content, dict) and content:
            content_type = next(iter(content))
            media = self._resolve(content[content_type])
            raw = media.get("schema") if isinstance(media, dict) else None
        try:
            schema = self.translator.translate(raw if raw is not None else {}, self.file, "in", refs,
                                               pointer + "/schema" if raw is not None else pointer)
        except SchemaError as exc:
            raise OperationError(f"parameter {param.get('name')!r}: {exc}") from None
        extra = {}
        if isinstance(param.get("description"), str) and param["description"]:
            extra["description"] = param["description"]
        if param.get("deprecated") is True:
            extra["deprecated"] = True
        if "example" in param and "examples" not in extra:
            extra["examples"] = [param["example"]]
        if extra and isinstance(schema, dict):
            schema = {**schema, **{k: v for k, v in extra.items() if k not in schema}}
            if "examples" in extra:
                self.translator.values.add(schema, self.file, pointer)
        return schema, content_type

    # -- request body ---------------------------------------------------------------------------

    def _request_body(self, operation: dict[str, Any], pointer: str, refs: set[str], properties: dict[str, Any],
                      required: list[str], arguments: list[Argument],
                      conditions: dict[str, list[str]]) -> BodyBinding | None:
        if "requestBody" not in operation:
            return None
        request = self._resolve(operation["requestBody"])
        content = request.get("content") if isinstance(request, dict) else None
        if not isinstance(content, dict) or not content:
            return None
        media = _pick_body_media(content)
        entry = self._resolve(content[media]) or {}
        body_required = request.get("required") is True
        raw = entry.get("schema") if isinstance(entry, dict) else None
        encoding = _encodings(entry.get("encoding") if isinstance(entry, dict) else None)
        xml = xml_mapping(raw, self.documents, self.file, self.warn, pointer) if is_xml_media(media) else None
        spread = self._spread_schema(raw, refs, _body_pointer(pointer, media))
        if spread is not None and not any(name in properties for name in spread.get("properties", {})):
            names = spread.get("properties", {})
            # Required names the body does not define can't be given (additionalProperties is false): left out.
            inner = [name for name in spread.get("required", ()) if name in names]
            for name, spread_schema in names.items():
                properties[name] = spread_schema
                is_required = body_required and name in inner
                if is_required:
                    required.append(name)
                arguments.append(Argument(name=name, location="body", wire_name=name, required=is_required))
            if not body_required and inner:
                conditions.update(_body_conditions(names, inner))
            return BodyBinding(media_type=media, required=body_required, argument=None, encoding=encoding,
                               xml=xml)
        schema: Any
        if raw is None:
            schema = {} if is_json_media(media) else {"type": "string"}
        else:
            try:
                schema = self.translator.translate(raw, self.file, "in", refs, _body_pointer(pointer, media))
            except SchemaError as exc:
                raise OperationError(f"request body: {exc}") from None
        argument = "body" if "body" not in properties else "request_body"
        counter = 2
        while argument in properties:
            argument = f"body_{counter}"
            counter += 1
        if isinstance(request.get("description"), str) and request["description"] and isinstance(schema, dict):
            schema = {**schema, "description": schema.get("description") or request["description"]}
        properties[argument] = schema
        if body_required:
            required.append(argument)
        arguments.append(Argument(name=argument, location="body", wire_name=argument, required=body_required))
        return BodyBinding(media_type=media, required=body_required, argument=argument, encoding=encoding,
                           xml=xml)

    def _spread_schema(self, raw: Any, refs: set[str], pointer: str) -> dict[str, Any] | None:
        """The translated root of an object body whose properties can sit at the top level, else None."""
        if not isinstance(raw, dict):
            return None
        try:
            target, file, target_pointer = self.documents.resolve(raw, self.file)
        except RefError as exc:
            raise OperationError(f"request body: {exc}") from None
        if not _is_plain_object(target):
            return None
        try:
            if target_pointer:
                name = self.translator.ref_name(raw["$ref"], self.file, "in")
                while True:  # follow alias chains to the definition that holds the properties
                    schema, deps = self.translator.definition(name, "in")
                    ref = schema.get("$ref") if isinstance(schema, dict) else None
                    if ref is None:
                        break
                    name = ref.rsplit("/", 1)[-1]
                refs.update(deps)
            else:
                schema = self.translator.translate(raw, file, "in", refs, pointer)
        except SchemaError as exc:
            raise OperationError(f"request body: {exc}") from None
        if not isinstance(schema, dict) or not schema.get("properties") or "anyOf" in schema or "allOf" in schema:
            return None
        return schema

    # -- responses ------------------------------------------------------------------------------

    def _output(self, operation: dict[str, Any], pointer: str) -> tuple[dict[str, Any] | None, tuple[str, ...]]:
        responses = operation.get("responses")
        if not isinstance(responses, dict):
            return None, ()
        media_types: dict[str, None] = {}
        output = None
        for code, raw in responses.items():
            code = str(code)
            if not (code.startswith("2") or code == "default"):
                continue
            try:
                response = self.documents.resolve(raw, self.file)[0]
            except RefError as exc:
                self.warn(f"{pointer}/responses/{code}", str(exc))
                continue
            content = response.get("content") if isinstance(response, dict) else None
            if not isinstance(content, dict):
                continue
            media_types.update(dict.fromkeys(m for m in content if isinstance(m, str)))
            if output is not None or not code.startswith("2"):
                continue
            for media, entry in content.items():
                if not is_json_media(media) or not isinstance(entry, dict) or "schema" not in entry:
                    continue
                output = self._output_schema(entry["schema"], f"{pointer}/responses/{code}")
                break
        return output, tuple(media_types)

    def _output_schema(self, raw: Any, pointer: str) -> dict[str, Any] | None:
        refs: set[str] = set()
        try:
            schema = self.translator.translate(raw, self.file, "out", refs, pointer)
        except SchemaError as exc:
            self.warn(pointer, f"output schema left out: {exc}")
            return None
        if isinstance(schema, bool):
            return None if schema else {"not": {}}
        if set(schema) == {"$ref"}:
            # A root that is only a reference is inlined one level, so the root says what it is
            # (MCP requires an object `type` at the root of outputSchema).
            definition, deps = self.translator.definition(schema["$ref"].rsplit("/", 1)[-1], "out")
            if isinstance(definition, dict) and "$ref" not in definition:
                schema = dict(definition)
                refs = set(deps)  # the root's own entry stays only when it is reached again (recursion)
        if refs:
            schema = {**schema, "$defs": self.translator.collect_defs(refs, "out")}
        output: dict[str, Any] = schema
        return output


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _is_plain_object(schema: Any) -> bool:
    """An object body whose properties can be spread: written out, or merged from a closed `allOf` (`_closed`)."""
    if not isinstance(schema, dict):
        return False
    closed_all_of = schema.get("additionalProperties") is False and isinstance(schema.get("allOf"), list)
    if not closed_all_of and (not isinstance(schema.get("properties"), dict) or not schema["properties"]):
        return False
    if schema.get("type", "object") != "object" or schema.get("nullable") is True:
        return False
    if any(key in schema for key in _COMPOSED if not (closed_all_of and key == "allOf")):
        return False
    extra = schema.get("additionalProperties")
    return extra is None or extra is False


def _body_conditions(names: dict[str, Any], inner: list[str]) -> dict[str, list[str]]:
    """`dependentRequired` for an optional spread body: any of its properties requires its required ones.

    Exact for "if the body is sent, it is complete" because the body is sent iff one of them is given.
    """
    conditions = {}
    for name in names:
        others = [other for other in inner if other != name]
        if others:
            conditions[name] = others
    return conditions


def _body_pointer(pointer: str, media: str) -> str:
    return f"{pointer}/requestBody/content/{escape_token(media)}/schema"


def template_fault(path: str) -> str | None:
    """Why no call could fill the path template `path` (a `{` or `}` outside a `{name}`: the executor would find
    a parameter the tool does not declare), or None."""
    stray = _PLACEHOLDER.sub("", path)
    if "{" in stray or "}" in stray:
        return (f"the path template {path!r} has a '{{' or '}}' outside a {{name}} placeholder, so no call could "
                "fill it")
    return None


def _template_names(path: str) -> list[str]:
    names = []
    start = path.find("{")
    while start != -1:
        end = path.find("}", start)
        if end == -1:
            break
        names.append(path[start + 1:end])
        start = path.find("{", end)
    return names


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _free_name(name: str, where: str, taken: dict[str, Any]) -> str:
    if name not in taken:
        return name
    candidate = f"{where}_{name}"
    counter = 2
    while candidate in taken:
        candidate = f"{where}_{name}_{counter}"
        counter += 1
    return candidate


def _encodings(raw: Any) -> dict[str, Encoding]:
    result = {}
    for name, entry in (raw or {}).items() if isinstance(raw, dict) else ():
        if not isinstance(entry, dict):
            continue
        headers = entry.get("headers")
        result[name] = Encoding(
            content_type=entry.get("contentType") if isinstance(entry.get("contentType"), str) else None,
            style=entry.get("style") if isinstance(entry.get("style"), str) else None,
            explode=entry.get("explode") if isinstance(entry.get("explode"), bool) else None,
            allow_reserved=entry.get("allowReserved") is True,
            headers=tuple(headers) if isinstance(headers, dict) else (),
        )
    return result


def describe(summary: str, description: str, deprecated: bool, security: tuple[dict[str, tuple[str, ...]], ...],
             limit: int) -> str:
    """Summary and description, trimmed to `limit` characters, with the deprecation and scopes notes kept."""
    summary, description = summary.strip(), description.strip()
    text = summary
    if description and description != summary:
        text = f"{summary}\n\n{description}" if summary else description
    notes = []
    if deprecated:
        notes.append("Deprecated.")
    scopes = sorted({scope for alternative in security for values in alternative.values() for scope in values})
    if scopes:
        notes.append("Required scopes: " + ", ".join(scopes) + ".")
    suffix = " ".join(notes)
    budget = max(limit - len(suffix) - 2, 0) if suffix else limit
    if len(text) > budget:
        text = text[: max(budget - 1, 0)].rstrip() + "…"
    return f"{text}\n\n{suffix}".strip() if suffix else text


def operation_pointer(path: str, method: str) -> str:
    return f"/paths/{escape_token(path)}/{method}"
