"""Reading a response into a result the model can use: capped reading, parsing, redaction, truncation.

Reading stops at a hard cap so a huge or endless body can't exhaust memory. What is shown is cut to
`max_result_bytes` at a clean boundary (whole array items and fields for JSON, a line or word for text)
with a marker saying how much was left out.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from typing import Any

import orjson
import webencodings

from ..jsondepth import too_deep
from ..kernel.redaction import Redactor
from ..truncation import cut_text_at_boundary, shrink_json
from .body import essence, is_binary_type, is_json_type
from .wire import WireResponse

MIN_HARD_CAP = 4 * 1024 * 1024
HARD_CAP_FACTOR = 16
ERROR_EXCERPT_BYTES = 2000
MAX_JSON_GROWTH = 5
"""At most how many times longer parsed JSON is when written again (compact, as `shrink_json` measures it): only
numbers grow (`1e15` is written `1000000000000000.0`, 4.5 times), escapes and whitespace shrink."""
_TEXT_TYPES = ("application/xml", "application/javascript", "application/x-www-form-urlencoded",
               "application/yaml", "application/x-yaml", "application/graphql", "application/csv")


@dataclass(slots=True)
class ReadBody:
    data: bytes
    complete: bool
    """False when reading stopped at the hard cap."""
    declared_length: int | None
    """The `Content-Length` the answer declared, read only for a body cut at the cap (how much was left out)."""


@dataclass(slots=True)
class Shaped:
    media_type: str | None
    body: Any
    truncated: bool
    json: bytes | None = None
    """The JSON text `body` was parsed from, when `body` is exactly its parse and the text showed no secret (nothing
    redacted, no escape that could hide one, nothing cut)."""
    whole: Any = None
    """With `truncated` and `read_whole`: what `body` is a cut of (the parse, or the text), redacted."""
    read_whole: bool = False
    """With `truncated`: the body was read to its end (cut for the result only, not where reading stops)."""

    @property
    def excerpt(self) -> str:
        """A short text form of the body, for error messages (worked out only when one is written)."""
        body = self.body
        if body is None:
            return ""
        text = body if isinstance(body, str) else orjson.dumps(body).decode()
        return text[:ERROR_EXCERPT_BYTES]


def hard_cap(max_result_bytes: int) -> int:
    return max(MIN_HARD_CAP, max_result_bytes * HARD_CAP_FACTOR)


async def read_capped(response: Any, cap: int) -> ReadBody:
    """The body up to `cap` bytes (decoded); `response` is an `httpx.Response` or the pyreqwest wire's
    `WireResponse` (which reads it without an async generator: `WireResponse.read_up_to`)."""
    if type(response) is WireResponse:
        data, complete = await response.read_up_to(cap)
    else:
        chunks: list[bytes] = []
        size = 0
        complete = True
        async for chunk in response.aiter_bytes():
            chunks.append(chunk)
            size += len(chunk)
            if size > cap:
                complete = False
                break
        data = b"".join(chunks)[:cap] if not complete else b"".join(chunks)
    # Positional: a dataclass called with keywords gathers them into a dict and unpacks it again for `__init__`.
    if complete:  # read to its end: the body is all there is (the client refuses one shorter than it declared)
        return ReadBody(data, True, None)
    length = response.headers.get("content-length")
    return ReadBody(data, False, int(length) if length and length.isdigit() else None)


def shape(read: ReadBody, content_type: str | None, max_bytes: int, redactor: Redactor) -> Shaped:
    """Parse, redact and cut the body to `max_bytes`."""
    media_type, binary, json_type, charset = _kind_of(content_type)
    data = read.data
    if not data:
        return Shaped(media_type, None, False)
    if binary or (media_type is None and _looks_binary(data)):
        total = _total(read)
        size = f"at least {total}" if not read.complete and total == len(data) else str(total)
        note = f"<binary body: {size} bytes of {media_type or 'unknown type'}, not shown>"
        return Shaped(media_type, note, False)
    text = charset.decode(data, "replace")[0]
    if read.complete and (media_type is None or json_type):
        try:
            parsed = orjson.loads(data)
        except orjson.JSONDecodeError:
            parsed = _NOT_JSON
        if parsed is not _NOT_JSON and too_deep(parsed, data):
            parsed = _NOT_JSON  # read as text: walking a value this deep would pass Python's recursion limit
        if parsed is not _NOT_JSON:
            # Walking every string of a large body is costly; the raw text tells whether any secret is there
            # (unless JSON escapes could hide one: then walk anyway). The text as orjson read it, UTF-8, whatever
            # charset the answer claims: read as `charset=utf-16` an echoed credential showed no secret, unredacted.
            if charset.name != "utf-8":
                text = data.decode("utf-8", "replace")
            walked = "\\" in text or redactor.appears_in(text)
            value = redactor.value(parsed) if walked else parsed
            if len(data) * MAX_JSON_GROWTH <= max_bytes:  # it fits: no second serialization to measure it
                cut, truncated = value, False
            else:
                cut, truncated = shrink_json(value, max_bytes)
            # The api's text stands for the body only when the text itself showed no secret in any form: a walk
            # judges the parse, and a text holds what its parse drops (a repeated key's first value).
            return Shaped(media_type or "application/json", cut, truncated,
                          data if not walked and cut is parsed and not truncated else None,
                          value if truncated else None, truncated)
    text = redactor.text(text)
    total = _total(read)
    omitted_unknown = not read.complete and total == len(data)
    cut_text, truncated = cut_text_at_boundary(text, max_bytes, total, at_least=omitted_unknown)
    if media_type is None or not (media_type.startswith("text/") or media_type in _TEXT_TYPES
                                  or media_type.endswith(("+xml", "+json")) or is_json_type(media_type)):
        media_type = media_type or "text/plain"
    if truncated and read.complete:
        return Shaped(media_type, cut_text, truncated, None, text, True)
    return Shaped(media_type, cut_text, truncated)


def _total(read: ReadBody) -> int:
    """The body's whole length as far as it is known: what was read, or more when the answer declared more."""
    declared = read.declared_length
    return declared if declared and declared > len(read.data) else len(read.data)


_NOT_JSON = object()
_kinds: dict[str | None, tuple[str | None, bool, bool, codecs.CodecInfo]] = {}
_MAX_KINDS = 256
_UTF_8 = codecs.lookup("utf-8")


def _kind_of(content_type: str | None) -> tuple[str | None, bool, bool, codecs.CodecInfo]:
    """(media type, binary, JSON, charset) of an answer's `Content-Type`, worked out once per value (an api
    answers with a handful)."""
    kind = _kinds.get(content_type)
    if kind is None:
        media_type = essence(content_type) if content_type else None
        kind = (media_type, bool(media_type and is_binary_type(media_type)),
                bool(media_type and is_json_type(media_type)), _charset(content_type))
        if len(_kinds) < _MAX_KINDS:  # foreign values cannot grow it without bound
            _kinds[content_type] = kind
    return kind


def _charset(content_type: str | None) -> codecs.CodecInfo:
    """The decoder of the `charset` an answer names, as the WHATWG Encoding Standard reads its label (webencodings:
    what browsers decode), else UTF-8. Not any codec Python has by that name: an upstream's `charset=punycode`
    decoded in quadratic time (400 KB held the event loop 26 s), and `idna` or `undefined` raise whatever the
    error handler (the call failed as the gateway's own error, the answer unread)."""
    if content_type:
        for param in content_type.split(";")[1:]:
            key, _, value = param.partition("=")
            if key.strip().lower() == "charset" and value.strip():
                encoding = webencodings.lookup(value.strip().strip('"'))
                return encoding.codec_info if encoding is not None else _UTF_8
    return _UTF_8


def _looks_binary(data: bytes) -> bool:
    head = data[:1024]
    if b"\x00" in head:
        return True
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as error:
        return error.start < len(head) - 4  # a character cut at the sample's end is not binary
    return False
