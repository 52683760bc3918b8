"""The Responses API's wire shapes: input items into `Message`s, a run into a Response object and its events.

Input is a string (one user message) or a list of items: messages (`role` user/system/developer/assistant,
content a string or `input_text`/`output_text` parts), `function_call` items (a turn's calls, gathered into
one assistant message) and `function_call_output` items (one tool message each). Anything else is a 400 naming
the item. Output items are one `message` per turn of the run that said something, then a `function_call` item
for each call handed back to the caller's own tools. The stream is the typed event sequence the official SDK
accumulates (`response.created` ... `response.completed`), each event with its `sequence_number`; the gateway's
steps go as `gateway.step_started` / `gateway.step_finished` / `gateway.approval_pending` events, which the
SDKs pass through untouched.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from ..kernel.usage import Usage
from ..loop_types import RunResult
from ..messages import Message, ToolCall
from ..providers.base import make_call
from .api_errors import APIError


def parse_input(raw: Any) -> list[Message]:
    if isinstance(raw, str):
        return [Message(role="user", content=raw)]
    if not isinstance(raw, list) or not raw:
        raise APIError(400, "`input` must be a string or a non-empty array of input items.", param="input")
    messages: list[Message] = []
    names: dict[str, str] = {}  # call id -> tool name, for the outputs answering them
    for index, item in enumerate(raw):
        where = f"input[{index}]"
        if not isinstance(item, dict):
            raise APIError(400, f"`{where}` must be an object.", param=where)
        kind = item.get("type", "message")
        if kind == "message":
            messages.append(_message(item, where))
        elif kind == "function_call":
            call = _function_call(item, where)
            names[call.id] = call.name
            last = messages[-1] if messages else None
            if last is not None and last.role == "assistant":
                last.tool_calls.append(call)  # a turn's text and calls, or several calls: one assistant message
            else:
                messages.append(Message(role="assistant", content=None, tool_calls=[call]))
        elif kind == "function_call_output":
            call_id = item.get("call_id")
            if not isinstance(call_id, str) or not call_id:
                raise APIError(400, f"`{where}.call_id` is required.", param=f"{where}.call_id")
            messages.append(Message(role="tool", content=_text(item.get("output"), f"{where}.output"),
                                    tool_call_id=call_id, name=names.get(call_id)))
        else:
            raise APIError(400, f"`{where}`: items of type {kind!r} are not supported (messages, function_call and "
                                f"function_call_output are).", param=where, code="unsupported_input_item")
    return messages


def _message(item: dict[str, Any], where: str) -> Message:
    role = item.get("role")
    if role in ("system", "developer"):
        return Message(role="system", content=_text(item.get("content"), f"{where}.content"))
    if role in ("user", "assistant"):
        return Message(role=role, content=_text(item.get("content"), f"{where}.content"))
    raise APIError(400, f"`{where}.role` must be one of user, assistant, system, developer; got {role!r}.",
                   param=f"{where}.role")


def _function_call(item: dict[str, Any], where: str) -> ToolCall:
    call_id, name = item.get("call_id"), item.get("name")
    if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
        raise APIError(400, f"`{where}` must have `call_id`, `name` and `arguments`.", param=where)
    arguments = item.get("arguments")
    if arguments is not None and not isinstance(arguments, str):
        raise APIError(400, f"`{where}.arguments` must be a JSON string.", param=f"{where}.arguments")
    return make_call(call_id, name, arguments)


def _text(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if isinstance(content, list):
        texts = []
        for index, part in enumerate(content):
            if isinstance(part, dict) and part.get("type") in ("input_text", "output_text", "text") and isinstance(
                    part.get("text"), str):
                texts.append(part["text"])
            elif isinstance(part, dict) and part.get("type") == "refusal" and isinstance(part.get("refusal"), str):
                texts.append(part["refusal"])
            else:
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise APIError(400, f"`{where}[{index}]`: only text parts are supported, not {kind!r}.", param=where)
        return "".join(texts)
    raise APIError(400, f"`{where}` must be a string or an array of text parts.", param=where)


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def message_item(item_id: str, text: str, *, done: bool = True) -> dict[str, Any]:
    content = [text_part(text)] if done else []
    return {"type": "message", "id": item_id, "role": "assistant", "status": "completed" if done else "in_progress",
            "content": content}


def text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def function_call_item(call: ToolCall, namespace: str | None = None) -> dict[str, Any]:
    """A handed-back call; `namespace`: the caller's `namespace` tool the function came in."""
    raw = call.raw_arguments
    arguments = raw if isinstance(raw, str) else json.dumps(call.arguments if call.arguments is not None else {})
    item = {"type": "function_call", "id": f"fc_{call.id}", "call_id": call.id, "name": call.name,
            "arguments": arguments, "status": "completed"}
    if namespace:
        item["namespace"] = namespace
    return item


def turn_texts(result: RunResult, first_new: int) -> list[str]:
    """What the run said, one text per turn (a paused run: its answer, which says what waits)."""
    if result.paused:
        return [result.message.content] if result.message.content else []
    return [m.content for m in result.messages[first_new:] if m.role == "assistant" and m.content]


def output_items(result: RunResult, first_new: int, namespaces: dict[str, str] | None = None, *,
                 ids: str | None = None) -> list[dict[str, Any]]:
    """The Response's output: a message per turn that spoke, then the handed-back calls (with the namespace their
    function came in, by name in `namespaces`). `ids`: message ids made from it and their place (else new ones)."""
    spaces = namespaces or {}
    texts = turn_texts(result, first_new)
    names = [f"msg_{ids}{index}" for index in range(len(texts))] if ids is not None else [new_id("msg") for _ in texts]
    items = [message_item(name, text) for name, text in zip(names, texts, strict=True)]
    return items + [function_call_item(call, spaces.get(call.name)) for call in result.handed_back]


def usage_object(usage: Usage) -> dict[str, Any]:
    return {"input_tokens": usage.input_tokens, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": usage.output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage.total_tokens}


def status_of(result: RunResult) -> tuple[str, dict[str, Any] | None]:
    """The Response's `status` and `incomplete_details`: a provider's cut is `incomplete`."""
    if result.finish_reason == "length":
        return "incomplete", {"reason": "max_output_tokens"}
    if result.finish_reason == "content_filter":
        return "incomplete", {"reason": "content_filter"}
    return "completed", None


class EventWriter:
    """Server-sent events of one streamed response, numbered in order."""

    def __init__(self) -> None:
        self.sequence = 0

    def __call__(self, kind: str, **data: Any) -> bytes:
        payload = {"type": kind, "sequence_number": self.sequence, **data}
        self.sequence += 1
        text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False, default=str)
        return f"event: {kind}\ndata: {text}\n\n".encode()


class StreamedOutput:
    """The output items of a streamed run, opened and closed as its text and handed-back calls arrive."""

    def __init__(self, write: EventWriter) -> None:
        self.write = write
        self.items: list[dict[str, Any]] = []
        self._open: dict[str, Any] | None = None
        self._iteration = -1

    def text(self, text: str, iteration: int) -> list[bytes]:
        out = []
        if self._open is not None and iteration != self._iteration:
            out.extend(self.close())
        if self._open is None:
            self._iteration = iteration
            item = message_item(new_id("msg"), "", done=False)
            self._open = item
            index = len(self.items)
            self.items.append(item)
            out.append(self.write("response.output_item.added", output_index=index, item=item))
            out.append(self.write("response.content_part.added", item_id=item["id"], output_index=index,
                                  content_index=0, part=text_part("")))
            item["text"] = []
        self._open["text"].append(text)
        out.append(self.write("response.output_text.delta", item_id=self._open["id"], output_index=len(self.items) - 1,
                              content_index=0, delta=text, logprobs=[]))
        return out

    def close(self) -> list[bytes]:
        item, self._open = self._open, None
        if item is None:
            return []
        index = self.items.index(item)
        text = "".join(item.pop("text"))
        done = message_item(item["id"], text)
        self.items[index] = done
        return [self.write("response.output_text.done", item_id=done["id"], output_index=index, content_index=0,
                           text=text, logprobs=[]),
                self.write("response.content_part.done", item_id=done["id"], output_index=index, content_index=0,
                           part=done["content"][0]),
                self.write("response.output_item.done", output_index=index, item=done)]

    def calls(self, calls: list[ToolCall], namespaces: dict[str, str] | None = None) -> list[bytes]:
        out = self.close()
        for call in calls:
            item = function_call_item(call, (namespaces or {}).get(call.name))
            index = len(self.items)
            self.items.append(item)
            out.append(self.write("response.output_item.added", output_index=index,
                                  item={**item, "arguments": "", "status": "in_progress"}))
            out.append(self.write("response.function_call_arguments.delta", item_id=item["id"], output_index=index,
                                  delta=item["arguments"]))
            out.append(self.write("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                                  name=item["name"], arguments=item["arguments"]))
            out.append(self.write("response.output_item.done", output_index=index, item=item))
        return out
