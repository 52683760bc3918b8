"""The compiled-spec cache: one pickle per spec file, keyed by the content hash of that file.

An entry also records the hash of every other file its `$ref`s read, and is used only when all of
them still match. Pickle is used because it keeps the sharing between tools (a `$defs` entry used by
500 tools is stored once) and loads at close to `json.load` speed; the cache folder is private to
the user (0700), and an entry that fails to load is simply compiled again.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
import os
import pickle
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_FORMAT = "gateway-catalog-7"
"""Bump when the entry layout changes. Changes to the compiler's code invalidate entries by themselves
(see `_code_fingerprint`)."""


def fingerprinted_sources() -> list[Path]:
    """The source files whose code shapes an entry: the compiler's own, the catalog types and the search room
    `gateway.offer` (an entry carries the index: its builder, the words it reads, the summaries it cuts, and what
    those import; a change to the rest of the room only costs one compile more)."""
    package = Path(__file__).resolve().parent
    offer = package.parent / "offer"
    return sorted([*package.glob("*.py"), package.parent / "catalog.py", *offer.glob("*.py")])


@functools.cache
def _code_fingerprint() -> str:
    """A hash of `fingerprinted_sources`: new code never reads old entries."""
    digest = hashlib.sha256()
    for path in fingerprinted_sources():
        try:
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
        except OSError:
            digest.update(path.name.encode() + b"\0missing")
    return digest.hexdigest()[:16]


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Unpickling a catalog creates ~10^5 containers, and the cyclic collector would run on them again
    and again (none of them is garbage yet): paused, a cached load takes about half the time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            # Those containers are alive, yet the first collection after this would scan all of them (a
            # cached load of a big spec: most of its time). freeze() moves every tracked object out of the young
            # generations without a scan; unfreeze() puts them in the oldest one. A process that keeps its
            # long-lived heap frozen (`gateway serve`) keeps the catalog frozen with it.
            keeps_frozen = gc.get_freeze_count() > 0
            gc.freeze()
            if not keeps_frozen:
                gc.unfreeze()
            gc.enable()


def default_dir() -> Path:
    configured = os.environ.get("GATEWAY_CACHE_DIR")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gateway"


class CatalogCache:
    def __init__(self, directory: Path, max_description: int) -> None:
        self.directory = Path(directory)
        self._salt = f"{_FORMAT}:{_code_fingerprint()}:{max_description}"

    def _entry_path(self, relative: str) -> Path:
        return self.directory / (hashlib.sha256(relative.encode()).hexdigest()[:24] + ".pickle")

    def load(self, relative: str, digest: str, specs_dir: Path) -> Any | None:
        try:
            with open(self._entry_path(relative), "rb") as handle, _gc_paused():
                entry = pickle.load(handle)  # noqa: S301 - our own per-user cache folder
        except Exception:  # noqa: BLE001 - a missing or damaged entry means: compile again
            return None
        if not isinstance(entry, dict) or entry.get("key") != (self._salt, relative, digest):
            return None
        for name, dep_digest in entry.get("dependencies", {}).items():
            try:
                current = hashlib.sha256((specs_dir / name).read_bytes()).hexdigest()
            except OSError:
                return None
            if current != dep_digest:
                return None
        return entry["result"]

    def store(self, relative: str, digest: str, dependencies: dict[str, bytes], result: Any) -> None:
        entry = {
            "key": (self._salt, relative, digest),
            "dependencies": {name: hashlib.sha256(data).hexdigest() for name, data in dependencies.items()},
            "result": result,
        }
        try:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            handle, temporary = tempfile.mkstemp(dir=self.directory, suffix=".tmp")
            with os.fdopen(handle, "wb") as out:
                pickle.dump(entry, out, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(temporary, self._entry_path(relative))
        except OSError:
            # A read-only or full cache folder must not stop the gateway; it just compiles next time too.
            return
