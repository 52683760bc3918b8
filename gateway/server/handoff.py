"""Turns handed back to a caller's tools, kept so the run goes on from what the model really said.

When the model calls the caller's tool and one of the agent's own in the same turn, the caller gets only its own
call back; the gateway's call already ran. The caller's next request repeats the turn as it saw it (an assistant
message with its calls, or `function_call` items) and adds its results. Sent on like that, the model would lose
the gateway's call and its result (and the turn's reasoning), so the turn is kept in the store under each
handed-back call id (`turn_<call id>`, scoped to the caller's client) and put back in place of the caller's copy.
A history the store does not know (another client's, an expired one, one made up) is used as sent.
"""

from __future__ import annotations

from ..assembly import GatewayState
from ..kernel.caller import current_caller, owner_key
from ..loop_types import RunResult, message_from_dict, message_to_dict
from ..messages import Message
from ..store import ResponseRecord, Store
from ..store.kept_conversations import keep_conversation

TURN_PREFIX = "turn_"


def owner(client: str | None) -> str | None:
    """Whose a stored answer or turn is: the client, and with `gateway.auth` the signed-in user too (two users of
    one client must not read or continue each other's conversations)."""
    return owner_key(client, current_caller().subject)


def store_of(state: GatewayState) -> Store:
    """The safety layer's store, or (a gateway built without one) a process-local store of the state's own."""
    return state.store


async def keep_turn(store: Store, result: RunResult, *, agent: str, client: str | None) -> None:
    """Keep the turn `result` handed back: its assistant message and the gateway's results that follow it."""
    if not result.handed_back:
        return
    index = max(i for i, m in enumerate(result.messages) if m.role == "assistant")
    turn = [message_to_dict(m) for m in result.messages[index:]]
    for call in result.handed_back:
        await keep_conversation(store, ResponseRecord(id=TURN_PREFIX + call.id, agent=agent, client=owner(client),
                                                      messages=turn))


async def restore_turns(store: Store, messages: list[Message], *, agent: str, client: str | None) -> list[Message]:
    """`messages` with every handed-back turn the store knows for this client put back as the model said it."""
    # A turn is kept under each call it handed back, and the caller's copy holds those calls: its first call finds
    # it. One question of the store for the whole history, not one an assistant message: a history of 16,000
    # made-up calls was 16,000 queries (redteam44), then one a message, up to 4,096 a request.
    asking = [m for m in messages if m.role == "assistant" and m.tool_calls]
    if not asking:
        return messages
    kept = await store.get_responses([TURN_PREFIX + m.tool_calls[0].id for m in asking])
    out: list[Message] = []
    answered = {m.tool_call_id for m in messages if m.role == "tool"}
    for message in messages:
        turn = _kept_turn(kept, message, agent=agent, client=client) if message.tool_calls else None
        if turn is None:
            out.append(message)
            continue
        out.append(turn[0])
        out.extend(m for m in turn[1:] if m.tool_call_id not in answered)
    return out


def _kept_turn(kept: dict[str, ResponseRecord], message: Message, *, agent: str,
               client: str | None) -> list[Message] | None:
    if message.role != "assistant":
        return None
    record = kept.get(TURN_PREFIX + message.tool_calls[0].id)
    if record is not None and record.client == owner(client) and record.agent == agent and record.messages:
        turn = [message_from_dict(m) for m in record.messages]
        if {c.id for c in message.tool_calls} <= {c.id for c in turn[0].tool_calls}:
            return turn
    return None
