"""Tool names: `^[a-zA-Z0-9_-]{1,64}$`, deterministic, unique.

Rules, in order:
1. The operationId when it matches the pattern.
2. Otherwise a name derived from it (invalid characters become `_`), or, without an operationId,
   from method and path: `get_repos_owner_repo_issues`.
3. A name longer than 64 characters keeps its first 55 and ends in `_` + 8 hex digits of a SHA-1
   of the full name, so two long names that share a prefix stay apart and the same name always
   shortens the same way.
4. Within a spec, a name already taken gets a suffix from the hash of `METHOD path`
   (duplicate operationIds are common).
5. Across the catalog, when two specs produce the same name, every tool with that name is prefixed
   by its api (`stripe_com_GetCharges`); names that do not collide are left alone.
6. A name must start with a letter or `_` (Gemini requires it): otherwise it gets `op_` in front.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable

NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
MAX_LENGTH = 64
_INVALID = re.compile(r"[^a-zA-Z0-9_-]+")
_UNDERSCORES = re.compile(r"_{2,}")


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:8]


def shorten(name: str, limit: int = MAX_LENGTH) -> str:
    """`name` itself when it fits, else a prefix plus a stable hash of the whole name."""
    if len(name) <= limit:
        return name
    return name[: limit - 9].rstrip("_-") + "_" + _digest(name)


def sanitize(text: str) -> str:
    cleaned = _UNDERSCORES.sub("_", _INVALID.sub("_", text)).strip("_")
    return cleaned


def _lead(name: str) -> str:
    return name if name[:1].isalpha() or name[:1] == "_" else shorten(f"op_{name}")


def base_name(operation_id: str | None, method: str, path: str) -> str:
    if operation_id and NAME_PATTERN.match(operation_id):
        return _lead(operation_id)
    if operation_id:
        cleaned = sanitize(operation_id)
        if cleaned:
            return _lead(shorten(cleaned))
    derived = sanitize(f"{method.lower()}_{path.replace('{', '').replace('}', '')}")
    return shorten(derived or method.lower())


def unique_in_spec(name: str, method: str, path: str, taken: set[str]) -> str:
    if name not in taken:
        return name
    candidate = shorten(name, MAX_LENGTH - 9) + "_" + _digest(f"{method} {path}")
    counter = 2
    while candidate in taken:
        candidate = shorten(name, MAX_LENGTH - 9 - len(str(counter))) + f"_{_digest(f'{method} {path}')}{counter}"
        counter += 1
    return candidate


def prefix_colliding(names: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """`(api, name)` pairs to their final names: only names used by more than one api get a prefix."""
    pairs = list(names)
    counts = Counter(name for _, name in pairs)
    final: dict[tuple[str, str], str] = {}
    used = {name for _, name in pairs if counts[name] == 1}
    for api, name in pairs:
        if counts[name] == 1:
            final[(api, name)] = name
            continue
        candidate = _lead(shorten(f"{sanitize(api)}_{name}"))
        if candidate in used:
            candidate = unique_in_spec(candidate, api, name, used)
        used.add(candidate)
        final[(api, name)] = candidate
    return final
