"""Errors of the HTTP doors, always in OpenAI's shape: `{"error": {"message", "type", "code"}}`.

Routes raise `APIError(status, message, ...)`; the handlers installed by `install_error_handlers` turn
it (and Starlette's own HTTP errors, and anything unexpected) into that shape with the right status,
so no client ever sees an HTML page or a traceback. `status_for_result` maps a `ToolResult`'s
`error_type` to the status of a direct tool call, `api_error_from` maps the loop's exceptions.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from typing import Any

import orjson
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse

from ..errors import AuditUnavailable, ConfigError, ProviderError, RunError, StoreUnavailable
from ..kernel.caller import current_caller
from ..messages import NOT_SENT, ToolResult

logger = logging.getLogger("gateway.server")


def json_bytes(content: Any) -> bytes:
    """The body Starlette's JSONResponse renders, made by orjson (the same compact UTF-8 JSON, faster).
    What orjson refuses (non-string keys, integers past 64 bits, lone surrogates) goes through json.dumps."""
    try:
        return orjson.dumps(content)
    except TypeError:
        pass
    text = json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (sent as a JSON escape): escaped again, the answer stays JSON
        return json.dumps(content, allow_nan=False, separators=(",", ":")).encode("ascii")


class FastJSONResponse(JSONResponse):
    """Starlette's JSONResponse rendered by `json_bytes`."""

    def render(self, content: Any) -> bytes:
        return json_bytes(content)

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    502: "upstream_error",
    503: "server_error",
    504: "timeout_error",
}

_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "request_too_large",
    415: "unsupported_media_type",
    422: "invalid_arguments",
    429: "rate_limited",
    500: "internal_error",
    502: "upstream_error",
    503: "unavailable",
    504: "deadline_exceeded",
}

# A tool call that failed: which status the direct-call door answers with (the ToolResult rides along).
_RESULT_STATUS = {
    "invalid_arguments": 422,
    "unknown_tool": 404,
    "upstream_error": 502,
    "invalid_output": 502,
    "transport_error": 502,
    "timeout": 504,
    "approval_pending": 202,
    "approval_denied": 403,
    "configuration_error": 502,
    "rate_limited": 429,
    "delegate_error": 502,
    "truncated_turn": 502,
    "hook_denied": 403,
    "credential_in_arguments": 403,
    "user_required": 403,
    "insufficient_scope": 403,
    "not_connected": 403,
    "auth_unavailable": 503,
    "store_unavailable": 503,
    "circuit_open": 503,
}


class APIError(Exception):
    """An error answer: status, a message written for the caller, and optional extra top-level fields."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str | None = None,
        code: str | None = None,
        param: str | None = None,
        extra: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type or _TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
        self.code = code or _CODES.get(status, "error")
        self.param = param
        self.extra = extra or {}
        self.headers = headers

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"message": self.message, "type": self.type, "code": self.code}
        if self.param is not None:
            error["param"] = self.param
        return {"error": error, **self.extra}

    def response(self) -> JSONResponse:
        return FastJSONResponse(self.body(), status_code=self.status, headers=self.headers)


def status_for_result(result: ToolResult) -> int:
    if result.ok:
        return 200
    return _RESULT_STATUS.get(result.error_type or "", 502)


def api_error_from(exc: Exception, redact: Callable[[str], str] | None = None) -> APIError:
    """The answer for an exception out of a chat run (provider down, deadline, bad manifest, ...).

    `redact` scrubs the manifest's secrets from the message: a provider's error text may quote the key it was
    sent (some OpenAI-compatible servers do)."""
    error = _api_error_from(exc)
    sent = sent_steps(getattr(exc, "steps", None) or [])
    if sent and "gateway" not in error.extra:
        # Tools ran before the failure: the answer lists every step and says so, so a client's retry of the whole
        # request does not repeat a write blindly.
        names = ", ".join(sorted({step.tool for step in sent}))
        ended = "" if error.message.rstrip().endswith((".", "!", "?")) else "."  # two sentences, not one run-on
        error.message = error.message.rstrip() + ended + (
            f" Before this, {len(sent)} tool call(s) were sent ({names}) and may have run upstream: "
            "check before repeating the request (`gateway.steps` lists them).")
        error.extra["gateway"] = {"steps": [step.to_dict() for step in exc.steps],  # type: ignore[attr-defined]
                                  "may_have_run": True}
    if redact is not None:
        error.message = redact(error.message)
    return error


def sent_steps(steps: list[Any]) -> list[Any]:
    """The steps whose call was sent to its api (or may have been): not refused before it, not a search of the
    gateway's own, not handed back to the caller."""
    from ..offer.reductions import DESCRIBE_TOOL
    from ..offer.toolsearch import SEARCH_TOOL

    meta = (SEARCH_TOOL, DESCRIBE_TOOL)
    return [step for step in steps if not getattr(step, "handed_back", False) and step.tool not in meta
            and (step.ok or step.error_type not in NOT_SENT)]


def _api_error_from(exc: Exception) -> APIError:
    if isinstance(exc, APIError):
        return exc
    if isinstance(exc, AuditUnavailable):
        return APIError(503, str(exc), code="audit_unavailable")
    if isinstance(exc, ProviderError):
        if exc.status == 429:  # after the gateway's own retries: the client waits as long as the provider asked
            after = None if exc.retry_after is None else {"retry-after": str(math.ceil(exc.retry_after))}
            return APIError(429, f"The provider is rate limiting: {exc}", code="provider_rate_limited", headers=after)
        # A provider's own refusal (a wrong model id, a bad key, a malformed request: a 4xx it would answer again)
        # tells OpenAI's and Anthropic's SDKs not to retry: they retry every 502 twice by default, which made each
        # request with a misconfigured model three model requests and a second's backoff before the error showed.
        refused = exc.status is not None and 400 <= exc.status < 500 and not exc.retryable
        return APIError(502, f"The model provider failed: {exc}", type="provider_error", code="provider_error",
                        headers={"x-should-retry": "false"} if refused else None)
    if isinstance(exc, RunError):
        notes = current_caller().notes
        if notes is not None:  # the chat's audit row says why the run ended (gateway.server.supervision)
            notes["run_error"] = f"{exc.code}: {exc}"
        if exc.code in ("deadline", "deadline_exceeded", "timeout"):
            return APIError(504, str(exc), code="deadline_exceeded")
        if exc.code in ("rate_limited", "max_tool_calls", "budget_exceeded"):
            return APIError(429, str(exc), code=exc.code)
        if exc.code == "hook_denied":
            return APIError(403, str(exc), code=exc.code)
        return APIError(502, str(exc), type="run_error", code=exc.code)
    if isinstance(exc, ConfigError):  # a local configuration mistake: this gateway cannot serve it (not upstream's)
        details = "; ".join(str(d) for d in exc.diagnostics[:5])
        return APIError(503, f"{exc}" + (f": {details}" if details else ""), type="configuration_error",
                        code="configuration_error")
    if isinstance(exc, StoreUnavailable):
        return APIError(503, f"The gateway's shared state is unavailable: {exc}", code="store_unavailable")
    if isinstance(exc, TimeoutError):
        return APIError(504, "The run's deadline passed before it finished.", code="deadline_exceeded")
    logger.exception("unexpected error", exc_info=exc)
    return APIError(500, f"Internal error: {type(exc).__name__}", code="internal_error")


async def _on_api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, APIError)
    return exc.response()


def _route_hint(path: str) -> str:
    """What a developer who reached no route most likely meant: a client's base_url without `/v1` (the OpenAI SDKs
    add `/chat/completions` to it), or an Anthropic SDK pointed at the gateway, which has no Messages door."""
    tail = path.rstrip("/")
    if tail.endswith("/messages"):
        return (": the gateway has no Anthropic Messages endpoint (its model doors are /v1/chat/completions and "
                "/v1/responses); an agent on Anthropic's SDK takes an agent's tools from "
                "/agents/{agent}/tools?format=anthropic and runs each as a direct call (docs/http-api.md)")
    if not tail.startswith("/v1/") and tail.endswith(("/chat/completions", "/responses", "/models")):
        return ": the OpenAI-compatible endpoints are under /v1 (a client's base_url ends in /v1)"
    return ""


async def _on_http_exception(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    status = exc.status_code
    if status == 404:
        message = f"No route for {request.method} {request.url.path}" + _route_hint(request.url.path)
    elif status == 405:  # the methods the path takes (a direct call is a POST with the arguments as its body)
        allowed = {k.lower(): v for k, v in (exc.headers or {}).items()}.get("allow")
        message = f"Method {request.method} is not allowed on {request.url.path}" + (
            f"; it takes {allowed}" if allowed else "")
    else:
        message = str(exc.detail)
    return APIError(status, message, headers=dict(exc.headers or {})).response()


async def _on_store_unavailable(request: Request, exc: Exception) -> JSONResponse:
    logger.error("%s %s: %s", request.method, request.url.path, exc)
    return api_error_from(exc).response()


async def _on_unexpected(request: Request, exc: Exception) -> JSONResponse:
    if isinstance(exc, StoreUnavailable):  # raised in a middleware (auth, limits), outside the routes' handlers
        return await _on_store_unavailable(request, exc)
    logger.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return APIError(500, f"Internal error: {type(exc).__name__}").response()


def error_handlers() -> dict[Any, Any]:
    """The `exception_handlers` mapping for the Starlette app."""
    return {APIError: _on_api_error, HTTPException: _on_http_exception, StoreUnavailable: _on_store_unavailable,
            Exception: _on_unexpected}
