"""Repeated wrong keys are slowed, per client address: guessing a key costs time, and nobody else's.

Every wrong key (a bearer no client has, on any door; a wrong key at the console's sign-in) takes a token from its
address's bucket in the `Store` (`wrongkey:<address>`, so every instance on that store counts together). A wrong key
that finds the bucket empty is answered 429 with `Retry-After`, and until the bucket has a token again every key from
that address is refused before it is looked at (a key checked while refusing would still tell the guesser when it is
right). So an address gets `BURST` guesses at once and one every `1 / RATE` seconds after that. Only wrong keys
are counted, and only the sender's address is refused: another address, with a right key or a wrong one, is answered
as before. IPv6 addresses count by their /64 (one host holds the whole block).

Which addresses are refused is also kept in this process, so a refused guesser costs no store request; the table is
bounded (the oldest entry goes first), and losing an entry only lets that address be counted again.
"""

from __future__ import annotations

import ipaddress
import logging
import time
from collections import OrderedDict

from ..errors import TooManyWrongKeys
from ..store import Bucket, Store

logger = logging.getLogger("gateway.auth")

BURST = 10
"""Wrong keys an address may send at once."""
RATE = 1 / 6
"""Wrong keys per second an address gets back (one every six seconds)."""
MAX_ADDRESSES = 10_000
"""Refused addresses remembered in this process."""


class WrongKeys:
    def __init__(self, store: Store, *, burst: float = BURST, rate: float = RATE,
                 max_addresses: int = MAX_ADDRESSES) -> None:
        """Count wrong keys per client address in `store`'s token buckets.

        Parameters:
            store: where the buckets live (shared by every instance on it).
            burst: wrong keys an address may send before it is refused.
            rate: wrong keys per second it gets back.
            max_addresses: refused addresses remembered in this process.
        """
        self.store = store
        self.burst = burst
        self.rate = rate
        self.max_addresses = max_addresses
        self._refused: OrderedDict[str, float] = OrderedDict()
        """Address -> monotonic time until which it is refused."""

    def check(self, address: str | None) -> None:
        """Raise TooManyWrongKeys while `address` is refused (before any key it sent is looked at)."""
        source = source_of(address)
        until = self._refused.get(source)
        if until is None:
            return
        left = until - time.monotonic()
        if left > 0:
            raise TooManyWrongKeys(left)
        del self._refused[source]

    async def failed(self, address: str | None) -> None:
        """Count one wrong key from `address`; raise TooManyWrongKeys when that emptied its bucket."""
        source = source_of(address)
        try:
            retry_after = await self.store.take_tokens([Bucket(f"wrongkey:{source}", self.rate, self.burst)])
        except Exception as exc:  # noqa: BLE001 - a store that cannot count: the key is refused as wrong anyway
            logger.warning("wrong keys from %s could not be counted: %s", source, exc)
            return
        if retry_after <= 0:
            return
        self._refused[source] = time.monotonic() + retry_after
        self._refused.move_to_end(source)
        while len(self._refused) > self.max_addresses:
            self._refused.popitem(last=False)
        logger.warning("refusing %s for %.0f s: too many wrong keys", source, retry_after)
        raise TooManyWrongKeys(retry_after)


def source_of(address: str | None) -> str:
    """Whose guesses these are: the client's IP address (an IPv6 address by its /64)."""
    if not address:
        return "unknown"
    try:
        ip = ipaddress.ip_address(address.strip("[]"))
    except ValueError:
        return address[:64]
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)
