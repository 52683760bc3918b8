"""Undoing `Content-Encoding` as an answer streams in: gzip and deflate (what `gateway.http.http1` advertises,
undone with zlib alone); a coding it can't undo leaves the body as it came, as httpx does."""

from __future__ import annotations

import zlib

import httpx


def decoders(encoding: str | None) -> list:  # type: ignore[type-arg]
    """Decoders for `Content-Encoding`, in the order to apply them; an unknown coding passes as it is."""
    if not encoding:
        return []
    chain = []
    for coding in reversed([c.strip().lower() for c in encoding.split(",")]):
        if coding in ("gzip", "x-gzip"):
            chain.append(zlib.decompressobj(zlib.MAX_WBITS | 16))
        elif coding == "deflate":
            chain.append(_Deflate())
        elif coding not in ("identity", ""):
            return []  # httpx's rule too: a coding it can't undo leaves the body as it came
    return chain


class _Deflate:
    """`deflate` as servers send it: zlib-wrapped as the RFC says, or raw as some do."""

    def __init__(self) -> None:
        self._inner: zlib._Decompress | None = None  # type: ignore[name-defined]

    def decompress(self, data: bytes) -> bytes:
        if self._inner is None:
            if not data:
                return b""
            wrapped = len(data) >= 2 and (data[0] & 0x0F) == 8 and (data[0] << 8 | data[1]) % 31 == 0
            self._inner = zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)
        return self._inner.decompress(data)

    def flush(self) -> bytes:
        return self._inner.flush() if self._inner is not None else b""


def decode(decoder, data: bytes) -> bytes:  # type: ignore[no-untyped-def]
    try:
        return decoder.decompress(data) if data else b""
    except zlib.error as error:
        raise httpx.DecodingError(f"the body is not what its Content-Encoding says: {error}") from error


def flush(decoder) -> bytes:  # type: ignore[no-untyped-def]
    try:
        return decoder.flush()
    except zlib.error as error:
        raise httpx.DecodingError(f"the body is not what its Content-Encoding says: {error}") from error
