"""Ollama's native `/api/chat` (NDJSON when streaming).

Arguments are objects both ways (Ollama rejects the stringified form its `/v1` layer produces), the finish
reason is `"stop"` even with tool calls, calls carry no ids (synthesized), and results are `tool` messages
with `tool_name`. `thinking` is kept and echoed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import httpx

from ..dialects import openai_tool
from ..dialects.tool import ToolLike
from ..errors import ProviderError
from ..kernel.usage import Usage
from ..messages import Message
from .base import FinishReason, ProviderAdapter, TextCallback, Turn, iter_lines, join_url, make_call

_FINISH: dict[str, FinishReason] = {"stop": "stop", "length": "length", "load": "other", "unload": "other"}
_OPTIONS = {"temperature": "temperature", "top_p": "top_p", "top_k": "top_k", "seed": "seed", "stop": "stop",
            "max_tokens": "num_predict", "max_completion_tokens": "num_predict",
            "presence_penalty": "presence_penalty", "frequency_penalty": "frequency_penalty"}
_BODY_KEYS = ("format", "keep_alive", "think", "options")


class OllamaAdapter(ProviderAdapter):
    kind = "ollama"
    default_base_url = "http://127.0.0.1:11434"
    request_path = "/api/chat"
    base_url_mistakes = ("/api/chat", "/api", "/v1")
    telemetry_name = "ollama"

    def render_tools(self, tools: Sequence[ToolLike]) -> list[dict[str, Any]]:
        return [self._render_cached(t, openai_tool) for t in tools]

    def render_messages(self, messages: Sequence[Message]) -> list[dict[str, Any]]:
        return [_render_message(m) for m in messages]

    def _build_request(self, model: str, messages: list[Message], tools: list[ToolLike], params: dict[str, Any],
                       stream: bool) -> tuple[str, dict[str, str], dict[str, Any]]:
        # Ollama streams unless told otherwise, so `stream` is always explicit.
        body: dict[str, Any] = {"model": model, "messages": self.render_messages(messages), "stream": stream}
        if tools:
            body["tools"] = self.render_tools(tools)
        options = dict(params.get("options") or {})
        for key, value in params.items():
            if key in _OPTIONS:
                options[_OPTIONS[key]] = value
            elif key in _BODY_KEYS and key != "options":
                body[key] = value
        if options:
            body["options"] = options
        response_format = params.get("response_format") or {}
        if response_format.get("type") == "json_object":
            body["format"] = "json"
        elif response_format.get("type") == "json_schema":
            body["format"] = (response_format.get("json_schema") or {}).get("schema") or "json"
        headers = {"Authorization": f"Bearer {self.config.api_key}"} if self.config.api_key else {}
        return join_url(self.config.base_url, self.request_path), headers, body

    def _parse_response(self, data: dict[str, Any]) -> Turn:
        if data.get("error"):
            raise ProviderError(self.name, str(data["error"]))
        return _turn(data.get("message") or {}, data)

    async def _parse_stream(self, response: httpx.Response, on_text: TextCallback) -> Turn:
        text: list[str] = []
        thinking: list[str] = []
        calls: list[dict[str, Any]] = []
        last: dict[str, Any] = {}
        async for line in iter_lines(response):
            try:
                chunk = json.loads(line)
            except ValueError as exc:
                raise ProviderError(self.name, f"a stream line is not JSON: {line[:200]!r}") from exc
            if chunk.get("error"):
                raise ProviderError(self.name, str(chunk["error"]))
            message = chunk.get("message") or {}
            if message.get("content"):
                text.append(message["content"])
                await on_text(message["content"])
            if message.get("thinking"):
                thinking.append(message["thinking"])
            calls.extend(message.get("tool_calls") or [])
            last = chunk
        merged = {"content": "".join(text), "thinking": "".join(thinking), "tool_calls": calls}
        return _turn(merged, last)


def _turn(raw: dict[str, Any], data: dict[str, Any]) -> Turn:
    calls = []
    for item in raw.get("tool_calls") or []:
        function = item.get("function") or {}
        calls.append(make_call(item.get("id"), function.get("name", ""), function.get("arguments")))
    message = Message(role="assistant", content=raw.get("content") or None, tool_calls=calls)
    if raw.get("thinking"):
        message.extras["thinking"] = raw["thinking"]
    finish = data.get("done_reason")
    # Ollama answers "stop" when it called tools: the message decides.
    reason: FinishReason = _FINISH.get(finish or "", "other" if finish else "stop")
    if calls and reason == "stop":
        reason = "tool_calls"
    return Turn(message=message, finish_reason=reason, raw_finish_reason=finish,
                usage=Usage(int(data.get("prompt_eval_count") or 0), int(data.get("eval_count") or 0)))


def _render_message(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "content": message.content or "", "tool_name": message.name or ""}
    out: dict[str, Any] = {"role": message.role, "content": message.content or ""}
    if message.role == "assistant":
        if message.tool_calls:
            out["tool_calls"] = [{"function": {"name": c.name, "arguments": c.arguments or {}}}
                                 for c in message.tool_calls]
        if message.extras.get("thinking"):
            out["thinking"] = message.extras["thinking"]
    return out
