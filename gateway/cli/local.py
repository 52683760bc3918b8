"""The gateway a terminal command runs in-process: the same call pipeline as `gateway serve`.

`gateway call` and `gateway chat` open the store agents.yaml names (`gateway.store`, default
`.gateway/state.db` beside it), so their calls are audited, rate limited, guarded by the breakers and held
for approval exactly as on the server's doors, and `gateway audit` / `gateway approvals` see them.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from ..runtime import Runtime, RuntimeHolder
from ..safety.guards import Safeguards


@contextlib.asynccontextmanager
async def local_gateway(runtime: Runtime, *, store: str | None = None) -> AsyncIterator[Any]:
    """`async with local_gateway(runtime) as state`: a `GatewayState` with the safety layer, closed after."""
    from ..server.state import GatewayState  # the state and its pipeline are shared with the server's doors

    # Log records are the terminal's own; the server scrubs its process's records, a command needs not.
    safety = Safeguards.open(runtime, store=store, redact_log_records=False)
    state = GatewayState(RuntimeHolder(runtime), safety=safety)
    try:
        yield state
    finally:
        try:
            await state.aclose()
        finally:
            await safety.aclose()
