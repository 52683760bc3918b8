"""`GET /metrics`: the gateway's Prometheus metrics as text (`gateway.observe.metrics`).

Behind the same caller checks as every other door when `clients` is set (a bearer key). The gauges that mirror
state (breakers, pending approvals, reloads) are refreshed at each scrape.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from ..assembly import GatewayState
from ..observe.metrics import CONTENT_TYPE

_MAX_COUNTED_APPROVALS = 10_000


async def metrics_endpoint(request: Request) -> Response:
    state: GatewayState = request.app.state.gateway
    metrics = state.metrics
    safety = state.safety
    pending = None
    breakers: list[tuple[str, str, str]] = []
    if safety is not None:
        pending = len(await safety.approvals.pending(limit=_MAX_COUNTED_APPROVALS))
        breakers = [(api, group, current) for api, group, current in safety.breakers.states()]
    metrics.refresh(breakers=breakers, pending=pending, reloads=state.reloads, refused=state.holder.refused)
    return Response(metrics.render(), media_type=CONTENT_TYPE)
