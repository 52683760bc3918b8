"""`gateway chat AGENT [MESSAGE]`: an agent's loop in a terminal.

The answer's text is printed to stdout as the provider streams it; each step (tool, arguments, status,
duration) goes to stderr as it starts and ends, so piping stdout keeps only the answer. Without MESSAGE it
is a REPL that keeps the conversation. A call needing approval is asked about on the terminal. Tool calls take
the same pipeline as the server's doors (`gateway.assembly.open_local`): validated, rate limited, guarded and
audited, and each turn is recorded as a chat row.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

import anyio

from ..errors import AuditUnavailable, ConfigError, GatewayError
from ..kernel.caller import TERMINAL_CLIENT, bind_caller
from ..loop import resume, run
from ..loop_types import Decision, LoopEvent, PendingApproval, RunResult
from ..messages import Message
from ..printable import printable

Ask = Callable[[str], str]


def chat_command(specs: Path, agents: Path, agent_name: str, message: str | None, *, use_cache: bool = True,
                 ask: Ask | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run the chat; returns the exit status (0 ok, 1 a failed run or bad config, 2 an unknown agent)."""
    out = out or sys.stdout
    err = err or sys.stderr
    ask = ask or _ask_stdin
    from ..runtime import load_runtime, missing_inputs

    try:
        runtime = load_runtime(specs, agents, use_cache=use_cache)
    except ConfigError as exc:
        print(str(exc), file=err)
        return 1
    if agent_name not in runtime.manifest.agents:
        known = ", ".join(runtime.manifest.agents) or "none"
        for line in missing_inputs(specs, agents):
            print(f"gateway: {line}", file=err)
        print(f"no agent named {agent_name!r} in {agents} (known: {known})", file=err)
        return 2
    from ..providers.keys import provider_problem

    problem = provider_problem(runtime.manifest, runtime.manifest.agents[agent_name])
    if problem is not None:  # as `gateway serve` answers it: nothing is sent with an empty key
        print(f"gateway: {problem}", file=err)
        return 1
    return anyio.run(_chat, runtime, agent_name, message, ask, out, err)


async def _chat(runtime: Any, agent_name: str, message: str | None, ask: Ask, out: TextIO, err: TextIO) -> int:
    from ..assembly import open_local

    agent = runtime.agent(agent_name)
    try:
        async with open_local(runtime) as state:
            generation = state.current
            session = _Session(agent, generation.adapter(agent.provider), generation.toolset(agent_name),
                               generation.runner.for_agent(agent_name), ask, out, err, safety=state.safety)
            with bind_caller(agent=agent_name, client=TERMINAL_CLIENT):  # its rows name the terminal, as its decisions
                return await _converse(session, agent_name, agent, message, ask, err)
    except (ConfigError, AuditUnavailable) as exc:
        print(str(exc), file=err)
        return 1


async def _converse(session: _Session, agent_name: str, agent: Any, message: str | None, ask: Ask,
                    err: TextIO) -> int:
    try:
        if message is not None:
            return 0 if await session.turn(message) else 1
        print(f"chatting with {agent_name} ({agent.model}); an empty line or Ctrl-D ends", file=err)
        while True:
            try:
                line = ask("you> ")
            except EOFError:
                return 0
            if not line.strip():
                return 0
            await session.turn(line)
    except ConfigError as exc:
        print(str(exc), file=err)
        return 1


class _Session:
    def __init__(self, agent: Any, adapter: Any, toolset: Any, invoke: Any, ask: Ask, out: TextIO,
                 err: TextIO, *, safety: Any = None) -> None:
        self.agent, self.adapter, self.toolset, self.invoke = agent, adapter, toolset, invoke
        self.ask, self.out, self.err = ask, out, err
        self.safety = safety
        self.history: list[Message] = []
        self._wrote_text = False

    async def turn(self, text: str) -> bool:
        """One user message through the loop; False when the run failed."""
        self._wrote_text = False
        started = time.perf_counter()
        options = {"adapter": self.adapter, "toolset": self.toolset, "invoke": self.invoke, "stream": True,
                   "on_event": self._show}
        try:
            result = await run(self.agent, [*self.history, Message(role="user", content=text)], **options)
            while result.pending_approvals:
                decisions = {p.id: self._decide(p) for p in result.pending_approvals}
                result = await resume(result.state or {}, decisions, agent=self.agent, **options)
        except AuditUnavailable:
            raise
        except GatewayError as exc:
            self._end_line()
            print(f"error: {exc}", file=self.err)
            await self._record("error", started, error=str(exc))
            return False
        self._end_line()
        await self._record("cut" if result.cut else "ok", started, usage=result.usage.to_dict())
        if result.cut:
            print("(the iteration limit cut this run: the answer is a summary)", file=self.err)
        usage = result.usage
        print(f"({len(result.steps)} step(s), {usage.llm_calls} LLM call(s), {usage.input_tokens} in / "
              f"{usage.output_tokens} out tokens)", file=self.err)
        self.history = _without_instructions(self.agent, result)
        return True

    async def _record(self, status: str, started: float, **fields: Any) -> None:
        if self.safety is not None:
            await self.safety.audit.record_chat(agent=self.agent.name, status=status,
                                                latency_ms=(time.perf_counter() - started) * 1000, **fields)

    async def _show(self, event: LoopEvent) -> None:
        if event.type == "text":
            self.out.write(printable(event.text))
            self.out.flush()
            self._wrote_text = True
            return
        step = event.step
        if step is None:
            return
        # A delegated agent's steps show indented, under its name.
        who = f"   [{step.agent}] " if step.agent else ""
        if event.type == "step_started":
            self._end_line()
            print(f"{who}-> {step.tool}({_compact(step.arguments)})", file=self.err, flush=True)
        elif event.type == "step_finished":
            # A step without an HTTP status (a delegation, run_code, search_tools) that worked is "ok", not "None".
            outcome = f"{step.status or 'ok'}" if step.ok else f"failed: {step.error_type}: {step.error}"
            print(f"{who}<- {step.tool}: {outcome} ({step.duration_ms:.0f} ms)", file=self.err, flush=True)

    def _decide(self, pending: PendingApproval) -> Decision:
        self._end_line()
        # Every argument, ASCII: what is approved is what was read (a cut prompt hid a model's tail; redteam45).
        prompt = f"approve {pending.tool}({json.dumps(pending.arguments)})? [y/N] "
        try:
            answer = self.ask(prompt).strip().lower()
        except EOFError:
            answer = ""
        if answer in ("y", "yes"):
            return Decision(approve=True)
        return Decision(approve=False, reason="the user refused it in the terminal")

    def _end_line(self) -> None:
        if self._wrote_text:
            self.out.write("\n")
            self.out.flush()
            self._wrote_text = False


def _without_instructions(agent: Any, result: RunResult) -> list[Message]:
    """The conversation to carry into the next turn (the loop adds the agent's instructions itself)."""
    messages = list(result.messages)
    if agent.instructions and messages and messages[0].role == "system" and \
            messages[0].content == agent.instructions:
        messages = messages[1:]
    return messages


def _compact(arguments: Any, limit: int = 200) -> str:
    text = printable(json.dumps(arguments, ensure_ascii=False))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _ask_stdin(prompt: str) -> str:
    print(prompt, end="", file=sys.stderr, flush=True)
    line = sys.stdin.readline()
    if not line:
        raise EOFError
    return line.rstrip("\n")
