"""A resumed run's answer, kept for the run's owner.

Deciding the last pending approval of a run resumes it as the client that started it (its owner), and what it
answers (the finished chat completion, or the call's or script's ToolResult) is that owner's. The decider gets it
only when it is the owner; any other decider (an approver, an admin) gets the decision and where the run stands.
Either way the answer is kept in the store (`answer_<run id>`, scoped to the owner like a stored Responses answer
and pruned with them by `conversation_retention_days`), and the owner reads it with `GET /approvals/{id}`.
"""

from __future__ import annotations

from typing import Any

from ..kernel.caller import current_caller, owner_key
from ..store import ResponseRecord, RunRecord, Store
from ..store.kept_conversations import keep_conversation

ANSWER_PREFIX = "answer_"
"""Kept answers share the stored conversations' table; the Responses door refuses ids with this prefix."""


async def keep_answer(store: Store, run: RunRecord, status: int, body: dict[str, Any]) -> None:
    """Keep what `run` answered when it was resumed (HTTP `status`, `body`), for its owner."""
    subject = run.state.get("subject") if isinstance(run.state, dict) else None  # the user it was held for
    await keep_conversation(store, ResponseRecord(id=ANSWER_PREFIX + run.id, agent=run.agent,
                                                  client=owner_key(run.client, subject),
                                                  body={"status": status, "answer": body}))


async def kept_answer(store: Store, run_id: str, client: str | None) -> dict[str, Any] | None:
    """The answer `run_id` gave when it was last resumed, if the current caller (as `client`, and as the signed-in
    user the run was held for) owns it; None: not resumed yet, pruned, or another user's."""
    record = await store.get_response(ANSWER_PREFIX + run_id)
    if record is None or record.client != owner_key(client, current_caller().subject):
        return None
    answer = record.body.get("answer")
    return answer if isinstance(answer, dict) else None


def decider_view(run: RunRecord, approval: dict[str, Any], finished: bool) -> dict[str, Any]:
    """What a decider who does not own the run is told: the decision, the run's state, and whose the answer is."""
    state = "done" if finished else "waiting"
    owner = run.client or "the caller that started it"
    return {"approval": approval, "status": "resumed", "run": {"id": run.id, "agent": run.agent, "state": state,
                                                              "owner": run.client},
            "answer": f"The run went on as {owner}; its answer is theirs (GET /approvals/{approval['id']})."}
