"""`gateway audit` and `gateway approvals`: the audit log and the approval queue from a terminal.

Both open the store agents.yaml names (`gateway: {store: ...}`, default `.gateway/state.db` beside it),
the same one a running `gateway serve` uses, so they work while it runs and after it stopped.
Deciding an approval resumes the paused run here, with this process's executor and provider clients,
and prints the finished answer.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ..errors import ConfigError
from ..kernel.caller import TERMINAL_CLIENT
from ..printable import printable
from ..runtime import RuntimeHolder
from ..safety.approvals import approval_dict

if TYPE_CHECKING:
    from ..loop_types import Decision

CLI_DECIDER = TERMINAL_CLIENT
"""`decided_by` of a decision made with `gateway approvals approve|deny`: the client terminal calls are audited as."""

def add_audit_parser(commands: Any, add_common: Any) -> None:
    audit = commands.add_parser("audit", help="show the newest rows of the audit log")
    add_common(audit)
    audit.add_argument("--limit", type=int, default=20, help="how many rows (default 20)")
    audit.add_argument("--agent", action="append", help="only this agent's rows (repeatable)")
    audit.add_argument("--json", action="store_true", help="one JSON object per line")
    audit.add_argument("--store", help="the store (default: gateway.store in agents.yaml)")


def add_approvals_parser(commands: Any, add_common: Any) -> None:
    approvals = commands.add_parser("approvals", help="list pending approvals, or approve/deny one")
    add_common(approvals)
    approvals.add_argument("action", nargs="?", default="list", choices=["list", "approve", "deny"])
    approvals.add_argument("id", nargs="?", help="the approval id (approve, deny)")
    approvals.add_argument("--args", help="approve: run with these arguments instead (a JSON object)")
    approvals.add_argument("--reason", help="why (the model sees it when denied)")
    approvals.add_argument("--client", help="list: only the calls of this client (else every client's, in turns)")
    approvals.add_argument("--json", action="store_true", help="machine-readable output")
    approvals.add_argument("--store", help="the store (default: gateway.store in agents.yaml)")


def run_audit(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    if args.limit < 1:
        print("gateway: --limit must be at least 1", file=sys.stderr)
        return 2
    store = _open_store_or_report(args)
    if store is None:
        return 1

    async def main() -> list[dict[str, Any]]:
        try:
            rows = await store.list_audit(limit=args.limit, agents=set(args.agent) if args.agent else None)
            return [row.to_dict() for row in rows]
        finally:
            await store.aclose()

    rows = asyncio.run(main())
    if not rows and not args.json:  # an empty answer said, and a mistyped agent named (rows outlive their agent)
        unknown = sorted(set(args.agent or ()) - set(_manifest(args.agents).agents)) if args.agent else []
        print("gateway: no audit rows" + (f" (no agent {', '.join(map(repr, unknown))} in {args.agents}; the agents "
                                          f"there are: {', '.join(_manifest(args.agents).agents) or 'none'})"
                                          if unknown else ""), file=sys.stderr)
    for row in rows:
        if args.json:
            print(printable(json.dumps(row, ensure_ascii=False)), file=out)
        else:
            print(_audit_line(row), file=out)
    return 0


def run_approvals(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    if args.action != "list" and not args.id:
        print(f"gateway: `gateway approvals {args.action}` needs the approval id", file=sys.stderr)
        return 2
    try:
        decision = _decision(args)
    except ValueError as exc:
        print(f"gateway: {exc}", file=sys.stderr)
        return 2
    if decision is None:
        return _list_approvals(args, out)
    from ..assembly import GatewayState
    from ..server.run import load_or_report
    from ..server.supervision import Safety

    runtime = load_or_report(args.specs, args.agents, use_cache=not args.no_cache)
    if runtime is None:
        return 1
    try:
        safety = Safety.open(runtime, store=args.store)
    except ConfigError as exc:
        print(f"gateway: {exc}", file=sys.stderr)
        return 1

    async def main() -> tuple[int, dict[str, Any]]:
        state = GatewayState(RuntimeHolder(runtime), safety=safety)
        try:
            from ..kernel.caller import bind_caller

            problem = await _model_problem(safety, runtime, args.id)
            if problem is not None:  # as `gateway chat` does: nothing decided, nothing sent
                raise _CannotResume(problem)
            with bind_caller(client=CLI_DECIDER):  # the decision is recorded as made at the terminal
                # as the route and the console answer it: a run that fails after the approved call was sent is
                # an error saying so (the approval is used), not a traceback
                return await safety.decide_and_render(state, args.id, decision)
        finally:
            await state.aclose()
            await safety.aclose()

    try:
        status, body = asyncio.run(main())
    except _CannotResume as exc:
        print(f"gateway: {exc} Nothing was decided.", file=sys.stderr)  # the reason ends its own sentence
        print(_ENVIRONMENT_HINT, file=sys.stderr)
        return 1
    if status >= 400:
        error = body["error"]
        print(f"gateway: {error['message']}", file=sys.stderr)
        if error.get("code") in ("approval_reopened", "provider_error"):  # often: this shell's environment
            print(_ENVIRONMENT_HINT, file=sys.stderr)
        return 1
    if args.json:
        print(printable(json.dumps(body, ensure_ascii=False, indent=2)), file=out)
    elif status == 202:
        print(f"{args.id}: {args.action}d; the run still waits for {', '.join(body['waiting_for'])}", file=out)
    elif "result" in body:
        print(printable(json.dumps(body["result"], ensure_ascii=False, indent=2)), file=out)
    else:
        print(printable(_answer_text(body)) or "(no text)", file=out)
        pending = body["gateway"]["pending_approvals"]
        for item in pending:
            print(f"waiting for approval {item['id']}: {item['tool']} {json.dumps(item['arguments'])}", file=out)
    return 0


_ENVIRONMENT_HINT = (
    "gateway: this command resumes the run in its own process, reading agents.yaml with this shell's environment; "
    "if `gateway serve` runs with other variables (a model's key, OPENAI_BASE_URL), decide again with those set, "
    "or with POST /approvals/{id} or the console, which resume the run in the server")


class _CannotResume(Exception):
    """The decided run's model cannot be asked from this process (why: the message)."""


async def _model_problem(safety: Any, runtime: Any, approval_id: str) -> str | None:
    """Why the chat run this decision resumes cannot ask its model from here (None: it can, or the decision
    resumes a single call or script, which asks none): checked before deciding, since an approved call runs
    first and the model is asked after it."""
    from ..providers.keys import provider_problem

    record = await safety.store.get_approval(approval_id)
    run = await safety.store.get_run(record.run_id) if record is not None else None
    agent = runtime.manifest.agents.get(run.agent) if run is not None and run.kind == "chat" else None
    return provider_problem(runtime.manifest, agent) if agent is not None else None


def _answer_text(body: dict[str, Any]) -> str:
    """The text of a resumed run's answer: a chat completion's message, or a Response's output messages (a run
    started on /v1/responses is answered as one)."""
    if "choices" in body:
        return str(body["choices"][0]["message"]["content"] or "")
    return "".join(part.get("text", "") for item in body.get("output") or [] if item.get("type") == "message"
                   for part in item.get("content") or [] if part.get("type") == "output_text")


def _list_approvals(args: argparse.Namespace, out: TextIO) -> int:
    from ..safety.approvals import ApprovalManager

    store = _open_store_or_report(args)
    if store is None:
        return 1

    async def main() -> list[dict[str, Any]]:
        try:
            found = await ApprovalManager(store).pending(limit=1000, client=args.client or None)
            return [approval_dict(a) for a in found]
        finally:
            await store.aclose()

    pending = asyncio.run(main())
    if args.json:
        print(printable(json.dumps(pending, ensure_ascii=False, indent=2)), file=out)
    elif not pending:
        print("no pending approvals", file=out)
    for item in [] if args.json else pending:
        # UTC, as the audit rows and the log lines write it, so the three line up (was the machine's local time)
        created = float(item["created"])
        when = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created)) + f".{int(created % 1 * 1000):03d}Z"
        who = f"  {item['client']}" if item["client"] is not None else ""  # whose call it is, with `clients`
        print(f"{item['id']}  {when}{who}  {item['agent']}/{item['tool']}  {json.dumps(item['arguments'])}", file=out)
    return 0


def _decision(args: argparse.Namespace) -> Decision | None:
    if args.action == "list":
        return None
    arguments = None
    if args.args is not None:
        if args.action == "deny":
            raise ValueError("--args only goes with approve")
        try:
            arguments = json.loads(args.args)
        except ValueError as exc:
            raise ValueError(f"--args is not valid JSON: {exc}") from None
        if not isinstance(arguments, dict):
            raise ValueError("--args must be a JSON object")
    from ..loop_types import Decision  # this module is imported with the parser, by every command

    return Decision(approve=args.action == "approve", arguments=arguments, reason=args.reason)


def _open_store_or_report(args: argparse.Namespace) -> Any:
    """The store `--store` or agents.yaml names; None after printing why it cannot be opened."""
    from ..store import open_store

    try:
        manifest = _manifest(args.agents)
        return open_store(args.store or manifest.gateway.store_location(Path(args.agents).parent),
                          timeout=manifest.gateway.shared_state_timeout)
    except ConfigError as exc:
        print(f"gateway: {exc}", file=sys.stderr)
        return None


def _manifest(agents: Path) -> Any:
    """The manifest alone (no spec compilation): enough for the store's location."""
    from ..config.loader import load_manifest
    from ..config.model import Manifest

    if not Path(agents).exists():
        return Manifest()
    manifest, _ = load_manifest(Path(agents))  # the usable part is enough; `gateway validate` reports the rest
    return manifest


def _audit_line(row: dict[str, Any]) -> str:
    what = {"tool": f"{row['agent']}/{row['tool']}", "decision": f"{row['agent']}/{row['tool']} decision",
            "conversation": f"{row['agent']} stored conversations"}.get(row["kind"], f"{row['agent']} chat")
    # the signed-in user beside the client: users mapped onto one client by their claims are told apart
    who = f"{row.get('client') or '-'} ({row['subject']})" if row.get("subject") else row.get("client") or "-"
    detail = f"HTTP {row['http_status']}" if row.get("http_status") else ""
    if row.get("usage"):
        detail = f"{row['usage'].get('total_tokens', 0)} tokens"
    extras = [x for x in (detail, f"approval {row['approval']}" if row.get("approval") else "") if x]
    # why, when it did not go through: a denial's reason, an upstream's or a limit's error (a held call's
    # "needs a human's approval" is its status already)
    if row.get("error") and row["status"] not in ("ok", "approval_pending", "paused"):
        reason = " ".join(str(row["error"]).split())
        extras.append(f"- {reason[:117] + '...' if len(reason) > 120 else reason}")
    return printable(f"{row['time']}  {who:<12} {what:<40} {row['status']:<18} "
                     f"{row['latency_ms']:>9.1f} ms  {' '.join(extras)}".rstrip(), lines=False)
