"""An api's concurrency slots: taken at once while free, else waited for in arrival order; a waiter that gives up
(its deadline, its caller gone) takes none, and one cancelled as a slot was handed to it passes the slot on."""

from __future__ import annotations

import asyncio

from gateway.safety.slots import Slots


def test_free_slots_are_taken_at_once_and_then_calls_wait_in_arrival_order() -> None:
    async def scenario() -> None:
        slots = Slots(2)
        assert slots.take_now() and slots.take_now()
        assert not slots.take_now()
        order: list[str] = []

        async def wait(name: str) -> None:
            await slots.take()
            order.append(name)

        first = asyncio.ensure_future(wait("first"))
        await asyncio.sleep(0)
        second = asyncio.ensure_future(wait("second"))
        await asyncio.sleep(0)
        slots.give()
        assert not slots.take_now()  # the slot given back is the first waiter's, not a newcomer's
        await first
        assert order == ["first"] and not second.done()
        slots.give()
        await second
        assert order == ["first", "second"]
        slots.give()
        slots.give()
        assert slots.free == 2

    asyncio.run(scenario())


def test_a_waiter_that_gives_up_takes_no_slot() -> None:
    async def scenario() -> None:
        slots = Slots(1)
        assert slots.take_now()
        try:
            async with asyncio.timeout(0.01):
                await slots.take()
        except TimeoutError:
            pass
        later = asyncio.ensure_future(slots.take())
        await asyncio.sleep(0)
        slots.give()  # goes past the waiter that gave up, to the one still waiting
        await later
        slots.give()
        assert slots.free == 1

    asyncio.run(scenario())


def test_a_waiter_cancelled_as_its_slot_arrives_passes_it_on() -> None:
    async def scenario() -> None:
        slots = Slots(1)
        assert slots.take_now()
        cancelled = asyncio.ensure_future(slots.take())
        waiting = asyncio.ensure_future(slots.take())
        await asyncio.sleep(0)
        slots.give()  # handed to the first waiter ...
        cancelled.cancel()  # ... which is cancelled before it runs again
        await asyncio.gather(cancelled, return_exceptions=True)
        await asyncio.wait_for(waiting, 10)  # the slot went on to the next waiter
        slots.give()
        assert slots.free == 1

    asyncio.run(scenario())
