"""agents.yaml's data validated against the settings model, every mistake a located diagnostic.

    agents.yaml:12: gateway.allowed_hosts: expected a list, got a number (5)
    agents.yaml:13: gateway.unknown_key_xyz: unknown key 'unknown_key_xyz' (did you mean 'allowed_hosts'?)

Pydantic reports each mistake with a location inside the model (`loc`); the location is walked through the data
as written to find the key path (parts that are not in the document, like a credential's `type` tag, are
skipped), and the path's line comes from the YAML nodes (`gateway.config.yamlnodes`). Messages are the
loader's own ("unknown key ... (did you mean ...?)", "expected an integer, got a string ('soon')"), not
pydantic's.

A bad value does not stop the reading: it is removed and the rest validated again (a bad optional key falls back
to its default, an entry missing a required key is left out), so the checks that follow see the usable rest and
one run reports every mistake. Values whose `${VAR}` was unset are removed first (their error is already said).
"""

from __future__ import annotations

import copy
import difflib
import re
import types
from collections.abc import Callable, Iterator
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from .checker import Checker, suggest
from .fields import PATTERN_MESSAGES, describe_type
from .model import Manifest
from .yamlnodes import MISSING, KeyPath

_MAX_PASSES = 12
_QUOTED = re.compile(r"'([^']*)'")


def read_manifest(data: Any, c: Checker) -> Manifest:
    """The manifest `data` describes, its mistakes reported on `c`; the usable rest when there are any."""
    data, unset = _without_missing(data, ())
    pruned: set[KeyPath] = set(unset)
    for _ in range(_MAX_PASSES):
        try:
            return Manifest.model_validate(data, by_alias=True, by_name=False)
        except ValidationError as exc:
            removed: list[KeyPath] = []
            for error in exc.errors(include_url=False):
                path, message, remove = _diagnose(data, error)
                where = c.file_path(path)
                if not any(_within(where + missing, done) for done in pruned for missing in _missing_key(error)):
                    c.error(path, message)
                removed.append(remove)
            if () in removed or not removed:
                return Manifest()
            pruned.update(c.file_path(path) for path in removed)
            for path in _deepest_first(removed):
                _keep_indexes(c, data, path)
            data = _removed(data, removed)
    return Manifest()


def _keep_indexes(c: Checker, data: Any, path: KeyPath) -> None:
    """Before a list item goes, remember the file's index of each item that stays (`Checker.kept`)."""
    if not path or not isinstance(path[-1], int):
        return
    items = data
    for part in path[:-1]:
        items = items[part]
    where = c.file_path(path[:-1])
    kept = c.kept.setdefault(where, list(range(len(items))))
    if path[-1] < len(kept):
        del kept[path[-1]]


def _within(path: KeyPath, prefix: KeyPath) -> bool:
    return path[:len(prefix)] == prefix


def _missing_key(error: ErrorDetails) -> tuple[KeyPath, ...]:
    """The key paths an error is about beyond its located path: a missing key's own, the keys a section's own check
    names (`at_key`: a key whose `${VAR}` was unset is gone, so the error locates at its section), else none."""
    if error["type"] == "at_key":
        return ((), tuple((error.get("ctx") or {}).get("keys", ())))
    return ((error["loc"][-1],),) if error["type"] == "missing" and error["loc"] else ((),)


def _without_missing(value: Any, path: KeyPath) -> tuple[Any, list[KeyPath]]:
    """`value` without the values whose substitution failed (already reported), and where they were."""
    if value is MISSING:
        return None, [path]
    if isinstance(value, dict):
        out, gone = {}, []
        for key, item in value.items():
            kept, lost = _without_missing(item, (*path, key))
            gone += lost
            if item is not MISSING:
                out[key] = kept
        return out, gone
    if isinstance(value, list):
        items, gone = [], []
        for index, item in enumerate(value):
            kept, lost = _without_missing(item, (*path, index))
            gone += lost
            if item is not MISSING:
                items.append(kept)
        return items, gone
    return value, []


def _locate(data: Any, loc: tuple[int | str, ...]) -> KeyPath:
    """The key path in the document that a model location points at (parts not in the document are skipped)."""
    path: list[str | int] = []
    node = data
    for part in loc:
        if isinstance(node, dict) and isinstance(part, str) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            continue
        path.append(part)
    return tuple(path)


def _deepest_first(paths: list[KeyPath]) -> list[KeyPath]:
    """Each path once, children before their parents and later list items before earlier ones."""
    return sorted(set(paths), key=lambda p: [(isinstance(k, int), k) for k in p], reverse=True)


def _removed(data: Any, paths: list[KeyPath]) -> Any:
    """A copy of `data` without the values at `paths` (list items from the end, so indexes hold)."""
    data = copy.deepcopy(data)
    for path in _deepest_first(paths):
        parent = data
        try:
            for part in path[:-1]:
                parent = parent[part]
        except (KeyError, IndexError, TypeError):
            continue  # inside a value already left out
        if isinstance(parent, dict):
            parent.pop(path[-1], None)
        elif isinstance(parent, list) and isinstance(path[-1], int) and path[-1] < len(parent):
            del parent[path[-1]]
    return data


def _diagnose(data: Any, error: ErrorDetails) -> tuple[KeyPath, str, KeyPath]:
    """(where, what to say, what to remove before the next pass)."""
    loc, kind, ctx, value = tuple(error["loc"]), error["type"], error.get("ctx") or {}, error.get("input")
    path = _locate(data, loc)
    key = loc[-1] if loc else ""
    if kind == "extra_forbidden":
        return path, f"unknown key {key!r}" + suggest(str(key), _keys_at(loc[:-1])), path
    if kind == "missing":
        choices = _choices_at(loc)
        hint = f": one of {', '.join(choices)}" if choices else ""
        return path, f"{key!r} is required{hint}", path  # the entry without it goes
    if kind == "at_key":
        path = _locate(data, loc + tuple(ctx["keys"]))
        return path, str(ctx["message"]), path
    if kind == "union_tag_not_found":
        tags = _choices_at(loc)
        return path, f"'type' is required: one of {', '.join(tags)}", path
    if kind == "union_tag_invalid":
        where = _locate(data, (*loc, "type"))
        tags = _QUOTED.findall(str(ctx.get("expected_tags", "")))
        return where, f"{ctx.get('tag')!r} is not one of {', '.join(tags)}" + _near(str(ctx.get("tag")), tags), path
    return path, _message(kind, ctx, value, key), path


def _message(kind: str, ctx: dict[str, Any], value: Any, key: str | int) -> str:
    if kind in ("value_error", "assertion_error"):
        return str(ctx.get("error", "")).removeprefix("Assertion failed, ")
    if kind == "literal_error":
        options = _QUOTED.findall(str(ctx.get("expected", "")))
        return f"{value!r} is not one of {', '.join(options)}" + _near(str(value), options)
    if kind == "string_pattern_mismatch":
        template = PATTERN_MESSAGES.get(str(ctx.get("pattern")), "{value!r} does not match " + str(ctx.get("pattern")))
        return template.format(value=value)
    if kind == "string_too_short":
        return f"{key!r} must not be empty"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        bound = ctx.get("ge", ctx.get("gt", ctx.get("le", ctx.get("lt"))))
        words = {"greater_than_equal": "at least", "greater_than": "greater than",
                 "less_than_equal": "at most", "less_than": "less than"}[kind]
        return f"must be {words} {bound:g}, got {value}"
    expected = _EXPECTED.get(kind)
    if expected is not None:
        return f"expected {expected}, got {describe_type(value)}"
    return str(ctx.get("message") or kind.replace("_", " "))


_EXPECTED = {
    "string_type": "a string", "int_type": "an integer", "int_parsing": "an integer", "int_from_float": "an integer",
    "float_type": "a number", "float_parsing": "a number", "finite_number": "a finite number",
    "number_type": "a number", "bool_type": "true or false", "bool_parsing": "true or false",
    "dict_type": "a mapping", "model_type": "a mapping", "model_attributes_type": "a mapping",
    "list_type": "a list", "tuple_type": "a list", "string_unicode": "text",
}


def _near(word: str, options: list[str]) -> str:
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


# -- what the model expects at a location (for did-you-mean and "one of") ---------------------------------------


def _keys_at(loc: tuple[int | str, ...]) -> list[str]:
    """The keys the section at `loc` knows (its fields' names as written in the file)."""
    models = [m for m in map(_bare, _members(_bare(_annotation_at(loc)))) if isinstance(m, type) and
              issubclass(m, BaseModel)]
    if len(models) != 1:
        return []
    model = models[0]
    return [field.alias or name for name, field in model.model_fields.items() if not _is_derived(field)]


def _is_derived(field: Any) -> bool:
    alias = field.validation_alias
    return isinstance(alias, str) and alias.startswith("\0")


def _choices_at(loc: tuple[int | str, ...]) -> list[str]:
    """The values a `Literal` field takes, or the tags of a credential union, at `loc`."""
    annotation = _bare(_annotation_at(loc))
    members = [_bare(member) for member in _members(annotation)]
    tags = [str(m.model_fields["type"].default) for m in members if isinstance(m, type) and
            issubclass(m, BaseModel) and "type" in m.model_fields]
    if tags:
        return tags
    return [str(v) for member in members for v in get_args(member) if isinstance(v, str)]


def _annotation_at(loc: tuple[int | str, ...]) -> Any:
    annotation: Any = Manifest
    for part in loc:
        annotation = _step(annotation, part)
        if annotation is None:
            return None
    return annotation


def _bare(annotation: Any) -> Any:
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation


def _members(annotation: Any) -> Iterator[Any]:
    if get_origin(annotation) in (Union, types.UnionType):
        yield from (member for member in get_args(annotation) if member is not type(None))
    else:
        yield annotation


def _step(annotation: Any, part: int | str) -> Any:
    annotation = _bare(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        for name, field in annotation.model_fields.items():
            if part in (name, field.alias):
                return field.annotation
        return None
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is dict:
        return args[1] if part != "[key]" else args[0]
    if origin in (list, tuple):
        return args[0]
    members = [_bare(member) for member in _members(annotation)]
    if len(members) > 1 or members[0] is not annotation:
        for member in members:  # a discriminated union's location names the member's tag
            if isinstance(member, type) and issubclass(member, BaseModel) and \
                    member.model_fields.get("type") is not None and member.model_fields["type"].default == part:
                return member
        stepped: Callable[[Any], Any] = lambda member: _step(member, part)  # noqa: E731
        return next((found for found in map(stepped, members) if found is not None), None)
    return None
