"""OpenAI's Responses API (`POST {base_url}/responses`), for `kind: openai-responses` providers.

The conversation goes out as input items: messages, `function_call` items (arguments a JSON string, as the model
sent them) and one `function_call_output` per call. Requests are sent with `store: false`, so no state is left at
the provider; reasoning models' `reasoning` items come back with their `encrypted_content` (asked for with
`include`) and are kept on the assistant message, then sent again before that turn's calls on every later turn
of the loop, as the API expects. Streaming reads the typed event stream (`response.output_text.delta`,
`response.output_item.done`, `response.completed`); the finished items are taken from the done events.

Native tool search (`tool_search: native`): `DeferredTool`s go out as functions with `defer_loading: true`,
grouped in one `namespace` per api (the model is shown a namespace's name and description up front, but every
name and description of deferred functions outside one), beside a `{"type": "tool_search"}` tool (run by the
server). The API answers with `tool_search_call` and `tool_search_output` items (the loaded definitions) before
the model's `function_call`s, which name their `namespace`; a turn with search items keeps its items but the
calls, text included, in their order, and sends them back before its calls (with their namespace) later.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import httpx

from ..dialects import openai_tool
from ..dialects.tool import ToolLike
from ..errors import ProviderError
from ..kernel.usage import Usage
from ..messages import Message
from .base import FinishReason, TextCallback, Turn, iter_sse, join_url, load_json, make_call
from .deferred import DeferredTool, ServerSearchTool
from .openai import OpenAIStrictArguments

REASONING_KEY = "responses_reasoning"
"""Message.extras key: the `reasoning` (and tool search) items of an assistant turn, echoed back as they came."""
IN_ORDER_KEY = "responses_in_order"
"""Message.extras key: the turn's text messages are among the kept items, where the model wrote them."""
_SEARCH_ITEMS = ("tool_search_call", "tool_search_output")
_READ_ONLY = {"reasoning": ("status",), "tool_search_call": ("created_by",), "tool_search_output": ("created_by",),
              "message": ()}
"""Fields of output items the API refuses as input."""

# Chat-style parameters (what callers and agents.yaml speak) in the Responses API's terms.
_RENAMED = {"max_tokens": "max_output_tokens", "max_completion_tokens": "max_output_tokens"}
_PASSED = ("temperature", "top_p", "user", "metadata", "parallel_tool_calls", "max_output_tokens", "truncation",
           "reasoning", "service_tier", "prompt_cache_key", "safety_identifier")


class OpenAIResponsesAdapter(OpenAIStrictArguments):
    kind = "openai-responses"
    default_base_url = "https://api.openai.com/v1"
    request_path = "/responses"
    base_url_mistakes = ("/responses",)
    key_variable = "OPENAI_API_KEY"
    telemetry_name = "openai"
    native_tool_search = True

    def render_tools(self, tools: Sequence[ToolLike]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        spaces: dict[str, dict[str, Any]] = {}
        for tool in tools:
            rendered = self._render_cached(tool, self._render_tool)
            if not isinstance(tool, DeferredTool) or not tool.group:
                out.append(rendered)
                continue
            space = spaces.get(tool.group)
            if space is None:  # where its first tool was, so the list keeps its order request after request
                space = spaces[tool.group] = _namespace(tool)
                out.append(space)
            space["tools"].append(rendered)
        return out

    def _render_tool(self, tool: ToolLike) -> dict[str, Any]:
        if isinstance(tool, ServerSearchTool):
            return {"type": "tool_search"}
        # The chat dialect's function object, flattened: the Responses API has no `function` wrapper.
        function = openai_tool(tool, strict=self.strict)["function"]
        if isinstance(tool, DeferredTool):
            function["defer_loading"] = True
        return {"type": "function", **function}

    def render_messages(self, messages: Sequence[Message], *, without_search: bool = False) -> list[dict[str, Any]]:
        """The conversation as input items. `without_search`: leave out tool search items, for a request that
        offers no tools (the summary at a limit), where no search tool stands behind them."""
        items: list[dict[str, Any]] = []
        for message in messages:
            items.extend(i for i in _render_message(message) if not (without_search and i["type"] in _SEARCH_ITEMS))
        return items

    def _build_request(self, model: str, messages: list[Message], tools: list[ToolLike], params: dict[str, Any],
                       stream: bool) -> tuple[str, dict[str, str], dict[str, Any]]:
        body: dict[str, Any] = {"model": model, "input": self.render_messages(messages, without_search=not tools),
                                "store": False, "include": ["reasoning.encrypted_content"]}
        body.update(_map_params(params))
        if tools:
            body["tools"] = self.render_tools(tools)
            choice = _tool_choice(params.get("tool_choice"))
            if choice is not None:
                body["tool_choice"] = choice
        else:
            body.pop("parallel_tool_calls", None)
        if stream:
            body["stream"] = True
        headers = {"Authorization": f"Bearer {self.config.api_key}"} if self.config.api_key else {}
        return join_url(self.config.base_url, self.request_path), headers, body

    def _parse_response(self, data: dict[str, Any]) -> Turn:
        if data.get("error"):
            raise ProviderError(self.name, _error_text(data["error"]))
        return _turn(data.get("output") or [], data)

    async def _parse_stream(self, response: httpx.Response, on_text: TextCallback) -> Turn:
        items: dict[int, dict[str, Any]] = {}
        final: dict[str, Any] = {}
        async for _, data in iter_sse(response):
            if data.strip() == "[DONE]":
                break
            event = load_json(self.name, data)
            kind = event.get("type") if isinstance(event, dict) else None
            if kind == "response.output_text.delta":
                if event.get("delta"):
                    await on_text(event["delta"])
            elif kind == "response.output_item.done":
                items[int(event.get("output_index", len(items)))] = event.get("item") or {}
            elif kind in ("response.completed", "response.incomplete"):
                final = event.get("response") or {}
            elif kind == "response.failed":
                failed = event.get("response") or {}
                raise ProviderError(self.name, _error_text(failed.get("error") or "the response failed"))
            elif kind == "error":
                raise ProviderError(self.name, _error_text(event))
        # The done events carry every finished item; the final response's `output` holds the same when a server
        # sends it, and is used when the done events were left out.
        output = [items[i] for i in sorted(items)] or final.get("output") or []
        return _turn(output, final)


def namespace_name(group: str) -> str:
    """An api's name as a namespace name (letters, digits, `_` and `-`)."""
    return re.sub(r"[^a-zA-Z0-9_-]", "_", group)[:64] or "tools"


def _namespace(tool: DeferredTool) -> dict[str, Any]:
    about = f"{tool.group_title} ({tool.group})" if tool.group_title else f"the {tool.group} API"
    return {"type": "namespace", "name": namespace_name(tool.group), "tools": [],
            "description": f"Operations of {about}; search to load the ones a task needs."}


def _map_params(params: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in params.items():
        key = _RENAMED.get(key, key)
        if key in _PASSED:
            out[key] = value
    if isinstance(params.get("reasoning_effort"), str):
        out["reasoning"] = {**(out.get("reasoning") or {}), "effort": params["reasoning_effort"]}
    response_format = params.get("response_format")
    if isinstance(response_format, dict) and response_format.get("type") == "json_schema":
        schema = response_format.get("json_schema") or {}
        out["text"] = {"format": {"type": "json_schema", **schema}}
    elif isinstance(response_format, dict) and response_format.get("type") == "json_object":
        out["text"] = {"format": {"type": "json_object"}}
    return out


def _tool_choice(choice: Any) -> Any:
    """A chat-style `tool_choice` in the Responses API's form (`{"type": "function", "name"}`)."""
    if isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        return {"type": "function", "name": choice["function"].get("name")}
    return choice


def _render_message(message: Message) -> list[dict[str, Any]]:
    if message.role == "tool":
        return [{"type": "function_call_output", "call_id": message.tool_call_id, "output": message.content or ""}]
    if message.role != "assistant":
        role = "developer" if message.role == "system" else message.role
        return [{"type": "message", "role": role, "content": message.content or ""}]
    items: list[dict[str, Any]] = [dict(item) for item in message.extras.get(REASONING_KEY) or []]
    if message.content and not message.extras.get(IN_ORDER_KEY):
        items.append({"type": "message", "role": "assistant",
                      "content": [{"type": "output_text", "text": message.content, "annotations": []}]})
    for call in message.tool_calls:
        raw = call.raw_arguments
        arguments = raw if isinstance(raw, str) else json.dumps(call.arguments if call.arguments is not None else {})
        item = {"type": "function_call", "call_id": call.extras.get("provider_id", call.id), "name": call.name,
                "arguments": arguments}
        if call.extras.get("namespace"):
            item["namespace"] = call.extras["namespace"]
        items.append(item)
    return items


def _turn(output: list[dict[str, Any]], response: dict[str, Any]) -> Turn:
    texts: list[str] = []
    calls = []
    kept = []
    in_order = any(item.get("type") in _SEARCH_ITEMS for item in output)
    for item in output:
        kind = item.get("type")
        if kind == "message":
            texts.extend(part.get("text") or "" for part in item.get("content") or []
                         if part.get("type") == "output_text")
        elif kind == "function_call":
            namespace = {"namespace": item["namespace"]} if item.get("namespace") else None
            calls.append(make_call(item.get("call_id") or item.get("id"), item.get("name") or "",
                                   item.get("arguments"), namespace))
        if kind in ("reasoning", *_SEARCH_ITEMS) or (kind == "message" and in_order):
            # Echoed as sent, minus the read-only fields the API refuses in input.
            kept.append({k: v for k, v in item.items() if k not in _READ_ONLY[kind]})
    message = Message(role="assistant", content="".join(texts) or None, tool_calls=calls)
    if kept:
        message.extras[REASONING_KEY] = kept
    if in_order:
        message.extras[IN_ORDER_KEY] = True
    details = response.get("incomplete_details") or {}
    reason: FinishReason = "stop"
    raw = response.get("status")
    if raw == "incomplete":
        cause = details.get("reason") if isinstance(details, dict) else None
        reason = "content_filter" if cause == "content_filter" else "length"
        raw = cause or raw
    elif calls:
        reason = "tool_calls"
    usage = response.get("usage") or {}
    return Turn(message=message, finish_reason=reason, raw_finish_reason=raw,
                usage=Usage(int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)))


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        return str(error.get("message") or error)
    return str(error)
