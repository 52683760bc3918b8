"""`GET /metrics`: the gateway's Prometheus metrics as text (`gateway.observe.metrics`).

With `clients` set it needs an admin key (`clients.<name>.admin: true`): its series name every tenant's agents,
apis, tools and (in the breakers' caller groups) client names, and most of them cannot be split by client (a
request count by door, the calls of an api that agents of several clients share), so a per-key view would be both
partial and misleading. A scraper is the operator's: give it an admin key. The gauges that mirror state (breakers,
pending approvals, reloads) are refreshed at each scrape.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from ..assembly import GatewayState
from ..observe.metrics import CONTENT_TYPE
from ..safety.rights import Rights
from .api_errors import APIError
from .auth import rights_of

_MAX_COUNTED_APPROVALS = 10_000


async def metrics_endpoint(request: Request) -> Response:
    state: GatewayState = request.app.state.gateway
    rights = rights_of(request.scope) if state.safety is not None else Rights.OPEN  # no safety layer: no keys
    if not (rights.everything or rights.admin):
        raise APIError(403, "/metrics shows every tenant's agents, tools and clients: it needs an admin key "
                            "(`clients.<name>.admin: true`).", code="admin_required")
    metrics = state.metrics
    safety = state.safety
    pending = None
    breakers: list[tuple[str, str, str]] = []
    if safety is not None:
        pending = len(await safety.approvals.pending(limit=_MAX_COUNTED_APPROVALS))
        breakers = [(api, group, current) for api, group, current in safety.breakers.states()]
    metrics.refresh(breakers=breakers, pending=pending, reloads=state.reloads, refused=state.holder.refused)
    return Response(metrics.render(), media_type=CONTENT_TYPE)
