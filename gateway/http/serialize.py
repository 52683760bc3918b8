"""Parameter serialization: OpenAPI `style`/`explode`/`allowReserved` for path, query, header and cookie.

Every value is percent-encoded for its location, so a path value can never add a segment, a query or a
fragment, and a query value can never add a parameter. `0`, `false` and `""` are values like any other.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import quote

from ..catalog import Argument
from ..errors import ArgumentError

# allowReserved keeps RFC 3986 reserved characters literal, except the four that would change the
# query's structure or meaning: `&` (a new parameter), `#` (a fragment), `+` (a space to form decoders) and `;`,
# a parameter separator to many servers (Python before 3.9.2, Go before 1.17, Rack 2): `q=x;api_key=mine` was a
# parameter of the model's choosing there, ahead of the credentials' own (redteam45).
_RESERVED_SAFE = ":/?[]@!$'()*,="
# RFC 6265 cookie-octet minus `%` (kept for our own escapes).
_COOKIE_SAFE = "!#$&'()*+-./:<=>?@[]^_`{|}~"
# The characters `quote` never escapes: a text made only of them (most names, ids and numbers) is its own encoding.
_UNRESERVED = re.compile(r"[A-Za-z0-9_.~-]*").fullmatch
# `quote`'s spelling of every ASCII character, for `str.translate`: an ASCII text is encoded in C, where `quote` steps
# through a Python list comprehension per byte once a text holds one character to escape. A table with an entry for
# each of the 128 (the character itself where it is kept), not a dict of the escapes alone: `translate` looks up each
# character of the text once it met the first escape, and a lookup that misses makes and drops a KeyError.
_ESCAPES = tuple(chr(c) if _UNRESERVED(chr(c)) is not None else f"%{c:02X}" for c in range(128))
_ESCAPES_RESERVED = tuple(chr(c) if chr(c) in _RESERVED_SAFE else escape for c, escape in enumerate(_ESCAPES))


def to_text(value: Any) -> str:
    """A primitive as its wire text: JSON spelling for booleans and numbers, `""` for null."""
    if type(value) is str:  # the usual value, asked first
        return value
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if type(value) is int:
        return str(value)  # json.dumps' spelling, without its encoder
    if isinstance(value, (int, float)):
        return json.dumps(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def encode(text: str, *, allow_reserved: bool = False) -> str:
    """`quote(text, safe="")` (with `allow_reserved`, `safe=_RESERVED_SAFE`): UTF-8, upper-case escapes."""
    if _UNRESERVED(text) is not None:
        return text
    if text.isascii():
        return text.translate(_ESCAPES_RESERVED if allow_reserved else _ESCAPES)
    return quote(text, safe=_RESERVED_SAFE if allow_reserved else "")


def encode_content(value: Any, media_type: str) -> str:
    """A parameter declared with `content`: the value in that media type (JSON unless it is plain text)."""
    if isinstance(value, str) and not _is_json(media_type):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _is_json(media_type: str) -> bool:
    essence = media_type.split(";", 1)[0].strip().lower()
    return "json" in essence.rsplit("/", 1)[-1] or essence == "*/*"


_MANGLED = str.maketrans({".": "_", " ": "_", "[": "_"})


def parameter_identity(name: str) -> str:
    """The name a parameter is known by upstream, to tell whether two names are one: case aside, and with `.`, ` `
    and `[` read as `_`, as PHP reads query, form and cookie names (`tenant.id` is `$_GET['tenant_id']`), where
    the later of two wins (redteam45)."""
    return name.lower().translate(_MANGLED)


def _pairs(value: dict[str, Any]) -> list[tuple[str, str]]:
    return [(str(k), to_text(v)) for k, v in value.items() if v is not None]


# -- path ---------------------------------------------------------------------------------------------


def serialize_path(argument: Argument, value: Any) -> str:
    """The encoded text that replaces `{name}` in the path template."""
    if argument.content_type:
        return _path_segment(encode_content(value, argument.content_type), argument.name)
    style = argument.style or "simple"
    explode = argument.explode
    enc = encode
    if style == "simple":
        text = _simple(value, explode, enc)
        return _path_segment(text, argument.name, raw=True)
    if style == "label":
        if isinstance(value, list):
            return "." + ("." if explode else ",").join(enc(to_text(v)) for v in value)
        if isinstance(value, dict):
            if explode:
                return "." + ".".join(f"{enc(k)}={enc(v)}" for k, v in _pairs(value))
            return "." + ",".join(f"{enc(k)},{enc(v)}" for k, v in _pairs(value))
        return "." + enc(to_text(value))
    if style == "matrix":
        name = encode(argument.wire_name)
        if isinstance(value, list):
            if explode:
                return "".join(f";{name}={enc(to_text(v))}" for v in value)
            return f";{name}=" + ",".join(enc(to_text(v)) for v in value)
        if isinstance(value, dict):
            if explode:
                return "".join(f";{enc(k)}={enc(v)}" for k, v in _pairs(value))
            return f";{name}=" + ",".join(f"{enc(k)},{enc(v)}" for k, v in _pairs(value))
        text = to_text(value)
        return f";{name}" if text == "" else f";{name}={enc(text)}"
    raise ArgumentError(f"{argument.name}: path style {style!r} is not supported")


def _path_segment(text: str, label: str, *, raw: bool = False) -> str:
    encoded = text if raw else encode(text)
    # An empty value would address another resource (`/items/` instead of `/items/{id}`); dot segments
    # (`/items/..`) are refused on the whole path by `gateway.http.request`.
    if encoded == "":
        raise ArgumentError(f"{label}: a path parameter can't be empty")
    return encoded


def _simple(value: Any, explode: bool, enc: Any) -> str:
    if isinstance(value, list):
        return ",".join(enc(to_text(v)) for v in value)
    if isinstance(value, dict):
        if explode:
            return ",".join(f"{enc(k)}={enc(v)}" for k, v in _pairs(value))
        return ",".join(f"{enc(k)},{enc(v)}" for k, v in _pairs(value))
    return str(enc(to_text(value)))


# -- query --------------------------------------------------------------------------------------------


def serialize_query(argument: Argument, value: Any) -> list[str]:
    """Encoded `name=value` items to join with `&`."""
    reserved = argument.allow_reserved
    name = _encoded_name(argument.wire_name)
    if not argument.content_type and argument.style != "deepObject" and not isinstance(value, (list, dict)):
        return [f"{name}={encode(to_text(value), allow_reserved=reserved)}"]  # the usual: one value, form style

    def enc(text: str) -> str:
        return encode(text, allow_reserved=reserved)

    if argument.content_type:
        return [f"{name}={enc(encode_content(value, argument.content_type))}"]
    style = argument.style or "form"
    explode = argument.explode
    if style == "deepObject":
        # OpenAPI defines deepObject for objects only; arrays get the bracket-index form most servers
        # that use deepObject (Stripe, Rails, PHP) read: `expand[0]=a&expand[1]=b`.
        if not isinstance(value, (dict, list)):
            return [f"{name}={enc(to_text(value))}"]
        return [f"{encode(key)}={enc(text)}" for key, text in _deep_items(argument.wire_name, value)]
    if isinstance(value, list):
        if explode:
            return [f"{name}={enc(to_text(v))}" for v in value]
        separator = {"spaceDelimited": "%20", "pipeDelimited": "|"}.get(style, ",")
        return [f"{name}=" + separator.join(enc(to_text(v)) for v in value)]
    if isinstance(value, dict):
        if explode:
            return [f"{encode(k)}={enc(v)}" for k, v in _pairs(value)]
        separator = {"spaceDelimited": "%20", "pipeDelimited": "|"}.get(style, ",")
        return [f"{name}=" + separator.join(f"{enc(k)}{separator}{enc(v)}" for k, v in _pairs(value))]
    return [f"{name}={enc(to_text(value))}"]


_names: dict[str, str] = {}


def _encoded_name(name: str) -> str:
    """A parameter's name from the spec, encoded once (the names are the catalog's: a bounded set)."""
    encoded = _names.get(name)
    if encoded is None:
        encoded = _names[name] = encode(name)
    return encoded


def _deep_items(prefix: str, value: Any) -> list[tuple[str, str]]:
    """`filter[status]=open`, nesting further for nested objects and `[0]` indexes for arrays inside."""
    if isinstance(value, dict):
        items: list[tuple[str, str]] = []
        for key, inner in value.items():
            if inner is not None:
                items.extend(_deep_items(f"{prefix}[{key}]", inner))
        return items
    if isinstance(value, list):
        items = []
        for index, inner in enumerate(value):
            items.extend(_deep_items(f"{prefix}[{index}]", inner))
        return items
    return [(prefix, to_text(value))]


_CONTROLS = re.compile(r"[\x01-\x08\x0b\x0c\x0e-\x1f\x7f]")


# -- header and cookie --------------------------------------------------------------------------------


def serialize_header(argument: Argument, value: Any) -> str:
    if argument.content_type:
        text = encode_content(value, argument.content_type)
    else:
        text = _simple(value, argument.explode, lambda t: t)
    check_header_value(argument.name, text)
    return text


def check_header_value(label: str, text: str) -> None:
    if "\r" in text or "\n" in text or "\x00" in text:
        raise ArgumentError(f"{label}: header values can't contain CR, LF or NUL characters")
    if not text.isascii():
        raise ArgumentError(f"{label}: header values must be ASCII text")
    # The other controls (RFC 9110 allows only tab): the library refuses them at sending, as a transport error,
    # which the breaker counts against the api; here they are the caller's invalid argument (redteam45).
    if not text.isprintable() and _CONTROLS.search(text):
        raise ArgumentError(f"{label}: header values can't contain control characters")


def serialize_cookie(argument: Argument, value: Any) -> list[tuple[str, str]]:
    """(name, encoded value) pairs for the Cookie header."""

    def enc(text: str) -> str:
        return quote(text, safe=_COOKIE_SAFE)

    name = argument.wire_name
    if argument.content_type:
        return [(name, enc(encode_content(value, argument.content_type)))]
    if isinstance(value, list):
        if argument.explode:
            return [(name, enc(to_text(v))) for v in value]
        return [(name, ",".join(enc(to_text(v)) for v in value))]
    if isinstance(value, dict):
        if argument.explode:
            return [(k, enc(v)) for k, v in _pairs(value)]
        return [(name, ",".join(f"{enc(k)},{enc(v)}" for k, v in _pairs(value)))]
    return [(name, enc(to_text(value)))]
