"""Each client's share of chat runs (`gateway.max_runs_per_client`), held from a run's start to its end.

A door takes a run's place before the run starts (`take`: `OverShare` past the client's share) and gives it back
when the run is over (`HeldRun.release`, however often it is called). A run resumed after an approval takes one
too, as its owner's. `RunShares` counts in this process (`ClientShares`: each worker or instance its own); with
`gateway.redis`, `gateway.safety.shared_run_shares.SharedRunShares` counts across every instance and worker, each
place leased briefly and renewed while its run lives, so that a killed instance's places come back on their own
soon after it died. Without a cap
nothing is counted, here or in Redis.
"""

from __future__ import annotations

from typing import Protocol

from .client_shares import ClientShares, Share

WHAT = "chat runs"
SETTING = "gateway.max_runs_per_client"


class HeldRun(Protocol):
    """One run's place in its client's share, until `release`."""

    async def release(self) -> None: ...


class RunShareBook(Protocol):
    """Where runs' places are counted (`RunShares`, `SharedRunShares`)."""

    async def take(self, client: str | None, cap: int | None) -> HeldRun:
        """A new run's place in `client`'s share of `cap` runs (None: no cap), held until `release` however long
        the run lasts; `OverShare` when the client holds `cap` already."""
        ...


class _Uncounted:
    """The place of a run under no cap: nothing held."""

    __slots__ = ()

    async def release(self) -> None:
        return None


UNCOUNTED: HeldRun = _Uncounted()
"""What `take` answers without a cap: nothing is counted, so a run pays no more than the look-up of the cap (a cap
a reload sets counts the runs that start after it)."""


class _Here:
    """A place counted in this process."""

    __slots__ = ("_share",)

    def __init__(self, share: Share) -> None:
        self._share = share

    async def release(self) -> None:
        self._share.release()


class RunShares:
    """Each client's runs in flight in this process (nothing to lease: the count dies with it)."""

    def __init__(self) -> None:
        self.counts = ClientShares(WHAT, SETTING)

    async def take(self, client: str | None, cap: int | None) -> HeldRun:
        if cap is None:
            return UNCOUNTED
        return _Here(self.counts.take(client, cap))
