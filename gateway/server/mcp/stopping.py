"""An MCP request cut because the instance stopped: answered with a JSON-RPC error that says so, and whether the
call was sent, instead of uvicorn's bare 500 (which the official client turns into "Server returned an error
response"). What every door shares is `gateway.server.stopping` (the request envelope calls `answer_cut`, which
the endpoint puts in the scope); here is the MCP door's shape of the answer.

A 503 with a JSON-RPC error (-32603, as a call the gateway cannot record: `answering._unrecorded`), its data
`{"status": 503, "code": "instance_stopped", "sent": ...}`. Its id is null: the door has not read the request's
(the SDK clients put the request's own id on an error answered with a non-2xx status, as the spec lets a server
that could not read it).

Whether a call was sent is known for a request answered in its own task, which is where a session's `tools/call`
and every stateless request are answered (`inline`, `stateless`; both mark the scope with the result's
`ResultAside`): a `tools/call` there counts its sends on the aside (`server`'s call handler enters `watch_sends`
only there, where a call can be sent), and any other request answered there sent none. A request the SDK's
session manager answers runs in the session's task, so for it the answer says it does not know.
"""

from __future__ import annotations

import json

import mcp_types as types
from starlette.types import Scope, Send

from ...asgi import send_json
from ..stopping import Sent, stopped_message
from .results import ResultAside
from .routing import ASIDE_SCOPE_KEY


def stopped_answer(sent: Sent) -> bytes:
    """The JSON-RPC error a request cut by the stopping instance is answered with."""
    error = {"code": types.INTERNAL_ERROR, "message": stopped_message(sent),
             "data": {"status": 503, "code": "instance_stopped", "sent": sent}}
    return json.dumps({"jsonrpc": "2.0", "id": None, "error": error}, separators=(",", ":")).encode()


def sent_of(scope: Scope) -> Sent:
    """Whether the request's call was sent: by its aside's count when it was answered in this task (no count: it
    was no `tools/call`, or one cut before it began), else not known here."""
    aside = scope.get(ASIDE_SCOPE_KEY)
    if not isinstance(aside, ResultAside):
        return "unknown"
    return "sent" if aside.sends is not None and aside.sends.count else "not sent"


async def answer_cut(scope: Scope, status: int, send: Send) -> None:
    """The MCP door's answer to a POST the stopping instance cut (`stopping.AnswerCut`)."""
    if status == 0:  # nothing answered yet (once it has started, only the connection can end)
        await send_json(send, 503, stopped_answer(sent_of(scope)))
