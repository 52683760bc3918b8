"""A request's hold on a generation: a reload closes the old one only once its last request let go."""

from __future__ import annotations

import pytest

from gateway.assembly import Holding

pytestmark = pytest.mark.anyio


class _Generation:
    def __init__(self) -> None:
        self.active = 0
        self.retired = False
        self.closed = 0

    async def aclose(self) -> None:
        self.closed += 1


async def test_a_retired_generation_closes_when_its_last_holder_leaves() -> None:
    generation = _Generation()
    async with Holding(generation) as held:  # type: ignore[arg-type]
        assert held is generation and generation.active == 1
        async with Holding(generation):  # type: ignore[arg-type]
            assert generation.active == 2
        generation.retired = True  # a reload swapped in another generation meanwhile
        assert generation.active == 1 and generation.closed == 0
    assert generation.active == 0 and generation.closed == 1


async def test_a_failing_block_still_lets_go() -> None:
    generation = _Generation()
    generation.retired = True
    with pytest.raises(RuntimeError):
        async with Holding(generation):  # type: ignore[arg-type]
            raise RuntimeError("the request failed")
    assert generation.active == 0 and generation.closed == 1
