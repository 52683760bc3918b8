"""The safety layer wired into the app: client keys, rate limits, audit, approvals, guarded executors.

`Safety` owns the store and everything built on it, and hands `create_app` what it plugs in:

    safety = Safety.open(holder.current)
    app = create_app(holder, **safety.app_options())

that is the auth and disconnect middleware, the `/approvals` and `/audit` routes, and the hooks the
server calls (`on_run_result` after each chat run, `approve_direct_call` for direct and MCP calls of
tools under approval, `wrap_executor` around each generation's executor). Parts that depend on
agents.yaml (keys, limits, secrets to redact) follow hot reloads: they are rebuilt when the manifest
object changes.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from .. import loop
from ..config.model import AgentConfig, Manifest
from ..errors import ConfigError
from ..loop_types import Decision
from ..messages import ToolCall, ToolResult
from ..runtime import Runtime
from ..safety.approvals import AlreadyDecided, ApprovalError, ApprovalManager, Outcome, approval_dict
from ..safety.audit import AuditLog, bind_caller, current_caller, retention_days
from ..safety.breaker import CircuitBreaker, GuardedExecutor, GuardSettings
from ..safety.logredact import redact_logs
from ..safety.ratelimit import RateLimiter, RateLimits
from ..safety.redaction import Redactor
from ..store import AuditQuery, RunRecord, Store, open_store, store_location
from ..toolsets import AgentTool
from .auth import AuthMiddleware, ClientKeys, allowed_agents
from .disconnect import DisconnectMiddleware
from .errors import APIError
from .handoff import keep_turn
from .routes import read_json

logger = logging.getLogger("gateway.safety")

MAX_AUDIT_LIMIT = 1000


class Safety:
    def __init__(self, store: Store, manifest: Manifest, *, allow_public: bool = False) -> None:
        """The safety layer on `store` for the manifest (and its reloads).

        Parameters:
            store: approvals, audit rows and rate-limit buckets.
            manifest: the current agents.yaml (clients, `gateway:` settings, secrets).
            allow_public: serve beyond loopback without client keys.
        """
        self.store = store
        self.allow_public = allow_public
        self.redactor = Redactor()
        redact_logs(self.redactor)
        self.audit = AuditLog(store, self.redactor)
        self.approvals = ApprovalManager(store, self.audit)
        self._manifest: Manifest | None = None
        self.keys = ClientKeys({})
        self.limiter = RateLimiter(store, RateLimits())
        self._guard_settings: GuardSettings | None = None
        self._breakers: dict[str, CircuitBreaker] = {}
        self.sync(manifest)
        self._guard_settings = GuardSettings.from_settings(manifest.settings)

    @classmethod
    def open(cls, runtime: Runtime, *, store: str | None = None, allow_public: bool = False) -> Safety:
        """Open the store named by `gateway.store` (relative to agents.yaml's folder) or by `store`."""
        base = Path(runtime.agents_path).parent if getattr(runtime, "agents_path", None) else None
        location = store or store_location(runtime.manifest.settings, base)
        return cls(open_store(location), runtime.manifest, allow_public=allow_public)

    def sync(self, manifest: Manifest) -> None:
        """Rebuild what depends on agents.yaml, when it changed (cheap to call on every request)."""
        if manifest is self._manifest:
            return
        self.redactor.add(*manifest.secrets())
        self.keys = ClientKeys(manifest.clients)
        try:
            limits = RateLimits.from_settings(manifest.settings)
            retention = retention_days(manifest.settings)
        except ConfigError as exc:
            if self._manifest is None:
                raise  # at start-up: refuse to serve with settings the operator did not mean
            logger.error("agents.yaml reloaded with bad settings (%s); keeping the previous limits", exc)
        else:
            self.limiter = RateLimiter(self.store, limits)
            self.audit.retention_days = retention
        self._manifest = manifest

    # -- what create_app plugs in -------------------------------------------------------------------
    def hooks(self) -> dict[str, Any]:
        """The hooks a `GatewayState` calls (enough without HTTP, e.g. for MCP over stdio)."""
        return {
            "on_run_result": self.on_run_result,
            "on_run_error": self.on_run_error,
            "approve_direct_call": self.approve_direct_call,
            "wrap_executor": self.wrap_executor,
            "store": self.store,  # stored responses and handed-back turns (gateway.server.handoff)
        }

    def app_options(self) -> dict[str, Any]:
        """Everything `create_app` takes from the safety layer: middleware, routes and hooks."""
        return {
            **self.hooks(),
            "middleware": [
                Middleware(AuthMiddleware, keys=lambda: self.keys, limiter=lambda: self.limiter,
                           allow_public=self.allow_public, on_chat_error=self._on_chat_error),
                Middleware(DisconnectMiddleware),
            ],
            "extra_routes": self.routes(),
        }

    def routes(self) -> list[BaseRoute]:
        from .console import Console  # the console's templates are only loaded by a server

        return [
            Route("/approvals", self._list_approvals, methods=["GET"]),
            Route("/approvals/{id}", self._decide_approval, methods=["POST"]),
            Route("/audit", self._list_audit, methods=["GET"]),
            Console(self).mount(),
        ]

    def wrap_executor(self, executor: Any, runtime: Runtime | None = None) -> GuardedExecutor:
        manifest = runtime.manifest if runtime is not None else executor.manifest
        self.sync(manifest)
        try:
            settings = GuardSettings.from_settings(manifest.settings)
        except ConfigError as exc:
            if self._guard_settings is None:
                raise
            logger.error("agents.yaml reloaded with bad settings (%s); keeping the previous breaker settings", exc)
            settings = self._guard_settings
        self._guard_settings = settings
        # Breakers outlive a reload: an api that was failing a second ago is still failing.
        return GuardedExecutor(executor, manifest, limiter=self.limiter, audit=self.audit, settings=settings,
                               breakers=self._breakers)

    async def on_run_result(self, *, run_id: str, agent: AgentConfig, client: str | None, result: Any) -> None:
        """After each chat run: keep a paused run's approvals, say in the answer's text what waits, and record
        the chat with its usage."""
        await self.approvals.hold_run(run_id=run_id, agent=agent.name, client=client, result=result)
        describe_pause(result, self.redactor.value)
        await self._record_chat(agent.name, result, run_id=run_id)

    async def on_run_error(self, *, run_id: str, agent: AgentConfig, error: APIError) -> None:
        """A streamed chat run that failed after its answer began (an error chunk, under status 200)."""
        caller = current_caller()
        latency = (time.perf_counter() - caller.started) * 1000 if caller.started is not None else 0.0
        await self.audit.record_chat(agent=agent.name, status="error", run_id=run_id, latency_ms=latency,
                                     error=f"HTTP {error.status} in the stream: {error.code or error.type}")

    async def approve_direct_call(self, *, agent: str, agent_tool: AgentTool, call: ToolCall,
                                  client: str | None) -> ToolResult | None:
        """A direct or MCP call of a tool under approval: put it on hold; the result carries the id."""
        with bind_caller(client=client, agent=agent):
            return await self.approvals.hold_call(agent=agent, tool=agent_tool.name, call=call, client=client)

    async def aclose(self) -> None:
        await self.store.aclose()

    # -- routes -------------------------------------------------------------------------------------
    async def _list_approvals(self, request: Request) -> Response:
        limit = _limit(request, default=100)
        pending = await self.approvals.pending(agents=allowed_agents(request.scope), limit=limit)
        return JSONResponse({"data": [approval_dict(a, self.redactor.value) for a in pending]})

    async def _list_audit(self, request: Request) -> Response:
        limit = _limit(request, default=100)
        query = audit_query(request.query_params)
        return JSONResponse({"data": await self.audit.recent(limit, agents=allowed_agents(request.scope),
                                                             query=query)})

    async def _decide_approval(self, request: Request) -> Response:
        payload = await read_json(request)  # 400 for what is not JSON, nested too deep or no text
        if not isinstance(payload, dict):
            raise APIError(400, "The body must be a JSON object: {\"decision\": \"approve\" | \"deny\"}.")
        try:
            decision = Decision.parse(payload)
        except (ValueError, AttributeError) as exc:
            raise APIError(400, str(exc), param="decision") from None
        if payload.get("reason") is not None and not isinstance(payload["reason"], str):
            raise APIError(400, "`reason` must be a string.", param="reason")
        visible = allowed_agents(request.scope)
        try:
            client = request.scope.get("gateway.client")
            outcome = await self.decide(request.app.state.gateway, request.path_params["id"], decision,
                                        allowed=None if visible is None else visible.__contains__,
                                        by=client if isinstance(client, str) else None)
        except ApprovalError as exc:
            code = "approval_used" if isinstance(exc, AlreadyDecided) else None
            raise APIError(exc.status, str(exc), code=code) from None
        status, body = self.render_outcome(request.app.state.gateway, outcome)
        return JSONResponse(body, status_code=status)

    async def decide(self, state: Any, approval_id: str, decision: Decision, *,
                     allowed: Callable[[str], bool] | None = None, by: str | None = None) -> Outcome:
        """Decide one approval and resume its run on `state` (the server's GatewayState) when it was the last;
        `by` names the deciding client in the audit log."""

        async def resume(run: RunRecord, decisions: dict[str, Decision]) -> Any:
            return await self._resume(state, run, decisions)

        return await self.approvals.decide(approval_id, decision, resume=resume, allowed=allowed, by=by)

    def render_outcome(self, state: Any, outcome: Outcome) -> tuple[int, dict[str, Any]]:
        """The HTTP answer: 202 while the run waits for more decisions, else the finished completion
        (chat) or the ToolResult (direct/MCP call)."""
        approval = approval_dict(outcome.approval, self.redactor.value)
        if outcome.result is None:
            return 202, {"approval": approval, "status": "waiting", "waiting_for": outcome.waiting}
        if isinstance(outcome.result, ToolResult):
            return 200, {"approval": approval, "result": outcome.result.to_dict()}
        from .chat import completion_body  # the chat module imports the loop; only needed here

        agent = state.current.runtime.manifest.agents.get(outcome.run.agent)
        shell = SimpleNamespace(id=outcome.run.id, created=int(time.time()),
                                agent=agent or SimpleNamespace(name=outcome.run.agent))
        body = completion_body(shell, outcome.result)  # type: ignore[arg-type]
        body["gateway"]["approval"] = approval
        return 200, body

    async def _resume(self, state: Any, run: RunRecord, decisions: dict[str, Decision]) -> Any:
        """Continue a claimed run on the current generation (a restart or reload in between is fine)."""
        async with state.use() as generation:
            if run.kind == "call":
                return await self._resume_call(generation, run, decisions)
            agent = generation.agent(run.agent)
            toolset = generation.toolset(agent.name)
            approved = {}
            for pending in run.state["loop"].get("pending", []):
                tool = toolset.get(pending["tool"])
                decision = decisions.get(pending["id"])
                if tool is not None and tool.tool is not None and decision is not None and decision.approve:
                    approved[tool.tool.name] = pending["id"]
            started = time.perf_counter()
            with bind_caller(agent=agent.name, run_id=run.id, approvals=approved):
                result = await loop.resume(run.state["loop"], decisions, agent=agent,
                                           adapter=generation.adapter(agent.provider), toolset=toolset,
                                           invoke=generation.runner)
                # A resumed turn that also called the caller's tools hands them back: kept like the chat door's.
                await keep_turn(self.store, result, agent=agent.name, client=run.client)
                await self._record_chat(agent.name, result, run_id=run.id, started=started)
            describe_pause(result, self.redactor.value)
            return result

    async def _resume_call(self, generation: Any, run: RunRecord, decisions: dict[str, Decision]) -> ToolResult:
        approval_id = run.state["pending"][0]
        decision = decisions[approval_id]
        if not decision.approve:
            why = f": {decision.reason}" if decision.reason else ""
            return ToolResult.failure("approval_denied", f"A human refused this call{why}.", approval_id=approval_id)
        agent_tool = generation.toolset(run.agent).get(run.state["tool"])
        if agent_tool is None:
            return ToolResult.failure("unknown_tool", f"Agent {run.agent!r} no longer has tool {run.state['tool']!r}.")
        arguments = decision.arguments if decision.arguments is not None else run.state["arguments"]
        call = ToolCall(id=run.state.get("call_id") or approval_id, name=agent_tool.name, arguments=arguments,
                        raw_arguments=arguments)
        approvals = {agent_tool.tool.name: approval_id} if agent_tool.tool is not None else {}
        with bind_caller(agent=run.agent, run_id=run.id, approvals=approvals):
            result: ToolResult = await generation.runner(agent_tool, call)
        return result

    async def _record_chat(self, agent: str, result: Any, *, run_id: str, started: float | None = None) -> None:
        caller = current_caller()
        begun = started if started is not None else caller.started
        status = "paused" if getattr(result, "pending_approvals", None) else "cut" if getattr(result, "cut", False) \
            else "ok"
        usage = getattr(result, "usage", None)
        await self.audit.record_chat(
            agent=agent, status=status, run_id=run_id, usage=usage.to_dict() if hasattr(usage, "to_dict") else None,
            latency_ms=(time.perf_counter() - begun) * 1000 if begun is not None else 0.0,
        )

    async def _on_chat_error(self, agent: str | None, status: int) -> None:
        await self.audit.record_chat(agent=agent or "", status="error", latency_ms=0.0, error=f"HTTP {status}")


def describe_pause(result: Any, redact: Callable[[Any], Any] = lambda value: value) -> None:
    """A paused run's answer says in plain words what waits for whom (the loop leaves its text empty)."""
    pending = getattr(result, "pending_approvals", None)
    message = getattr(result, "message", None)
    if not pending or message is None or message.content:
        return
    said = next((m.content for m in reversed(getattr(result, "messages", []) or [])
                 if m.role == "assistant" and m.content), "")
    lines = [f"- {p.tool} {json.dumps(redact(p.arguments), ensure_ascii=False)} (approval {p.id})" for p in pending]
    note = ("Waiting for a human's approval before running:\n" + "\n".join(lines) +
            "\nApprove or deny each with POST /approvals/{id} (or `gateway approvals approve|deny ID`); "
            "the run then continues.")
    message.content = f"{said}\n\n{note}" if said else note


def audit_query(params: Mapping[str, str]) -> AuditQuery:
    """`GET /audit`'s filters: agent, client, tool, status, kind, run_id (exact), since and until (ISO 8601 in UTC,
    or epoch seconds); a bad time is a 400 naming the parameter."""
    def text(name: str) -> str | None:
        return params.get(name) or None

    return AuditQuery(agent=text("agent"), client=text("client"), tool=text("tool"), status=text("status"),
                      kind=text("kind"), run_id=text("run_id"), since=_time_param(params, "since"),
                      until=_time_param(params, "until"))


def _time_param(params: Mapping[str, str], name: str) -> float | None:
    raw = (params.get(name) or "").strip()
    if not raw:
        return None
    try:
        return float(raw)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise APIError(400, f"`{name}` must be a time in ISO 8601 (2026-12-01T10:00:00Z) or epoch seconds, not "
                            f"{raw[:40]!r}.", param=name) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _limit(request: Request, *, default: int) -> int:
    raw = request.query_params.get("limit")
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise APIError(400, f"`limit` must be a whole number, not {raw!r}.", param="limit") from None
    if value < 1:
        raise APIError(400, "`limit` must be at least 1.", param="limit")
    return min(value, MAX_AUDIT_LIMIT)
