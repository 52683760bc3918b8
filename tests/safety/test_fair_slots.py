"""`FairSlots`: who gets a freed slot, the per-group cap, and a waiter that leaves (timed out, cancelled) without
taking a slot with it. Real asyncio tasks; the order of events is asserted, never a duration."""

from __future__ import annotations

import asyncio

import pytest

from gateway.safety.fair_slots import FairSlots

pytestmark = pytest.mark.anyio


async def _queue(slots: FairSlots, group: str, order: list[str], seconds: float = 60) -> asyncio.Task[bool]:
    """A call of `group` waiting for a slot (queued when this returns); `order` says who got one, in turn."""

    async def wait() -> bool:
        handed = await slots.wait(group, seconds)
        if handed:
            order.append(group)
        return handed

    task = asyncio.ensure_future(wait())
    await asyncio.sleep(0)  # the task runs up to its wait: it is in the queue now
    return task


async def test_one_group_alone_takes_every_slot_without_waiting() -> None:
    slots = FairSlots(4)
    assert [slots.take("a") for _ in range(5)] == [True, True, True, True, False]
    assert slots.free == 0 and slots.held("a") == 4 and slots.waiting == 0


async def test_a_freed_slot_goes_to_the_waiting_group_holding_fewest_not_to_the_first_queued() -> None:
    slots = FairSlots(2)
    order: list[str] = []
    assert slots.take("a") and slots.take("a")
    first_a = await _queue(slots, "a", order)
    second_a = await _queue(slots, "a", order)
    b = await _queue(slots, "b", order)  # queued last, holds none
    slots.release("a")
    await b
    assert order == ["b"] and slots.held("b") == 1 and slots.held("a") == 1
    slots.release("a")  # a holds 0 now, b 1: a's first waiter
    await first_a
    slots.release("b")  # a holds 1, b 0 but b waits no more: a's second waiter
    await second_a
    assert order == ["b", "a", "a"] and slots.held("a") == 2 and slots.waiting == 0


async def test_between_groups_holding_as_many_the_one_waiting_longest_goes_first() -> None:
    slots = FairSlots(1)
    order: list[str] = []
    assert slots.take("x")
    waiters = [await _queue(slots, group, order) for group in ("c", "b", "c")]
    for _ in waiters:
        slots.release(order[-1] if order else "x")
        await asyncio.sleep(0)
    await asyncio.gather(*waiters)
    assert order == ["c", "b", "c"]


async def test_a_group_at_its_cap_waits_for_its_own_slot_while_others_take_free_ones() -> None:
    slots = FairSlots(4, per_group=2)
    order: list[str] = []
    assert slots.take("a") and slots.take("a") and not slots.take("a")
    third_a = await _queue(slots, "a", order)
    assert slots.free == 2 and slots.waiting == 1  # the api has room, the group has none
    assert slots.take("b")  # another group takes a free slot at once
    slots.release("b")
    await asyncio.sleep(0)
    assert order == [] and slots.free == 2  # b's slot is not a's to take
    slots.release("a")
    await third_a
    assert order == ["a"] and slots.held("a") == 2 and slots.free == 2


async def test_a_cap_above_the_limit_is_the_limit() -> None:
    assert FairSlots(3, per_group=8).per_group == 3 and FairSlots(3).per_group == 3


async def test_a_waiter_that_times_out_leaves_the_queue_and_the_count_whole() -> None:
    slots = FairSlots(1)
    assert slots.take("a")
    assert await slots.wait("b", 0) is False
    assert slots.waiting == 0 and slots.free == 0
    slots.release("a")
    assert slots.free == 1 and slots.held("b") == 0


async def test_a_waiter_cancelled_before_a_slot_came_takes_none() -> None:
    slots = FairSlots(1)
    order: list[str] = []
    assert slots.take("a")
    gone = await _queue(slots, "b", order)
    gone.cancel()
    slots.release("a")  # before the cancelled task ran: the hand-over skips it
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert order == [] and slots.free == 1 and slots.waiting == 0 and slots.held("b") == 0


async def test_a_waiter_cancelled_after_a_slot_was_handed_to_it_gives_the_slot_back() -> None:
    slots = FairSlots(1)
    order: list[str] = []
    assert slots.take("a")
    gone = await _queue(slots, "b", order)
    after = await _queue(slots, "c", order)
    slots.release("a")  # handed to b (queued first, both hold none) ...
    assert slots.held("b") == 1 and slots.free == 0
    gone.cancel()  # ... which is cancelled before it wakes up
    with pytest.raises(asyncio.CancelledError):
        await gone
    await after  # b's slot went on to the next waiter
    assert order == ["c"] and slots.held("b") == 0 and slots.held("c") == 1
    slots.release("c")
    assert slots.free == 1 and slots.waiting == 0
