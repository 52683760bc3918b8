"""Sending: one pooled httpx client per api, retries for idempotent methods, and our own redirect policy.

httpx strips only `Authorization` on a cross-host redirect, so redirects are never followed by httpx: a
redirect to the api's own origin is followed here (a few times at most), one to any other origin is refused.
Retries (connect errors, 429, 502, 503, 504) are for GET, HEAD, OPTIONS, PUT and DELETE only, with jittered
exponential backoff that honours `Retry-After`, and never past the call's deadline. POST and PATCH are sent
once.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http.cookiejar import CookieJar, DefaultCookiePolicy
from urllib.parse import quote

import httpx

from .aio import AiohttpTransport
from .auth import Credentials
from .request import PreparedRequest, origin_of

IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
RETRY_STATUSES = frozenset({429, 502, 503, 504})
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
MAX_RETRIES = 2
MAX_REDIRECTS = 5
BACKOFF_BASE = 0.25
BACKOFF_CAP = 8.0
CONNECT_TIMEOUT = 10.0


class RedirectRefused(Exception):
    def __init__(self, location: str) -> None:
        super().__init__(location)
        self.location = location


class TooManyRedirects(Exception):
    pass


class DeadlineExceeded(Exception):
    pass


def new_client(transport: httpx.AsyncBaseTransport | None = None, *, max_connections: int = 20) -> httpx.AsyncClient:
    """A pooled client that follows no redirects and keeps no cookies between calls (no state leaks
    from one agent's call to another's)."""
    jar = CookieJar(policy=DefaultCookiePolicy(blocked_domains=[], allowed_domains=[]))
    limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
    if transport is None:  # aiohttp underneath: a fifth of httpcore's CPU per call (gateway.http.aio)
        transport = AiohttpTransport(max_connections=max_connections)
    client = httpx.AsyncClient(
        transport=transport,
        follow_redirects=False,
        cookies=jar,
        trust_env=False,
        limits=limits,
        headers={"User-Agent": "gateway/0.1"},
    )
    if isinstance(getattr(client, "_cookies", None), httpx.Cookies):
        # The jar above refuses every cookie anyway; not even looking saves httpx's per-response
        # urllib round trip (a tenth of a proxied call's client time).
        client._cookies = _NoCookies()
    return client


class _NoCookies(httpx.Cookies):
    """A cookie store that never stores: nothing leaks from one call into another."""

    def extract_cookies(self, response: httpx.Response) -> None:
        return None


@dataclass(slots=True)
class Attempts:
    """How the send went: how many times the request went out, for results and tests."""

    sent: int = 0
    redirects: int = 0


CredentialsFactory = Callable[[], Awaitable[Credentials]]


async def send(
    client: httpx.AsyncClient,
    prepared: PreparedRequest,
    credentials: CredentialsFactory,
    *,
    deadline: float,
    attempts: Attempts | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> httpx.Response:
    """Send `prepared` and return the (streamed, unread) response; the caller closes it.

    `deadline` is a `time.monotonic()` instant covering every retry and redirect.
    """
    attempts = attempts if attempts is not None else Attempts()
    home = prepared.origin()
    method = prepared.method
    url = prepared.url
    content = prepared.content
    headers = list(prepared.headers)
    retries = 0
    while True:
        creds = await credentials() if origin_of(url) == home else Credentials()
        request = _build(client, method, url, headers, prepared.cookies, content, creds, deadline)
        try:
            attempts.sent += 1
            response = await client.send(request, stream=True)
        except (httpx.ConnectError, httpx.ConnectTimeout):
            # The request never left: safe to retry, but only idempotent methods are retried at all.
            if method in IDEMPOTENT and retries < MAX_RETRIES:
                delay = _backoff(retries)
                if time.monotonic() + delay < deadline:
                    retries += 1
                    await sleep(delay)
                    continue
            raise
        status = response.status_code
        if status in RETRY_STATUSES and method in IDEMPOTENT and retries < MAX_RETRIES:
            delay = _retry_after(response)
            delay = _backoff(retries) if delay is None else delay
            if time.monotonic() + delay < deadline:
                await response.aclose()
                retries += 1
                await sleep(delay)
                continue
            return response
        location = response.headers.get("location")
        if status in REDIRECT_STATUSES and location:
            target = url.join(location)
            await response.aclose()
            if origin_of(target) != home:
                raise RedirectRefused(str(target.copy_with(query=None, fragment=None)))
            if attempts.redirects >= MAX_REDIRECTS:
                raise TooManyRedirects(str(url))
            attempts.redirects += 1
            if status == 303 or (status in (301, 302) and method == "POST"):
                method, content = ("GET" if method != "HEAD" else "HEAD"), None
                headers = [(k, v) for k, v in headers if k.lower() != "content-type"]
            url = target
            continue
        return response


def _build(
    client: httpx.AsyncClient,
    method: str,
    url: httpx.URL,
    headers: list[tuple[str, str]],
    cookies: list[tuple[str, str]],
    content: bytes | None,
    creds: Credentials,
    deadline: float,
) -> httpx.Request:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise DeadlineExceeded()
    if creds.query:
        url = _append_query(url, creds.query)
    all_headers = list(headers) + list(creds.headers.items())
    cookie_pairs = list(cookies) + list(creds.cookies)
    if cookie_pairs:
        all_headers.append(("Cookie", "; ".join(f"{k}={v}" for k, v in cookie_pairs)))
    timeout = httpx.Timeout(remaining, connect=min(CONNECT_TIMEOUT, remaining))
    return client.build_request(method, url, headers=all_headers, content=content, timeout=timeout)


def _append_query(url: httpx.URL, items: list[tuple[str, str]]) -> httpx.URL:
    extra = "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in items)
    raw = url.raw_path.decode("ascii")
    raw += ("&" if "?" in raw else "?") + extra
    return url.copy_with(raw_path=raw.encode("ascii"))


def _backoff(retries: int) -> float:
    # Full jitter: spreads retries of many callers instead of synchronising them.
    return random.uniform(0, min(BACKOFF_CAP, BACKOFF_BASE * 2**retries))


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time())
