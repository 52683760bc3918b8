"""The provider adapter contract, and what every wire format shares.

A `ProviderAdapter` turns the loop's neutral `Message`s and an agent's tools into one provider's request,
sends it (pooled `httpx.AsyncClient`, timeouts, retries with backoff on 429/5xx/connect errors honouring
`Retry-After`), and parses the answer, streamed or not, into a `Turn`. Provider failures become
`ProviderError(provider, message, status)`; nothing else escapes.
"""

from __future__ import annotations

import abc
import email.utils
import json
import random
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import anyio
import httpx
import orjson

from ..config.model import ProviderConfig
from ..dialects.brevity import estimate_tokens
from ..dialects.tool import ToolLike
from ..errors import ProviderError
from ..http.library import ClientOptions
from ..http.transport import CappedTransport
from ..jsondepth import MAX_DEPTH, too_deep
from ..jsonwire import dumps, holds_lone_surrogate
from ..kernel import tracing
from ..kernel.usage import Usage
from ..messages import Message, ToolCall
from .pacing import StreamClock, tick

FinishReason = Literal["stop", "tool_calls", "length", "content_filter", "error", "other"]
TextCallback = Callable[[str], Awaitable[None]]

MAX_ANSWER_BYTES = 16 * 1024 * 1024
"""An LLM's answer (decoded) is cut off past this: far above any real answer, far below a compression bomb."""
_RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
_MAX_RETRY_AFTER = 60.0


@dataclass(slots=True, kw_only=True)
class Turn:
    """One answer of the model, normalized."""

    message: Message
    finish_reason: FinishReason
    raw_finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)

    @property
    def truncated(self) -> bool:
        """The model's output hit its token limit: any tool call in it may carry cut-off arguments."""
        return self.finish_reason == "length"


def parse_arguments(raw: Any) -> tuple[dict[str, Any] | None, str | None]:
    """A JSON string is parsed ("" and null are {}), an object used as is; anything else is a parse error."""
    if raw is None:
        return {}, None
    text = raw if isinstance(raw, str) else None
    if isinstance(raw, str):
        if not raw.strip():
            return {}, None
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            return None, f"the arguments are not valid JSON ({str(exc)[:200]}); send one JSON object"
        if not isinstance(value, dict):
            return None, f"the arguments must be a JSON object, not {type(value).__name__}"
        raw = value
    if isinstance(raw, dict):
        if too_deep(raw, text):
            return None, (f"the arguments nest arrays and objects more than {MAX_DEPTH} levels deep, which the "
                          "gateway does not read; send a flatter JSON object")
        if holds_lone_surrogate(raw):
            return None, ("the arguments hold a lone surrogate (an unpaired \\ud800-\\udfff escape), which is not "
                          "text; send valid Unicode")
        return raw, None
    return None, f"the arguments must be a JSON object, not {type(raw).__name__}"


def make_call(call_id: str | None, name: str, raw: Any, extras: dict[str, Any] | None = None) -> ToolCall:
    arguments, error = parse_arguments(raw)
    return ToolCall(id=call_id or "", name=name or "", arguments=arguments, raw_arguments=raw, parse_error=error,
                    extras=extras or {})


def ensure_unique_ids(calls: list[ToolCall]) -> None:
    """Give every call of one turn an id, unique in the turn (providers may omit or repeat them)."""
    seen: set[str] = set()
    for call in calls:
        if not call.id or call.id in seen:
            if call.id:
                call.extras.setdefault("provider_id", call.id)
            call.id = f"call_{uuid.uuid4().hex[:24]}"
            call.extras["synthesized_id"] = True
        seen.add(call.id)


def result_payload(message: Message) -> dict[str, Any]:
    """A tool message's result as an object (Gemini's functionResponse.response must be one)."""
    result = message.extras.get("result")
    if isinstance(result, dict):
        if result.get("ok"):
            return {"output": result.get("body")}
        return {"error": {k: v for k, v in result.items() if k in ("error", "error_type", "status", "body") and v}}
    if message.is_error:
        return {"error": message.content or ""}
    return {"output": message.content or ""}


def retry_delay(response: httpx.Response | None, attempt: int, backoff: float) -> float:
    """Seconds to wait before the next attempt: `Retry-After` when the server says, else jittered backoff."""
    after = server_retry_after(response) if response is not None else None
    return after if after is not None else float(backoff * (2**attempt) * (0.5 + random.random() / 2))


def server_retry_after(response: httpx.Response) -> float | None:
    """The seconds a server's `Retry-After` (or `retry-after-ms`) asks for, bounded; None when it says nothing."""
    header = response.headers.get("retry-after-ms")
    if header:
        try:
            return min(float(header) / 1000, float(_MAX_RETRY_AFTER))
        except ValueError:
            pass
    header = response.headers.get("retry-after")
    if header:
        try:
            return min(max(float(header), 0.0), _MAX_RETRY_AFTER)
        except ValueError:
            parsed = email.utils.parsedate_to_datetime(header) if header else None
            if parsed is not None:
                return min(max(float(parsed.timestamp()) - time.time(), 0.0), _MAX_RETRY_AFTER)
    return None


class ProviderAdapter(abc.ABC):
    """One provider's wire format. Subclasses implement the `_build_*`/`_parse_*` hooks.

    Each adapter class carries its kind's facts (the class attributes below); whoever needs one reads it from the
    registry (`gateway.providers.registry.ADAPTERS`), never from a table of kind names of its own."""

    kind: ClassVar[str] = ""
    """The `kind:` of a provider in agents.yaml."""
    default_base_url: ClassVar[str] = ""
    """The `base_url` of a provider that names none."""
    request_path: ClassVar[str] = ""
    """What the adapter appends to `base_url` for a model call (`{model}`: the model's id)."""
    base_url_mistakes: ClassVar[tuple[str, ...]] = ()
    """Endings of a `base_url` that most likely hold a part the adapter appends itself."""
    key_variable: ClassVar[str | None] = None
    """The environment variable a cloud provider's `api_key` is usually read from; None: it needs no key."""
    tool_format: ClassVar[str] = "openai"
    """The dialect (`gateway.dialects`) the provider is sent its tools in."""
    telemetry_name: ClassVar[str] = ""
    """The provider's `gen_ai.provider.name` in OpenTelemetry's conventions."""
    strict_mode: ClassVar[bool] = False
    """Whether `strict: true` (OpenAI's strict mode for tool schemas) means something to the provider."""
    passes_tool_choice: ClassVar[bool] = False
    """Whether a caller's `tool_choice` and `parallel_tool_calls` are passed on to the provider."""
    native_tool_search: ClassVar[bool] = False
    """Whether the provider searches deferred tools itself (`gateway.providers.deferred`): only then does an
    agent's `tool_search: native` send them."""
    max_deferred_tools: ClassVar[int | None] = None
    """How many tools the provider's native search takes in one request; None: no limit."""

    @classmethod
    def refuses_tool_count(cls, config: ProviderConfig, count: int) -> bool:
        """Whether the provider itself would refuse `count` tools in one request."""
        return False

    def __init__(self, config: ProviderConfig, *, transport: httpx.AsyncBaseTransport | None = None,
                 max_retries: int = 2, backoff: float = 0.5,
                 sleep: Callable[[float], Awaitable[None]] | None = None) -> None:
        """Parameters: config: the provider's entry of agents.yaml; transport: an httpx transport (tests);
        max_retries: extra attempts on 429/5xx/connect errors; backoff: the first retry's base delay, seconds;
        sleep: the waiting function (tests record the delays instead of waiting)."""
        self.config = config
        self.max_retries = max_retries
        self.backoff = backoff
        self._sleep = sleep or anyio.sleep
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        self._rendered: dict[int, tuple[Any, Any, dict[str, Any]]] = {}

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None or self._client.is_closed:
            # pyreqwest underneath (proxies from the environment, bodies decoded by the library and capped while
            # they stream: `gateway.http.transport`); it times each read, as httpx did, so a long stream lives.
            timeout = httpx.Timeout(self.config.timeout, connect=min(self.config.timeout, 10.0))
            options = ClientOptions(max_connections=100, read_timeout=self.config.timeout)
            transport = CappedTransport(self._transport, options=options, max_body=MAX_ANSWER_BYTES)
            self._client = httpx.AsyncClient(transport=transport, timeout=timeout if self._transport else None,
                                             trust_env=False)
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()

    def prepare_arguments(self, tool: ToolLike, arguments: dict[str, Any]) -> dict[str, Any]:
        """The arguments of a parsed call as the tool's own schema means them (undoing a dialect's rendering).

        Raises ValueError, with a message the model can act on, when they cannot be mapped back."""
        return arguments

    async def complete(self, model: str, messages: Sequence[Message], tools: Iterable[ToolLike] = (), *,
                       params: dict[str, Any] | None = None, on_text: TextCallback | None = None) -> Turn:
        """One LLM call. With `on_text` the answer is streamed and each text delta is passed to it."""
        stream = on_text is not None
        url, headers, body = self._build_request(model, list(messages), list(tools), dict(params or {}), stream)
        headers = {**self.config.headers, **headers}
        if not stream:
            response = await self._send(url, headers, body, stream=False)
            turn = self._parse_response(self._json_answer(response))
        else:
            assert on_text is not None  # `stream`
            response = await self._send(url, headers, body, stream=True)
            clock = StreamClock(self.config.stream_idle_timeout or self.config.timeout, self.config.stream_timeout)
            clock.attach(response)
            try:
                with clock.scope:
                    turn = await self._read_stream(response, on_text)
                if clock.expired:
                    raise ProviderError(self.name, clock.explain(self.name))
            finally:
                await response.aclose()
        ensure_unique_ids(turn.message.tool_calls)
        turn.usage.llm_calls = 1
        return turn

    async def _read_stream(self, response: httpx.Response, on_text: TextCallback) -> Turn:
        try:
            if _is_plain_json(response):
                # A server that ignored `stream: true` (some OpenAI-compatible ones do) and answered in one
                # piece: read it as the whole answer, its text passed on as one delta.
                await response.aread()
                turn = self._parse_response(self._json_answer(response))
                if turn.message.content:
                    await on_text(turn.message.content)
                return turn
            return await self._parse_stream(response, on_text)
        except httpx.HTTPError as exc:
            raise ProviderError(self.name, f"the stream broke: {exc!r}") from exc

    def _json_answer(self, response: httpx.Response) -> dict[str, Any]:
        try:
            data = orjson.loads(response.content)
        except ValueError as exc:
            raise ProviderError(self.name, f"the answer is not JSON: {response.text[:200]!r}",
                                response.status_code) from exc
        if not isinstance(data, dict):
            raise ProviderError(self.name, f"the answer is not a JSON object: {response.text[:200]!r}",
                                response.status_code)
        return data

    async def _send(self, url: str, headers: dict[str, str], body: dict[str, Any], *, stream: bool) -> httpx.Response:
        payload = dumps(body)
        headers = {**headers, "Content-Type": "application/json"}
        tracing.propagate_to(headers)  # inside the model call's span: the LLM's side can join the trace
        attempt = 0
        while True:
            response: httpx.Response | None = None
            try:
                request = self.client.build_request("POST", url, headers=headers, content=payload)
                # The client times each read (a stream lives as long as it streams); an answer read whole gets the
                # whole timeout, or an LLM that sends a byte a second holds the run forever (redteam46: `timeout: 3`
                # and a body trickled at a byte a second: no answer after 120 s).
                with anyio.fail_after(None if stream else self.config.timeout):
                    response = await self.client.send(request, stream=stream)
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError) as exc:
                if attempt >= self.max_retries:
                    raise ProviderError(self.name, f"cannot reach {url}: {_describe(exc)}", retryable=True) from exc
            except (httpx.TimeoutException, TimeoutError) as exc:
                raise ProviderError(self.name, f"no answer from {url} within {self.config.timeout}s") from exc
            except httpx.HTTPError as exc:
                raise ProviderError(self.name, f"request to {url} failed: {_describe(exc)}") from exc
            else:
                if response.status_code < 400:
                    return response
                if stream:
                    await response.aread()
                retryable = response.status_code in _RETRY_STATUSES
                if not retryable or attempt >= self.max_retries:
                    message = self._error_message(response)
                    if response.status_code in (401, 403):
                        message += f" (check providers.{self.name}.api_key in agents.yaml)"
                    raise ProviderError(self.name, message, response.status_code, retryable,
                                        retry_after=server_retry_after(response))
            await self._sleep(retry_delay(response, attempt, self.backoff))
            attempt += 1

    def _error_message(self, response: httpx.Response) -> str:
        """The provider's own error text: `{"error": {"message"}}`, `{"error": "..."}` or the body."""
        try:
            data = response.json()
        except ValueError:
            return response.text[:500] or response.reason_phrase
        error = data.get("error") if isinstance(data, dict) else None
        if isinstance(error, dict):
            return str(error.get("message") or error)
        if isinstance(error, str):
            return error
        return json.dumps(data)[:500]

    def _render_cached(self, tool: ToolLike, render: Callable[[ToolLike], dict[str, Any]]) -> dict[str, Any]:
        """A tool's definition, rendered once per tool object (schemas are converted, not just copied, and the
        same tools go out on every call of a run)."""
        entry = self._rendered.get(id(tool))
        if entry is not None and entry[0] is tool and entry[1] is tool.input_schema:
            return entry[2]
        if len(self._rendered) > 4096:  # tools of old runtimes (hot reload): start over
            self._rendered.clear()
        rendered = render(tool)
        self._rendered[id(tool)] = (tool, tool.input_schema, rendered)
        return rendered

    @abc.abstractmethod
    def render_tools(self, tools: Sequence[ToolLike]) -> list[dict[str, Any]]:
        """The tool definitions in this provider's dialect."""

    def definition_tokens(self, tool: ToolLike) -> int:
        """The estimated tokens of `tool`'s definition as this provider is sent it: what a run's definitions
        budget charges for it (`gateway.offer.toolsearch.ToolOffer`)."""
        return sum(estimate_tokens(rendered) for rendered in self.render_tools([tool]))

    @abc.abstractmethod
    def render_messages(self, messages: Sequence[Message]) -> Any:
        """The conversation in this provider's grouping (tool results where the provider wants them)."""

    @abc.abstractmethod
    def _build_request(self, model: str, messages: list[Message], tools: list[ToolLike], params: dict[str, Any],
                       stream: bool) -> tuple[str, dict[str, str], dict[str, Any]]:
        """URL, headers and JSON body of one call."""

    @abc.abstractmethod
    def _parse_response(self, data: dict[str, Any]) -> Turn: ...

    @abc.abstractmethod
    async def _parse_stream(self, response: httpx.Response, on_text: TextCallback) -> Turn: ...


async def iter_sse(response: httpx.Response) -> AsyncIterator[tuple[str, str]]:
    """(event, data) pairs of a server-sent event stream."""
    event, data = "", list[str]()
    async for line in response.aiter_lines():
        if not line:
            if data:
                if event != "ping":  # a keep-alive (Anthropic's `event: ping`), as comments are: not data (`pacing`)
                    tick(response)
                yield event, "\n".join(data)
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        key, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if key == "event":
            event = value
        elif key == "data":
            data.append(value)
    if data:
        tick(response)
        yield event, "\n".join(data)


async def iter_lines(response: httpx.Response) -> AsyncIterator[str]:
    """The non-blank lines of a JSON-lines stream (Ollama's); blank ones are keep-alives (`pacing`)."""
    async for line in response.aiter_lines():
        if line.strip():
            tick(response)
            yield line


def _is_plain_json(response: httpx.Response) -> bool:
    """The answer to a streamed request is one JSON document, not a stream (SSE or Ollama's JSON lines)."""
    media: str = response.headers.get("content-type", "")
    return media.split(";", 1)[0].strip().lower() == "application/json"


def load_json(provider: str, text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ProviderError(provider, f"a stream chunk is not JSON: {text[:200]!r}") from exc


def join_url(base: str, path: str) -> str:
    return base.rstrip("/") + "/" + path.lstrip("/")


def _describe(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
