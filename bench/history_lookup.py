"""What finding a chat history's kept turns costs a request (`gateway.server.handoff.restore_turns`), before and after
it asked the store once for the whole history.

    python -m bench.history_lookup [--rounds 5] [--messages 4096] [--kept 1000]

A history of `messages` assistant messages, each with one tool call (the most a request holds: 4,096), of which
`kept` name a turn the store keeps for the caller (a handed-back turn, `turn_<call id>`); the store holds those and
nothing else of the client's. On SQLite (WAL) and PostgreSQL (started on a free loopback port in a temporary
folder), modes take turns each round: one lookup a message (`get_response`, as `restore_turns` asked before) and one
lookup a request (`restore_turns` now: `get_responses`). Medians of the rounds, in ms a request, with the ratio and
the load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from bench.both_stores import on_both_stores
from gateway.loop_types import message_to_dict
from gateway.messages import Message, ToolCall
from gateway.server.handoff import TURN_PREFIX, restore_turns
from gateway.store import ResponseRecord, Store

AGENT, CLIENT = "clerk", "c"


def _history(messages: int) -> list[Message]:
    out = [Message(role="user", content="go on")]
    for n in range(messages):
        call = ToolCall(id=f"call_{n:05d}", name="getForecast", arguments={})
        out.append(Message(role="assistant", tool_calls=[call]))
        out.append(Message(role="tool", tool_call_id=call.id, content="{}"))
    return out


async def _each_message(store: Store, history: list[Message]) -> int:
    """Before: one question of the store an assistant message (its first call's kept turn)."""
    found = 0
    for message in history:
        if message.role == "assistant" and message.tool_calls:
            found += await store.get_response(TURN_PREFIX + message.tool_calls[0].id) is not None
    return found


async def _measure(store: Store, rounds: int, messages: int, kept: int) -> dict[str, float]:
    history = _history(messages)
    for n in range(0, messages, max(1, messages // kept)):
        call = ToolCall(id=f"call_{n:05d}", name="getForecast", arguments={})
        turn = [message_to_dict(Message(role="assistant", content="kept", tool_calls=[call]))]
        await store.save_response(ResponseRecord(id=TURN_PREFIX + call.id, agent=AGENT, client=CLIENT, messages=turn))
    spent: dict[str, list[float]] = {"a message": [], "a request": []}
    for _ in range(rounds):
        started = time.perf_counter()
        found = await _each_message(store, history)
        spent["a message"].append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        restored = await restore_turns(store, history, agent=AGENT, client=CLIENT)
        spent["a request"].append((time.perf_counter() - started) * 1000)
        assert sum(m.content == "kept" for m in restored) == found, "every kept turn is put back"
    return {mode: statistics.median(values) for mode, values in spent.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--messages", type=int, default=4096)
    parser.add_argument("--kept", type=int, default=1000)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    results = on_both_stores(lambda store: _measure(store, args.rounds, args.messages, args.kept))
    print(f"a history of {args.messages} assistant messages, {args.kept} of them kept turns; ms a request, median of "
          f"{args.rounds} rounds; load average {load:.2f} -> {os.getloadavg()[0]:.2f}")
    for name, found in results.items():
        print(f"{name}: one lookup a message {found['a message']:.1f} -> one a request {found['a request']:.1f} "
              f"(x{found['a message'] / found['a request']:.1f} faster)")


if __name__ == "__main__":
    main()
