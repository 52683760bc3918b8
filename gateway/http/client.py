"""Sending: one pooled wire per api, retries for idempotent methods, and our own redirect policy.

The wire is an api's pooled pyreqwest client (`gateway.http.wire.ReqwestWire`, the default) or an httpx
client (`HttpxWire`: an injected httpx transport, as tests use); both answer a response with httpx's attribute
names, so everything here and in `gateway.http.reading` reads either.

httpx strips only `Authorization` on a cross-host redirect (and reqwest a few more), so redirects are never
followed by the library: a redirect to the api's own origin is followed here (a few times at most), one to
any other origin is refused.
Retries (connect errors, 429, 502, 503, 504) are for GET, HEAD, OPTIONS, PUT and DELETE only, with jittered
exponential backoff that honours `Retry-After`, never past the call's deadline, and only while the api's
retry budget lasts (`gateway.http.budget`). POST and PATCH are sent once.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Any, Protocol
from urllib.parse import quote

import httpx

from .auth import Credentials
from .budget import RetryBudget
from .library import CONNECT_TIMEOUT, IDEMPOTENT, USER_AGENT, ClientOptions
from .request import PreparedRequest, origin_of
from .transport import DEFAULT_MAX_BODY, CappedTransport

RETRY_STATUSES = frozenset({429, 502, 503, 504})
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
MAX_RETRIES = 2
MAX_REDIRECTS = 5
BACKOFF_BASE = 0.25
BACKOFF_CAP = 8.0


class RedirectRefused(Exception):
    def __init__(self, location: str) -> None:
        super().__init__(location)
        self.location = location


class TooManyRedirects(Exception):
    pass


class DeadlineExceeded(Exception):
    pass


class Wire(Protocol):
    """Moves one request: `url` percent-encoded, `timeout` seconds per phase; the answer's body unread."""

    async def send(self, method: str, url: str, headers: list[tuple[str, str]], content: bytes | None,
                   timeout: float) -> Any: ...


class HttpxWire:
    """A wire over an httpx client (an injected transport: in-process upstreams, tests)."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    async def send(self, method: str, url: str, headers: list[tuple[str, str]], content: bytes | None,
                   timeout: float) -> httpx.Response:
        request = self.client.build_request(method, url, headers=headers, content=content,
                                            timeout=httpx.Timeout(timeout, connect=min(CONNECT_TIMEOUT, timeout)))
        return await self.client.send(request, stream=True)


def new_client(transport: httpx.AsyncBaseTransport | None = None, *, options: ClientOptions | None = None,
               max_body: int = DEFAULT_MAX_BODY) -> httpx.AsyncClient:
    """A pooled httpx client on `CappedTransport` (pyreqwest underneath unless `transport` is given) that
    follows no redirects and keeps no cookies between calls (no state leaks from one agent's call to another's).

    `trust_env=False`: proxies from the environment are reqwest's to apply, inside the transport.
    """
    jar = CookieJar(policy=DefaultCookiePolicy(blocked_domains=[], allowed_domains=[]))
    return httpx.AsyncClient(
        transport=CappedTransport(transport, options=options, max_body=max_body),
        follow_redirects=False,
        cookies=jar,
        trust_env=False,
        headers={"User-Agent": USER_AGENT},
    )


@dataclass(slots=True)
class Attempts:
    """How the send went: how many redirects it followed (a send follows at most `MAX_REDIRECTS`), and why each
    request before the last was sent again (`no connection`, `HTTP 503`): an upstream that saw the call twice."""

    redirects: int = 0
    resent: list[str] = field(default_factory=list)


CredentialsFactory = Callable[[], Awaitable[Credentials]]


async def send(
    wire: Wire,
    prepared: PreparedRequest,
    credentials: CredentialsFactory | Credentials,
    *,
    deadline: float,
    attempts: Attempts | None = None,
    budget: RetryBudget | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> Any:
    """Send `prepared` and return the (streamed, unread) response; the caller closes it.

    `deadline` is a `time.monotonic()` instant covering every retry and redirect; `budget` (the api's)
    must have a retry left for each retry. `credentials`: asked before each attempt, or the same for all of them.
    """
    attempts = attempts if attempts is not None else Attempts()
    if budget is not None:
        budget.record_call()
    method = prepared.method
    url = prepared.href
    content = prepared.content
    headers = prepared.headers
    retries = 0
    while True:
        # Credentials go with every attempt: the URL is the api's origin (a redirect elsewhere is refused).
        creds = credentials if isinstance(credentials, Credentials) else await credentials()
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise DeadlineExceeded()
        target, all_headers = _with_credentials(url, headers, prepared.cookies, creds)
        try:
            response = await wire.send(method, target, all_headers, content, remaining)
        except (httpx.ConnectError, httpx.ConnectTimeout):
            # The request never left: safe to retry, but only idempotent methods are retried at all.
            if method in IDEMPOTENT and retries < MAX_RETRIES:
                delay = _backoff(retries)
                if time.monotonic() + delay < deadline and (budget is None or budget.try_retry()):
                    retries += 1
                    attempts.resent.append("no connection")
                    await sleep(delay)
                    continue
            raise
        status = response.status_code
        if status in RETRY_STATUSES and method in IDEMPOTENT and retries < MAX_RETRIES:
            after = _retry_after(response)
            delay = _backoff(retries) if after is None else after
            if time.monotonic() + delay < deadline and (budget is None or budget.try_retry()):
                await response.aclose()
                retries += 1
                attempts.resent.append(f"HTTP {status}")
                await sleep(delay)
                continue
            return response
        location = response.headers.get("location") if status in REDIRECT_STATUSES else None
        if location:
            target_url = httpx.URL(url).join(location)
            await response.aclose()
            if origin_of(target_url) != prepared.origin():
                raise RedirectRefused(str(target_url.copy_with(query=None, fragment=None)))
            if attempts.redirects >= MAX_REDIRECTS:
                raise TooManyRedirects(url)
            attempts.redirects += 1
            if status == 303 or (status in (301, 302) and method == "POST"):
                method, content = ("GET" if method != "HEAD" else "HEAD"), None
                headers = [(k, v) for k, v in headers if k.lower() != "content-type"]
            url = str(target_url)
            continue
        return response


def _with_credentials(url: str, headers: list[tuple[str, str]], cookies: list[tuple[str, str]],
                      creds: Credentials) -> tuple[str, list[tuple[str, str]]]:
    if creds.query:
        extra = "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in creds.query)
        url += ("&" if "?" in url else "?") + extra
    all_headers = [*headers, *creds.headers.items()]
    if cookies or creds.cookies:  # most calls send none: no list of them made
        all_headers.append(("Cookie", "; ".join(f"{k}={v}" for k, v in (*cookies, *creds.cookies))))
    return url, all_headers


def _backoff(retries: int) -> float:
    # Full jitter: spreads retries of many callers instead of synchronising them.
    return random.uniform(0, min(BACKOFF_CAP, BACKOFF_BASE * 2**retries))


def _retry_after(response: Any) -> float | None:
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
