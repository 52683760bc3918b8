"""OpenAI Chat Completions, and with it every OpenAI-compatible server (vLLM, DeepSeek, LM Studio, Ollama /v1).

Arguments travel as a JSON *string*; each call gets one `tool` message; DeepSeek's `reasoning_content` is
kept and echoed. Streamed tool calls are assembled by `index`, except that a new non-empty `id` on an index
starts a new call (servers that send every parallel call with `index: 0`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import httpx

from ..config.model import ProviderConfig
from ..dialects import openai_tool, strict_arguments
from ..dialects.tool import ToolLike
from ..errors import ProviderError
from ..kernel.usage import Usage
from ..messages import Message
from .base import FinishReason, ProviderAdapter, TextCallback, Turn, iter_sse, join_url, load_json, make_call

OPENAI_MAX_TOOLS = 128
"""api.openai.com refuses more tools in one request; compatible servers may take more."""
def refuses_tool_count(config: ProviderConfig, count: int) -> bool:
    """Whether OpenAI itself would refuse this many tools (compatible servers may take more)."""
    return config.kind == "openai" and "api.openai.com" in config.base_url and count > OPENAI_MAX_TOOLS


_FINISH: dict[str, FinishReason] = {"stop": "stop", "tool_calls": "tool_calls", "function_call": "tool_calls",
                                    "length": "length", "content_filter": "content_filter"}


class OpenAIStrictArguments(ProviderAdapter):
    """What OpenAI's two APIs (chat completions, Responses) share: tools in strict mode when the provider says
    `strict: true`, and the model's arguments mapped back from strict mode's forms."""

    strict_mode = True
    passes_tool_choice = True

    @property
    def strict(self) -> bool:
        return self.config.strict

    def prepare_arguments(self, tool: ToolLike, arguments: dict[str, Any]) -> dict[str, Any]:
        # In strict mode the model sends null for every optional property it leaves out, and free-form objects
        # and maps in the encoded forms strict mode accepts: back to what the exact schema means.
        return strict_arguments(tool.input_schema, arguments) if self.strict else arguments


class OpenAIAdapter(OpenAIStrictArguments):
    kind = "openai"
    default_base_url = "https://api.openai.com/v1"
    request_path = "/chat/completions"
    base_url_mistakes = ("/chat/completions",)
    key_variable = "OPENAI_API_KEY"
    telemetry_name = "openai"

    @classmethod
    def refuses_tool_count(cls, config: ProviderConfig, count: int) -> bool:
        return refuses_tool_count(config, count)

    def render_tools(self, tools: Sequence[ToolLike]) -> list[dict[str, Any]]:
        return [self._render_cached(t, lambda t: openai_tool(t, strict=self.strict)) for t in tools]

    def render_messages(self, messages: Sequence[Message]) -> list[dict[str, Any]]:
        return [_render_message(m) for m in messages]

    def _build_request(self, model: str, messages: list[Message], tools: list[ToolLike], params: dict[str, Any],
                       stream: bool) -> tuple[str, dict[str, str], dict[str, Any]]:
        body: dict[str, Any] = {"model": model, "messages": self.render_messages(messages), **params}
        if tools:
            if refuses_tool_count(self.config, len(tools)):
                raise ProviderError(self.name, f"the agent offers {len(tools)} tools and OpenAI accepts at most "
                                    f"{OPENAI_MAX_TOOLS} in one request: narrow its `tools:` in agents.yaml")
            body["tools"] = self.render_tools(tools)
        else:
            body.pop("tool_choice", None)
            body.pop("parallel_tool_calls", None)
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        headers = {"Authorization": f"Bearer {self.config.api_key}"} if self.config.api_key else {}
        return join_url(self.config.base_url, self.request_path), headers, body

    def _parse_response(self, data: dict[str, Any]) -> Turn:
        choices = data.get("choices") or []
        if not choices:
            raise ProviderError(self.name, f"the answer has no choices: {json.dumps(data)[:300]}")
        choice = choices[0]
        raw = choice.get("message") or {}
        calls = [make_call(c.get("id"), (c.get("function") or {}).get("name", ""),
                           (c.get("function") or {}).get("arguments"))
                 for c in raw.get("tool_calls") or []]
        message = Message(role="assistant", content=raw.get("content"), tool_calls=calls)
        if raw.get("reasoning_content"):
            message.extras["reasoning_content"] = raw["reasoning_content"]
        return _turn(message, choice.get("finish_reason"), data.get("usage"))

    async def _parse_stream(self, response: httpx.Response, on_text: TextCallback) -> Turn:
        text: list[str] = []
        reasoning: list[str] = []
        slots: list[dict[str, Any]] = []
        by_index: dict[int, dict[str, Any]] = {}
        finish: str | None = None
        usage: dict[str, Any] | None = None
        async for _, data in iter_sse(response):
            if data.strip() == "[DONE]":
                break
            chunk = load_json(self.name, data)
            if isinstance(chunk, dict) and chunk.get("error"):
                error = chunk["error"]
                raise ProviderError(self.name, str(error.get("message") if isinstance(error, dict) else error))
            usage = chunk.get("usage") or usage
            for choice in chunk.get("choices") or []:
                delta = choice.get("delta") or {}
                if delta.get("content"):
                    text.append(delta["content"])
                    await on_text(delta["content"])
                if delta.get("reasoning_content"):
                    reasoning.append(delta["reasoning_content"])
                for part in delta.get("tool_calls") or []:
                    _merge_call_delta(part, slots, by_index)
                finish = choice.get("finish_reason") or finish
        calls = [make_call(s["id"], s["name"], "".join(s["arguments"])) for s in slots]
        message = Message(role="assistant", content="".join(text) or None, tool_calls=calls)
        if reasoning:
            message.extras["reasoning_content"] = "".join(reasoning)
        return _turn(message, finish, usage)


def _merge_call_delta(part: dict[str, Any], slots: list[dict[str, Any]], by_index: dict[int, dict[str, Any]]) -> None:
    index = part.get("index", len(slots))
    call_id = part.get("id") or ""
    function = part.get("function") or {}
    slot = by_index.get(index)
    # A different non-empty id on a known index is another call (servers that send every call as index 0).
    if slot is None or (call_id and slot["id"] and call_id != slot["id"]):
        slot = {"id": call_id, "name": "", "arguments": []}
        slots.append(slot)
        by_index[index] = slot
    if call_id and not slot["id"]:
        slot["id"] = call_id
    name = function.get("name")
    if name and name != slot["name"]:  # some servers repeat the whole name on every delta; others send it once
        slot["name"] += name
    arguments = function.get("arguments")
    if isinstance(arguments, dict):  # some compatible servers send an object
        slot["arguments"].append(json.dumps(arguments))
    elif arguments:
        slot["arguments"].append(arguments)


def _turn(message: Message, finish: str | None, usage: dict[str, Any] | None) -> Turn:
    reason: FinishReason = _FINISH.get(finish or "", "other" if finish else "stop")
    if message.tool_calls and reason == "stop":
        reason = "tool_calls"
    usage = usage or {}
    return Turn(message=message, finish_reason=reason, raw_finish_reason=finish,
                usage=Usage(int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)))


def _render_message(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content or ""}
    if message.role != "assistant":
        return {"role": message.role, "content": message.content or ""}
    out: dict[str, Any] = {"role": "assistant", "content": message.content or ""}
    if message.tool_calls:
        # OpenAI documents `content` as optional with tool_calls; null is what its own API returns and what
        # strict compatible servers accept (some reject "" with tool calls, others reject a missing key).
        out["content"] = message.content or None
        out["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": _arguments_text(c.raw_arguments,
                                                                                                       c.arguments)}}
            for c in message.tool_calls
        ]
    if message.extras.get("reasoning_content"):
        out["reasoning_content"] = message.extras["reasoning_content"]
    return out


def _arguments_text(raw: Any, parsed: dict[str, Any] | None) -> str:
    """The model's own argument string when it sent one (echoed exactly), else the object as JSON."""
    if isinstance(raw, str):
        return raw
    return json.dumps(parsed if parsed is not None else (raw if isinstance(raw, dict) else {}))
