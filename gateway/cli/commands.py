"""The `gateway` command: a gateway from LLM agents to the APIs of OpenAPI specs (each command has its own --help).

Each subcommand's handler is a `_cmd_<name>` function here; the work lives in the modules they call.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..dialects import FORMATS
from ..printable import printable
from .output import say, write_json, write_json_array

if TYPE_CHECKING:
    from ..catalog import Catalog, Diagnostic
    from ..runtime import Runtime


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--specs", type=Path, default=Path(os.environ.get("GATEWAY_SPECS", "./specs")),
                        help="folder of OpenAPI specs (default ./specs)")
    parser.add_argument("--agents", type=Path, default=Path(os.environ.get("GATEWAY_AGENTS", "./agents.yaml")),
                        help="the agents manifest (default ./agents.yaml)")
    parser.add_argument("--no-cache", action="store_true", help="compile the specs again, bypassing the cache")


def build_parser() -> argparse.ArgumentParser:
    return _build_parsers()[0]


def subcommand_parsers() -> dict[str, argparse.ArgumentParser]:
    """Each subcommand's parser, by name (the docs are checked against them)."""
    return dict(_build_parsers()[1].choices)


def _build_parsers() -> tuple[argparse.ArgumentParser, Any]:
    """The `gateway` parser and its subparsers action."""
    parser = argparse.ArgumentParser(prog="gateway", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the HTTP gateway")
    _add_common(serve)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8080)
    serve.add_argument("--allow-public", action="store_true",
                       help="serve a non-loopback host even without `clients` keys in agents.yaml")
    serve.add_argument("--workers", type=int, default=1,
                       help="worker processes sharing the port and the store (default 1)")
    serve.add_argument("--no-access-log", action="store_true",
                       help="write no line per request (the audit log still records every tool call)")
    serve.add_argument("--log-format", choices=("text", "json"),
                       default=os.environ.get("GATEWAY_LOG_FORMAT", "text"),
                       help="text: uvicorn's lines, each starting with its UTC time (ISO 8601); json: one object "
                            "per line (time, level, logger, message); default text, or GATEWAY_LOG_FORMAT")
    serve.add_argument("--graceful-timeout", type=int, default=None, metavar="SECONDS",
                       help="on SIGTERM, how long the requests in flight may take to end before they are cut "
                            "(default 30; set it to your longest run and the stop timeout of what stops the "
                            "process above it)")
    serve.set_defaults(handler=_cmd_serve)

    migrate = commands.add_parser("migrate", help="apply the PostgreSQL store's schema migrations")
    _add_common(migrate)
    migrate.add_argument("--store", help="the store URL (default: gateway.store in agents.yaml)")
    migrate.set_defaults(handler=_cmd_migrate)

    validate = commands.add_parser("validate", help="compile everything and report diagnostics")
    _add_common(validate)
    validate.add_argument("--json", action="store_true", help="machine-readable report")
    validate.set_defaults(handler=_cmd_validate)

    schema = commands.add_parser("schema", help="print the JSON Schema of agents.yaml (for editors and checks)")
    schema.add_argument("--markdown", action="store_true",
                        help="the reference of every key as Markdown instead (docs/agents-yaml-reference.md)")
    schema.set_defaults(handler=_cmd_schema)

    tools = commands.add_parser("tools", help="print tool definitions as a JSON array: what the model is sent")
    _add_common(tools)
    tools.add_argument("--agent", help="only this agent's tools (default: the whole catalog)")
    tools.add_argument("--format", default="json", choices=FORMATS)
    tools.add_argument("--strict", action="store_true",
                       help="openai: render strict-mode schemas; stderr says why a tool cannot be strict")
    tools.add_argument("--search", metavar="QUERY", help="with --agent: the agent's tools that best match QUERY "
                                                         "(name, api, operation_id, summary, score; copies: the same "
                                                         "operation at other addresses), best first")
    tools.add_argument("--limit", type=int, default=10, help="with --search: how many tools (default 10)")
    shape = tools.add_mutually_exclusive_group()
    shape.add_argument("--budget", type=int, metavar="TOKENS",
                       help="each tool's view within TOKENS instead of gateway.tool_budget")
    shape.add_argument("--exact", action="store_true",
                       help="every tool with its exact schema, not what the model is sent (--format json always is)")
    tools.set_defaults(handler=_cmd_tools)

    call = commands.add_parser("call", help="make one tool call and print the ToolResult")
    _add_common(call)
    call.add_argument("agent")
    call.add_argument("tool")
    call.add_argument("--args", default="{}", help="the arguments as a JSON object")
    call.set_defaults(handler=_cmd_call)

    chat = commands.add_parser("chat", help="run an agent's loop in the terminal")
    _add_common(chat)
    chat.add_argument("agent")
    chat.add_argument("message", nargs="?")
    chat.set_defaults(handler=_cmd_chat)

    mcp = commands.add_parser("mcp", help="serve an agent's tools over MCP stdio")
    _add_common(mcp)
    mcp.add_argument("agent")
    mcp.set_defaults(handler=_cmd_mcp)

    from .oversight import add_approvals_parser, add_audit_parser
    from .settings_command import add_settings_parser, run_settings

    add_audit_parser(commands, _add_common)
    add_approvals_parser(commands, _add_common)
    add_settings_parser(commands)
    commands.choices["audit"].set_defaults(handler=_cmd_audit)
    commands.choices["approvals"].set_defaults(handler=_cmd_approvals)
    commands.choices["settings"].set_defaults(handler=run_settings)
    return parser, commands


def _cmd_serve(args: argparse.Namespace) -> int:
    from ..server.run import GRACEFUL_SHUTDOWN_SECONDS, serve_http

    if args.workers < 1:
        print("gateway: --workers must be at least 1", file=sys.stderr)
        return 2
    if args.log_format not in ("text", "json"):  # GATEWAY_LOG_FORMAT: argparse checks only what was typed
        print(f"gateway: --log-format (or GATEWAY_LOG_FORMAT) must be text or json, not {args.log_format!r}",
              file=sys.stderr)
        return 2
    graceful = GRACEFUL_SHUTDOWN_SECONDS if args.graceful_timeout is None else args.graceful_timeout
    if graceful < 0:
        print(f"gateway: --graceful-timeout must be 0 or more seconds, not {graceful}", file=sys.stderr)
        return 2
    return serve_http(args.specs, args.agents, host=args.host, port=args.port, use_cache=not args.no_cache,
                      allow_public=args.allow_public, workers=args.workers, access_log=not args.no_access_log,
                      graceful_timeout=graceful, log_format=args.log_format)


def _cmd_migrate(args: argparse.Namespace) -> int:
    from ..server.run import migrate_store

    return migrate_store(args.agents, store=args.store)


def _cmd_validate(args: argparse.Namespace) -> int:
    import json

    from ..openapi import compile_specs
    from ..openapi.spec_validation import spec_reports

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    on_tty = sys.stderr.isatty()
    catalog = compile_specs(args.specs, use_cache=not args.no_cache, progress=progress if on_tty else None)
    if on_tty:
        progress("validating the specs in full (openapi-spec-validator)...")
    reports = spec_reports(args.specs, catalog)
    manifest: dict[str, Any] = {"file": str(args.agents), "checked": False, "usable": True, "diagnostics": []}
    if args.agents.exists():
        from ..configuration import load_configuration

        _, _, manifest_diagnostics = load_configuration(args.agents, catalog=catalog)
        manifest.update(checked=True, diagnostics=[d.to_dict() for d in manifest_diagnostics],
                        usable=not any(d.level == "error" for d in manifest_diagnostics))
    elif args.agents != Path("agents.yaml"):
        # named (--agents, GATEWAY_AGENTS) but absent: a mistyped path, which must not pass a CI check as "no
        # agents"; only the default ./agents.yaml may be absent (the specs checked alone)
        manifest.update(usable=False, error="not found: --agents or GATEWAY_AGENTS names no file")
    missing = not args.specs.is_dir()
    ok = not missing and all(r.usable for r in reports) and manifest["usable"]
    lost = sum(r.lost for r in reports)
    # 1: something is unusable; 3: all usable, but an operation (or a schema keyword) was lost on the way.
    status = 1 if not ok else 3 if lost else 0
    not_strict = _not_strict_counts(catalog)
    if args.json:
        specs = [{**r.to_dict(), "not_strict": not_strict.get(r.api, {})} for r in reports]
        report = {"ok": ok, "complete": ok and not lost, "specs": specs,
                  "manifest": manifest, "diagnostics": [d.to_dict() for d in catalog.diagnostics if not any(
                      d.file == r.file for r in reports)]}
        print(printable(json.dumps(report, indent=2, ensure_ascii=False)))  # a spec's text in its diagnostics
        return status
    if missing:
        print(f"{args.specs}: the specs folder does not exist")
    for r in reports:
        errors = sum(d.level == "error" for d in r.diagnostics)
        warnings = len(r.diagnostics) - errors
        state = "UNUSABLE" if not r.usable else f"INCOMPLETE ({r.lost} lost)" if r.lost else "ok"
        reasons = not_strict.get(r.api, {})
        print(f"{r.file}: {state}, {r.tools}/{r.operations} operations as tools, {errors} error(s), "
              f"{warnings} warning(s), {sum(reasons.values())} not OpenAI-strict")
        for reason, count in reasons.items():
            print(f"  not strict: {count} tool(s): {reason}")
        for d in r.diagnostics:
            print(printable(f"  {d.level}: {d}", lines=False))
    if manifest["checked"]:
        count = len(manifest["diagnostics"])
        print(f"{args.agents}: {'ok' if manifest['usable'] else 'UNUSABLE'}, {count} diagnostic(s)")
        for d in manifest_diagnostics:
            print(printable(f"  {d.level}: {d}", lines=False))
    elif not manifest["usable"]:
        print(f"{args.agents}: UNUSABLE, {manifest['error']}")
    else:
        print(f"{args.agents}: not found (no agents)")
    return status


def _cmd_schema(args: argparse.Namespace) -> int:
    import json

    if args.markdown:
        from ..config.reference import agents_reference

        print(agents_reference(), end="")
        return 0
    from ..config.schema import agents_schema

    print(json.dumps(agents_schema(), indent=2, ensure_ascii=False))
    return 0


def _not_strict_counts(catalog: Catalog) -> dict[str, dict[str, int]]:
    """Per api, how many tools OpenAI strict mode cannot take, by reason (most frequent first)."""
    from collections import Counter

    from ..dialects import strict_reason

    counts: dict[str, Counter[str]] = {}
    for tool in catalog:
        reason = strict_reason(tool.input_schema)
        if reason is not None:
            counts.setdefault(tool.api, Counter())[reason] += 1
    return {api: dict(counter.most_common()) for api, counter in counts.items()}


def _cmd_tools(args: argparse.Namespace) -> int:
    import orjson

    from ..dialects import render_tools

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    show = progress if sys.stderr.isatty() else None
    view: Any = _same
    if args.agent:
        runtime = _load_runtime_or_report(args)
        if runtime is None:
            return 1
        tools: list[Any] = runtime.tools(args.agent)
        diagnostics = _concerning(runtime, args.agent)
        missing = False
        if not args.exact and args.format != "json":
            tools = _offered(runtime, args.agent, args.budget)
        if args.search is not None:
            from ..offer.toolsearch import WEAK_NOTE, find, prepare_toolset

            for diagnostic in diagnostics:
                say(diagnostic)
            _wait_for_embeddings(prepare_toolset(runtime.catalog, runtime.toolset(args.agent)))
            found = find(runtime.catalog, runtime.toolset(args.agent), args.search, max(1, args.limit))
            if found.match == "weak":  # stdout stays the array the search endpoint's `data` holds
                print(f"tool search: {WEAK_NOTE}", file=sys.stderr)
            write_json(orjson.dumps(found.items, option=orjson.OPT_INDENT_2))
            return 0
    elif args.search is not None:
        print("--search needs --agent: it searches one agent's tools", file=sys.stderr)
        return 2
    else:
        from ..openapi import compile_specs

        catalog = compile_specs(args.specs, use_cache=not args.no_cache, progress=show)
        tools, diagnostics = list(catalog), catalog.diagnostics
        missing = not args.specs.is_dir()
        if not args.exact and args.format != "json":
            from ..offer.views import DEFAULT_TOOL_BUDGET, model_view

            budget = args.budget or DEFAULT_TOOL_BUDGET
            view = partial(model_view, budget=budget)  # each tool's view made as it is written, not all kept
    for diagnostic in diagnostics:
        say(diagnostic)
    if missing:
        return 1
    if args.strict:
        from ..dialects import strict_reason

        reasons = [(t.name, strict_reason(view(t).input_schema)) for t in tools]
        for name, reason in reasons:
            if reason is not None:
                print(f"not strict: {name}: {reason}", file=sys.stderr)
        strict = sum(reason is None for _, reason in reasons)
        print(f"OpenAI strict mode: {strict} of {len(reasons)} tools sent strict, the others with strict: false",
              file=sys.stderr)
    write_json_array(render_tools([view(tool)], args.format, strict=args.strict)[0] for tool in tools)
    sys.stdout.flush()
    return 0


def _same(tool: Any) -> Any:
    return tool


def _wait_for_embeddings(pending: list[Any]) -> None:
    """A one-off search waits for the tools' embeddings (a server answers BM25 alone meanwhile): once computed they
    are cached, and a process that exits before would lose them."""
    for computation in pending:
        try:
            if not computation.from_cache():  # said when computed, however long a cached read takes
                print(f"note: computing the embeddings of {computation.key[1]}'s tools once (cached for the next "
                      "searches)", file=sys.stderr)
            computation.wait()
        except Exception:  # noqa: BLE001 - the search falls back to BM25 and logs why
            pass


def _offered(runtime: Runtime, agent: str, budget: int | None) -> list[Any]:
    """What the agent's model is sent on a run's first request, as the loop offers it: each tool's view within
    `gateway.tool_budget` (or `budget`); with tool search (`auto`: decided from the definitions as the agent's
    provider is sent them, as the loop decides), the pinned tools and the search tools."""
    from ..offer.toolsearch import ToolOffer
    from ..offer.views import model_view
    from ..providers.registry import get_adapter

    config = runtime.agent(agent)
    provider = runtime.manifest.providers.get(config.provider)
    measure = get_adapter(provider).definition_tokens if provider is not None else None
    offer = ToolOffer(config, runtime.toolset(agent), measure=measure)
    views = offer.views() if budget is None else [
        tool if offer.is_meta(tool.name) else model_view(tool, budget) for tool in offer.offered]
    if offer.searching:
        print(f"note: {agent} has tool search: its model starts with these {len(views)} tools and finds the other "
              f"{len(runtime.toolset(agent))} with search_tools (--exact lists them all)", file=sys.stderr)
    return views


def _concerning(runtime: Runtime, agent: str) -> list[Diagnostic]:
    """The diagnostics that bear on `agent`: not another agent's (`agents.<other>...`), nor an api's it does not
    use (`apis.<api>...`, that api's spec file); `gateway validate` lists them all."""
    apis = {selection.api for selection in runtime.manifest.agents[agent].tools}
    others = {spec.file for name, spec in runtime.catalog.apis.items() if name not in apis}

    def bears(diagnostic: Diagnostic) -> bool:
        section, _, rest = diagnostic.pointer.partition(".")
        if section == "agents":
            return rest.partition(".")[0] == agent
        if section == "apis":
            return rest.partition(".")[0] in apis
        return diagnostic.file not in others

    return [diagnostic for diagnostic in runtime.diagnostics if bears(diagnostic)]


def _load_runtime_or_report(args: argparse.Namespace) -> Runtime | None:
    """The runtime, holding agent `args.agent`; None after printing why not (its diagnostics, or the known agents)."""
    from ..errors import ConfigError
    from ..runtime import load_runtime, missing_inputs

    try:
        runtime = load_runtime(args.specs, args.agents, use_cache=not args.no_cache)
        runtime.agent(args.agent)
    except ConfigError as exc:
        for diagnostic in exc.diagnostics:
            say(diagnostic)
        print(f"error: {exc}", file=sys.stderr)
        return None
    except KeyError as exc:
        for line in missing_inputs(args.specs, args.agents):
            print(f"error: {line}", file=sys.stderr)
        print(f"error: {exc.args[0]}", file=sys.stderr)
        return None
    return runtime


def _cmd_call(args: argparse.Namespace) -> int:
    import asyncio
    import json

    from ..messages import ToolResult

    def emit(result: ToolResult) -> int:
        print(printable(json.dumps(result.to_dict(), indent=2, ensure_ascii=False)))  # an upstream's text
        return 0 if result.ok else 1

    unread: str | None = None  # why --args cannot be read: the call is refused, and recorded as any door's
    try:
        arguments = json.loads(args.args)
    except json.JSONDecodeError as exc:
        arguments, unread = None, f"--args is not valid JSON: {exc}"
    if unread is None and not isinstance(arguments, dict):
        arguments, unread = None, "--args must be a JSON object"
    runtime = _load_runtime_or_report(args)
    if runtime is None:
        return 1
    agent_tool = runtime.tool(args.agent, args.tool)
    if agent_tool is None:
        names = ", ".join(runtime.toolset(args.agent).names) or "none"
        return emit(ToolResult.failure("unknown_tool", f"agent {args.agent!r} has no tool {args.tool!r} "
                                       f"(its tools: {names})"))
    if agent_tool.delegate or agent_tool.tool is None:
        return emit(ToolResult.failure("configuration_error", f"{args.tool} delegates to agent "
                                       f"{agent_tool.delegate!r}: use `gateway chat {args.agent}` to run it"))
    from ..assembly import open_local
    from ..errors import AuditUnavailable, ConfigError
    from ..kernel.caller import TERMINAL_CLIENT, bind_caller
    from ..messages import ToolCall

    # The same pipeline as every other door: validated, held for approval, rate limited, audited.
    call = ToolCall(id="cli_call", name=agent_tool.name, arguments=arguments,
                    raw_arguments=arguments if unread is None else args.args, parse_error=unread)

    async def run() -> ToolResult:
        async with open_local(runtime) as state:
            with bind_caller(agent=args.agent, client=TERMINAL_CLIENT):  # audited as the terminal's, as its decisions
                runner = state.current.runner.for_agent(args.agent)
                if unread is not None:
                    return await runner.refuse(agent_tool, call, ToolResult.failure("invalid_arguments", unread),
                                               door="cli", client=TERMINAL_CLIENT)
                return await runner.run(agent_tool, call, door="cli", client=TERMINAL_CLIENT)

    try:
        result = asyncio.run(run())
    except (AuditUnavailable, ConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if result.error_type == "approval_pending":
        print(f"note: {args.tool} needs a human's approval; decide with `gateway approvals approve|deny "
              f"{result.approval_id}` (approving runs it)", file=sys.stderr)
    return emit(result)


def _cmd_chat(args: argparse.Namespace) -> int:
    from .terminal_chat import chat_command

    return chat_command(args.specs, args.agents, args.agent, args.message, use_cache=not args.no_cache)


def _cmd_mcp(args: argparse.Namespace) -> int:
    from ..server.run import serve_mcp_stdio

    return serve_mcp_stdio(args.specs, args.agents, args.agent, use_cache=not args.no_cache)


def _cmd_audit(args: argparse.Namespace) -> int:
    from .oversight import run_audit

    return run_audit(args)


def _cmd_approvals(args: argparse.Namespace) -> int:
    from .oversight import run_approvals

    return run_approvals(args)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.handler in (_cmd_call, _cmd_chat, _cmd_audit, _cmd_approvals, _cmd_migrate):  # these open the store
        from ..server.loglines import quiet_drivers

        quiet_drivers()  # its driver's warnings one line each, once per outage, as under `serve` and `mcp`
    try:
        return int(args.handler(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `gateway schema | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
