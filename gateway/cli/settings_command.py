"""`gateway settings [--agent NAME] [--json]`: each effective setting and the layer it came from
(`gateway.config.layers`), secrets as `set` or `unset` only."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from ..printable import printable

SHOWN_CHARACTERS = 60
"""A longer value (instructions, descriptions) is cut in the text table; `--json` has it whole."""


def add_settings_parser(commands: Any) -> None:
    settings = commands.add_parser("settings", help="print each effective setting and the layer it came from")
    # No defaults here: whether --specs/--agents were typed, set by GATEWAY_SPECS/GATEWAY_AGENTS or left to the
    # default is what the command reports.
    settings.add_argument("--specs", type=Path, default=None, help="folder of OpenAPI specs (default ./specs)")
    settings.add_argument("--agents", type=Path, default=None, help="the agents manifest (default ./agents.yaml)")
    settings.add_argument("--no-cache", action="store_true", help="as the other commands take it (shown as set)")
    settings.add_argument("--agent", help="only the settings that bear on this agent (its own, its provider's, "
                                          "its apis', gateway's)")
    settings.add_argument("--json", action="store_true",
                          help="a JSON array of {key, value, layer, source}")


def run_settings(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    from ..config.layers import effective_settings, process_settings

    out = out or sys.stdout
    err = err or sys.stderr
    process = process_settings(specs=args.specs, agents=args.agents, no_cache=args.no_cache)
    agents = Path(next(s.value for s in process if s.key == "agents"))
    if not agents.is_file():
        print(f"gateway: {agents} does not exist (--agents, GATEWAY_AGENTS, or ./agents.yaml)", file=err)
        return 1
    settings, diagnostics, manifest = effective_settings(agents, agent=args.agent)
    if args.agent is not None and args.agent not in manifest.agents:
        known = ", ".join(manifest.agents) or "none"
        print(f"gateway: unknown agent {args.agent!r}; the agents in {agents} are: {known}", file=err)
        return 2
    errors = [d for d in diagnostics if d.level == "error"]
    for diagnostic in errors:  # the rest of the file is still shown: what it would run with, less these keys
        print(f"gateway: {printable(str(diagnostic))}", file=err)
    rows = [*process, *settings]
    if args.json:
        json.dump([row.as_json() for row in rows], out, indent=2, default=str)
        out.write("\n")
    else:
        _table(rows, out)
    return 1 if errors else 0


def _table(rows: list[Any], out: TextIO) -> None:
    shown = [(row.key, _text(row.value), row.layer, row.source) for row in rows]
    widths = [max(len(cells[i]) for cells in [("SETTING", "VALUE", "LAYER", "SOURCE"), *shown]) for i in range(3)]
    for cells in [("SETTING", "VALUE", "LAYER", "SOURCE"), *shown]:
        line = "  ".join(cell.ljust(width) for cell, width in zip(cells[:3], widths, strict=True))
        print(printable(f"{line}  {cells[3]}", lines=False), file=out)


def _text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = text.replace("\n", " ")
    return text if len(text) <= SHOWN_CHARACTERS else text[:SHOWN_CHARACTERS - 1] + "…"


__all__ = ["add_settings_parser", "run_settings"]
