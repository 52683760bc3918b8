"""Operators' hooks around each model call and tool call (`hooks:` in agents.yaml), as typed pipeline objects.

A hook gets the step as a JSON object and answers with a verdict:

    None or {}                       allow: the step goes on as it is
    {"deny": "reason"}               deny: a tool call is not run (the model sees the reason as the tool's error);
                                     a model call ends the run with the reason
    {"arguments": {...}}             before_tool_call: the call runs with these arguments instead
    {"result": ...}                  after_tool_call: the model gets this body instead of the API's
    {"content": "..."}               after_model_call: the model's text is replaced

A `call:` hook is a Python callable (`module:function`, sync or async; a sync one runs in a worker thread) given
the step dict; a `url:` hook is an HTTP endpoint the step is POSTed to as JSON, answering the verdict as JSON (an
empty body allows). Each hook has a `timeout`; a hook that fails, answers nonsense or runs late counts as
`on_error` (allow, or deny by default). `ConfiguredHooks` is the pipeline's `ToolHooks` (the hooks stage) and the
loop's model-call hooks.
"""

from __future__ import annotations

import fnmatch
import importlib
import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import anyio
import httpx

from .config.hooks_budgets import HookConfig, HookEvent
from .errors import HookDenied
from .kernel.redaction import url_without_credentials
from .messages import ToolResult

if TYPE_CHECKING:
    from .config.model import Manifest
    from .kernel.calls import Invocation

logger = logging.getLogger("gateway.hooks")

HookFunction = Callable[[dict[str, Any]], Any]


@dataclass(slots=True, frozen=True)
class Verdict:
    """What one hook decided about a step."""

    action: Literal["allow", "deny", "replace"] = "allow"
    reason: str | None = None
    arguments: dict[str, Any] | None = None
    result: Any = None
    content: str | None = None

    @classmethod
    def parse(cls, answer: Any, event: HookEvent) -> Verdict:
        """A hook's answer as a verdict; ValueError for an answer that means nothing."""
        if answer is None or answer == {} or answer is True:
            return cls()
        if answer is False:
            return cls("deny", "refused by a hook")
        if not isinstance(answer, dict):
            raise ValueError(f"a hook answers an object or nothing, not {type(answer).__name__}")
        if answer.get("deny"):
            deny = answer["deny"]
            return cls("deny", deny if isinstance(deny, str) else str(answer.get("reason") or "refused by a hook"))
        if answer.get("allow") is False:
            return cls("deny", str(answer.get("reason") or "refused by a hook"))
        if event == "before_tool_call" and "arguments" in answer:
            if not isinstance(answer["arguments"], dict):
                raise ValueError("`arguments` must be an object")
            return cls("replace", arguments=answer["arguments"])
        if event == "after_tool_call" and "result" in answer:
            return cls("replace", result=answer["result"])
        if event == "after_model_call" and "content" in answer:
            return cls("replace", content=str(answer["content"]))
        if set(answer) <= {"allow", "reason"}:
            return cls()
        raise ValueError(f"the answer's keys {sorted(answer)} mean nothing for {event}")


class Hook:
    """One configured hook, ready to run."""

    def __init__(self, config: HookConfig, client: httpx.AsyncClient | None = None) -> None:
        self.config = config
        self._function: HookFunction | None = None
        self._client = client

    @property
    def name(self) -> str:
        """How the hook is named to callers, the model, the audit and the log: never with its URL's credentials."""
        if self.config.url is not None:
            return url_without_credentials(self.config.url)
        return self.config.call or "hook"

    def applies_to(self, agent: str, tool: str | None = None) -> bool:
        if self.config.agent is not None and self.config.agent != agent:
            return False
        return tool is None or self.names(tool)

    def names(self, tool: str) -> bool:
        """Whether the hook's `tools` patterns take in the tool named `tool` (no patterns: every tool)."""
        return not self.config.tools or any(fnmatch.fnmatchcase(tool, pattern) for pattern in self.config.tools)

    async def judge(self, step: dict[str, Any]) -> Verdict:
        """The hook's verdict on `step`; a failure or a late answer becomes `on_error`'s verdict."""
        event = self.config.event
        try:
            with anyio.fail_after(self.config.timeout):
                answer = await self._ask(step)
            return Verdict.parse(answer, event)
        except Exception as exc:  # noqa: BLE001 - any failure of the operator's code is on_error
            why = "timed out" if isinstance(exc, TimeoutError) else self._failure(exc)
            logger.warning("%s hook %s %s", event, self.name, why)
            if self.config.on_error == "allow":
                return Verdict()
            return Verdict("deny", f"the {event} hook {self.name} {why}")

    def _failure(self, exc: Exception) -> str:
        """What went wrong, in words that do not repeat the hook's URL (httpx's messages carry it whole)."""
        if isinstance(exc, httpx.HTTPStatusError):
            return f"answered HTTP {exc.response.status_code}"
        text = str(exc)
        if self.config.url:
            text = text.replace(self.config.url, self.name)
        return f"failed: {text}"

    async def _ask(self, step: dict[str, Any]) -> Any:
        if self.config.call is not None:
            # The operator's module is imported, and a plain function runs, in a worker thread: the event loop
            # serves every other caller meanwhile, and `timeout` (the caller's `fail_after`) ends the wait. A
            # thread cannot be stopped: one that runs late finishes on its own, its answer unheard.
            function = self._function
            if function is None:
                function = await anyio.to_thread.run_sync(self._resolve, abandon_on_cancel=True)
            if inspect.iscoroutinefunction(function):
                return await function(step)
            answer = await anyio.to_thread.run_sync(function, step, abandon_on_cancel=True)
            return await answer if inspect.isawaitable(answer) else answer
        client = self._client or httpx.AsyncClient()
        response = await client.post(self.config.url or "", json=step, headers=dict(self.config.headers))
        response.raise_for_status()
        return response.json() if response.content.strip() else None

    def _resolve(self) -> HookFunction:
        if self._function is None:
            module, _, attribute = (self.config.call or "").partition(":")
            function = getattr(importlib.import_module(module), attribute)
            if not callable(function):
                raise TypeError(f"{self.config.call} is not callable")
            self._function = function
        return self._function


class ConfiguredHooks:
    """The manifest's hooks (global first, then each agent's own), as the pipeline's `ToolHooks` and the loop's
    model-call hooks."""

    def __init__(self, manifest: Manifest, *, on_decision: Callable[[HookEvent, str], None] | None = None) -> None:
        configs = [*manifest.hooks, *(h for agent in manifest.agents.values() for h in agent.hooks)]
        self._client = httpx.AsyncClient() if any(c.url for c in configs) else None
        self.hooks: dict[HookEvent, list[Hook]] = {}
        for config in configs:
            self.hooks.setdefault(config.event, []).append(Hook(config, self._client))
        self._on_decision = on_decision

    def __bool__(self) -> bool:
        return bool(self.hooks)

    def acts_on(self, tool: str) -> bool:
        """Whether a tool hook may run for calls of the agent tool named `tool`, of some agent: when not, the hooks
        stage is left out of that tool's chain (`RunHooks.for_tool`). An agent's own hooks count for the tool
        whichever agent calls it: a chain is compiled per agent tool, not per agent."""
        return any(hook.names(tool) for event in ("before_tool_call", "after_tool_call")
                   for hook in self.hooks.get(event, ()))

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()

    async def _run(self, event: HookEvent, agent: str, tool: str | None, step: Callable[[], dict[str, Any]],
                   apply: Callable[[Verdict], Awaitable[None] | None] | None = None) -> Verdict:
        """Each applicable hook in order; the first deny wins, replacements apply as they come."""
        payload: dict[str, Any] | None = None
        for hook in self.hooks.get(event, ()):
            if not hook.applies_to(agent, tool):
                continue
            payload = payload if payload is not None else step()
            verdict = await hook.judge(payload)
            if self._on_decision is not None:
                self._on_decision(event, verdict.action)
            if verdict.action == "deny":
                return verdict
            if verdict.action == "replace" and apply is not None:
                applied = apply(verdict)
                if inspect.isawaitable(applied):
                    await applied
                payload = step()
        return Verdict()

    # -- tool calls: the pipeline's ToolHooks ------------------------------------------------------

    async def before_tool_call(self, invocation: Invocation) -> ToolResult | None:
        if "before_tool_call" not in self.hooks:
            return None

        def replace(verdict: Verdict) -> None:
            # The agent's fixed arguments still win: a hook cannot lift what the operator pinned.
            invocation.arguments = {**(verdict.arguments or {}), **invocation.agent_tool.fixed_args}

        # Replaced arguments are validated by the hooks stage (`RunHooks`), by the pipeline's own rule.
        verdict = await self._run("before_tool_call", invocation.agent, invocation.call.name,
                                  lambda: tool_step("before_tool_call", invocation), replace)
        if verdict.action == "deny":
            return ToolResult.failure("hook_denied", f"a gateway hook refused this call: {verdict.reason}. "
                                      "Nothing was sent.")
        return None

    async def after_tool_call(self, invocation: Invocation, result: ToolResult) -> ToolResult:
        if "after_tool_call" not in self.hooks:
            return result
        current = [result]

        def replace(verdict: Verdict) -> None:
            current[0].body = verdict.result

        verdict = await self._run("after_tool_call", invocation.agent, invocation.call.name,
                                  lambda: tool_step("after_tool_call", invocation, current[0]), replace)
        if verdict.action == "deny":
            return ToolResult.failure("hook_denied", f"a gateway hook withheld this call's result: {verdict.reason}",
                                      status=result.status)
        return current[0]

    # -- model calls: the loop's seam --------------------------------------------------------------

    async def before_model_call(self, agent: str, step: Callable[[], dict[str, Any]]) -> None:
        """Raises `HookDenied` when a hook refuses the model call."""
        if "before_model_call" in self.hooks:
            verdict = await self._run("before_model_call", agent, None, step)
            if verdict.action == "deny":
                raise HookDenied("before_model_call", verdict.reason or "refused")

    async def after_model_call(self, agent: str, step: Callable[[], dict[str, Any]],
                               replace_content: Callable[[str], None]) -> None:
        if "after_model_call" in self.hooks:
            verdict = await self._run("after_model_call", agent, None, step,
                                      lambda v: replace_content(v.content or ""))
            if verdict.action == "deny":
                raise HookDenied("after_model_call", verdict.reason or "refused")


def tool_step(event: HookEvent, invocation: Invocation, result: ToolResult | None = None) -> dict[str, Any]:
    """The JSON a tool hook gets."""
    tool = invocation.tool
    step: dict[str, Any] = {
        "event": event, "agent": invocation.agent, "client": invocation.client, "door": invocation.door,
        "tool": invocation.call.name, "api": tool.api, "operation_id": tool.operation_id, "method": tool.method,
        "path": tool.path, "call_id": invocation.call.id, "arguments": invocation.arguments,
    }
    if result is not None:
        step["result"] = result.to_dict()
    return step


def model_step(event: HookEvent, *, agent: str, client: str | None, model: str, iteration: int,
               messages: Sequence[Any], answer: Any = None) -> dict[str, Any]:
    """The JSON a model hook gets: the conversation so far (role and text) and, after the call, the answer."""
    step: dict[str, Any] = {
        "event": event, "agent": agent, "client": client, "model": model, "iteration": iteration,
        "messages": [{"role": m.role, "content": m.content} for m in messages],
    }
    if answer is not None:
        step["message"] = {"content": answer.content,
                           "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments}
                                          for c in answer.tool_calls]}
    return step
