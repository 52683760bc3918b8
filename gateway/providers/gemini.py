"""Google Gemini `generateContent` and `streamGenerateContent?alt=sse`.

Arguments are `functionCall.args` objects. Gemini may omit call ids (they are synthesized; a functionResponse
carries an id only when the model gave one) and reports `STOP` even when it called tools. The model's parts
are kept verbatim in `Message.extras["gemini_parts"]` and echoed, so `thoughtSignature`s travel back exactly;
all results of one turn go back as one `user` content with one `functionResponse` part per call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx

from ..dialects import gemini_function
from ..dialects.brevity import estimate_tokens
from ..dialects.tool import ToolLike
from ..errors import ProviderError
from ..kernel.usage import Usage
from ..messages import Message, ToolCall
from .base import (
    FinishReason,
    ProviderAdapter,
    TextCallback,
    Turn,
    iter_sse,
    join_url,
    load_json,
    make_call,
    result_payload,
)

_FINISH: dict[str, FinishReason] = {"STOP": "stop", "MAX_TOKENS": "length", "SAFETY": "content_filter",
                                    "RECITATION": "content_filter", "BLOCKLIST": "content_filter",
                                    "PROHIBITED_CONTENT": "content_filter", "SPII": "content_filter",
                                    "MALFORMED_FUNCTION_CALL": "error", "UNEXPECTED_TOOL_CALL": "error"}
_PARAMS = {"temperature": "temperature", "top_p": "topP", "top_k": "topK", "max_tokens": "maxOutputTokens",
           "max_completion_tokens": "maxOutputTokens", "stop": "stopSequences", "seed": "seed",
           "presence_penalty": "presencePenalty", "frequency_penalty": "frequencyPenalty"}
_NATIVE = ("safetySettings", "toolConfig", "cachedContent", "labels")
"""Gemini's own request fields, passed as given; other OpenAI-style parameters have no equivalent and are left out
(the API refuses unknown fields)."""


class GeminiAdapter(ProviderAdapter):
    kind = "gemini"
    default_base_url = "https://generativelanguage.googleapis.com"
    request_path = "/v1beta/models/{model}:generateContent"
    base_url_mistakes = ("/v1beta", ":generateContent", "/models")
    key_variable = "GEMINI_API_KEY"
    tool_format = "gemini"
    telemetry_name = "gcp.gemini"
    api_version = "v1beta"

    def render_tools(self, tools: Sequence[ToolLike]) -> list[dict[str, Any]]:
        return [{"functionDeclarations": [self._render_cached(t, gemini_function) for t in tools]}] if tools else []

    def definition_tokens(self, tool: ToolLike) -> int:
        return estimate_tokens(self._render_cached(tool, gemini_function))  # one declaration, not the group

    def render_messages(self, messages: Sequence[Message]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for message in messages:
            if message.role == "system":
                continue
            if message.role == "assistant":
                parts = message.extras.get("gemini_parts") or _model_parts(message)
                if parts:
                    out.append({"role": "model", "parts": parts})
                continue
            part = _response_part(message) if message.role == "tool" else {"text": message.content or ""}
            if out and out[-1]["role"] == "user" and (message.role == "tool") == _has_responses(out[-1]):
                out[-1]["parts"].append(part)  # one content holds every functionResponse of a turn
            else:
                out.append({"role": "user", "parts": [part]})
        return out

    def _build_request(self, model: str, messages: list[Message], tools: list[ToolLike], params: dict[str, Any],
                       stream: bool) -> tuple[str, dict[str, str], dict[str, Any]]:
        body: dict[str, Any] = {"contents": self.render_messages(messages)}
        system = "\n\n".join(m.content or "" for m in messages if m.role == "system")
        if system:
            body["systemInstruction"] = {"parts": [{"text": system}]}
        if tools:
            body["tools"] = self.render_tools(tools)
        config = dict(params.pop("generationConfig", {}) or {})
        for key, value in params.items():
            if key in _PARAMS:
                config[_PARAMS[key]] = [value] if key == "stop" and isinstance(value, str) else value
            elif key in _NATIVE:
                body[key] = value
        response_format = params.get("response_format") or {}
        if response_format.get("type") in ("json_object", "json_schema"):
            config["responseMimeType"] = "application/json"
            schema = (response_format.get("json_schema") or {}).get("schema")
            if schema:
                config["responseJsonSchema"] = schema
        if config:
            body["generationConfig"] = config
        method = "streamGenerateContent?alt=sse" if stream else "generateContent"
        model_path = model if model.startswith(("models/", "tunedModels/")) else f"models/{model}"
        headers = {"x-goog-api-key": self.config.api_key} if self.config.api_key else {}
        return join_url(self.config.base_url, f"{self.api_version}/{model_path}:{method}"), headers, body

    def _parse_response(self, data: dict[str, Any]) -> Turn:
        candidates = data.get("candidates") or []
        if not candidates:
            feedback = data.get("promptFeedback") or {}
            raise ProviderError(self.name, f"no candidates (blocked: {feedback.get('blockReason', 'unknown')})")
        candidate = candidates[0]
        return _turn((candidate.get("content") or {}).get("parts") or [], candidate.get("finishReason"),
                     data.get("usageMetadata") or {})

    async def _parse_stream(self, response: httpx.Response, on_text: TextCallback) -> Turn:
        parts: list[dict[str, Any]] = []
        finish: str | None = None
        usage: dict[str, Any] = {}
        async for _, data in iter_sse(response):
            chunk = load_json(self.name, data)
            if chunk.get("error"):
                raise ProviderError(self.name, str(chunk["error"].get("message", chunk["error"])),
                                    chunk["error"].get("code"))
            usage = chunk.get("usageMetadata") or usage
            for candidate in (chunk.get("candidates") or [])[:1]:
                for part in (candidate.get("content") or {}).get("parts") or []:
                    if "text" in part and not part.get("thought") and part["text"]:
                        await on_text(part["text"])
                    _append_part(parts, part)
                finish = candidate.get("finishReason") or finish
        return _turn(parts, finish, usage)


def _append_part(parts: list[dict[str, Any]], part: dict[str, Any]) -> None:
    """Merge streamed text into the previous text part of the same kind, keep everything else as sent."""
    last = parts[-1] if parts else None
    mergeable = set(part) <= {"text", "thought", "thoughtSignature"} and "text" in part
    if (mergeable and last is not None and set(last) <= {"text", "thought", "thoughtSignature"} and "text" in last
            and bool(last.get("thought")) == bool(part.get("thought")) and "thoughtSignature" not in last):
        last["text"] += part["text"]
        if "thoughtSignature" in part:
            last["thoughtSignature"] = part["thoughtSignature"]
        return
    parts.append(dict(part))


def _turn(parts: list[dict[str, Any]], finish: str | None, usage: dict[str, Any]) -> Turn:
    texts, calls = [], []
    for part in parts:
        if "functionCall" in part:
            call = part["functionCall"] or {}
            extras = {"thoughtSignature": part["thoughtSignature"]} if "thoughtSignature" in part else {}
            calls.append(make_call(call.get("id"), call.get("name", ""), call.get("args"), extras))
        elif "text" in part and not part.get("thought"):
            texts.append(part["text"])
    message = Message(role="assistant", content="".join(texts) or None, tool_calls=calls,
                      extras={"gemini_parts": parts} if parts else {})
    # Gemini says STOP when it called tools: the message decides, the reason only tells truncation apart.
    reason: FinishReason = _FINISH.get(finish or "", "other" if finish else "stop")
    if calls and reason == "stop":
        reason = "tool_calls"
    output = int(usage.get("candidatesTokenCount") or 0) + int(usage.get("thoughtsTokenCount") or 0)
    return Turn(message=message, finish_reason=reason, raw_finish_reason=finish,
                usage=Usage(int(usage.get("promptTokenCount") or 0), output))


def _model_parts(message: Message) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = [{"text": message.content}] if message.content else []
    for call in message.tool_calls:
        parts.append(_call_part(call))
    return parts


def _call_part(call: ToolCall) -> dict[str, Any]:
    function: dict[str, Any] = {"name": call.name, "args": call.arguments or {}}
    if not call.extras.get("synthesized_id"):
        function["id"] = call.id
    part: dict[str, Any] = {"functionCall": function}
    if call.extras.get("thoughtSignature"):
        part["thoughtSignature"] = call.extras["thoughtSignature"]
    return part


def _response_part(message: Message) -> dict[str, Any]:
    response: dict[str, Any] = {"name": message.name or "", "response": result_payload(message)}
    if message.tool_call_id and not message.extras.get("synthesized_id"):
        response["id"] = message.tool_call_id
    return {"functionResponse": response}


def _has_responses(content: dict[str, Any]) -> bool:
    return any("functionResponse" in part for part in content["parts"])
