"""Keeping a stored conversation within its client's cap (`gateway.max_stored_conversations_per_client`).

Responses answers (`store`, the default, and `previous_response_id`), handed-back turns and resumed runs' answers
are kept per owner (the client key, and with `gateway.auth` the signed-in user). Retention alone
(`conversation_retention_days`) let one client keep any number for a month; past the cap the oldest go, not the
new one: a refusal would fail every later request of a client that stores by default, while the removed are the
ones least likely to be continued. Each save that removed some is an audit row of its own (kind `conversation`,
status `evicted`: whose, how many, the first ids), so a caller told 404 for an old id can be shown why. The
stores keep each owner's count in a row of its own (`conversation_counts`), so a save reads one number, not the
owner's thousands of index entries.
"""

from __future__ import annotations

import time

from ..kernel.caller import OWNER_SEPARATOR
from .base import AuditRow, ResponseRecord, Store

SHOWN_IDS = 20
"""The removed ids an audit row lists (a cap lowered at a reload may remove thousands at one save)."""


async def keep_conversation(store: Store, record: ResponseRecord) -> None:
    """Save `record` (insert or replace), removing its owner's oldest beyond the store's `conversation_cap`."""
    cap = store.conversation_cap
    removed = await store.save_response(record, keep=cap)
    if removed and cap is not None:
        await store.add_audit(evicted_row(record, removed, cap))


def evicted_row(record: ResponseRecord, removed: list[str], cap: int) -> AuditRow:
    """The audit row of one save's removals: the owner's client and user, the agent of the record that made room."""
    client, subject = record.client, None
    if client is not None and OWNER_SEPARATOR in client:
        client, subject = client.split(OWNER_SEPARATOR, 1)
    return AuditRow(time=time.time(), kind="conversation", client=client or None, subject=subject,
                    agent=record.agent, status="evicted", run_id=record.id,
                    arguments={"removed": removed[:SHOWN_IDS], "count": len(removed), "cap": cap},
                    error=f"{len(removed)} stored conversation(s) of this client removed, oldest first: past "
                          f"gateway.max_stored_conversations_per_client ({cap})")
