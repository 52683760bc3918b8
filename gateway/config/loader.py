"""Load agents.yaml into a `Manifest`, reporting every mistake at once with file:line and key path.

    agents.yaml:9: agents.reader.tools[1].api: no spec named 'nosuchapi' (known: github, shop)

One reading serves every command: `gateway validate` prints what `gateway serve`, `mcp`, `chat` and `call`
would refuse, and they refuse it with the same lines. The steps:

1. the YAML, with each key path's line and `${VAR}` / `${VAR:-default}` read from the environment
   (`gateway.config.yamlnodes`; a missing variable without a default is an error naming it and the key);
2. the settings model (`gateway.config.model` and its sections), every key typed, unknown keys refused with a
   did-you-mean (`gateway.config.reading`);
3. what the model cannot see alone: names that refer to each other, certificate files, provider URLs
   (`gateway.config.checks`), delegation (`gateway.config.delegation`);
4. with a `catalog`: the apis and every tool selection against the compiled specs. What needs the agents'
   toolsets (credentials their operations demand, tool counts their providers refuse) is checked a floor up,
   where the toolsets are built once for the checks and for serving (`gateway.configuration`).

A credential whose secrets all come out empty (`token: ${TOKEN:-}`) counts as not configured. Diagnostics come
sorted by line.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from ..catalog import Catalog, Diagnostic
from .checker import Checker
from .checks import check_manifest
from .delegation import check_delegation
from .model import DEFAULT_BASE_URLS, Manifest
from .reading import read_manifest
from .yamlnodes import load_yaml

__all__ = ["DEFAULT_BASE_URLS", "load_manifest", "parse_manifest", "read_checked", "read_text"]


def load_manifest(
    path: Path, *, catalog: Catalog | None = None, environ: Mapping[str, str] | None = None
) -> tuple[Manifest, list[Diagnostic]]:
    """Read and validate `path`; never raises for bad content.

    Returns the manifest (the usable parts of it) and every diagnostic, sorted by line. The manifest is
    unusable when any diagnostic is an error. With `catalog`, apis and tool selections are checked against the
    compiled specs; `gateway.configuration.load_configuration` adds the checks of the agents' toolsets.
    """
    text, file, unreadable = read_text(path)
    if unreadable is not None:
        return Manifest(file=file), [unreadable]
    return _parse(text, file=file, catalog=catalog, environ=environ, base_dir=Path(path).parent)


def read_text(path: Path) -> tuple[str, str, Diagnostic | None]:
    """agents.yaml's text and file name, or the diagnostic saying why it cannot be read."""
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8"), path.name, None
    except (OSError, UnicodeDecodeError) as exc:
        return "", path.name, Diagnostic(level="error", file=path.name, message=f"cannot read: {exc}")


def parse_manifest(
    text: str, *, file: str = "agents.yaml", catalog: Catalog | None = None, environ: Mapping[str, str] | None = None,
    base_dir: Path | None = None,
) -> tuple[Manifest, list[Diagnostic]]:
    """`load_manifest` on a string; relative file names in it are taken from `base_dir` (default: the current
    folder)."""
    return _parse(text, file=file, catalog=catalog, environ=environ, base_dir=base_dir)


def _parse(
    text: str, *, file: str, catalog: Catalog | None, environ: Mapping[str, str] | None, base_dir: Path | None,
) -> tuple[Manifest, list[Diagnostic]]:
    manifest, checker, _ = read_checked(text, file=file, catalog=catalog, environ=environ, base_dir=base_dir)
    return manifest, checker.sorted()


def read_checked(
    text: str, *, file: str, catalog: Catalog | None, environ: Mapping[str, str] | None, base_dir: Path | None,
) -> tuple[Manifest, Checker, bool]:
    """The manifest in `text` and the `Checker` holding its diagnostics so far (steps 1-3), so that checks against
    the agents' toolsets (`gateway.configuration`) report at their lines too; False: the YAML was unreadable."""
    data, lines, diagnostics = load_yaml(text, file=file, environ=os.environ if environ is None else environ)
    c = Checker(file, lines)
    c.diagnostics.extend(diagnostics)
    if data is None:
        return Manifest(file=file), c, False
    manifest = read_manifest(data, c)
    manifest.file = file
    manifest.key_sources = c.sources()
    check_manifest(c, manifest, catalog, base_dir or Path.cwd())
    check_delegation(c, manifest)
    return manifest, c, True
