"""Located diagnostics for one file: every mistake becomes a `Diagnostic` carrying its key path and line.

The loader reports through a `Checker`: the settings model's errors (`gateway.config.reading`) and the checks
across sections (`gateway.config.checks`) alike, so loading goes on and the next mistake is found too.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..catalog import Diagnostic, Level
from .yamlnodes import KeyLines, KeyPath, format_path


def suggest(word: str, options: Iterable[str], *, what: str = "", limit: int = 12) -> str:
    """` (did you mean 'shop'?)` for a near miss, else ` (known: a, b, c)`; empty when there are no options."""
    choices = sorted(set(options))
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    if close:
        return f" (did you mean {close[0]!r}?)"
    if not choices:
        return f" (no {what} defined)" if what else ""
    shown = ", ".join(choices[:limit]) + (", ..." if len(choices) > limit else "")
    return f" (known: {shown})"


@dataclass(slots=True)
class KeySources:
    """Where the values of one loaded manifest came from (`Manifest.key_sources`): each key path's line in the file
    as it read then, the `${VAR}`s each value read, and the file's index of each list item kept. What `gateway
    settings --url` shows a running value's source from once the file has changed: line numbers, not the text."""

    file: str
    lines: dict[KeyPath, int]
    kept: dict[KeyPath, list[int]] = field(default_factory=dict)
    """For a list some of whose items were left out (`gateway.config.reading`): the file's index of each item
    kept, so a path into the loaded lists names the file's item."""

    def file_path(self, path: KeyPath) -> KeyPath:
        """`path` into the loaded values as the key path of the file."""
        if not self.kept:
            return path
        out: list[str | int] = []
        for part in path:
            kept = self.kept.get(tuple(out))
            out.append(kept[part] if kept is not None and isinstance(part, int) and part < len(kept) else part)
        return tuple(out)

    @property
    def key_lines(self) -> KeyLines:
        return self.lines if isinstance(self.lines, KeyLines) else KeyLines()


class Checker:
    """Collects diagnostics for one file, each at the line of its key path (or of the nearest enclosing one)."""

    def __init__(self, file: str, lines: dict[KeyPath, int]) -> None:
        self.source = KeySources(file, lines)
        """The file, its key paths' lines and the list items kept: what the manifest keeps of this load
        (`sources`)."""
        self.diagnostics: list[Diagnostic] = []

    @property
    def file(self) -> str:
        return self.source.file

    @property
    def lines(self) -> dict[KeyPath, int]:
        return self.source.lines

    @property
    def kept(self) -> dict[KeyPath, list[int]]:
        return self.source.kept

    def sources(self) -> KeySources:
        """The lines and variables this file's values came from (shared, not copied: the loader is done with them)."""
        return self.source

    def file_path(self, path: KeyPath) -> KeyPath:
        """`path` into the loaded values as the key path of the file."""
        return self.source.file_path(path)

    def line(self, path: KeyPath) -> int | None:
        """The line of `path` into the loaded values (or of its nearest enclosing key in the file)."""
        return self._file_line(self.file_path(path))

    def _file_line(self, path: KeyPath) -> int | None:
        """The line of a key path of the file: mapped already, not again (an index past a list's left-out item
        would name the item after it)."""
        while True:
            if path in self.lines:
                return self.lines[path]
            if not path:
                return None
            path = path[:-1]

    def report(self, level: Level, path: KeyPath, message: str) -> None:
        path = self.file_path(path)
        self.diagnostics.append(Diagnostic(level=level, file=self.file, pointer=format_path(path),
                                           line=self._file_line(path), message=message))

    def error(self, path: KeyPath, message: str) -> None:
        self.report("error", path, message)

    def warning(self, path: KeyPath, message: str) -> None:
        self.report("warning", path, message)

    @property
    def has_errors(self) -> bool:
        return any(d.level == "error" for d in self.diagnostics)

    def sorted(self) -> list[Diagnostic]:
        """Every diagnostic so far, in the order of the file's lines."""
        return sorted(self.diagnostics, key=lambda d: d.line or 0)
