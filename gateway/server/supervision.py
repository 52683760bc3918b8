"""The safety layer wired into the app: client keys, the `/approvals` and `/audit` routes, resumes.

`Safety` is the HTTP half of the safety layer, on `gateway.safety.serving.ServingSafeguards` (store, audit,
approvals, limits, breakers, whose stages go into every call's pipeline, and users' own connections, which `gateway
mcp` opens alone, without importing any of this). It adds client keys, wrong-key counting and the OAuth resource
server (`gateway.auth`), and hands `create_app` what it plugs in:

    safety = Safety.open(holder.current)
    app = create_app(holder, **safety.app_options())

that is the auth and disconnect middleware, the `/approvals` and `/audit` routes, and `safety` itself, which
each generation's pipeline takes its stages from and the chat door reports finished runs to
(`on_run_result`, `on_run_error`). Parts that depend on agents.yaml (keys, limits, secrets to redact) follow
hot reloads: they are rebuilt when the manifest object changes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route, request_response

from .. import loop
from ..config.model import Manifest
from ..errors import AlreadyDecided, ApprovalError, ConfigError, DecisionNotCarriedOut, RunError, ToolGone
from ..http.client import new_client
from ..identity.resource import ResourceServer, ResourceSettings
from ..kernel.caller import bind_caller, current_caller
from ..loop_types import Decision, attach_steps
from ..messages import ToolCall, ToolResult
from ..safety.approvals import Outcome, approval_dict, run_owner, run_subject
from ..safety.guards import describe_pause
from ..safety.rights import Rights
from ..safety.serving import ServingSafeguards
from ..safety.wrong_keys import WrongKeys
from ..store import AUDIT_KINDS, ApprovalRecord, AuditQuery, RunRecord, Store
from .api_errors import APIError, api_error_from, status_for_result
from .auth import AuthMiddleware, ClientKeys, rights_of
from .cut_doors import ResumeDoor, resume_begins, resume_recorded
from .handoff import keep_turn, owner
from .identity_routes import identity_routes
from .responses_object import ResponseShape
from .routes import agent_of, read_json, toolset_of
from .run_answers import decider_view, keep_answer, kept_answer
from .settings_route import PATH as SETTINGS_PATH
from .settings_route import running_settings

if TYPE_CHECKING:
    import httpx

    from ..assembly import Generation
    from ..config.model import AgentConfig
    from ..loop_types import RunResult

logger = logging.getLogger("gateway.safety")

MAX_AUDIT_LIMIT = 1000


class Safety(ServingSafeguards):
    def __init__(self, store: Store, manifest: Manifest, *, allow_public: bool = False) -> None:
        """The safety layer on `store` for the manifest (and its reloads).

        Parameters:
            store: approvals, audit rows and rate-limit buckets.
            manifest: the current agents.yaml (clients, `gateway:` settings, secrets).
            allow_public: serve beyond loopback without client keys.
        """
        self.allow_public = allow_public
        self.keys = ClientKeys({})
        self.identity: ResourceServer | None = None
        """`gateway.auth`: the resource server checking callers' access tokens (None: static keys only)."""
        self._identity_http = new_client()
        """The identity layer's requests (discovery, keys, users' token refreshes), on pyreqwest like every other."""
        self.wrong_keys = WrongKeys(store)
        """Wrong keys counted per client address, on the API's doors and at the console's sign-in."""
        super().__init__(store, manifest)
        self.connections  # noqa: B018 - built now: the connect routes and the console use them from the start

    def sync(self, manifest: Manifest) -> None:
        """Rebuild what depends on agents.yaml, when it changed (cheap to call on every request)."""
        if manifest is not self._manifest:
            self.keys = ClientKeys(manifest.clients)
            self._sync_identity(manifest)  # before the connections: their default callback is on its audience
        super().sync(manifest)

    def _connections_http(self) -> httpx.AsyncClient:
        return self._identity_http  # users' token refreshes go out with the identity layer's other requests

    def _audience(self, manifest: Manifest) -> str | None:
        # The resource server's: a reload with a bad `gateway.auth` keeps the previous one, and its audience.
        return self.identity.settings.audience if self.identity is not None else None

    def _sync_identity(self, manifest: Manifest) -> None:
        """The resource server of the manifest's `gateway.auth`; the same one (its cached keys) while that is
        unchanged."""
        try:
            settings = ResourceSettings.from_manifest(manifest)
        except ConfigError as exc:
            if self._manifest is None:
                raise
            logger.error("agents.yaml reloaded with a bad gateway.auth (%s); keeping the previous one", exc)
            return
        current = self.identity
        if settings is None:
            self.identity = None
        elif current is not None and current.settings == settings:
            self.identity = current.with_clients(settings)
        else:
            self.identity = ResourceServer(settings, self._identity_http)

    # -- what create_app plugs in -------------------------------------------------------------------
    def app_options(self) -> dict[str, Any]:
        """Everything `create_app` takes from the safety layer: middleware, routes and the layer itself."""
        return {
            "safety": self,
            "middleware": [
                Middleware(AuthMiddleware, keys=lambda: self.keys, limiter=lambda: self.limiter,
                           allow_public=self.allow_public, on_chat_error=self._on_chat_error,
                           identity=lambda: self.identity, wrong_keys=self.wrong_keys),
            ],
            "watch_disconnects": True,  # in the request envelope: one layer with it (gateway.server.disconnect)
            "extra_routes": self.routes(),
        }

    def routes(self) -> list[BaseRoute]:
        """`/approvals`, `/audit`, `/settings` (the running ones), and the identity routes: protected-resource
        metadata, users' connections (`create_app` adds the console beside them)."""
        return [
            Route("/approvals", self._list_approvals, methods=["GET"]),
            # A decision whose resume the stopping instance cuts is answered as a cut chat is (`stopping`), and its
            # run gets its row: the console's form decides through the same door.
            Route("/approvals/{id}", ResumeDoor(request_response(self._decide_approval)), methods=["POST"]),
            Route("/approvals/{id}", self._show_approval, methods=["GET"]),
            Route("/audit", self._list_audit, methods=["GET"]),
            Route(SETTINGS_PATH, running_settings, methods=["GET"]),  # `gateway settings --url`
            *identity_routes(self),
        ]

    async def aclose(self) -> None:
        await self._identity_http.aclose()
        await super().aclose()

    # -- routes -------------------------------------------------------------------------------------
    async def _list_approvals(self, request: Request) -> Response:
        limit = _limit(request, default=100)
        pending = await self.approvals.pending(rights=rights_of(request.scope), limit=limit,
                                               client=text_param(request.query_params, "client"))
        return JSONResponse({"data": [approval_dict(a, self.redactor.value) for a in pending]})

    async def _show_approval(self, request: Request) -> Response:
        """One approval, decided or not, and (for the run's owner) the answer its run gave when it went on."""
        rights = rights_of(request.scope)
        try:
            record = await self.approvals.visible(request.path_params["id"], rights)
        except ApprovalError as exc:
            raise APIError(exc.status, str(exc)) from None
        run = await self.store.get_run(record.run_id)
        body: dict[str, Any] = {"approval": approval_dict(record, self.redactor.value),
                                "run": {"id": record.run_id, "status": run.status if run else "gone"}}
        if rights.owns(record.client, run_subject(run) if run is not None else None):
            body["answer"] = await kept_answer(self.store, record.run_id, record.client)
        return JSONResponse(body)

    async def _list_audit(self, request: Request) -> Response:
        limit = _limit(request, default=100)
        return JSONResponse({"data": await self.readable_audit(rights_of(request.scope), limit,
                                                               audit_query(request.query_params))})

    async def readable_audit(self, rights: Rights, limit: int, query: AuditQuery) -> list[dict[str, Any]]:
        """The newest audit rows matching `query` that `rights` may read (a plain key: its own)."""
        narrowed = rights.audit_query(query)
        return [] if narrowed is None else await self.audit.recent(limit, query=narrowed)

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
        rights = rights_of(request.scope)
        client = request.scope.get("gateway.client")
        status, body = await self.decide_and_render(request.app.state.gateway, request.path_params["id"], decision,
                                                    rights=rights, by=client if isinstance(client, str) else None)
        return JSONResponse(body, status_code=status)

    async def decide_and_render(self, state: Any, approval_id: str, decision: Decision, *,
                                rights: Rights = Rights.OPEN, by: str | None = None) -> tuple[int, dict[str, Any]]:
        """`decide`, answered over HTTP (the route and the console): the outcome, or an error that says what
        happened: the decision was refused (4xx), taken back with nothing sent (503 `approval_reopened`: decide
        again), or the run failed after something was sent (saying it may have run; with the steps for the run's
        owner)."""
        try:
            outcome = await self.decide(state, approval_id, decision, rights=rights, by=by)
        except ApprovalError as exc:
            code = {AlreadyDecided: "approval_used", DecisionNotCarriedOut: "approval_reopened",
                    ToolGone: "tool_gone"}.get(type(exc))
            return exc.status, APIError(exc.status, str(exc), code=code).body()
        except Exception as exc:
            error = api_error_from(exc, self.redactor.text)
            error.message += (f" Approval {approval_id} is used: the approved call ran or may have run, so it is "
                              "not run again.")
            if not rights.everything and not await self._owns_approval(approval_id, rights):
                error.extra.pop("gateway", None)  # the steps (their arguments and results) are the owner's
            return error.status, error.body()
        return self.render_outcome(state, outcome, rights)

    async def _owns_approval(self, approval_id: str, rights: Rights) -> bool:
        try:
            record = await self.store.get_approval(approval_id)
        except Exception:  # noqa: BLE001 - the store failed too: not shown as the owner's
            return False
        if record is None:
            return False
        run = await self.store.get_run(record.run_id)
        return rights.owns(record.client, run_subject(run) if run is not None else None)

    async def decide(self, state: Any, approval_id: str, decision: Decision, *, rights: Rights = Rights.OPEN,
                     by: str | None = None) -> Outcome:
        """Decide one approval (when `rights` may) and resume its run on `state` (the server's GatewayState) when it
        was the last, as the run's owner, keeping its answer for them; `by` names the deciding client in the audit
        log."""

        async def resume(run: RunRecord, decisions: dict[str, Decision]) -> Any:
            return await self._resume(state, run, decisions)

        def gone(record: ApprovalRecord) -> str | None:
            """Why approving `record` would run nothing: a reload took its tool (or its agent) away. The decider
            was told "resumed", and only the run's owner saw the step fail as an unknown tool."""
            generation = state.current
            if record.agent in generation.runtime.manifest.agents and \
                    generation.toolset(record.agent).get(record.tool) is not None:
                return None
            return (f"{record.tool!r} is no longer a tool of agent {record.agent!r} (a reload of the specs or "
                    f"agents.yaml took it away): approved, it would run nothing. Deny approval {record.id}; its run "
                    "then goes on without it.")

        # `by`: the deciding client of a request; else the bound caller's (`cli` for `gateway approvals`).
        outcome = await self.approvals.decide(approval_id, decision, resume=resume, rights=rights,
                                              by=by if by is not None else current_caller().client, gone=gone)
        if outcome.result is not None and not outcome.reopened:  # a decision taken back answered nothing yet
            await keep_answer(self.store, outcome.run, *self._answer(state, outcome))
        return outcome

    def render_outcome(self, state: Any, outcome: Outcome, rights: Rights = Rights.OPEN) -> tuple[int, dict[str, Any]]:
        """The HTTP answer: 202 while the run waits for more decisions, else (to the run's owner) the finished
        completion (chat) or the ToolResult (direct/MCP call); a decider who does not own the run learns where it
        stands, not what it answered."""
        approval = approval_dict(outcome.approval, self.redactor.value)
        if outcome.result is None:
            return 202, {"approval": approval, "status": "waiting", "waiting_for": outcome.waiting}
        if outcome.reopened and isinstance(outcome.result, ToolResult):
            status = status_for_result(outcome.result)
            shown = {"result": outcome.result.to_dict()} if rights.owns(outcome.run.client,
                                                                          run_subject(outcome.run)) else {}
            error = APIError(status if status >= 400 else 503,
                             f"The approved call was not sent: {outcome.result.error} The decision was taken back "
                             f"and approval {outcome.approval.id} is pending again: decide it again.",
                             code="approval_reopened", extra={"approval": approval, **shown})
            return error.status, error.body()
        if not rights.owns(outcome.run.client, run_subject(outcome.run)):
            result = outcome.result
            waits = bool(getattr(result, "pending_approvals", None)) or (
                isinstance(result, ToolResult) and result.error_type == "approval_pending")
            return 200, decider_view(outcome.run, approval, finished=not waits)
        return self._answer(state, outcome)

    def _answer(self, state: Any, outcome: Outcome) -> tuple[int, dict[str, Any]]:
        """What the resumed run answered its owner: the finished completion (chat), or the ToolResult."""
        approval = approval_dict(outcome.approval, self.redactor.value)
        if isinstance(outcome.result, ToolResult):
            return 200, {"approval": approval, "result": outcome.result.to_dict()}
        shape = ResponseShape.from_state((outcome.run.state.get("loop") or {}).get("door"))
        if shape is not None:  # a run started on /v1/responses is answered as a Response, as it was stored
            body = shape.resumed(outcome.run.id, outcome.run.agent, outcome.result)
            body["gateway"]["approval"] = approval
            return 200, body
        from .chat import completion_body  # the chat module imports the loop; only needed here

        agent = state.current.runtime.manifest.agents.get(outcome.run.agent)
        shell = SimpleNamespace(id=outcome.run.id, created=int(time.time()),
                                agent=agent or SimpleNamespace(name=outcome.run.agent))
        body = completion_body(shell, outcome.result)  # type: ignore[arg-type]
        body["gateway"]["approval"] = approval
        return 200, body

    async def _resume(self, state: Any, run: RunRecord, decisions: dict[str, Decision]) -> Any:
        """Continue a claimed run on the current generation (a restart or reload in between is fine)."""
        with bind_caller(client=run.client):  # the run goes on as its owner (limits, budgets, audit), not its decider
            return await self._resume_as_owner(state, run, decisions)

    async def _resume_as_owner(self, state: Any, run: RunRecord, decisions: dict[str, Decision]) -> Any:
        async with state.use() as generation:
            if run.kind == "call":
                return await self._resume_call(generation, run, decisions)
            if run.kind == "script":
                from .direct_script import resume_direct_script

                approval_id = run.state["pending"][0]
                with bind_caller(**run_owner(run)):
                    return await resume_direct_script(state, generation, run, decisions[approval_id], approval_id)
            agent = agent_of(generation, run.agent)
            toolset = toolset_of(generation, agent.name)
            approved: dict[str, str] = {}
            for pending in run.state["loop"].get("pending", []):
                tool = toolset.get(pending["tool"])
                decision = decisions.get(pending["id"])
                if tool is not None and tool.tool is not None and decision is not None and decision.approve:
                    approved[tool.tool.name] = pending["id"]
            # The resumed run is one of its owner's runs while it goes on, as a new one would be: past the share
            # it does not start (`OverShare`: nothing was sent, so the decision is taken back, to be made again).
            share = await state.runs.take(run.client, generation.runtime.manifest.gateway.max_runs_per_client)
            try:
                return await self._resume_chat(run, agent, generation, decisions, approved)
            finally:
                await share.release()

    async def _resume_chat(self, run: RunRecord, agent: AgentConfig, generation: Generation,
                           decisions: dict[str, Decision], approved: dict[str, str]) -> RunResult:
        """The claimed chat run resumed on `generation` as its owner, with `approved` calls named by tool; one the
        stopping instance cuts before its row is written gets its `stopped` row from the decision's door
        (`cut_doors.ResumeDoor`, when the decision came by one)."""
        started = time.perf_counter()
        resume_begins(run, self.audit)
        with bind_caller(agent=agent.name, run_id=run.id, approvals=approved, **run_owner(run)):
            result = await loop.resume(run.state["loop"], decisions, agent=agent,
                                       adapter=generation.adapter(agent.provider),
                                       toolset=toolset_of(generation, agent.name),
                                       invoke=generation.runner.for_agent(agent.name))
            try:
                # A resumed turn that also called the caller's tools hands them back: kept like the chat door's.
                await keep_turn(self.store, result, agent=agent.name, client=run.client)
                # A new pause is kept before the row is written, as the chat door keeps one: a pause its client's
                # cap cannot keep (another request filled it after the loop looked) ends the run, and the row
                # says so, not `paused` (mend46's left item).
                try:
                    await self.approvals.hold_again(run, result)
                except RunError as ended:
                    await self._record_chat(agent.name, result, run_id=run.id, started=started, ended=ended)
                    resume_recorded()
                    raise
                await self._record_chat(agent.name, result, run_id=run.id, started=started)
                resume_recorded()
            except Exception as exc:
                attach_steps(exc, result.steps)  # the approved calls ran: the error answer says so
                raise
        describe_pause(result, self.redactor.value)
        await self._keep_response(run, result)
        return result

    async def _keep_response(self, run: RunRecord, result: Any) -> None:
        """A run started on /v1/responses: its stored Response is replaced by the resumed one (the waiting text
        goes, the approved calls and their results join the conversation), and a run that pauses again keeps
        what its next resume needs to answer as a Response too."""
        door = run.state["loop"].get("door")
        shape = ResponseShape.from_state(door)
        if shape is None:
            return
        if result.state is not None:
            result.state["door"] = door
        with bind_caller(**run_owner(run)):  # stored as the run's user's, as the Responses door keeps it
            await shape.keep_answer(self.store, run.id, run.agent, owner(run.client),
                                    shape.resumed(run.id, run.agent, result), result)

    async def _resume_call(self, generation: Any, run: RunRecord, decisions: dict[str, Decision]) -> ToolResult:
        approval_id = run.state["pending"][0]
        decision = decisions[approval_id]
        if not decision.approve:
            why = f": {decision.reason}" if decision.reason else ""
            return ToolResult.failure("approval_denied", f"A human refused this call{why}.", approval_id=approval_id)
        agent_tool = toolset_of(generation, run.agent).get(run.state["tool"])
        if agent_tool is None:
            return ToolResult.failure("unknown_tool", f"Agent {run.agent!r} no longer has tool {run.state['tool']!r}.")
        arguments = decision.arguments if decision.arguments is not None else run.state["arguments"]
        call = ToolCall(id=run.state.get("call_id") or approval_id, name=agent_tool.name, arguments=arguments,
                        raw_arguments=arguments)
        with bind_caller(agent=run.agent, run_id=run.id, **run_owner(run)):
            result: ToolResult = await generation.runner.for_agent(run.agent).run(
                agent_tool, call, door="resume", client=run.client, approval=approval_id)
        return result

    async def _on_chat_error(self, agent: str | None, status: int) -> None:
        notes = current_caller().notes or {}
        why = notes.get("run_error")
        await self.audit.record_chat(agent=agent or "", status="error", latency_ms=0.0,
                                     error=f"HTTP {status}: {why}" if why else f"HTTP {status}")


def audit_query(params: Mapping[str, str]) -> AuditQuery:
    """`GET /audit`'s filters: agent, client, tool, status, kind, run_id (exact), since and until (ISO 8601 in UTC,
    or epoch seconds); a bad time, or a NUL character (no stored value holds one; PostgreSQL's text cannot), is a 400
    naming the parameter."""
    def text(name: str) -> str | None:
        return text_param(params, name)

    kind = params.get("kind")
    if kind is not None and kind not in AUDIT_KINDS:
        raise APIError(400, f"`kind` must be one of {', '.join(AUDIT_KINDS)}, not {kind[:40]!r}.", param="kind")
    return AuditQuery(agent=text("agent"), client=text("client"), tool=text("tool"), status=text("status"),
                      kind=kind, run_id=text("run_id"), since=_time_param(params, "since"),
                      until=_time_param(params, "until"))


def text_param(params: Mapping[str, str], name: str) -> str | None:
    """An exact-match filter (`client`, `agent`, ...): None when absent or empty; a NUL character (no stored value
    holds one; PostgreSQL's text cannot) is a 400 naming the parameter."""
    value = params.get(name) or None
    if value is not None and "\x00" in value:
        raise APIError(400, f"`{name}` must not contain a NUL character.", param=name)
    return value


def _time_param(params: Mapping[str, str], name: str) -> float | None:
    if name not in params:
        return None
    raw = params[name].strip()
    try:
        return float(raw)
    except ValueError:
        pass
    try:
        # RFC 3339 allows a lower-case `t` and `z`; fromisoformat takes the upper-case forms.
        moment = datetime.fromisoformat(raw.upper().replace("Z", "+00:00"))
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
