"""`GET /openapi.json`: the gateway's own HTTP API as OpenAPI 3.1, so it can be fuzzed against itself.

Every response a route can give is declared, errors included (`default`: OpenAI's error shape), so a
fuzzer that checks statuses and response schemas holds the server to this document. The MCP endpoint
speaks JSON-RPC and is described only in prose. The schemas of the bodies are in `openapi_schemas`.
"""

from __future__ import annotations

import re
from typing import Any

from ..dialects import FORMATS
from ..kernel import __version__
from ..store.base import AUDIT_KINDS
from .api_schemas import SCHEMAS


def _json(schema_ref: str, description: str) -> dict[str, Any]:
    return {"description": description,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema_ref}"}}}}


_ERRORS = {"default": _json("Error", "An error, in OpenAI's shape.")}
_CALL_RESPONSES = {
    "200": _json("ToolResult", "The call succeeded."),
    "202": _json("ToolResult", "The tool needs a human's approval; `approval_id` names the request."),
    **_ERRORS,
}


def _agent_param() -> dict[str, Any]:
    return {"name": "agent", "in": "path", "required": True, "schema": {"type": "string"}}


_LIMIT = {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "default": 100}}
_DATA_LIST = {"type": "object", "required": ["data"],
              "properties": {"data": {"type": "array", "items": {"type": "object"}}}}

_AUDIT_FILTERS = [
    *({"name": name, "in": "query", "required": False, "description": f"Only rows whose `{name}` is this.",
       "schema": {"type": "string", "pattern": "^[^\\x00]*$"}}  # no stored value holds a NUL: a 400
      for name in ("agent", "client", "tool", "status", "run_id")),
    {"name": "kind", "in": "query", "required": False, "schema": {"type": "string",
                                                                  "enum": list(AUDIT_KINDS)}},
    *({"name": name, "in": "query", "required": False,
       "description": f"Rows {'at or after' if name == 'since' else 'before'} this time: ISO 8601 (UTC unless it "
                      "says otherwise) or epoch seconds.",
       "schema": {"anyOf": [{"type": "number"}, {"type": "string", "format": "date-time"}]}}
      for name in ("since", "until")),
]

# The safety layer's routes (DESIGN.md fixes their shapes); described when they are mounted.
SAFETY_PATHS: dict[str, Any] = {
    "/approvals": {"get": {
        "operationId": "listApprovals", "summary": "Tool calls waiting for a human",
        "parameters": [_LIMIT, {"name": "client", "in": "query", "required": False,
                                "description": "Only the calls of this client.",
                                "schema": {"type": "string", "pattern": "^[^\\x00]*$"}}],
        "responses": {"200": {"description": "Pending approvals, oldest first, taken in turns by client up to "
                                             "`limit`: id, agent, tool, arguments (redacted), ...",
                              "content": {"application/json": {"schema": _DATA_LIST}}}, **_ERRORS},
    }},
    "/approvals/{id}": {"post": {
        "operationId": "decideApproval", "summary": "Approve or deny a pending call; the run resumes",
        "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}],
        "requestBody": {"required": True, "content": {"application/json": {"schema": {
            "type": "object", "required": ["decision"],
            "properties": {"decision": {"enum": ["approve", "deny"]}, "arguments": {"type": ["object", "null"]},
                           "reason": {"type": ["string", "null"]}}}}}},
        "responses": {
            "200": {"description": "The finished chat completion (the finished Response for a run started on "
                                   "/v1/responses), or `{approval, result}` for a direct call.",
                    "content": {"application/json": {"schema": {"anyOf": [
                        {"$ref": "#/components/schemas/ChatCompletion"},
                        {"$ref": "#/components/schemas/Response"},
                        {"type": "object", "required": ["approval", "result"],
                         "properties": {"approval": {"type": "object"},
                                        "result": {"$ref": "#/components/schemas/ToolResult"}}}]}}}},
            "202": {"description": "Decided; the run still waits for other approvals.",
                    "content": {"application/json": {"schema": {"type": "object", "required": ["approval"]}}}},
            **_ERRORS,
        },
    }},
    "/audit": {"get": {
        "operationId": "listAudit", "summary": "Recent tool calls, chats and approval decisions, newest first",
        "parameters": [_LIMIT, *_AUDIT_FILTERS],
        "responses": {"200": {"description": "time, client, agent, tool, arguments (redacted), status, latency_ms, "
                                             "approval", "content": {"application/json": {"schema": _DATA_LIST}}},
                      **_ERRORS},
    }},
    "/settings": {"get": {
        "operationId": "runningSettings", "summary": "The settings this running gateway uses (an admin key only)",
        "parameters": [{"name": "agent", "in": "query", "required": False,
                        "description": "Only the settings that bear on this agent.", "schema": {"type": "string"}}],
        "responses": {"200": {"description": "Each setting the gateway runs on (key, value: a secret `set` or `unset`, "
                                             "layer, source: the line it was loaded from), whether agents.yaml still "
                                             "reads as the running manifest, and its errors when it is broken now",
                              "content": {"application/json": {"schema": {
                                  "type": "object", "required": ["data", "agents_yaml", "agents_yaml_errors"],
                                  "properties": {"data": {"type": "array", "items": {"type": "object"}},
                                                 "agents_yaml": {"enum": ["as loaded", "changed", "broken",
                                                                          "unreadable"]},
                                                 "agents_yaml_errors": {"type": "array",
                                                                        "items": {"type": "object"}},
                                                 "restart_needed": {
                                                     "type": "array", "items": {"type": "string"},
                                                     "description": "The settings read at start only whose value "
                                                                    "in agents.yaml now is not the one this process "
                                                                    "runs on: a restart applies them"}}}}}},
                      **_ERRORS},
    }},
}


def _component_name(*parts: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", ".".join(parts))


def _hoisted(schema: Any, prefix: str, components: dict[str, Any]) -> Any:
    """A tool's input schema for the document: its `$defs` moved to `components/schemas` (a `#/$defs/...` inside
    the document would resolve against the document's root) and its `$ref`s pointed there."""
    defs = schema.get("$defs", {}) if isinstance(schema, dict) else {}

    def rewrite(node: Any) -> Any:
        if isinstance(node, dict):
            out = {}
            for key, value in node.items():
                if key == "$defs":
                    continue
                if key == "$ref" and isinstance(value, str) and value.startswith("#/$defs/"):
                    out[key] = "#/components/schemas/" + _component_name(prefix, value[len("#/$defs/"):])
                elif key == "$ref" and value == "#":
                    out[key] = "#/components/schemas/" + _component_name(prefix)
                else:
                    out[key] = rewrite(value)
            return out
        if isinstance(node, list):
            return [rewrite(item) for item in node]
        return node

    for name, definition in defs.items():
        components[_component_name(prefix, name)] = rewrite(definition)
    body = rewrite(schema)
    components[_component_name(prefix)] = body
    return {"$ref": "#/components/schemas/" + _component_name(prefix)}


def _with_path_values_required(schema: dict[str, Any], path: Any) -> dict[str, Any]:
    """The schema with `minLength: 1` on string arguments that fill a `{placeholder}` of the operation's path:
    the door refuses an empty path value (422), so the document says so."""
    properties = schema.get("properties")
    if not isinstance(path, str) or not isinstance(properties, dict):
        return schema
    placeholders = set(re.findall(r"\{([^}]+)\}", path))
    patched = {name: {**prop, "minLength": max(1, prop.get("minLength", 0))}
               if name in placeholders and isinstance(prop, dict) and prop.get("type") == "string" else prop
               for name, prop in properties.items()}
    return {**schema, "properties": patched}


def tool_call_paths(tools: dict[str, list[dict[str, Any]]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(paths, component schemas) of every agent's direct calls, each with the tool's exact body.

    `tools`: agent -> its tools as `GET /agents/{agent}/tools` lists them (`name`, `description`, `input_schema`).
    """
    paths: dict[str, Any] = {}
    components: dict[str, Any] = {}
    for agent, agent_tools in tools.items():
        for tool in agent_tools:
            schema = _with_path_values_required(tool.get("input_schema") or {"type": "object"}, tool.get("path"))
            operation_id = _component_name("call", agent, tool["name"])
            paths[f"/agents/{agent}/tools/{tool['name']}"] = {"post": {
                "operationId": operation_id,
                "summary": (tool.get("description") or "").split("\n", 1)[0][:200] or f"Call {tool['name']}",
                "description": f"Call tool {tool['name']!r} of agent {agent!r}; the body is its arguments.",
                # An empty body is `{}`: it may be left out when `{}` is a valid call.
                "requestBody": {"required": bool(schema.get("required")), "content": {"application/json": {
                    "schema": _hoisted(schema, f"Args.{agent}.{tool['name']}", components)}}},
                "responses": _CALL_RESPONSES,
            }}
    return paths, components


def openapi_document(server_url: str = "", extra_paths: dict[str, Any] | None = None, *,
                     tool_paths: tuple[dict[str, Any], dict[str, Any]] | None = None) -> dict[str, Any]:
    """The document; with `tool_paths` (from `tool_call_paths`) each direct call is listed with its exact body
    instead of the one templated path whose body is any object."""
    paths: dict[str, Any] = {
        "/healthz": {"get": {"operationId": "healthz", "summary": "Liveness and what is loaded", "security": [],
                             "responses": {"200": _json("Health", "Serving."), **_ERRORS}}},
        "/readyz": {"get": {"operationId": "readyz", "summary": "Readiness: the store can write (and Redis answers)",
                            "security": [], "responses": {
                                "200": _json("Ready", "Ready for audited calls."),
                                "503": _json("Ready", "The store cannot write or Redis does not answer."),
                                **_ERRORS}}},
        "/v1/models": {"get": {"operationId": "listModels", "summary": "The agents, as OpenAI models",
                               "responses": {"200": _json("ModelList", "The agents."), **_ERRORS}}},
        "/v1/models/{model}": {"get": {
            "operationId": "getModel", "summary": "One agent, as an OpenAI model",
            "parameters": [{"name": "model", "in": "path", "required": True, "schema": {"type": "string"}}],
            "responses": {"200": _json("Model", "The agent."), **_ERRORS}}},
        "/v1/chat/completions": {"post": {
            "operationId": "createChatCompletion",
            "summary": "Run an agent's tool-call loop (OpenAI-compatible; `model` is the agent)",
            "requestBody": {"required": True, "content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/ChatRequest"}}}},
            "responses": {
                "200": {"description": "The final answer, with the steps taken in `gateway`; with `stream: true` "
                                       "server-sent `chat.completion.chunk`s.",
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ChatCompletion"}},
                                    "text/event-stream": {"schema": {"type": "string"}}}},
                **_ERRORS,
            },
        }},
        "/v1/responses": {"post": {
            "operationId": "createResponse",
            "summary": "Run an agent's tool-call loop (OpenAI Responses API; `model` is the agent)",
            "requestBody": {"required": True, "content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/ResponsesRequest"}}}},
            "responses": {
                "200": {"description": "The response, with the steps taken in `gateway`; with `stream: true` the "
                                       "Responses event stream.",
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Response"}},
                                    "text/event-stream": {"schema": {"type": "string"}}}},
                **_ERRORS,
            },
        }},
        "/v1/responses/{id}": {"get": {
            "operationId": "getResponse", "summary": "A stored response of the caller's own key",
            "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}],
            "responses": {"200": _json("Response", "The response."), **_ERRORS}}},
        "/agents": {"get": {"operationId": "listAgents", "summary": "The agents and their tools' names",
                            "responses": {"200": _json("AgentList", "The agents."), **_ERRORS}}},
        "/agents/{agent}/tools": {"get": {
            "operationId": "listAgentTools",
            "summary": "An agent's tool definitions in one dialect",
            "parameters": [
                _agent_param(),
                {"name": "format", "in": "query", "schema": {"enum": list(FORMATS), "default": "json"}},
                {"name": "strict", "in": "query", "schema": {"type": "boolean", "default": False}},
            ],
            "responses": {"200": _json("ToolList", "The tools."), **_ERRORS},
        }},
        "/agents/{agent}/tools/search": {"get": {
            "operationId": "searchAgentTools",
            "summary": "The agent's tools that best match a request, best first (the tool search index)",
            "parameters": [
                _agent_param(),
                {"name": "q", "in": "query", "required": True, "schema": {"type": "string", "minLength": 1}},
                {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 100,
                                                            "default": 10}},
            ],
            "responses": {"200": _json("ToolSearch", "The matches."), **_ERRORS},
        }},
    }
    if tool_paths is None:
        paths["/agents/{agent}/tools/{tool}"] = {"post": {
            "operationId": "callAgentTool",
            "summary": "Call one of an agent's tools directly; the body is the arguments object",
            "description": "The body must match the tool's `input_schema` (GET /agents/{agent}/tools lists it): "
                           "arguments it does not declare are refused with 422.",
            "parameters": [_agent_param(), {"name": "tool", "in": "path", "required": True,
                                            "schema": {"type": "string"}}],
            "requestBody": {"content": {"application/json": {"schema": {"type": "object"}}}},
            "responses": _CALL_RESPONSES,
        }}
    else:
        paths.update(tool_paths[0])
    paths.update(extra_paths or {})
    document: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": "gateway",
            "version": __version__,
            "description": "A declarative tool gateway for LLM agents. `/mcp/{agent}` (not described here) serves "
                           "each agent's tools over MCP Streamable HTTP.",
        },
        "paths": paths,
        # With `clients` in agents.yaml every door but /healthz, /readyz and /openapi.json needs a client key.
        "security": [{}, {"clientKey": []}],
        "components": {"securitySchemes": {"clientKey": {
            "type": "http", "scheme": "bearer", "description": "A key from agents.yaml `clients`."}}, "schemas": {
            **SCHEMAS,
            **(tool_paths[1] if tool_paths is not None else {}),
        }},
    }
    if server_url:
        document["servers"] = [{"url": server_url}]
    return document
