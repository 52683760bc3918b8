"""The `gateway` command: serve, validate, tools, call, chat, mcp.

Each subcommand's handler is a `_cmd_<name>` function here; the work lives in the modules they call.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--specs", type=Path, default=Path(os.environ.get("GATEWAY_SPECS", "./specs")),
                        help="folder of OpenAPI specs (default ./specs)")
    parser.add_argument("--agents", type=Path, default=Path(os.environ.get("GATEWAY_AGENTS", "./agents.yaml")),
                        help="the agents manifest (default ./agents.yaml)")
    parser.add_argument("--no-cache", action="store_true", help="compile the specs again, bypassing the cache")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gateway", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the HTTP gateway")
    _add_common(serve)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8080)
    serve.set_defaults(handler=_cmd_serve)

    validate = commands.add_parser("validate", help="compile everything and report diagnostics")
    _add_common(validate)
    validate.add_argument("--json", action="store_true", help="machine-readable report")
    validate.set_defaults(handler=_cmd_validate)

    tools = commands.add_parser("tools", help="print tool definitions as a JSON array")
    _add_common(tools)
    tools.add_argument("--agent", help="only this agent's tools (default: the whole catalog)")
    tools.add_argument("--format", default="json", choices=["json", "openai", "anthropic", "gemini", "mcp"])
    tools.add_argument("--strict", action="store_true", help="openai: render strict-mode schemas")
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
    return parser


def _cmd_serve(args: argparse.Namespace) -> int:
    raise NotImplementedError("serve")


def _cmd_validate(args: argparse.Namespace) -> int:
    raise NotImplementedError("validate")


def _cmd_tools(args: argparse.Namespace) -> int:
    raise NotImplementedError("tools")


def _cmd_call(args: argparse.Namespace) -> int:
    raise NotImplementedError("call")


def _cmd_chat(args: argparse.Namespace) -> int:
    raise NotImplementedError("chat")


def _cmd_mcp(args: argparse.Namespace) -> int:
    raise NotImplementedError("mcp")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
