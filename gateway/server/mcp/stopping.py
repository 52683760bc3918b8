"""An MCP request cut because the instance stopped: answered with a JSON-RPC error that says so, and whether the
call was sent, instead of uvicorn's bare 500 (which the official client turns into "Server returned an error
response"). What every door shares is `gateway.server.stopping`; here is the MCP door's shape of the answer.

A 503 with a JSON-RPC error (-32603, as a call the gateway cannot record: `answering._unrecorded`), its data
`{"status": 503, "code": "instance_stopped", "sent": ...}`. Its id is null: the door has not read the request's
(the SDK clients put the request's own id on an error answered with a non-2xx status, as the spec lets a server
that could not read it).

`watch_sends` counts only what runs in the request's own task, which is where a session's `tools/call` and every
stateless request are answered (`inline`, `stateless`; both mark the scope with the result's `ResultAside`); a
request the SDK's session manager answers runs in the session's task, so for it the answer says it does not know.

A cancellation whose client already went away (the disconnect watch) is answered the same way, to nobody:
uvicorn drops what is sent on a closed connection, and the request envelope still counts it as a client that left
(499). The cancellation is raised again in every case.
"""

from __future__ import annotations

import json

import mcp_types as types
from starlette.types import Scope, Send

from ...asgi import StatusWatch, send_json
from ...safety.audit import Sends
from ..stopping import CutRequests, Sent, stopped_message
from .routing import ASIDE_SCOPE_KEY


def stopped_answer(sent: Sent) -> bytes:
    """The JSON-RPC error a request cut by the stopping instance is answered with."""
    error = {"code": types.INTERNAL_ERROR, "message": stopped_message(sent),
             "data": {"status": 503, "code": "instance_stopped", "sent": sent}}
    return json.dumps({"jsonrpc": "2.0", "id": None, "error": error}, separators=(",", ":")).encode()


async def _answer_cut(scope: Scope, sends: Sends, watch: StatusWatch, send: Send) -> None:
    if watch.status == 0:  # nothing answered yet (once it has started, only the connection can end)
        in_task = ASIDE_SCOPE_KEY in scope  # answered in this task: `sends` saw its call
        sent: Sent = ("sent" if sends.count else "not sent") if in_task else "unknown"
        await send_json(send, 503, stopped_answer(sent))


def mcp_cut_requests() -> CutRequests:
    """The MCP door's POSTs in flight, each answered so when the stopping instance cuts it."""
    return CutRequests(_answer_cut)
