"""Each client's share of work that holds something for its whole length: chat runs, code-mode sandboxes.

Upstream calls have theirs in the breaker stage (`max_concurrency_per_client`: a call over the share waits for a
slot its own client gives back). A chat run or a script holds what it holds for seconds to minutes, so one over
its client's share does not wait: it is refused at once (`OverShare`, a 429 with Retry-After at a door, a
`rate_limited` tool result inside a run) and the other clients' work goes on. `take` counts a client's work and
refuses one past `cap`; `Share.release` gives it back (once, however often it is called). Callers without a key
count as one client. This counts in this process (`gateway.safety.shares.LocalShares`); with `gateway.redis` both
are counted across every instance in Redis instead (`gateway.safety.shared_shares`).

Thread-safe (one lock): the sandbox pool is shared by every event loop of the process.
"""

from __future__ import annotations

import threading

from ..errors import OverShare

__all__ = ["RETRY_AFTER", "ClientShares", "OverShare", "Share"]

RETRY_AFTER = 1.0
"""Seconds a refused client is told to wait: when one of its runs ends cannot be known in advance, and a refusal
costs the gateway nothing, so it may ask again soon."""


class Share:
    """One piece of a client's work, counted until `release`."""

    __slots__ = ("_client", "_shares")

    def __init__(self, shares: ClientShares, client: str | None) -> None:
        self._shares: ClientShares | None = shares
        self._client = client

    def release(self) -> None:
        shares, self._shares = self._shares, None
        if shares is not None:
            shares.give_back(self._client)


class ClientShares:
    """What each client holds now of one kind of work.

    Parameters:
        what: the work, as a refusal names it (`chat runs`).
        setting: the agents.yaml key of the cap, as a refusal names it.
    """

    def __init__(self, what: str, setting: str) -> None:
        self.what = what
        self.setting = setting
        self._held: dict[str | None, int] = {}
        self._lock = threading.Lock()

    def held(self, client: str | None) -> int:
        return self._held.get(client, 0)

    def take(self, client: str | None, cap: int | None) -> Share:
        """Count one more piece of `client`'s work; `OverShare` when it holds `cap` already (None: no cap)."""
        with self._lock:
            held = self._held.get(client, 0)
            if cap is not None and held >= cap:
                raise OverShare(client, self.what, cap, self.setting, RETRY_AFTER)
            self._held[client] = held + 1
        return Share(self, client)

    def give_back(self, client: str | None) -> None:
        with self._lock:
            held = self._held.get(client, 0) - 1
            if held > 0:
                self._held[client] = held
            else:
                self._held.pop(client, None)
