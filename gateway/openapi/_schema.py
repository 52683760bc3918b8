"""OpenAPI Schema Objects (Swagger 2.0, OAS 3.0, OAS 3.1) to JSON Schema 2020-12.

Every `$ref` becomes `{"$ref": "#/$defs/<Name>"}` and its target is translated once per mode and
memoized, so recursive schemas stay finite and a spec's components are never expanded into every
tool. `collect_defs` then gives each tool exactly the `$defs` it reaches.

Translation rules (what "handled" means):
- `nullable: true` (3.0) and `x-nullable: true` (2.0): `"null"` joins `type` (and `enum`); without a
  `type` the schema becomes `anyOf: [schema, {"type": "null"}]`.
- boolean `exclusiveMinimum/Maximum` (3.0): folded into the numeric 2020-12 form.
- `example`: `examples: [example]`. `type: file` (2.0): `type: string, format: binary`. Formats are kept.
- `readOnly` properties are left out of input schemas, `writeOnly` ones out of output schemas.
- `discriminator` (3.x) beside a `oneOf`/`anyOf` of `$ref`s, in input schemas (`_discriminator`): each branch becomes
  `{"allOf": [branch, {"properties": {<propertyName>: {"const": <value>}}, "required": [<propertyName>]}]}`
  with the `mapping` keys that point at it (`enum` when several), or its component name when none do
  (the implicit mapping). So a value that would route to another schema is refused, as OpenAPI
  validators do. The keyword itself is dropped; output schemas keep the plain union (real responses
  are not refused over it).
- `format: binary` / `format: byte` strings also get `contentEncoding: base64` (the format is kept): the
  model sends base64 text, and the executor decodes binary content (see gateway/http/body.py).
  `xml`, `externalDocs`, `x-*` extensions and other unknown keywords are dropped.
- Keyword values of the wrong shape (a `pattern` Python cannot compile, `required: true`, an unknown
  type name) are dropped with a warning, so every result passes Draft 2020-12 `check_schema`; so is a `pattern`
  the linear regex engine cannot run (look-around, back-references), which only a backtracking one could run
  on a model's value (`fastschema.linear_pattern`): the upstream checks it.

Results are shared between tools: treat them as immutable (copy before changing).
"""

from __future__ import annotations

import difflib
import re
from typing import Any, Literal

from ..kernel.nullable import make_nullable
from ._closed import Members, closed_composition, drop_hidden_required, drop_undeclared, require_in_branches
from ._discriminator import pin_discriminator
from ._documents import Documents, RefError, escape_token
from ._keyword_values import is_count, is_number, is_string, pattern_fault
from ._values import ValueChecks, Warn, fix_enum

Mode = Literal["in", "out"]
JSONSchema = dict[str, Any]

_TYPES = frozenset({"string", "number", "integer", "boolean", "object", "array", "null"})
_STRINGS = ("title", "description", "format", "contentMediaType", "contentEncoding", "$comment")
_NUMBERS = ("minimum", "maximum", "multipleOf")
_COUNTS = ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties",
           "minContains", "maxContains")
_BOOLS = ("deprecated", "readOnly", "writeOnly", "uniqueItems")
_SUBSCHEMAS = ("additionalProperties", "contains", "not", "if", "then", "else", "propertyNames",
               "unevaluatedProperties", "unevaluatedItems")
_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_COMPOSERS = ("allOf", "oneOf", "anyOf")
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


class SchemaError(Exception):
    """A schema that cannot be translated (a broken or refused `$ref` inside it); `file` and `pointer`: where that
    `$ref` is written, once known (the innermost `$ref` on the way there)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.file: str | None = None
        self.pointer = ""


class SchemaTranslator:
    """Translates the schemas of one spec; remembers each `$ref` target's translation per mode.

    Args:
        documents: the registry that resolves references.
        main_file: the spec's own file; `$defs` names of targets in other files get that file's stem.
        warn: called with `(file, pointer, message)` for every value dropped as malformed: the file and pointer
            where it is written (a schema in a split spec's second file is named there, not in `main_file`).
        error: as `warn`, for what makes a schema accept more than the spec meant (an unknown type name).
        broken: called with `(file, pointer, message)` for a `$ref` that breaks in another file than `main_file`
            (the operation using it is told too, at its own place in the spec: this says where to mend it).
    """

    def __init__(self, documents: Documents, main_file: str, warn: Warn, error: Warn | None = None,
                 broken: Warn | None = None) -> None:
        self._documents = documents
        self._main_file = main_file
        self._warn = warn
        self._error = error or warn
        self._broken = broken
        self._told: set[tuple[str, str]] = set()
        self._names: dict[tuple[str, str], str] = {}
        self._taken: set[str] = set()
        self._defs: dict[tuple[Mode, str], JSONSchema | bool] = {}
        self._deps: dict[tuple[Mode, str], frozenset[str]] = {}
        self._failed: dict[tuple[str, str], str] = {}
        self._closure: dict[tuple[Mode, str], frozenset[str]] = {}
        self._memo: dict[tuple[int, str, Mode], tuple[Any, Any, frozenset[str]]] = {}
        self._collected: dict[tuple[Mode, frozenset[str]], dict[str, Any]] = {}
        self.values = ValueChecks()
        """The `default`/`examples` of input schemas, checked by `check_values` once the spec is compiled."""

    # -- public ---------------------------------------------------------------------------------

    def translate(self, node: Any, file: str, mode: Mode, refs: set[str], where: str = "") -> Any:
        """The 2020-12 form of `node` (met in `file`); the `$defs` names it uses are added to `refs`.

        Memoized per node: a parameter `$ref`'d by 500 operations is translated once. The memo keeps
        the node itself, so its `id` cannot be reused by another object while the translator lives.
        """
        if not isinstance(node, dict):
            return self._translate(node, file, mode, refs, where)
        key = (id(node), file, mode)
        hit = self._memo.get(key)
        if hit is None:
            used: set[str] = set()
            hit = (node, self._translate(node, file, mode, used, where), frozenset(used))
            self._memo[key] = hit
        refs.update(hit[2])
        return hit[1]

    def definition(self, name: str, mode: Mode) -> tuple[JSONSchema | bool, frozenset[str]]:
        """A translated `$defs` entry and the names it references directly."""
        return self._defs[(mode, name)], self._deps[(mode, name)]

    def collect_defs(self, refs: set[str], mode: Mode) -> dict[str, Any]:
        """Every `$defs` entry reachable from `refs`, sorted by name.

        The result is shared by the tools that reach the same set: treat it as immutable.
        """
        key = (mode, frozenset(refs))
        found = self._collected.get(key)
        if found is None:
            names: set[str] = set()
            for name in refs:
                names |= self._closure.get((mode, name)) or self._close(mode, name)
            found = {name: self._defs[(mode, name)] for name in sorted(names)}
            self._collected[key] = found
        return found

    def _close(self, mode: Mode, start: str) -> frozenset[str]:
        """Reachable names of every definition reachable from `start` (Tarjan's SCCs, iteratively).

        Strongly connected definitions (mutual recursion) share one closure; each SCC's closure is its
        members plus the closures of the SCCs it points to, which Tarjan finishes first.
        """
        deps, closures = self._deps, self._closure
        index = {start: 0}
        low = {start: 0}
        stack, on_stack = [start], {start}
        work = [(start, iter(deps[(mode, start)]))]
        while work:
            node, successors = work[-1]
            descended = False
            for successor in successors:
                if (mode, successor) in closures:
                    continue
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(deps[(mode, successor)])))
                    descended = True
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            if descended:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                closure = set(component)
                for member in component:
                    for successor in deps[(mode, member)]:
                        if successor not in closure:
                            closure |= closures[(mode, successor)]
                frozen = frozenset(closure)
                for member in component:
                    closures[(mode, member)] = frozen
        return closures[(mode, start)]

    def warn_at_definition(self, name: str, message: str) -> None:
        """Warn where the `$defs` entry `name` is written (its own file and pointer)."""
        file, pointer = next((location for location, given in self._names.items() if given == name),
                             (self._main_file, ""))
        self._warn(file, pointer, message)

    def ref_name(self, ref: str, file: str, mode: Mode) -> str:
        """Translate the target of `ref` (if not yet) and give its `$defs` name."""
        try:
            target_file, pointer = self._documents.split_ref(ref, file)
        except RefError as exc:
            raise SchemaError(str(exc)) from None
        return self._define(target_file, pointer, mode)

    # -- internals ------------------------------------------------------------------------------

    def _define(self, file: str, pointer: str, mode: Mode) -> str:
        location = (file, pointer)
        failure = self._failed.get(location)
        if failure is not None:
            raise SchemaError(failure)
        name = self._names.get(location)
        if name is None:
            name = self._name_for(file, pointer)
        key = (mode, name)
        if key in self._defs:
            return name
        try:
            target = self._documents.lookup(file, pointer)
        except RefError as exc:
            self._failed[location] = str(exc)
            raise SchemaError(str(exc)) from None
        self._defs[key] = {}  # placeholder: a recursive reference finds the name and stops here
        refs: set[str] = set()
        try:
            self._defs[key] = self._translate(target, file, mode, refs, pointer)
        except BaseException:  # RecursionError too: never leave the placeholder behind for the next tool
            del self._defs[key]
            raise
        self._deps[key] = frozenset(refs)
        return name

    def _name_for(self, file: str, pointer: str) -> str:
        tokens = [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]
        if len(tokens) == 3 and tokens[0] == "components" or len(tokens) == 2 and tokens[0] == "definitions":
            base = tokens[-1]
        else:
            base = "_".join(tokens[-3:]) or "root"
        if file != self._main_file:
            base = file.rsplit("/", 1)[-1].rsplit(".", 1)[0] + "." + base
        base = _NAME_UNSAFE.sub("_", base)[:80] or "schema"
        name = base
        counter = 2
        while name in self._taken:
            name = f"{base}_{counter}"
            counter += 1
        self._taken.add(name)
        self._names[(file, pointer)] = name
        return name

    def _translate(self, node: Any, file: str, mode: Mode, refs: set[str], where: str) -> Any:
        if isinstance(node, bool):
            return node
        if not isinstance(node, dict):
            self._warn(file, where, f"a schema must be an object, not {type(node).__name__}: treated as any value")
            return {}
        if node.get("additionalProperties") is False and any(isinstance(node.get(k), list) for k in _COMPOSERS):
            try:
                brought = closed_composition(node, file, self._documents, where)
            except RefError as exc:
                raise SchemaError(str(exc)) from None
            if brought is not None:
                return self._translate_closed(node, file, mode, refs, where, *brought)
        out: JSONSchema = {}
        nullable = False
        exclusive_min = exclusive_max = False
        translate = self._translate
        for key, value in node.items():
            if key == "$ref":
                if not isinstance(value, str):
                    raise SchemaError(f"{where}: $ref must be a string")
                try:
                    name = self.ref_name(value, file, mode)
                except SchemaError as exc:
                    raise self._placed(exc, file, f"{where}/$ref") from None
                refs.add(name)
                out["$ref"] = "#/$defs/" + name
            elif key == "type":
                self._put_type(out, value, file, where)
            elif key == "properties":
                if isinstance(value, dict):
                    out["properties"] = self._translate_properties(value, file, mode, refs, where)
            elif key == "items":
                # Each subschema at its own pointer: a warning (or a broken `$ref`) inside it is told there.
                if isinstance(value, list):
                    out["prefixItems"] = [translate(v, file, mode, refs, f"{where}/items/{i}")
                                          for i, v in enumerate(value)]
                    extra = node.get("additionalItems")
                    if isinstance(extra, dict | bool):
                        out["items"] = translate(extra, file, mode, refs, f"{where}/additionalItems")
                else:
                    out["items"] = translate(value, file, mode, refs, f"{where}/items")
            elif key in _LISTS:
                if isinstance(value, list) and value:
                    out[key] = [translate(v, file, mode, refs, f"{where}/{key}/{i}") for i, v in enumerate(value)]
                else:
                    self._warn(file, where, f"{key} must be a non-empty array: dropped")
            elif key == "required":
                if isinstance(value, list):
                    names = [v for v in value if isinstance(v, str)]
                    if names:
                        out["required"] = list(dict.fromkeys(names))
            elif key in _STRINGS:
                if isinstance(value, str):
                    out[key] = value
            elif key == "enum":
                if isinstance(value, list):
                    out["enum"] = value
            elif key in ("default", "const"):
                out[key] = value
            elif key == "example":
                if "examples" not in node:
                    out["examples"] = [value]
            elif key == "examples":
                if isinstance(value, list):
                    out["examples"] = value
            elif key in _NUMBERS:
                if is_number(value) and (key != "multipleOf" or value > 0):
                    out[key] = value
                else:
                    self._warn(file, where, f"{key} must be a number: dropped")
            elif key in ("exclusiveMinimum", "exclusiveMaximum"):
                if value is True:
                    if key == "exclusiveMinimum":
                        exclusive_min = True
                    else:
                        exclusive_max = True
                elif is_number(value):
                    out[key] = value
            elif key in _COUNTS:
                if is_count(value):
                    out[key] = int(value)
                else:
                    self._warn(file, where, f"{key} must be a non-negative integer: dropped")
            elif key == "pattern":
                fault = pattern_fault(value) if isinstance(value, str) else "is not a string"
                if fault is None:
                    out["pattern"] = value
                else:
                    self._warn(file, where, f"pattern {value!r} {fault}: dropped")
            elif key in _BOOLS:
                if isinstance(value, bool):
                    out[key] = value
            elif key in ("nullable", "x-nullable"):
                nullable = value is True
            elif key in _SUBSCHEMAS:
                if isinstance(value, dict | bool):
                    out[key] = translate(value, file, mode, refs, f"{where}/{key}")
            elif key == "patternProperties":
                if isinstance(value, dict):
                    out[key] = {p: translate(s, file, mode, refs, f"{where}/{key}/{escape_token(p)}")
                                for p, s in value.items() if pattern_fault(p) is None}
            elif key == "dependentSchemas":
                if isinstance(value, dict):
                    out[key] = {p: translate(s, file, mode, refs, f"{where}/{key}/{escape_token(p)}")
                                for p, s in value.items()}
            elif key == "dependentRequired":
                if isinstance(value, dict):
                    out[key] = {p: list(v) for p, v in value.items() if isinstance(v, list)}
            # discriminator, xml, externalDocs, x-*, $schema, $id, definitions/$defs (reached through
            # pointers instead) and unknown keywords are dropped on purpose: see the module docstring.
        if exclusive_min and "minimum" in out:
            out["exclusiveMinimum"] = out.pop("minimum")
        if exclusive_max and "maximum" in out:
            out["exclusiveMaximum"] = out.pop("maximum")
        if "required" in out and "properties" in out and len(out["properties"]) != len(node.get("properties") or ()):
            kept = [n for n in out["required"] if n in out["properties"] or n not in node["properties"]]
            if kept:
                out["required"] = kept
            else:
                del out["required"]
        if "required" in out and out.get("additionalProperties") is False and "patternProperties" not in out:
            undeclared = drop_undeclared(out)
            if undeclared:
                self._warn(file, where, f"required {', '.join(map(repr, undeclared))} declared nowhere under "
                                  "additionalProperties: false (no call could send them): not required")
        elif "required" in out and "allOf" in out and isinstance(node.get("allOf"), list):
            drop_hidden_required(node, out, file, "readOnly" if mode == "in" else "writeOnly", self._documents)
        if out.get("format") in ("binary", "byte") and "contentEncoding" not in out and is_string(out):
            out["contentEncoding"] = "base64"
        if mode == "in" and isinstance(node.get("discriminator"), dict):
            pin_discriminator(node, out, file, self._documents)
        if "enum" in out and "type" in out:
            fix_enum(out, self._warn, file, where)
        if mode == "in" and ("default" in out or "examples" in out):
            self.values.add(out, file, where, allow_null=nullable)
        if nullable:
            out = make_nullable(out)
        return out

    def check_values(self) -> None:
        """Drop the `default`/`examples` of input schemas that fail their own schema (see `_values`)."""
        self.values.run(lambda names: self.collect_defs(names, "in"), self._warn)

    def _translate_closed(self, node: dict[str, Any], file: str, mode: Mode, refs: set[str], where: str,
                          members: Members, branch_properties: dict[str, Any],
                          per_branch: dict[str, list[set[str]]]) -> Any:
        """`additionalProperties: false` beside an `allOf` (or a `oneOf`/`anyOf` whose branches declare
        properties): those properties declared at this level too (see `_closed`)."""
        # Translated without its closure (which would bring it back here), closed again below.
        rest = {key: value for key, value in node.items()
                if key not in ("allOf", "properties", "required", "additionalProperties")}
        rest.setdefault("type", "object")
        out = self._translate(rest, file, mode, refs, where)
        out["additionalProperties"] = False
        own: dict[str, Any] = node["properties"] if isinstance(node.get("properties"), dict) else {}
        properties: JSONSchema = {}
        for name, (raw, source, at) in [*members.properties.items(), *branch_properties.items()]:
            if name not in own and name not in properties:  # each told where it is written
                properties.update(self._translate_properties({name: raw}, source, mode, refs, at))
        properties.update(self._translate_properties(own, file, mode, refs, where))
        declared = {*members.properties, *own}
        written: list[Any] = node["required"] if isinstance(node.get("required"), list) else []
        names = list(dict.fromkeys([*members.required, *(n for n in written if isinstance(n, str))]))
        # A name only a oneOf/anyOf branch declares is that branch's to require, not every object's.
        required = [name for name in names if name in properties and name in declared]
        in_branches = [name for name in names if name not in declared and name in branch_properties]
        undeclared = [name for name in names if name not in declared and name not in branch_properties]
        out["properties"] = properties
        if required:
            out["required"] = required
        if members.leftovers:
            out["allOf"] = [self._translate(raw, source, mode, refs, place) for raw, source, place in members.leftovers]
        brought = [key for key in _COMPOSERS if isinstance(node.get(key), list)]
        self._warn(file, where, f"additionalProperties: false beside {'/'.join(brought)}: the "
                          f"{len(members.properties) + len(branch_properties)} properties they declare are declared "
                          "at this level too (read strictly, the object refuses them)")
        if in_branches:
            require_in_branches(out, in_branches, per_branch)
            self._warn(file, where, f"required {', '.join(map(repr, in_branches))} declared only in oneOf/anyOf "
                                    "branches: each is required by the branches that declare it, not by every object")
        if undeclared:
            self._warn(file, where, f"required {', '.join(map(repr, undeclared))} declared nowhere under "
                              "additionalProperties: false (no call could send them): not required")
        return out

    def _placed(self, error: SchemaError, file: str, pointer: str) -> SchemaError:
        """`error` placed at the `$ref` written at `pointer` of `file`, unless a `$ref` within placed it first; one
        in another file than the spec's is reported there, once."""
        if error.file is None:
            error.file, error.pointer = file, pointer
            if file != self._main_file and self._broken is not None and (file, pointer) not in self._told:
                self._told.add((file, pointer))
                self._broken(file, pointer, f"{error} (a $ref {self._main_file} uses: what uses it is left out)")
        return error

    def _translate_properties(self, properties: dict[str, Any], file: str, mode: Mode, refs: set[str],
                              where: str) -> dict[str, Any]:
        hidden = "readOnly" if mode == "in" else "writeOnly"
        result = {}
        for name, schema in properties.items():
            token = name if "/" not in name and "~" not in name else name.replace("~", "~0").replace("/", "~1")
            if isinstance(schema, dict):
                raw = schema
                if "$ref" in schema:
                    try:
                        raw = self._documents.resolve(schema, file)[0]
                    except RefError as exc:
                        raise self._placed(SchemaError(str(exc)), file, f"{where}/properties/{token}/$ref") from None
                if (schema.get(hidden) is True or isinstance(raw, dict) and raw.get(hidden) is True):
                    continue
            result[name] = self._translate(schema, file, mode, refs, f"{where}/properties/{token}")
        return result

    def _put_type(self, out: JSONSchema, value: Any, file: str, where: str) -> None:
        if value == "file":
            out["type"] = "string"
            out.setdefault("format", "binary")
        elif isinstance(value, str) and value in _TYPES:
            out["type"] = value
        elif isinstance(value, list) and value and all(isinstance(v, str) and v in _TYPES for v in value):
            out["type"] = list(dict.fromkeys(value))
        else:
            # A typo (`intger`) silently widens what the tool accepts: an error, though the operation is kept.
            names = [value] if isinstance(value, str) else value if isinstance(value, list) else []
            unknown = [name for name in names if not (isinstance(name, str) and name in _TYPES)] or [value]
            close = difflib.get_close_matches(str(unknown[0]), sorted(_TYPES), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            self._error(file, where, f"unknown type {unknown[0]!r}{hint}: the type is dropped, so this schema "
                               "accepts any value")
