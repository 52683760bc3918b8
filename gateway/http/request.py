"""From a tool's binding and the model's arguments to a request: URL, headers, cookies and body.

The host comes only from the api's configured `base_url` or the spec's server (never a link-local address, a
cloud's metadata endpoint, unless `base_url` names it); the path template is the spec's, with every value
percent-encoded. Headers the HTTP layer owns and names the credentials occupy are
never taken from arguments.
"""

from __future__ import annotations

import functools
import ipaddress
import re
import socket
import unicodedata
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, quote, unquote

import httpx

from ..catalog import OWNED_HEADERS, Argument, Tool
from ..config.model import ApiConfig
from ..errors import ApiSetupError, ArgumentError
from .body import build_body
from .serialize import (
    check_header_value,
    encode,
    parameter_identity,
    serialize_cookie,
    serialize_header,
    serialize_path,
    serialize_query,
    to_text,
)

_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_PLACEHOLDER = re.compile(r"\{([^{}]+)\}")
_MAX_ACCEPT_TYPES = 8
_ALTERING = re.compile(r"%(?![0-7][0-9A-Fa-f])|%(?:2[EeFf5]|5[Cc])")
"""A `%` that decoding could turn into a dot, a slash, a backslash, a `%` or non-ASCII text (whose NFKC form may hold
dots: `%EF%BC%8E` is a fullwidth dot), or that starts no escape (a later decoding may read it with what follows)."""


@dataclass(slots=True)
class PreparedRequest:
    method: str
    href: str
    """The absolute URL, percent-encoded, exactly as it goes out (a string: parsing it into an `httpx.URL`
    on every call cost more than building the request)."""
    headers: list[tuple[str, str]] = field(default_factory=list)
    cookies: list[tuple[str, str]] = field(default_factory=list)
    content: bytes | None = None

    @property
    def url(self) -> httpx.URL:
        return httpx.URL(self.href)

    def origin(self) -> tuple[str, str, int | None]:
        return origin_of(self.url)


def origin_of(url: httpx.URL) -> tuple[str, str, int | None]:
    default = {"http": 80, "https": 443}.get(url.scheme)
    return (url.scheme, url.host, url.port or default)


def server_url(tool: Tool, api: ApiConfig) -> httpx.URL:
    """The absolute base URL of this tool's api, or a ApiSetupError saying what to set."""
    return _parse_server(*_server_of(tool, api))


def _server_of(tool: Tool, api: ApiConfig) -> tuple[str, str, str]:
    """(the base URL as written, where it was written, the api's name)."""
    if api.base_url:
        return api.base_url, "base_url", tool.api
    if tool.servers:
        return tool.servers[0].resolved(), f"the server {tool.servers[0].url!r} of {tool.source or tool.api}", tool.api
    raise ApiSetupError(f"api {tool.api!r} declares no server: set apis.{tool.api}.base_url in agents.yaml")


@functools.lru_cache(maxsize=1024)
def _parse_server(raw: str, source: str, api: str) -> httpx.URL:
    # Parsed once per base URL, not on every call (httpx.URL is immutable); errors are not cached.
    if source == "base_url":
        source = f"apis.{api}.base_url"
    if _PLACEHOLDER.search(raw):
        raise ApiSetupError(f"{source} has an unresolved variable: set apis.{api}.base_url in agents.yaml")
    try:
        url = httpx.URL(raw)
    except (httpx.InvalidURL, TypeError, ValueError) as error:
        raise ApiSetupError(f"{source} is not a valid URL ({error})") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise ApiSetupError(
            f"{source} is relative or not http(s) ({raw!r}): set apis.{api}.base_url in agents.yaml"
        )
    if source != f"apis.{api}.base_url" and link_local(url.host):
        raise ApiSetupError(
            f"{source} names a link-local address ({url.host}), where a cloud serves its instances' metadata and "
            f"credentials, not an API: nothing was sent (set apis.{api}.base_url in agents.yaml to send there)")
    return url


def link_local(host: str) -> bool:
    """Whether `host` is a link-local IP address (169.254.0.0/16, fe80::/10) in any form the client's URL parser
    reads as one: `2852039166`, `0xa9fea9fe` and `169.254.43518` are each 169.254.169.254 to it (inet_aton reads
    the same shorthands). A spec downloaded from anywhere names its servers; a name that resolves there is caught
    where it resolves (`gateway.http.resolving`)."""
    host = host.rstrip(".")
    try:
        address: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.ip_address(host)
    except ValueError:
        try:
            address = ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_link_local or address in _METADATA_ADDRESSES


_METADATA_ADDRESSES = frozenset(map(ipaddress.ip_address, ("fd00:ec2::254", "100.100.100.200")))
"""Metadata endpoints outside the link-local ranges: AWS's over IPv6, Alibaba Cloud's."""


def build_request(
    tool: Tool,
    arguments: dict[str, Any],
    api: ApiConfig,
    *,
    reserved: set[tuple[str, str]] = frozenset(),  # type: ignore[assignment]
) -> PreparedRequest:
    """One call's request (`request_plan(...).build(arguments)`)."""
    return request_plan(tool, api, reserved).build(arguments)


class RequestPlan:
    """What of a tool's request is fixed for one api configuration and its credentials, worked out once: the base
    URL's parts, the path template, the api's headers, and the query, header and cookie arguments that can be sent
    at all (not a name the credentials or the api's headers occupy, not a name that is no token). `build` makes one
    call's request from its arguments."""

    __slots__ = ("accept", "base_query", "cookies", "has_body", "headers", "method", "prefix", "query", "spread",
                 "static_headers", "taken", "template", "tool")

    def __init__(self, tool: Tool, api: ApiConfig, reserved: set[tuple[str, str]] | frozenset[tuple[str, str]]) -> None:
        self.tool = tool
        self.prefix, self.base_query = _base_parts(*_server_of(tool, api))
        self.template = template = _template(tool)
        static_headers, taken = _api_headers(tool.api, api)
        self.static_headers = static_headers
        self.method = template.method
        self.accept = ("Accept", template.accept)
        self.has_body = tool.body is not None
        sendable = [(argument, key, plain) for argument, key, can_send, plain in template.parameters
                    if can_send and key not in reserved and not (key[0] == "header" and key[1] in taken)]
        # One list per location, each in the spec's order (the order within a location is what goes out).
        self.query: list[tuple[str, Argument, str | None, bool]] = [
            (argument.name, argument, plain, argument.explode) for argument, key, plain in sendable
            if key[0] == "query"]
        """(argument name, argument, for a plain `form` argument the encoded `name=`, whether it explodes)."""
        self.headers = [(argument.name, argument, not argument.content_type) for argument, key, _ in sendable
                        if key[0] == "header"]
        """(argument name, argument, whether a string value is sent as it is: no `content`)."""
        self.cookies = [(argument.name, argument) for argument, key, _ in sendable if key[0] == "cookie"]
        # An exploded object (`form` + `explode`: a spec's "any query parameters" or "any cookies") sends each of
        # its keys as a name the model chose. Such a key must not name what the credentials, the base URL's query
        # or the tool's other arguments occupy: `?api_key=mine&api_key=<secret>` or a second `tenant=` (a value
        # agents.yaml fixes) is decided by the first one on many upstreams, so the model would pick the identity
        # or the tenant of the call.
        self.spread = frozenset(argument.name for argument, key, _ in sendable
                                if key[0] in ("query", "cookie") and _spreads(argument, key[0]))
        self.taken = {location: frozenset(map(parameter_identity,
            {name for where, name in reserved if where == location}
            | {key[1] for _, key, _, _ in template.parameters if key[0] == location}
            | ({name for name, _ in parse_qsl(self.base_query, keep_blank_values=True)}
               if location == "query" else set())))
            for location in ("query", "cookie")}

    def build(self, arguments: dict[str, Any]) -> PreparedRequest:
        path = _build_path(self.tool, self.template, arguments)
        query: list[str] = []
        headers: list[tuple[str, str]] = []
        cookies: list[tuple[str, str]] = []
        for name, argument, plain, explode in self.query:
            value = arguments.get(name)
            if value is None:
                continue
            if plain is not None:  # a `form` argument without content or allowReserved: its text encoded
                kind = type(value)
                if kind is str or kind is int:  # the usual: one string or integer
                    query.append(plain + encode(value if kind is str else str(value)))
                    continue
                if kind is list:  # an array: `name=a,b` (explode: `name=a&name=b`), as `serialize_query` spells it
                    if explode:
                        query.extend([plain + text for text in map(encode, map(to_text, value))])
                    else:
                        query.append(plain + ",".join(map(encode, map(to_text, value))))
                    continue
            if type(value) is dict and name in self.spread:
                self._check_names(argument, value, "query")
            query.extend(serialize_query(argument, value))
        for name, argument, plain_header in self.headers:
            value = arguments.get(name)
            if value is None:
                continue
            if plain_header and type(value) is str:  # the usual: a string, checked and sent as it is
                check_header_value(argument.name, value)
                headers.append((argument.wire_name, value))
            else:
                headers.append((argument.wire_name, serialize_header(argument, value)))
        for name, argument in self.cookies:
            value = arguments.get(name)
            if value is not None:
                if type(value) is dict and name in self.spread:
                    self._check_names(argument, value, "cookie")
                cookies.extend(serialize_cookie(argument, value))
        href = _join(self.prefix, self.base_query, path, query)
        headers.extend(self.static_headers)
        content = None
        if self.has_body:
            body = build_body(self.tool, arguments)
            if body is not None:
                headers.append(("Content-Type", body.content_type))
                content = body.content
        headers.append(self.accept)
        # Positional: a dataclass called with keywords gathers them into a dict and unpacks it again for `__init__`.
        return PreparedRequest(self.method, href, headers, cookies, content)

    def _check_names(self, argument: Argument, value: dict[str, Any], location: str) -> None:
        taken = self.taken[location]
        own = parameter_identity(argument.wire_name)  # not sent: its keys stand in its place
        for key in value:
            if (identity := parameter_identity(str(key))) in taken and identity != own:
                raise ArgumentError(f"{argument.name}: the key {key!r} names a {location} parameter this call sets "
                                    "otherwise (another argument or the API's credentials); leave it out")
            # A cookie's name goes out as written (`name=value; ...`): `;`, `=` or a line break in it would add
            # cookies of the model's choosing or break the header.
            if location == "cookie" and not _TOKEN.match(str(key)):
                raise ArgumentError(f"{argument.name}: the key {key!r} is not a cookie name (letters, digits and "
                                    "!#$%&'*+.^_`|~- only)")


def _spreads(argument: Argument, location: str) -> bool:
    """Whether an object value of `argument` is sent as one parameter per key (`serialize_query`/`_cookie`).

    Not only `form`: `serialize_query` spreads an exploded object under every style but `deepObject` (a spec's
    `pipeDelimited` + `explode: true` too), and `serialize_cookie` whatever the style says (a spec's `simple`),
    so judging by `form` alone let those keys name the credentials' parameter or carry `; name=` (redteam45)."""
    if argument.content_type or not argument.explode:
        return False
    return location == "cookie" or argument.style != "deepObject"


def request_plan(tool: Tool, api: ApiConfig,
                 reserved: set[tuple[str, str]] | frozenset[tuple[str, str]] = frozenset()) -> RequestPlan:
    """The tool's `RequestPlan` for `api` (an `ApiSetupError` for an api with no usable server or a bad
    configured header: never remembered, so every call says it until the configuration is fixed)."""
    return RequestPlan(tool, api, reserved)


_api_header_cache: dict[int, tuple[ApiConfig, tuple[tuple[str, str], ...], frozenset[str]]] = {}


def _api_headers(api_name: str, api: ApiConfig) -> tuple[tuple[tuple[str, str], ...], frozenset[str]]:
    """The api's configured headers, checked, and the lower-case header names no argument may set (those the HTTP
    layer owns and the configured ones): once per api configuration, not on every call. A bad value is an error
    on every call (never remembered)."""
    entry = _api_header_cache.get(id(api))
    if entry is not None and entry[0] is api:  # keyed by identity; the config is kept so an id is never reused
        return entry[1], entry[2]
    for name, value in api.headers.items():
        check_header_value(f"apis.{api_name}.headers.{name}", value)
    headers = tuple(api.headers.items())
    taken = OWNED_HEADERS | {name.lower() for name in api.headers}
    if len(_api_header_cache) >= _TEMPLATE_CACHE_SIZE:
        _api_header_cache.pop(next(iter(_api_header_cache)))
    _api_header_cache[id(api)] = (api, headers, taken)
    return headers, taken


def accept_header(media_types: tuple[str, ...]) -> str:
    seen: list[str] = []
    for media_type in media_types:
        kind = media_type.split(";", 1)[0].strip()
        if kind and kind not in seen and _TOKEN.match(kind.replace("/", "")):
            seen.append(kind)
    if not seen:
        return "application/json, */*;q=0.5"
    return ", ".join(seen[:_MAX_ACCEPT_TYPES])


@dataclass(slots=True)
class _Template:
    """What of a tool's request never changes from call to call, worked out on its first call."""

    method: str
    path: list[tuple[str, Argument | None, str, bool]]
    """The path template: (the literal before a placeholder, percent-encoded; its argument; its wire name; whether
    the argument is a plain `simple` one, whose string or integer value is just percent-encoded)."""
    tail: str
    """The literal after the last placeholder, percent-encoded."""
    parameters: list[tuple[Argument, tuple[str, str], bool, str | None]]
    """Query, header and cookie arguments: (argument, (location, lower-case wire name), can be sent at all, and
    for a plain `form` query argument the encoded `name=` its string or integer value follows)."""
    accept: str


_templates: dict[int, tuple[Tool, _Template]] = {}
_TEMPLATE_CACHE_SIZE = 8192


def _template(tool: Tool) -> _Template:
    entry = _templates.get(id(tool))
    if entry is not None and entry[0] is tool:  # keyed by identity; the tool is kept so an id is never reused
        return entry[1]
    by_wire = {a.wire_name: a for a in tool.arguments if a.location == "path"}
    pieces: list[tuple[str, Argument | None, str, bool]] = []
    last = 0
    for match in _PLACEHOLDER.finditer(tool.path):
        wire = match.group(1)
        argument = by_wire.get(wire)
        plain = argument is not None and not argument.content_type and (argument.style or "simple") == "simple"
        pieces.append((_quote_literal(tool.path[last : match.start()]), argument, wire, plain))
        last = match.end()
    parameters: list[tuple[Argument, tuple[str, str], bool, str | None]] = [
        # A header or cookie name that isn't a token (a broken spec: a parameter named "") can't be sent at all.
        (a, (a.location, a.wire_name.lower()), a.location == "query" or bool(_TOKEN.match(a.wire_name)),
         encode(a.wire_name) + "=" if a.location == "query" and not a.content_type and not a.allow_reserved
         and (a.style or "form") == "form" else None)
        for a in tool.arguments if a.location in ("query", "header", "cookie")
    ]
    template = _Template(method=tool.method.upper(), path=pieces, tail=_quote_literal(tool.path[last:]),
                         parameters=parameters, accept=accept_header(tool.response_media_types))
    if len(_templates) >= _TEMPLATE_CACHE_SIZE:
        _templates.pop(next(iter(_templates)))
    _templates[id(tool)] = (tool, template)
    return template


def _build_path(tool: Tool, template: _Template, arguments: dict[str, Any]) -> str:
    pieces: list[str] = []
    for literal, argument, wire, plain in template.path:
        if argument is None:
            raise ApiSetupError(f"{tool.name}: the path parameter {{{wire}}} has no argument")
        value = arguments.get(argument.name)
        if value is None:
            raise ArgumentError(f"{argument.name}: required path parameter is missing")
        pieces.append(literal)
        kind = type(value)
        if plain and (kind is str and value or kind is int):  # the usual: a non-empty string or an integer
            pieces.append(encode(value if kind is str else str(value)))
        else:
            pieces.append(serialize_path(argument, value))
    pieces.append(template.tail)
    path = "".join(pieces)
    if not path.startswith("/"):
        path = "/" + path
    # Encoded values can't hold `/`, but `.` is unreserved: a value that forms a whole `.` or `..`
    # segment would walk to another endpoint with the gateway's credentials. Nor may one hold such a segment
    # between its own slashes: many upstreams decode `%2F` (or take `\` as `/`) before they resolve the path (a
    # proxy that normalizes it, Python's file server), so `../private/x` read a file outside `/files/` (redteam45).
    # A value's `/` and `\` always go out escaped: a path without a `%` has nothing to decode.
    # A value's non-ASCII text is read as servers that fold compatibility characters read it (NFKC, or Windows'
    # best-fit mapping): `．．` (fullwidth) and `‥` (a two-dot leader) are `..` to them (redteam47).
    # Decoded as often as a proxy and the server behind it may decode it (`%252e%252e` is `..` after two).
    # The usual path (`hello%20world`) decodes to nothing that could change its segments: when every `%` in it
    # starts an escape of an ASCII character other than `.`, `/`, `\` and `%` (`_ALTERING`), decoding leaves each
    # segment a dot segment exactly when it is one as written, and leaves no `%` for a second decoding.
    decoded = path
    if not path.isascii() or "\\" in path or _ALTERING.search(path) is not None:
        for _ in range(3):
            if "%" not in decoded:
                break
            decoded = unquote(decoded).replace("\\", "/")
        if not decoded.isascii():
            decoded = unicodedata.normalize("NFKC", decoded)
    if "." in decoded and any(segment in (".", "..") for segment in decoded.split("/")):
        raise ArgumentError(f"{tool.name}: path parameters can't be '.' or '..', nor hold a '.' or '..' segment "
                            "between slashes")
    return path


def _quote_literal(text: str) -> str:
    # The template's own characters: keep what a path may hold (and existing escapes), encode the rest.
    return quote(text, safe="/:@!$&'()*+,;=%-._~")


@functools.lru_cache(maxsize=1024)
def _base_parts(raw: str, source: str, api: str) -> tuple[str, str]:
    """`scheme://authority/base/path` (no trailing slash, no query) and the base's own encoded query, once per
    base URL (keyed by its text: hashing an `httpx.URL` renders it again on every call)."""
    base = _parse_server(raw, source, api)
    path = base.raw_path.decode("ascii").split("?", 1)[0].rstrip("/")
    host = base.raw_host.decode("ascii")
    authority = (f"[{host}]" if ":" in host else host) + (f":{base.port}" if base.port is not None else "")
    if base.userinfo:
        authority = base.userinfo.decode("ascii") + "@" + authority
    return f"{base.scheme}://{authority}{path}", base.query.decode("ascii")


def _join(prefix: str, base_query: str, path: str, query: list[str]) -> str:
    # Plain concatenation, never urljoin: `//evil.example/x` must stay a path on our host. The host can't
    # change: `path` starts with `/` and every value in it and in the query is percent-encoded (no `?`, `#`).
    if base_query:  # rare: a base URL with a query of its own, which goes first
        query = [base_query, *query]
    return f"{prefix}{path}?{'&'.join(query)}" if query else prefix + path
