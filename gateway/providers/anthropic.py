"""Anthropic Messages API.

Arguments are the `tool_use.input` object. All `tool_result` blocks answering one turn go first in the next
user message (any user text after them). `thinking`/`redacted_thinking` blocks of an assistant turn are kept
in `Message.extras["anthropic_blocks"]` and echoed in front of its tool calls. Streaming parses
`content_block_*` events; the first `input_json_delta` may carry `""`.

Native tool search (`tool_search: native`): `DeferredTool`s go out with `defer_loading: true` beside the
`tool_search_tool_bm25` server tool. The API runs the search itself and answers with `server_tool_use` and
`tool_search_tool_result` blocks (whose `tool_reference`s it expands into the found definitions), then the
model's ordinary `tool_use` of a found tool. A turn with server blocks keeps all its blocks but `tool_use`, text
included, in their order, and echoes them verbatim before its tool calls: the API reads the references from
the conversation on every later request. At most `MAX_DEFERRED_TOOLS` may be deferred in one request.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import httpx

from ..dialects import anthropic_tool
from ..dialects.tool import ToolLike
from ..errors import ProviderError
from ..kernel.usage import Usage
from ..messages import Message
from .base import FinishReason, ProviderAdapter, TextCallback, Turn, iter_sse, join_url, load_json, make_call
from .deferred import DeferredTool, ServerSearchTool

API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096
_FINISH: dict[str, FinishReason] = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls",
                                    "max_tokens": "length", "model_context_window_exceeded": "length",
                                    "refusal": "content_filter", "pause_turn": "other"}
_STATE_BLOCKS = ("thinking", "redacted_thinking")
SEARCH_TOOL_TYPE = "tool_search_tool_bm25_20251119"
MAX_DEFERRED_TOOLS = 10_000
"""Anthropic's tool search takes at most this many tools in its catalog."""


class AnthropicAdapter(ProviderAdapter):
    kind = "anthropic"
    default_base_url = "https://api.anthropic.com"
    request_path = "/v1/messages"
    base_url_mistakes = ("/v1/messages", "/v1")
    key_variable = "ANTHROPIC_API_KEY"
    tool_format = "anthropic"
    telemetry_name = "anthropic"
    native_tool_search = True
    max_deferred_tools = MAX_DEFERRED_TOOLS

    def render_tools(self, tools: Sequence[ToolLike]) -> list[dict[str, Any]]:
        deferred = sum(isinstance(t, DeferredTool) for t in tools)
        if deferred > MAX_DEFERRED_TOOLS:
            raise ProviderError(self.name, f"{deferred} tools to defer, but Anthropic's tool search takes at most "
                                f"{MAX_DEFERRED_TOOLS}: select fewer with the agent's `tools:`, or use "
                                "`tool_search: on` (the gateway's own search)")
        return [self._render_cached(t, _render_tool) for t in tools]

    def render_messages(self, messages: Sequence[Message], *, flatten_tools: bool = False) -> list[dict[str, Any]]:
        """Anthropic's `messages` (system excluded). `flatten_tools`: write past tool calls and results as text,
        for a request without tools (the API refuses tool blocks when no tools are defined)."""
        out: list[dict[str, Any]] = []
        for message in messages:
            if message.role == "system":
                continue
            if message.role == "assistant":
                blocks = _assistant_blocks(message, flatten_tools)
                if blocks:
                    out.append({"role": "assistant", "content": blocks})
                continue
            blocks = [_result_block(message, flatten_tools)] if message.role == "tool" else \
                [{"type": "text", "text": message.content or ""}]
            if out and out[-1]["role"] == "user":
                # Results of one turn share one user message, results first, then any user text.
                out[-1]["content"].extend(blocks)
            else:
                out.append({"role": "user", "content": blocks})
        return out

    def _build_request(self, model: str, messages: list[Message], tools: list[ToolLike], params: dict[str, Any],
                       stream: bool) -> tuple[str, dict[str, str], dict[str, Any]]:
        system = "\n\n".join(m.content or "" for m in messages if m.role == "system")
        body: dict[str, Any] = {"model": model, "max_tokens": DEFAULT_MAX_TOKENS,
                                "messages": self.render_messages(messages, flatten_tools=not tools)}
        body.update(_map_params(params))
        if system:
            body["system"] = system
        if tools:
            body["tools"] = self.render_tools(tools)
        else:
            body.pop("tool_choice", None)
        if stream:
            body["stream"] = True
        headers = {"anthropic-version": API_VERSION}
        if self.config.api_key:
            headers["x-api-key"] = self.config.api_key
        return join_url(self.config.base_url, self.request_path), headers, body

    def _parse_response(self, data: dict[str, Any]) -> Turn:
        if data.get("type") == "error":
            raise ProviderError(self.name, str((data.get("error") or {}).get("message", data)))
        return _turn(data.get("content") or [], data.get("stop_reason"), data.get("usage") or {})

    async def _parse_stream(self, response: httpx.Response, on_text: TextCallback) -> Turn:
        blocks: dict[int, dict[str, Any]] = {}
        partial: dict[int, list[str]] = {}
        usage: dict[str, Any] = {}
        stop_reason: str | None = None
        async for event, data in iter_sse(response):
            payload = load_json(self.name, data)
            kind = payload.get("type", event)
            if kind == "error":
                raise ProviderError(self.name, str((payload.get("error") or {}).get("message", payload)))
            if kind == "message_start":
                usage.update((payload.get("message") or {}).get("usage") or {})
            elif kind == "content_block_start":
                index = payload["index"]
                blocks[index] = dict(payload.get("content_block") or {})
                partial[index] = []
            elif kind == "content_block_delta":
                await _apply_delta(blocks, partial, payload, on_text)
            elif kind == "content_block_stop":
                index = payload["index"]
                block = blocks.get(index, {})
                if block.get("type") == "tool_use":
                    raw = "".join(partial.get(index, []))
                    block["input"] = raw if partial.get(index) else block.get("input") or {}
                elif block.get("type") == "server_tool_use" and partial.get(index):
                    block["input"] = _server_input("".join(partial[index]))
            elif kind == "message_delta":
                stop_reason = (payload.get("delta") or {}).get("stop_reason") or stop_reason
                usage.update({k: v for k, v in (payload.get("usage") or {}).items() if v is not None})
        for index, block in blocks.items():
            if block.get("type") == "tool_use" and not isinstance(block.get("input"), str) and partial.get(index):
                block["input"] = "".join(partial[index])  # a stream cut before content_block_stop
            elif block.get("type") == "server_tool_use" and not block.get("input") and partial.get(index):
                block["input"] = _server_input("".join(partial[index]))
        return _turn([blocks[i] for i in sorted(blocks)], stop_reason, usage)


async def _apply_delta(blocks: dict[int, dict[str, Any]], partial: dict[int, list[str]], payload: dict[str, Any],
                       on_text: TextCallback) -> None:
    index = payload["index"]
    block = blocks.setdefault(index, {"type": "text", "text": ""})
    delta = payload.get("delta") or {}
    kind = delta.get("type")
    if kind == "text_delta":
        block["text"] = block.get("text", "") + delta.get("text", "")
        if delta.get("text"):
            await on_text(delta["text"])
    elif kind == "input_json_delta":
        partial.setdefault(index, []).append(delta.get("partial_json") or "")
    elif kind == "thinking_delta":
        block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
    elif kind == "signature_delta":
        block["signature"] = block.get("signature", "") + delta.get("signature", "")


def _render_tool(tool: ToolLike) -> dict[str, Any]:
    if isinstance(tool, ServerSearchTool):
        return {"type": SEARCH_TOOL_TYPE, "name": tool.name}
    rendered = anthropic_tool(tool)
    if isinstance(tool, DeferredTool):
        rendered["defer_loading"] = True
    return rendered


def _server_input(raw: str) -> dict[str, Any]:
    """A server tool's streamed input, as the object the API wants back ({} when the stream cut it off)."""
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _is_server_block(kind: Any) -> bool:
    """A block the API's own tools wrote (`server_tool_use`, `tool_search_tool_result`, ...)."""
    return kind == "server_tool_use" or (isinstance(kind, str) and kind.endswith("_tool_result"))


def _turn(content: list[dict[str, Any]], stop_reason: str | None, usage: dict[str, Any]) -> Turn:
    texts, calls, state = [], [], []
    in_order = any(_is_server_block(block.get("type")) for block in content)
    for block in content:
        kind = block.get("type")
        if kind == "text":
            texts.append(block.get("text", ""))
            if in_order:
                state.append(block)
        elif kind == "tool_use":
            calls.append(make_call(block.get("id"), block.get("name", ""), block.get("input")))
        elif kind in _STATE_BLOCKS or _is_server_block(kind):
            state.append(block)
    message = Message(role="assistant", content="".join(texts) or None, tool_calls=calls)
    if state:
        message.extras["anthropic_blocks"] = state
    if in_order:
        message.extras["anthropic_in_order"] = True  # the text is among the blocks, where the model wrote it
    reason: FinishReason = _FINISH.get(stop_reason or "", "other" if stop_reason else "stop")
    input_tokens = sum(int(usage.get(k) or 0) for k in ("input_tokens", "cache_creation_input_tokens",
                                                          "cache_read_input_tokens"))
    return Turn(message=message, finish_reason=reason, raw_finish_reason=stop_reason,
                usage=Usage(input_tokens, int(usage.get("output_tokens") or 0)))


def _assistant_blocks(message: Message, flatten: bool) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [] if flatten else list(message.extras.get("anthropic_blocks") or [])
    if message.content and (flatten or not message.extras.get("anthropic_in_order")):
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        arguments = call.arguments if call.arguments is not None else {}
        if flatten:
            blocks.append({"type": "text", "text": f"[called tool {call.name} with {json.dumps(arguments)}]"})
        else:
            # Unparseable input is echoed as {} (the API wants an object); the error result says what was wrong.
            blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": arguments})
    return blocks


def _result_block(message: Message, flatten: bool) -> dict[str, Any]:
    if flatten:
        label = "error from" if message.is_error else "result of"
        return {"type": "text", "text": f"[{label} tool {message.name or ''}: {message.content or ''}]"}
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id,
                             "content": message.content or ""}
    if message.is_error:
        block["is_error"] = True
    return block


def _map_params(params: dict[str, Any]) -> dict[str, Any]:
    """The OpenAI-style parameters a chat request carries, in Anthropic's spelling; the ones the Messages API
    has no equivalent for (seed, penalties, logit_bias, response_format, ...) are left out, as it refuses
    unknown fields."""
    out: dict[str, Any] = {k: params[k] for k in ("temperature", "top_p", "top_k", "max_tokens", "metadata",
                                                   "thinking") if k in params}
    if "max_completion_tokens" in params:
        out["max_tokens"] = params["max_completion_tokens"]
    if "stop" in params:
        stop = params["stop"]
        out["stop_sequences"] = [stop] if isinstance(stop, str) else stop
    if isinstance(params.get("user"), str):
        out["metadata"] = {"user_id": params["user"]}
    return out
