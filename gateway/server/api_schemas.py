"""The JSON Schemas of the gateway's own requests and answers: the `components.schemas` of `GET /openapi.json`.

They describe what the doors take and give (OpenAI's chat and Responses shapes, a tool result, the error
shape, the plain listings), so a fuzzer checking response schemas holds the server to them.
"""

from __future__ import annotations

from typing import Any

from ..dialects import FORMATS

_NULLABLE_STRING = {"type": ["string", "null"]}

_ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["message", "type", "code"],
            "properties": {
                "message": {"type": "string"},
                "type": {"type": "string"},
                "code": {"type": ["string", "null"]},
                "param": _NULLABLE_STRING,
            },
        },
        "result": {"$ref": "#/components/schemas/ToolResult"},
    },
}

_TOOL_RESULT = {
    "type": "object",
    "required": ["ok", "status", "body", "truncated", "error", "error_type", "duration_ms", "bytes"],
    "properties": {
        "ok": {"type": "boolean"},
        "status": {"type": ["integer", "null"], "description": "The upstream HTTP status; null when nothing was sent."},
        "media_type": _NULLABLE_STRING,
        "body": {"description": "Parsed JSON, text, or a description of a binary body."},
        "truncated": {"type": "boolean"},
        "error": _NULLABLE_STRING,
        "error_type": _NULLABLE_STRING,
        "duration_ms": {"type": "number"},
        "bytes": {"type": "integer"},
        "approval_id": {"type": "string"},
    },
}

_CONTENT = {"anyOf": [
    {"type": "string"},
    {"type": "array", "items": {"type": "object", "required": ["type", "text"],
                                "properties": {"type": {"const": "text"}, "text": {"type": "string"}}}},
    {"type": "null"},
]}

_TEXT_MESSAGE = {
    "type": "object",
    "required": ["role"],
    "properties": {"role": {"enum": ["system", "developer", "user"]}, "content": _CONTENT, "name": {"type": "string"}},
}

_ASSISTANT_MESSAGE = {
    "type": "object",
    "required": ["role"],
    "properties": {
        "role": {"const": "assistant"},
        "content": _CONTENT,
        "name": {"type": "string"},
        "tool_calls": {"type": "array", "items": {
            "type": "object",
            "required": ["id", "type", "function"],
            "properties": {
                "id": {"type": "string"},
                "type": {"const": "function"},
                "function": {"type": "object", "required": ["name", "arguments"],
                             "properties": {"name": {"type": "string"}, "arguments": {"type": "string"}}},
            },
        }},
    },
}

_TOOL_MESSAGE = {
    "type": "object",
    "required": ["role", "tool_call_id"],
    "properties": {"role": {"const": "tool"}, "content": _CONTENT, "tool_call_id": {"type": "string", "minLength": 1},
                   "name": {"type": "string"}},
}

_FUNCTION = {
    "type": "object", "required": ["name"],
    "properties": {"name": {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,64}$"}, "description": {"type": "string"},
                   "parameters": {"type": "object"}, "strict": {"type": "boolean"}},
}

_TOOL_CHOICE = {"anyOf": [{"enum": ["none", "auto", "required"]}, {
    "type": "object", "required": ["type", "function"],
    "properties": {"type": {"const": "function"}, "function": {
        "type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}}}]}
_RESPONSES_TOOL_CHOICE = {"anyOf": [{"enum": ["none", "auto", "required"]}, {
    "type": "object", "required": ["type", "name"],
    "properties": {"type": {"const": "function"}, "name": {"type": "string"}}}]}

_RESPONSES_TEXT_PARTS = {"anyOf": [{"type": "string"}, {"type": "null"}, {"type": "array", "items": {"anyOf": [
    {"type": "object", "required": ["type", "text"],
     "properties": {"type": {"enum": ["input_text", "output_text", "text"]}, "text": {"type": "string"}}},
    {"type": "object", "required": ["type", "refusal"],
     "properties": {"type": {"const": "refusal"}, "refusal": {"type": "string"}}}]}}]}

_RESPONSES_INPUT_ITEM = {"anyOf": [
    {"type": "object", "required": ["role"], "description": "A message (`type` may be left out).",
     "properties": {"type": {"const": "message"}, "role": {"enum": ["user", "assistant", "system", "developer"]},
                    "content": _RESPONSES_TEXT_PARTS}},
    {"type": "object", "required": ["type", "call_id", "name"], "description": "A call the model made.",
     "properties": {"type": {"const": "function_call"}, "call_id": {"type": "string", "minLength": 1},
                    "name": {"type": "string", "minLength": 1}, "arguments": {"type": ["string", "null"]},
                    "namespace": {"type": "string"}}},
    {"type": "object", "required": ["type", "call_id"], "description": "A function's result.",
     "properties": {"type": {"const": "function_call_output"}, "call_id": {"type": "string", "minLength": 1},
                    "output": _RESPONSES_TEXT_PARTS}},
]}

_BUILT_IN_TOOL = {"type": "object", "required": ["type"],
                  "description": "A built-in tool (web_search, ...): left out, and listed in `gateway.ignored`.",
                  "properties": {"type": {"type": "string", "minLength": 1,
                                          "not": {"enum": ["function", "namespace"]}}}}

_RESPONSES_FUNCTION = {"allOf": [
    {"type": "object", "required": ["type"], "properties": {"type": {"const": "function"}}},
    {"$ref": "#/components/schemas/Function"}]}


def _responses_request(function: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["model", "input"],
        "properties": {
            "model": {"type": "string", "minLength": 1, "description": "The agent's name (GET /v1/models)."},
            "input": {"anyOf": [{"type": "string"}, {"type": "array", "minItems": 1, "items": _RESPONSES_INPUT_ITEM}]},
            "instructions": {"type": ["string", "null"]},
            "previous_response_id": {"type": ["string", "null"], "minLength": 1,
                                     "description": "A response of the same client key."},
            "store": {"type": "boolean", "default": True},
            "stream": {"type": "boolean", "default": False},
            "stream_options": {"type": ["object", "null"]},
            "tools": {"type": ["array", "null"], "items": {"anyOf": [
                function,
                {"type": "object", "required": ["type", "name", "tools"], "description": "A namespace: its "
                 "functions are your tools, handed back with the namespace.",
                 "properties": {"type": {"const": "namespace"}, "name": {"type": "string", "minLength": 1},
                                "tools": {"type": "array", "items": {"anyOf": [function, _BUILT_IN_TOOL]}}}},
                _BUILT_IN_TOOL,
            ]}},
            "tool_choice": {"anyOf": [_RESPONSES_TOOL_CHOICE, {"type": "null"}]},
            "parallel_tool_calls": {"type": ["boolean", "null"]},
            "temperature": {"type": ["number", "null"], "minimum": 0, "maximum": 2},
            "top_p": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
            "max_output_tokens": {"type": ["integer", "null"], "minimum": 1},
            "metadata": {"type": ["object", "null"], "additionalProperties": {"type": "string"}},
            "user": {"type": ["string", "null"]},
            "text": {"type": ["object", "null"], "additionalProperties": False, "properties": {
                "format": {"anyOf": [{"type": "null"}, {"type": "object", "required": ["type"], "properties": {
                    "type": {"enum": ["text", "json_object", "json_schema"]}}}]},
                "verbosity": {"enum": ["medium", None]}}},
            "reasoning": {"type": ["object", "null"], "additionalProperties": False, "properties": {
                "effort": {"type": ["string", "null"]},
                "summary": {"type": ["string", "null"], "description": "Ignored (listed in `gateway.ignored`)."}}},
            "prompt_cache_key": {"type": ["string", "null"], "description": "Passed to OpenAI providers; else "
                                                                           "ignored and listed."},
            "safety_identifier": {"type": ["string", "null"], "description": "Passed to OpenAI providers; else "
                                                                            "ignored and listed."},
            "include": {"type": ["array", "null"], "items": {"type": "string"},
                        "description": "Ignored (listed in `gateway.ignored`)."},
            "client_metadata": {"type": ["object", "null"], "description": "Ignored (listed in `gateway.ignored`)."},
            "truncation": {"enum": ["disabled", None]},
            "background": {"enum": [False, None]},
            "service_tier": {"enum": ["auto", "default", None]},
        },
        "additionalProperties": False,
    }


_RESPONSES_REQUEST = _responses_request(_RESPONSES_FUNCTION)
RESPONSES_REQUEST_SCHEMA: dict[str, Any] = _responses_request({"allOf": [
    {"type": "object", "required": ["type"], "properties": {"type": {"const": "function"}}}, _FUNCTION]})
"""The Responses request with nothing referenced: what `POST /v1/responses` validates its body against, so the
document and the door agree."""

_RESPONSE = {
    "type": "object",
    "required": ["id", "object", "created_at", "status", "model", "output", "gateway"],
    "properties": {
        "id": {"type": "string"},
        "object": {"const": "response"},
        "created_at": {"type": "integer"},
        "status": {"enum": ["completed", "incomplete"]},
        "model": {"type": "string"},
        "output": {"type": "array", "items": {"type": "object", "required": ["type"], "properties": {
            "type": {"enum": ["message", "function_call"]}}}},
        "gateway": {"$ref": "#/components/schemas/GatewayExtension"},
    },
}

_MESSAGE = {"oneOf": [_TEXT_MESSAGE, _ASSISTANT_MESSAGE, _TOOL_MESSAGE]}

_REFUSED_LIST = {"type": "array", "maxItems": 0,
                 "description": "The deprecated form of `tools`: refused when not empty."}


def _chat_request(message: dict[str, Any], function: dict[str, Any], tool_choice: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["model", "messages"],
        "properties": {
            "model": {"type": "string", "minLength": 1, "description": "The agent's name (GET /v1/models)."},
            "messages": {"type": "array", "minItems": 1, "items": message},
            "stream": {"type": "boolean", "default": False},
            "stream_options": {"type": "object", "properties": {"include_usage": {"type": "boolean"}}},
            "temperature": {"type": "number", "minimum": 0, "maximum": 2},
            "top_p": {"type": "number", "minimum": 0, "maximum": 1},
            "max_tokens": {"type": "integer", "minimum": 1},
            "max_completion_tokens": {"type": "integer", "minimum": 1},
            "stop": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}, "maxItems": 4}]},
            "seed": {"type": "integer"},
            "presence_penalty": {"type": "number", "minimum": -2, "maximum": 2},
            "frequency_penalty": {"type": "number", "minimum": -2, "maximum": 2},
            "response_format": {"type": "object"},
            "logit_bias": {"type": "object"},
            "reasoning_effort": {"type": "string"},
            "top_k": {"type": "integer"},
            "user": {"type": "string"},
            "n": {"const": 1},
            "tools": {"type": "array", "items": {
                "type": "object", "required": ["type", "function"],
                "properties": {"type": {"const": "function"}, "function": function}},
                "description": "The caller's own tools: handed back when the model calls one (not an agent tool's "
                               "name)."},
            "tool_choice": tool_choice,
            "parallel_tool_calls": {"type": "boolean"},
            "functions": _REFUSED_LIST,
            "function_call": {"not": {}, "description": "The deprecated form of `tool_choice`: refused."},
        },
    }


_CHAT_REQUEST = _chat_request({"$ref": "#/components/schemas/ChatMessage"}, {"$ref": "#/components/schemas/Function"},
                              {"$ref": "#/components/schemas/ToolChoice"})
CHAT_REQUEST_SCHEMA: dict[str, Any] = _chat_request(_MESSAGE, _FUNCTION, _TOOL_CHOICE)
"""The chat request with its messages inline: what `POST /v1/chat/completions` validates its body against, so
the document and the door agree (a body the schema refuses is a 400; one it allows is not refused for its shape)."""

_STEP = {"type": "object", "description": "One tool call the gateway made: tool, arguments, status, duration."}

_GATEWAY_EXTENSION = {
    "type": "object",
    "required": ["steps", "pending_approvals", "cut"],
    "properties": {
        "steps": {"type": "array", "items": _STEP},
        "pending_approvals": {"type": "array", "items": {
            "type": "object", "description": "A tool call waiting for a human: id, agent, tool, arguments."}},
        "cut": {"type": "boolean", "description": "True when the iteration cap ended the loop."},
    },
}

_USAGE = {
    "type": "object",
    "required": ["prompt_tokens", "completion_tokens", "total_tokens"],
    "properties": {k: {"type": "integer", "minimum": 0}
                   for k in ("prompt_tokens", "completion_tokens", "total_tokens")},
}

_CHAT_COMPLETION = {
    "type": "object",
    "required": ["id", "object", "created", "model", "choices", "gateway"],
    "properties": {
        "id": {"type": "string"},
        "object": {"const": "chat.completion"},
        "created": {"type": "integer"},
        "model": {"type": "string"},
        "choices": {"type": "array", "minItems": 1, "maxItems": 1, "items": {
            "type": "object",
            "required": ["index", "message", "finish_reason"],
            "properties": {
                "index": {"type": "integer"},
                "message": {"type": "object", "required": ["role", "content"], "properties": {
                    "role": {"const": "assistant"}, "content": {"type": ["string", "null"]},
                    "tool_calls": {"type": "array", "items": {"type": "object"},
                                   "description": "Calls of the caller's own tools, handed back."}}},
                "finish_reason": {"enum": ["stop", "length", "content_filter", "tool_calls"]},
            },
        }},
        "usage": {"$ref": "#/components/schemas/Usage"},
        "gateway": {"$ref": "#/components/schemas/GatewayExtension"},
    },
}

_STRING_LIST = {"type": "array", "items": {"type": "string"}}

_MODEL = {
    "type": "object", "required": ["id", "object", "owned_by"],
    "properties": {"id": {"type": "string"}, "object": {"const": "model"}, "created": {"type": "integer"},
                   "owned_by": {"type": "string"}, "description": {"type": "string"}},
}

_MODEL_LIST = {
    "type": "object",
    "required": ["object", "data"],
    "properties": {"object": {"const": "list"},
                   "data": {"type": "array", "items": {"$ref": "#/components/schemas/Model"}}},
}

_AGENT_LIST = {
    "type": "object",
    "required": ["data"],
    "properties": {"data": {"type": "array", "items": {
        "type": "object", "required": ["name", "model", "tools"],
        "properties": {"name": {"type": "string"}, "description": {"type": "string"}, "model": {"type": "string"},
                       "approval": {"enum": ["never", "writes", "always"]}, "delegates": _STRING_LIST,
                       "tools": _STRING_LIST}}}},
}

_TOOL_LIST = {
    "type": "object",
    "required": ["agent", "format", "data"],
    "properties": {"agent": {"type": "string"}, "format": {"enum": list(FORMATS)},
                   "data": {"type": "array", "items": {"type": "object"}}},
}

_HEALTH = {
    "type": "object",
    "required": ["status", "agents", "tools"],
    "properties": {"status": {"enum": ["ok", "degraded"], "description": "degraded: the last reload was refused "
                                                                           "(`reload_error` says why)"},
                   "agents": {"type": "integer"}, "tools": {"type": "integer"},
                   "diagnostics": {"type": "integer"}, "reloads": {"type": "integer"},
                   "reload_error": {"type": "string"},
                   "reload_warnings": {"type": "array", "items": {"type": "string"},
                                       "description": "tools the last reload took away from agents that had them "
                                                      "(their spec no longer has the operation)"}},
}
_READY = {
    "type": "object", "required": ["status", "store"],
    "properties": {"status": {"enum": ["ready", "unavailable"]},
                   "store": {"type": "string", "description": "ok, or why the store cannot write"},
                   "redis": {"type": "string", "description": "with gateway.redis: ok, or why Redis does not answer"}},
}


_TOOL_SEARCH: dict[str, Any] = {
    "type": "object", "required": ["data"],
    "properties": {"data": {"type": "array", "items": {
        "type": "object", "required": ["name", "api", "operation_id", "summary", "score"],
        "properties": {"name": {"type": "string"}, "api": {"type": "string"},
                       "operation_id": {"type": ["string", "null"]}, "summary": {"type": "string"},
                       "score": {"type": "number"},
                       "copies": {"type": "array", "items": {"type": "string"},
                                  "description": "the same operation at other addresses (Graph's /users/{id}/... "
                                                 "beside /me/...), ranked after this one"}}}},
                   "match": {"enum": ["weak", "close"],
                             "description": "weak: nothing found is close to the request (the tools listed are the "
                                            "closest); close: the best is. Absent where the search cannot tell "
                                            "(without the packaged local model, or over fewer than 100 of the "
                                            "agent's tools) or nothing was found."}},
}


SCHEMAS: dict[str, Any] = {
    "Error": _ERROR,
    "ToolResult": _TOOL_RESULT,
    "ChatMessage": _MESSAGE,
    "ChatRequest": _CHAT_REQUEST,
    "Function": _FUNCTION,
    "ToolChoice": _TOOL_CHOICE,
    "ResponsesRequest": _RESPONSES_REQUEST,
    "Response": _RESPONSE,
    "ChatCompletion": _CHAT_COMPLETION,
    "GatewayExtension": _GATEWAY_EXTENSION,
    "Usage": _USAGE,
    "Model": _MODEL,
    "ModelList": _MODEL_LIST,
    "AgentList": _AGENT_LIST,
    "ToolList": _TOOL_LIST,
    "ToolSearch": _TOOL_SEARCH,
    "Health": _HEALTH,
    "Ready": _READY,
}
"""By component name, as `#/components/schemas/<name>` refers to them."""
