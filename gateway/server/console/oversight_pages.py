"""The console's oversight pages: runs and the audit log, the approvals inbox, and the gateway's health."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, request_response

from ...loop_types import Decision
from ...runtime import refusal_lines
from ...safety.approvals import approval_dict, refusal, run_subject
from ...store import AUDIT_KINDS, ApprovalRecord, AuditQuery
from ..cut_doors import ResumeDoor
from ..routes import read_json, readiness, state_of, toolset_of
from ..run_answers import kept_answer
from .rendering import json_error, viewer_of
from .tryout import argument_problems

if TYPE_CHECKING:
    from .rendering import Console

FILTERS = ("agent", "client", "tool", "status", "kind", "since", "until")
PAGE_ROWS = 200


def routes(console: Console) -> list[Route]:
    from ..supervision import audit_query, text_param

    safety = console.safety

    async def audit_page(request: Request) -> Response:
        viewer = viewer_of(request)
        filters = {name: request.query_params.get(name, "") for name in FILTERS}
        query = audit_query({k: v for k, v in filters.items() if v})
        rows = await safety.readable_audit(viewer.rights, PAGE_ROWS, query)
        agents = viewer.visible(state_of(request).current.runtime.manifest.agents)
        return console.render(request, "audit.html", rows=rows, filters=filters, kinds=AUDIT_KINDS, agents=agents,
                              title="Runs and audit")

    async def run_page(request: Request) -> Response:
        viewer = viewer_of(request)
        run_id = request.path_params["run_id"]
        rows = list(reversed(await safety.readable_audit(viewer.rights, PAGE_ROWS, AuditQuery(run_id=run_id))))
        run = await safety.store.get_run(run_id)
        answer = None
        if run is not None and viewer.may_see(run.agent) and viewer.rights.owns(run.client, run_subject(run)):
            answer = await kept_answer(safety.store, run_id, run.client)  # the resumed run's answer is its owner's
        return console.render(request, "run.html", rows=rows, run_id=run_id, answer=answer, title=f"Run {run_id}")

    async def approvals_page(request: Request) -> Response:
        viewer = viewer_of(request)
        client = text_param(request.query_params, "client")
        pending = await safety.approvals.pending(rights=viewer.rights, limit=PAGE_ROWS, client=client)
        items = [approval_dict(a, safety.redactor.value) for a in pending]
        return console.render(request, "approvals.html", approvals=items, client=client, title="Approvals")

    async def decide(request: Request) -> Response:
        viewer = viewer_of(request)
        state = state_of(request)
        payload = await read_json(request)
        if not isinstance(payload, dict):
            return json_error(400, "Send {\"decision\": \"approve\" | \"deny\", \"reason\"?, \"arguments\"?}.")
        try:
            decision = Decision.parse(payload)
        except (ValueError, AttributeError) as exc:
            return json_error(400, str(exc), param="decision")
        approval_id = request.path_params["id"]
        record = await safety.store.get_approval(approval_id)
        if record is None:
            return json_error(404, f"No approval {approval_id!r}; the Approvals page lists the pending ones.")
        refused = refusal(viewer.rights, record)  # the right first: nothing of the call is looked at for others
        if refused is not None:
            return json_error(403, refused, code="approval_forbidden")
        if decision.approve and decision.arguments is not None:
            problems = await _edit_problems(state, record, decision.arguments)
            if problems:  # the edit is refused before the approval is used
                return json_error(422, "The edited arguments are not valid; the approval still waits.",
                                  code="invalid_arguments", param="arguments", problems=problems)
        status, body = await safety.decide_and_render(state, approval_id, decision, rights=viewer.rights,
                                                      by=viewer.name or "console")
        return JSONResponse(body, status_code=status)

    async def health_page(request: Request) -> Response:
        state = state_of(request)
        generation = state.current
        runtime = generation.runtime
        holder = state.holder
        error = holder.last_error
        viewer = viewer_of(request)
        agents = viewer.visible(runtime.manifest.agents)
        apis, diagnostics = sorted(runtime.catalog.apis.values(), key=lambda a: a.name), runtime.diagnostics
        tool_count = len(runtime.catalog)
        if not viewer.admin:
            # Another tenant's agents, specs and the diagnostics naming them are not this key's to see: its own
            # agents' apis, their specs' diagnostics, and that a reload was refused (an admin sees why).
            used = {selection.api for agent in agents for selection in runtime.manifest.agents[agent].tools}
            apis = [api for api in apis if api.name in used]
            files = {api.file for api in apis}
            diagnostics = [d for d in diagnostics if d.file in files]
            tool_count = len({name for agent in agents for name in generation.toolset(agent).names})
        refused: str | None = None
        diagnostic_lines: list[str] = []
        if error is not None:
            hidden = ["An admin of this gateway sees why."]
            refused, *diagnostic_lines = refusal_lines(error) if viewer.admin else hidden
        # The store and Redis as /readyz finds them, for an admin (their addresses are the deployment's): with Redis
        # gone the pages still render (sessions are in the store), and this says why calls are refused.
        shared = await readiness(state.store) if viewer.admin else {}
        return console.render(
            request, "health.html", runtime=runtime, apis=apis, agents=agents, diagnostics=diagnostics, shared=shared,
            tool_count=tool_count, reloads=holder.generation, loaded_at=_when(holder.started_at),
            reloaded_at=_when(holder.reloaded_at), refused_at=_when(holder.refused_at), refused=refused,
            diagnostic_lines=diagnostic_lines,
            reload_warnings=[str(w) for w in holder.warnings if viewer.may_see(w.agent)],
            title="Health")

    return [
        Route("/audit", console.page(audit_page), methods=["GET"]),
        Route("/runs/{run_id}", console.page(run_page), methods=["GET"]),
        Route("/approvals", console.page(approvals_page), methods=["GET"]),
        # The API's approvals door: a resume the stopping instance cuts is answered so, and its run gets its row.
        Route("/approvals/{id}", ResumeDoor(request_response(decide)), methods=["POST"]),
        Route("/health", console.page(health_page), methods=["GET"]),
    ]


async def _edit_problems(state: Any, record: ApprovalRecord, arguments: Any) -> list[str]:
    generation = state.current
    agent_tool = toolset_of(generation, record.agent).get(record.tool) if record.agent in \
        generation.runtime.manifest.agents else None
    if agent_tool is None:
        return []
    return await argument_problems(generation, agent_tool, arguments)


def _when(moment: float | None) -> str | None:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(moment)) if moment is not None else None
