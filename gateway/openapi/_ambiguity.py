"""Schemas a validator would apply to one place of a value exponentially often, found before any value is.

A validator (jsonschema_rs included) applies every branch of an `anyOf`/`oneOf`/`allOf` to the same place of
a value. When two branches lead to one `$defs` entry (`L0 = anyOf: [{items: L1, minItems: 1}, {items: L1,
maxItems: 5}]`, and so on down), that entry is applied twice to each item, the one below it four times, and a
value nested 25 deep costs 2**25 applications: jsonschema_rs holds the GIL and has no step budget, so neither the
event loop nor a worker thread would be free for seconds to minutes (redteam46). A recursive union whose variants
share a recursive property does the same, N**depth.

`ExcessCheck.excessive_defs` walks the places of a value as the schema sees them (a property name, an array item)
and counts, at each, how many times each subschema would be applied (the number of composition paths reaching it: the
ambiguity of the schema read as an automaton over a value's path). Where a count passes `MAX_APPLICATIONS`, the
`$defs` entry counted most there is named; it is left unjudged by the gateway (`unjudged`: the upstream still
checks it, the model still sees it) and the walk starts again, until no place passes. A place's set of counts
that was seen before is not walked again, so plain recursion (each entry once per place) ends at once; counts are
capped, so every walk ends.
"""

from __future__ import annotations

from typing import Any, NamedTuple

MAX_APPLICATIONS = 16
"""Times one subschema may be applied to one place of a value. The corpus's real specs reach 8 at most (IX-API; GitHub
and Jira 2-3: `allOf` diamonds); the hostile chain passes 16 at depth 5; a value costs at most 16 times its plain
size to judge."""

_SAME_PLACE = ("allOf", "anyOf", "oneOf")
_SAME_PLACE_ONE = ("not", "if", "then", "else")
_ITEM_KEYS = ("items", "contains", "unevaluatedItems")
_ANY_NAME = ("additionalProperties", "unevaluatedProperties")
_ITEM = "\x00item"
"""The label of an array's items (no property name is this)."""
_UNDECLARED = "\x00undeclared"
"""The label of a property name no `properties` declares."""

Counts = dict[int, int]


class _Members(NamedTuple):
    """What one subschema applies to its value's members."""

    named: dict[str, Any]
    """A declared property name -> its schema."""
    matching: list[Any]
    """The `patternProperties` schemas (applied to declared names too)."""
    undeclared: list[Any]
    """The schemas applied to a name `properties` does not declare (`additionalProperties`, patterns...)."""
    items: list[Any]


class _Walk:
    """The subschemas of one spec's tools, as a validator reaches them; `cut`: `$defs` names treated as accepting
    anything. A `$defs` name of one spec is the same object in every tool's `$defs` (`SchemaTranslator`), so what is
learnt of a subschema (by identity) holds for the spec's next tools."""

    def __init__(self, cut: set[str]) -> None:
        self.defs: dict[str, Any] = {}
        self.cut = cut
        self.nodes: dict[int, Any] = {}
        self.closures: dict[int, Counts] = {}
        self.edges: dict[int, _Members] = {}

    def add(self, schema: dict[str, Any]) -> None:
        """Resolve `$ref`s in `schema`'s own `$defs` (the same name is the same object in every tool's)."""
        defs = schema.get("$defs")
        self.defs = defs if isinstance(defs, dict) else {}

    def name_of(self, place: Counts) -> str | None:
        """The `$defs` entry applied most often at `place`, if any is applied there."""
        names = {id(node): name for name, node in self.defs.items()}
        named = [(times, names[key]) for key, times in place.items() if key in names]
        return max(named)[1] if named else None

    def _target(self, ref: Any) -> Any:
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref[len("#/$defs/"):]
            if name not in self.cut:
                return self.defs.get(name)
        return None

    def _same_place(self, node: dict[str, Any]) -> list[Any]:
        """The subschemas applied to the same place as `node`."""
        found = [self._target(node.get("$ref"))]
        for key in _SAME_PLACE:
            value = node.get(key)
            if isinstance(value, list):
                found.extend(value)
        found.extend(node.get(key) for key in _SAME_PLACE_ONE)
        dependent = node.get("dependentSchemas")
        if isinstance(dependent, dict):
            found.extend(dependent.values())
        return [sub for sub in found if isinstance(sub, dict)]

    def closure(self, node: dict[str, Any], open_: set[int]) -> Counts:
        """How many times each subschema is applied at a place where `node` is applied once."""
        key = id(node)
        known = self.closures.get(key)
        if known is not None:
            return known
        counts: Counts = {key: 1}
        self.nodes[key] = node
        open_.add(key)
        for sub in self._same_place(node):
            if id(sub) in open_:
                continue  # a same-place cycle: no validator ends it, and it multiplies nothing here
            for inner, times in self.closure(sub, open_).items():
                counts[inner] = min(counts.get(inner, 0) + times, MAX_APPLICATIONS + 1)
        open_.discard(key)
        self.closures[key] = counts
        return counts

    def members(self, node: dict[str, Any]) -> _Members:
        """What `node` applies to its value's members (memoized)."""
        key = id(node)
        known = self.edges.get(key)
        if known is None:
            properties = node.get("properties")
            named = {name: sub for name, sub in properties.items() if isinstance(sub, dict)} \
                if isinstance(properties, dict) else {}
            patterns = node.get("patternProperties")
            # Whether a pattern matches a name is not asked: counted as if it did, which only counts more.
            matching = [sub for sub in patterns.values() if isinstance(sub, dict)] if isinstance(patterns, dict) else []
            undeclared = [sub for sub in (node.get(key) for key in _ANY_NAME) if isinstance(sub, dict)]
            items = [node.get(key) for key in _ITEM_KEYS]
            prefix = node.get("prefixItems")
            if isinstance(prefix, list):
                items.extend(prefix)
            known = self.edges[key] = _Members(named, matching, undeclared + matching,
                                               [sub for sub in items if isinstance(sub, dict)])
        return known

    def following(self, place: Counts) -> list[Counts]:
        """The counts at each member place of a value at `place` (a property name, any other name, an item)."""
        members = [(self.members(self.nodes[key]), times) for key, times in place.items()]
        names = {name for member, _ in members for name in member.named}
        found: dict[str, Counts] = {}
        for member, times in members:
            subs: list[tuple[str, Any]] = [(name, sub) for name, sub in member.named.items()]
            if member.matching:
                subs.extend((name, sub) for name in member.named for sub in member.matching)
            if member.undeclared:  # rare: most schemas say nothing of names they do not declare
                subs.extend((name, sub) for name in names if name not in member.named for sub in member.undeclared)
                subs.extend((_UNDECLARED, sub) for sub in member.undeclared)
            subs.extend((_ITEM, sub) for sub in member.items)
            for label, sub in subs:
                counts = found.setdefault(label, {})
                for inner, count in self.closure(sub, set()).items():
                    counts[inner] = min(counts.get(inner, 0) + times * count, MAX_APPLICATIONS + 1)
        return list(found.values())


class ExcessCheck:
    """The check for the tools of one spec: their `$defs` entries are shared objects, so a place's counts
    found harmless for one tool are not walked again for the next (Graph: 3,326 tools reach `$defs`)."""

    def __init__(self) -> None:
        self._harmless: set[frozenset[tuple[int, int]]] = set()
        self._walk = _Walk(set())

    def excessive_defs(self, schema: dict[str, Any]) -> list[str]:
        """The `$defs` names of `schema` a value would be judged by too often (see the module docstring), in the
        order found; empty for every tool of the corpus's real specs (bench/ambiguity.py)."""
        cut: list[str] = []
        if not schema.get("$defs"):
            return cut  # a tree: every subschema is reached one way only
        while (name := self._first_excess(schema, set(cut))) is not None and name not in cut:
            cut.append(name)
        return cut

    def _first_excess(self, schema: dict[str, Any], cut: set[str]) -> str | None:
        """The `$defs` entry to leave unjudged at the first place applied too often, or None when none is."""
        # The memos hold for the schemas as written: a walk with entries cut is a walk of its own.
        walk = self._walk if not cut else _Walk(cut)
        walk.add(schema)
        harmless = self._harmless if not cut else set()
        todo = [walk.closure(schema, set())]
        seen: set[frozenset[tuple[int, int]]] = set()
        while todo:
            place = todo.pop()
            state = frozenset(place.items())
            if state in seen or state in harmless:
                continue
            seen.add(state)
            if max(place.values()) > MAX_APPLICATIONS:
                return walk.name_of(place)
            todo.extend(walk.following(place))
        harmless |= seen  # walked to the end without an excess: harmless wherever met again
        return None


def unjudged(schema: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """`schema` with the `$defs` entries `names` accepting any value (a new object; the others stay shared)."""
    defs = dict(schema["$defs"])
    for name in names:
        defs[name] = {}
    return {**schema, "$defs": defs}
