"""`gateway settings [--agent NAME] [--json] [--url URL]`: each effective setting and the layer it came from
(`gateway.config.layers`), secrets as `set` or `unset` only.

Without `--url` it reads agents.yaml here, with this terminal's environment: what the file says, which a running
gateway may not use (its environment differs, or the file changed since it loaded and the reload was refused).
`--url` asks the running gateway instead (`GET /settings`, `gateway.server.settings_route`), with an admin key from
`GATEWAY_KEY` when it has `clients`."""

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
    settings = commands.add_parser(
        "settings", help="print each effective setting and the layer it came from",
        description="Without --url: what agents.yaml says, read here with this shell's environment (a running "
                    "gateway may differ: its own environment, a reload since). With --url: what that running "
                    "gateway uses.")
    # No defaults here: whether --specs/--agents were typed, set by GATEWAY_SPECS/GATEWAY_AGENTS or left to the
    # default is what the command reports.
    settings.add_argument("--specs", type=Path, default=None, help="folder of OpenAPI specs (default ./specs)")
    settings.add_argument("--agents", type=Path, default=None, help="the agents manifest (default ./agents.yaml)")
    settings.add_argument("--no-cache", action="store_true", help="as the other commands take it (shown as set)")
    settings.add_argument("--agent", help="only the settings that bear on this agent (its own, its provider's, "
                                          "its apis', gateway's)")
    settings.add_argument("--json", action="store_true",
                          help="a JSON array of {key, value, layer, source}")
    settings.add_argument("--url", help="ask the gateway running there (http://127.0.0.1:8080) what it uses, with an "
                                        "admin key from GATEWAY_KEY when it has clients")


def run_settings(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    from ..config.layers import effective_settings, process_settings

    out = out or sys.stdout
    err = err or sys.stderr
    if args.url is not None:
        return _running(args, out, err)
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
    _print([row.as_json() for row in [*process, *settings]], args.json, out)
    return 1 if errors else 0


def _running(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`--url`: the running gateway's settings (`GET /settings`)."""
    import os

    import httpx

    if args.specs is not None or args.agents is not None or args.no_cache:
        print("gateway: --url asks the running gateway, which has its own --specs, --agents and cache: leave them "
              "out", file=err)
        return 2
    key = os.environ.get("GATEWAY_KEY")
    url = args.url.rstrip("/") + "/settings"
    try:
        answer = httpx.get(url, params={"agent": args.agent} if args.agent else None, timeout=30,
                           headers={"Authorization": f"Bearer {key}"} if key else None)
    except httpx.HTTPError as exc:
        print(f"gateway: cannot reach {url}: {exc}", file=err)
        return 1
    try:
        body = answer.json()
    except ValueError:
        body = None
    if answer.status_code != 200 or not isinstance(body, dict) or not isinstance(body.get("data"), list):
        error = body.get("error") if isinstance(body, dict) else None
        error = error if isinstance(error, dict) else {}
        hint = {401: " (set GATEWAY_KEY to an admin key: clients.<name>.admin: true)", 403: " (an admin key: "
                "clients.<name>.admin: true)"}.get(answer.status_code, "")
        if answer.status_code == 404 and not error:
            hint = " (no /settings there: a gateway older than this command, or not a gateway)"
        print(printable(f"gateway: {url} answered HTTP {answer.status_code}: "
                        f"{error.get('message') or answer.text[:200]}{hint}"), file=err)
        return 2 if error.get("code") == "unknown_agent" else 1
    loaded = f" at {body['loaded_at']}" if isinstance(body.get("loaded_at"), str) else ""
    runs_on = "the values shown are the ones it runs on, each with the line it was loaded from"
    said = {"changed": f"agents.yaml changed since the running gateway loaded it{loaded} (not reloaded yet, or the "
                       f"reload was refused): {runs_on}",
            "broken": f"agents.yaml is broken now (the running gateway keeps what it loaded{loaded}): {runs_on}; "
                      "the file's errors:",
            "unreadable": f"the running gateway cannot read its agents.yaml now (it keeps what it loaded{loaded}): "
                          f"{runs_on}:"}.get(body.get("agents_yaml", ""))
    if said:
        print(printable(f"gateway: {said}"), file=err)
    for error in body.get("agents_yaml_errors") or ():
        if isinstance(error, dict):
            where = f"{error.get('file')}:{error.get('line')}" if error.get("line") else f"{error.get('file')}"
            key = f" {error['pointer']}:" if error.get("pointer") else ""
            print(printable(f"  {where}:{key} {error.get('message')}"), file=err)
    if body.get("reload_refused"):
        print(printable(f"gateway: its last reload was refused: {body['reload_refused']}"), file=err)
    restart = [key for key in body.get("restart_needed") or () if isinstance(key, str)]
    if restart:
        print(printable(f"gateway: agents.yaml gives {', '.join(restart)}, read at start only, another value than the "
                        "one the running gateway started with: restart it to apply"), file=err)
    _print(body["data"], args.json, out)
    return 0


def _print(rows: list[dict[str, Any]], as_json: bool, out: TextIO) -> None:
    if as_json:
        json.dump(rows, out, indent=2, default=str)
        out.write("\n")
    else:
        _table(rows, out)


def _table(rows: list[dict[str, Any]], out: TextIO) -> None:
    shown = [(row["key"], _text(row["value"]), row["layer"], row["source"]) for row in rows]
    widths = [max(len(cells[i]) for cells in [("SETTING", "VALUE", "LAYER", "SOURCE"), *shown]) for i in range(3)]
    for cells in [("SETTING", "VALUE", "LAYER", "SOURCE"), *shown]:
        line = "  ".join(cell.ljust(width) for cell, width in zip(cells[:3], widths, strict=True))
        print(printable(f"{line}  {cells[3]}", lines=False), file=out)


def _text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = text.replace("\n", " ")
    return text if len(text) <= SHOWN_CHARACTERS else text[:SHOWN_CHARACTERS - 1] + "…"


__all__ = ["add_settings_parser", "run_settings"]
