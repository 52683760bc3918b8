"""Each client's share of work held for its whole length: chat runs (`gateway.max_runs_per_client`) and code-mode
sandboxes (`gateway.max_code_workers_per_client`), counted in this process or, with `gateway.redis`, across every
instance and worker, by one mechanism for both.

A door takes a place before the work starts (`take`: `OverShare` past the client's share) and gives it back when
the work is over (`Held.release`, however often it is called). `LocalShares` counts in this process
(`ClientShares`); with `gateway.redis`, `gateway.safety.shared_shares.SharedShares` counts in Redis, each place
leased briefly and renewed while its work lives (`gateway.store.lease_keeper`), so that a killed instance's places
come back on their own soon after it died. Without a cap nothing is counted, here or in Redis.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .client_shares import ClientShares, Share


@dataclass(frozen=True, slots=True)
class Kind:
    """One kind of work a client's share counts."""

    what: str
    """The work, as a refusal names it."""
    setting: str
    """The agents.yaml key of its cap, as a refusal names it."""
    name: str
    """Its part of the Redis keys."""


RUNS = Kind("chat runs", "gateway.max_runs_per_client", "runs")
SANDBOXES = Kind("code-mode sandboxes", "gateway.max_code_workers_per_client", "sandboxes")


class Held(Protocol):
    """One place in a client's share, until `release`."""

    async def release(self) -> None: ...


class ShareBook(Protocol):
    """Where one kind of work's places are counted (`LocalShares`, `SharedShares`)."""

    kind: Kind

    async def take(self, client: str | None, cap: int | None, *, admitted: bool = False) -> Held:
        """A place in `client`'s share of `cap` (None: no cap, nothing counted), held until `release` however long
        the work lasts; `OverShare` when the client holds `cap` already. `admitted`: work let in before (a script
        resumed after an approval): counted, never refused."""
        ...


class _Uncounted:
    """The place of work under no cap: nothing held."""

    __slots__ = ()

    async def release(self) -> None:
        return None


UNCOUNTED: Held = _Uncounted()
"""What `take` answers without a cap: nothing is counted, so the work pays no more than the look-up of the cap (a
cap a reload sets counts the work that starts after it)."""


class _Here:
    """A place counted in this process."""

    __slots__ = ("_share",)

    def __init__(self, share: Share) -> None:
        self._share = share

    async def release(self) -> None:
        self._share.release()


class LocalShares:
    """Each client's work of one kind in flight in this process (nothing to lease: the count dies with it)."""

    def __init__(self, kind: Kind) -> None:
        self.kind = kind
        self.counts = ClientShares(kind.what, kind.setting)

    async def take(self, client: str | None, cap: int | None, *, admitted: bool = False) -> Held:
        if cap is None:
            return UNCOUNTED
        return _Here(self.counts.take(client, None if admitted else cap))
