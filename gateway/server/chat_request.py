"""OpenAI chat request fields into the loop's terms: `messages` into `Message`s, the sampling
parameters into the `params` passed to the provider.

Every mistake is a 400 naming the field (`messages[2].tool_calls[0].function.arguments`), never a
500 from deep inside the loop.
"""

from __future__ import annotations

import json
from typing import Any

from ..messages import Message, ToolCall
from .api_errors import APIError

# Parameters passed through to the provider (each adapter keeps those its API supports), and the JSON
# types each may have.
_PARAM_TYPES: dict[str, tuple[type, ...]] = {
    "temperature": (int, float),
    "top_p": (int, float),
    "max_tokens": (int,),
    "max_completion_tokens": (int,),
    "stop": (str, list),
    "seed": (int,),
    "presence_penalty": (int, float),
    "frequency_penalty": (int, float),
    "response_format": (dict,),
    "user": (str,),
    "logit_bias": (dict,),
    "reasoning_effort": (str,),
    "top_k": (int,),
}


def parse_params(body: dict[str, Any]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for name, types in _PARAM_TYPES.items():
        value = body.get(name)
        if value is None:
            continue
        if types == (int,) and isinstance(value, float) and value.is_integer():
            value = int(value)  # JSON has one number type: 2.0 is the integer 2 (JSON Schema agrees)
        if not isinstance(value, types) or isinstance(value, bool):
            expected = " or ".join(_json_type(t) for t in types)
            raise APIError(400, f"`{name}` must be {expected}.", param=name)
        if name == "stop" and isinstance(value, list) and not all(isinstance(s, str) for s in value):
            raise APIError(400, "`stop` must be a string or a list of strings.", param=name)
        params[name] = value
    n = body.get("n")
    if n is not None and n != 1:
        raise APIError(400, "Only `n: 1` is supported: the gateway runs one loop per request.", param="n")
    return params


def parse_messages(raw: Any) -> list[Message]:
    if not isinstance(raw, list) or not raw:
        raise APIError(400, "`messages` must be a non-empty array of messages.", param="messages")
    messages: list[Message] = []
    names: dict[str, str] = {}  # tool call id -> tool name, for the tool messages answering them
    for index, item in enumerate(raw):
        where = f"messages[{index}]"
        if not isinstance(item, dict):
            raise APIError(400, f"`{where}` must be an object.", param=where)
        role = item.get("role")
        if role in ("system", "developer"):
            messages.append(Message(role="system", content=_text(item.get("content"), where)))
        elif role == "user":
            messages.append(Message(role="user", content=_text(item.get("content"), where)))
        elif role == "assistant":
            calls = _tool_calls(item.get("tool_calls"), where)
            names.update({call.id: call.name for call in calls})
            content = item.get("content")
            messages.append(Message(role="assistant", content=_text(content, where) if content is not None else None,
                                    tool_calls=calls))
        elif role == "tool":
            call_id = item.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise APIError(400, f"`{where}.tool_call_id` is required for a tool message.",
                               param=f"{where}.tool_call_id")
            messages.append(Message(role="tool", content=_text(item.get("content"), where), tool_call_id=call_id,
                                    name=names.get(call_id)))
        else:
            raise APIError(400, f"`{where}.role` must be one of system, developer, user, assistant, tool; "
                                f"got {role!r}.", param=f"{where}.role")
    return messages


def _text(content: Any, where: str) -> str:
    """A message's content as text: a string, or an array of `text` parts (other parts are refused)."""
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if isinstance(content, list):
        texts = []
        for index, part in enumerate(content):
            if isinstance(part, dict) and part.get("type") in ("text", "input_text") and isinstance(
                    part.get("text"), str):
                texts.append(part["text"])
            elif isinstance(part, str):
                texts.append(part)
            else:
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise APIError(400, f"`{where}.content[{index}]`: only text parts are supported, not {kind!r}.",
                               param=f"{where}.content")
        return "".join(texts)
    raise APIError(400, f"`{where}.content` must be a string or an array of text parts.", param=f"{where}.content")


def _tool_calls(raw: Any, where: str) -> list[ToolCall]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise APIError(400, f"`{where}.tool_calls` must be an array.", param=f"{where}.tool_calls")
    calls = []
    for index, item in enumerate(raw):
        at = f"{where}.tool_calls[{index}]"
        function = item.get("function") if isinstance(item, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise APIError(400, f"`{at}` must be {{id, type: function, function: {{name, arguments}}}}.", param=at)
        call_id = item.get("id") if isinstance(item.get("id"), str) else f"call_{index}"
        raw_arguments = function.get("arguments")
        arguments: dict[str, Any] | None = None
        parse_error = None
        if isinstance(raw_arguments, str):
            try:
                parsed = json.loads(raw_arguments) if raw_arguments.strip() else {}
            except ValueError as exc:
                parsed, parse_error = None, f"the arguments are not valid JSON ({exc})"
            if parsed is not None and not isinstance(parsed, dict):
                parsed, parse_error = None, "the arguments must be a JSON object"
            arguments = parsed
        elif isinstance(raw_arguments, dict):
            arguments = raw_arguments
        elif raw_arguments is None:
            arguments = {}
        else:
            raise APIError(400, f"`{at}.function.arguments` must be a JSON string.", param=f"{at}.function.arguments")
        calls.append(ToolCall(id=call_id, name=function["name"], arguments=arguments, raw_arguments=raw_arguments,
                              parse_error=parse_error))
    return calls


def _json_type(t: type) -> str:
    return {int: "an integer", float: "a number", str: "a string", list: "an array", dict: "an object"}[t]
