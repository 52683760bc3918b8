"""A real HTTP server on 127.0.0.1 that plays an LLM in all five wire formats, streaming and not.

Tests queue `Reply`s (provider-neutral: text, tool calls, finish, usage, errors); each request pops the next
one and renders it in the format its path asks for (OpenAI `/chat/completions` and `/responses`, Anthropic
`/v1/messages`, Gemini `:generateContent` / `:streamGenerateContent?alt=sse`, Ollama `/api/chat`). Every
request is recorded so tests assert what the gateway sent. tests/test_scripted_llm.py proves the answers with
the official SDKs.

Embeddings (OpenAI `/v1/embeddings`, floats or base64; Ollama `/api/embed`) are answered without a script, with
deterministic vectors: a hashed bag of words (`bag_of_words`), so texts that share words are similar and nothing
else is. `embedding_status` makes them fail with that HTTP status instead.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import struct
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

GATE_LIMIT = 60.0
"""Seconds a gated stream waits for its test at most. Only a broken run reaches it (then the test fails rather
than hangs): a gate that gave up sooner let a slow, loaded machine see the model go on talking (a tool call ran
after the client had left)."""


@dataclass
class Call:
    name: str
    args: dict[str, Any] = field(default_factory=dict)
    id: str | None = None
    """None: an id is made up (OpenAI, Anthropic) or left out (Gemini, Ollama: they send none)."""
    raw: str | None = None
    """OpenAI (and Anthropic streaming): the exact argument text, e.g. broken JSON."""
    signature: str | None = None
    """Gemini: a thoughtSignature on this functionCall part."""
    namespace: str | None = None
    """Responses: the namespace of the called function (filled in from the request when it has one)."""


@dataclass
class ToolSearch:
    """A server-side tool search in a reply, naming `found` (each must be a deferred tool of the request, as the
    APIs insist). Anthropic: a `server_tool_use` of `tool_search_tool_bm25`, then its `tool_search_tool_result`.
    OpenAI Responses: a `tool_search_call`, then a `tool_search_output` with the found definitions."""

    query: str
    found: list[str] = field(default_factory=list)
    id: str = "srvtoolu_01"
    error: str | None = None
    """Anthropic: an error code (e.g. "unavailable") answered instead of references."""
    loaded: list[dict[str, Any]] = field(default_factory=list)
    """Responses: the found definitions, taken from the request when it arrives."""


@dataclass
class Reply:
    text: str = ""
    calls: list[Call] = field(default_factory=list)
    finish: str | None = None
    """"length" for a turn cut by the token limit; None: the format's normal reason."""
    usage: tuple[int, int] = (10, 5)
    status: int = 200
    error: str = "scripted failure"
    headers: dict[str, str] = field(default_factory=dict)
    thinking: str | None = None
    """Provider state: Anthropic thinking block, Gemini thought part, Ollama thinking, DeepSeek reasoning."""
    signature: str = "sig-123"
    chunks: int = 3
    """Streaming: how many pieces the text and each argument string are cut into."""
    index_zero: bool = False
    """OpenAI streaming: every call's deltas carry `index: 0` (ollama/ollama#15457)."""
    gate: threading.Event | None = None
    """Streaming: after the first text chunk, wait for this event (the test sets it when it sees the text;
    `GATE_LIMIT` at most)."""
    gate_released: bool | None = None
    delay: float = 0.0
    """Seconds to wait before answering (a provider slower than the gateway's timeout)."""
    stream_error: str | None = None
    """Streaming: after the first two chunks, send this as the format's in-stream error and stop."""
    ignore_stream: bool = False
    """Answer a streamed request as if it were not streamed (one JSON document), as some servers do."""
    tool_search: ToolSearch | None = None
    """Anthropic, OpenAI Responses: the model searched the deferred tools (after its text, before its calls)."""


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class ScriptedLLM:
    """Usage: `with ScriptedLLM() as llm: llm.script(Reply(...)); ...; llm.requests`."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.requests: list[Recorded] = []
        self.embedding_status = 200
        """The HTTP status embedding requests get (200: vectors; else the format's error)."""
        self.embedding_dim = EMBEDDING_DIM
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._server.daemon_threads = True
        # A short poll interval: shutdown() waits up to one interval, once per test.
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def script(self, *replies: Reply) -> ScriptedLLM:
        with self._lock:
            self.replies.extend(replies)
        return self

    def bodies(self) -> list[Any]:
        return [r.body for r in self.requests]

    def embedding_inputs(self) -> list[list[str]]:
        """The texts of each embedding request, in order."""
        return [r.body["input"] if isinstance(r.body["input"], list) else [r.body["input"]]
                for r in self.requests if _format_of(r.path).endswith("embed")]

    def __enter__(self) -> ScriptedLLM:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _next(self, recorded: Recorded) -> Reply | None:
        with self._lock:
            self.requests.append(recorded)
            return self.replies.pop(0) if self.replies else None


def _make_handler(llm: ScriptedLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body are separate writes: no 40 ms delayed-ACK stalls

        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw or b"null")
            except ValueError:
                body = raw.decode(errors="replace")
            headers = {k.lower(): v for k, v in self.headers.items()}
            fmt = _format_of(self.path)
            if fmt.endswith("embed"):
                with llm._lock:
                    llm.requests.append(Recorded("POST", self.path, headers, body))
                if llm.embedding_status != 200:
                    failed = Reply(status=llm.embedding_status, error="embeddings are down")
                    return self._send_json(llm.embedding_status, _error_body(fmt, failed))
                return self._send_json(200, _embeddings(fmt, body, llm.embedding_dim))
            reply = llm._next(Recorded("POST", self.path, headers, body))
            if reply is None:
                return self._send_json(500, {"error": {"message": "the script has no more replies"}})
            if reply.status >= 400:
                return self._send_json(reply.status, _error_body(fmt, reply), reply.headers)
            refusal = REFUSAL[fmt](body, reply) if fmt in REFUSAL else None
            if refusal is not None:
                return self._send_json(400, _invalid_request(fmt, refusal))
            if reply.delay:
                time.sleep(reply.delay)
            model = _model_of(fmt, self.path, body)
            stream = fmt == "gemini-stream" or (isinstance(body, dict) and body.get("stream") is True)
            if fmt == "ollama" and isinstance(body, dict) and "stream" not in body:
                stream = True  # Ollama streams unless told otherwise
            if not stream or reply.ignore_stream:
                return self._send_json(200, RENDER[fmt](reply, model), reply.headers)
            media = "application/x-ndjson" if fmt == "ollama" else "text/event-stream"
            self.send_response(200)
            self.send_header("content-type", media)
            self.send_header("connection", "close")
            for key, value in reply.headers.items():
                self.send_header(key, value)
            self.end_headers()
            first_text = True
            for count, (piece, is_text) in enumerate(STREAM[fmt](reply, model)):
                if reply.stream_error is not None and count == 2:
                    self.wfile.write(_stream_error(fmt, reply.stream_error).encode())
                    break
                self.wfile.write(piece.encode())
                self.wfile.flush()
                if is_text and first_text and reply.gate is not None:
                    first_text = False
                    reply.gate_released = reply.gate.wait(timeout=GATE_LIMIT)
            self.close_connection = True

        def _send_json(self, status: int, data: Any, headers: dict[str, str] | None = None) -> None:
            payload = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(payload)

    return Handler


def _format_of(path: str) -> str:
    if path.rstrip("/").endswith("/embeddings"):
        return "openai-embed"
    if path.rstrip("/").endswith("/api/embed"):
        return "ollama-embed"
    if ":streamGenerateContent" in path:
        return "gemini-stream"
    if ":generateContent" in path:
        return "gemini"
    if path.rstrip("/").endswith("/api/chat"):
        return "ollama"
    if path.rstrip("/").endswith("/v1/messages"):
        return "anthropic"
    if path.rstrip("/").endswith("/responses"):
        return "openai-responses"
    return "openai"


EMBEDDING_DIM = 64


def bag_of_words(text: str, dim: int = EMBEDDING_DIM) -> list[float]:
    """A deterministic embedding: each lower-case word adds 1 at the place its hash picks."""
    vector = [0.0] * dim
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        vector[int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big") % dim] += 1.0
    return vector


def _embeddings(fmt: str, body: Any, dim: int) -> dict[str, Any]:
    texts = body.get("input", []) if isinstance(body, dict) else []
    texts = [texts] if isinstance(texts, str) else texts
    asked = body.get("dimensions") if isinstance(body, dict) else None
    vectors = [bag_of_words(str(text), asked if isinstance(asked, int) and asked > 0 else dim) for text in texts]
    model = str(body.get("model", "")) if isinstance(body, dict) else ""
    words = sum(len(str(text).split()) for text in texts)
    if fmt == "ollama-embed":
        return {"model": model, "embeddings": vectors, "total_duration": 1000, "load_duration": 10,
                "prompt_eval_count": words}
    as_base64 = isinstance(body, dict) and body.get("encoding_format") == "base64"
    data = [{"object": "embedding", "index": index,
             "embedding": base64.b64encode(struct.pack(f"<{len(v)}f", *v)).decode() if as_base64 else v}
            for index, v in enumerate(vectors)]
    return {"object": "list", "data": data, "model": model, "usage": {"prompt_tokens": words, "total_tokens": words}}


def _model_of(fmt: str, path: str, body: Any) -> str:
    if fmt.startswith("gemini"):
        return path.split("/models/", 1)[-1].split(":", 1)[0]
    return str(body.get("model", "")) if isinstance(body, dict) else ""


def _error_body(fmt: str, reply: Reply) -> Any:
    if fmt == "anthropic":
        return {"type": "error", "error": {"type": "rate_limit_error" if reply.status == 429 else "api_error",
                                           "message": reply.error}}
    if fmt.startswith("gemini"):
        return {"error": {"code": reply.status, "message": reply.error, "status": "UNAVAILABLE"}}
    if fmt.startswith("ollama"):
        return {"error": reply.error}
    return {"error": {"message": reply.error, "type": "server_error", "code": None}}


def _invalid_request(fmt: str, message: str) -> Any:
    if fmt == "anthropic":
        return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    return {"error": {"message": message, "type": "invalid_request_error", "param": "tools", "code": None}}


def _stream_error(fmt: str, message: str) -> str:
    if fmt == "anthropic":
        data = {"type": "error", "error": {"type": "overloaded_error", "message": message}}
        return f"event: error\ndata: {json.dumps(data)}\n\n"
    if fmt == "ollama":
        return json.dumps({"error": message}) + "\n"
    if fmt == "openai-responses":
        data = {"type": "error", "code": "server_error", "message": message, "param": None, "sequence_number": 99}
        return f"event: error\ndata: {json.dumps(data)}\n\n"
    if fmt.startswith("gemini"):
        return f"data: {json.dumps({'error': {'code': 503, 'message': message, 'status': 'UNAVAILABLE'}})}\r\n\r\n"
    return f"data: {json.dumps({'error': {'message': message, 'type': 'server_error'}})}\n\n"


def _pieces(text: str, n: int) -> list[str]:
    if not text:
        return []
    size = max(1, -(-len(text) // max(1, n)))
    return [text[i:i + size] for i in range(0, len(text), size)]


def _args_text(call: Call) -> str:
    return call.raw if call.raw is not None else json.dumps(call.args)


def _call_id(call: Call, index: int, prefix: str) -> str:
    return call.id or f"{prefix}{index}_{uuid.uuid4().hex[:8]}"


# --- OpenAI Chat Completions -------------------------------------------------------------------------------

def _openai(reply: Reply, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.calls:
        message["tool_calls"] = [{"id": _call_id(c, i, "call_"), "type": "function",
                                  "function": {"name": c.name, "arguments": _args_text(c)}}
                                 for i, c in enumerate(reply.calls)]
    if reply.thinking:
        message["reasoning_content"] = reply.thinking
    finish = reply.finish or ("tool_calls" if reply.calls else "stop")
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": {"prompt_tokens": reply.usage[0], "completion_tokens": reply.usage[1],
                      "total_tokens": sum(reply.usage)}}


def _openai_stream(reply: Reply, model: str) -> Iterator[tuple[str, bool]]:
    def chunk(delta: dict[str, Any] | None, finish: str | None = None, usage: bool = False) -> str:
        data: dict[str, Any] = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": int(time.time()),
                                "model": model,
                                "choices": [] if delta is None else [{"index": 0, "delta": delta,
                                                                      "finish_reason": finish, "logprobs": None}]}
        if usage:
            data["usage"] = {"prompt_tokens": reply.usage[0], "completion_tokens": reply.usage[1],
                             "total_tokens": sum(reply.usage)}
        return f"data: {json.dumps(data)}\n\n"

    yield chunk({"role": "assistant", "content": ""}), False
    if reply.thinking:
        yield chunk({"reasoning_content": reply.thinking}), False
    for piece in _pieces(reply.text, reply.chunks):
        yield chunk({"content": piece}), True
    for i, call in enumerate(reply.calls):
        index = 0 if reply.index_zero else i
        yield chunk({"tool_calls": [{"index": index, "id": _call_id(call, i, "call_"), "type": "function",
                                     "function": {"name": call.name, "arguments": ""}}]}), False
        for piece in _pieces(_args_text(call), reply.chunks):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}), False
    yield chunk({}, reply.finish or ("tool_calls" if reply.calls else "stop")), False
    yield chunk(None, usage=True), False
    yield "data: [DONE]\n\n", False


# --- Anthropic Messages --------------------------------------------------------------------------------------

SEARCH_TOOL_TYPES = ("tool_search_tool_bm25_20251119", "tool_search_tool_regex_20251119")


def _anthropic_refusal(body: Any, reply: Reply) -> str | None:
    """What the Messages API would refuse about a request using tool search (None: nothing)."""
    if not isinstance(body, dict):
        return None
    tools = body.get("tools") or []
    deferred = {t.get("name") for t in tools if t.get("defer_loading")}
    searching = any(t.get("type") in SEARCH_TOOL_TYPES for t in tools)
    if deferred and not searching:
        return "tools with defer_loading need a tool search tool in `tools`"
    if tools and len(deferred) == len(tools):
        return "all tools have defer_loading set; at least one tool must be non-deferred"
    for message in body.get("messages") or []:
        blocks = message.get("content") if isinstance(message.get("content"), list) else []
        used = [b.get("id") for b in blocks if b.get("type") == "server_tool_use"]
        answered = {b.get("tool_use_id") for b in blocks if b.get("type") == "tool_search_tool_result"}
        if any(u not in answered for u in used):
            return "a server_tool_use block must be followed by its tool_search_tool_result"
        for block in blocks:
            if block.get("type") != "tool_search_tool_result":
                continue
            for ref in (block.get("content") or {}).get("tool_references") or []:
                if ref.get("tool_name") not in deferred:
                    return f"tool_reference {ref.get('tool_name')!r} names no deferred tool of this request"
    search = reply.tool_search
    if search is not None:
        if not searching:
            return "the script searches, but the request carries no tool search tool"
        unknown = [name for name in search.found if name not in deferred]
        if unknown:
            return f"the script finds {unknown}, which are not deferred tools of this request"
    return None


def _anthropic_search_blocks(search: ToolSearch) -> list[dict[str, Any]]:
    use = {"type": "server_tool_use", "id": search.id, "name": "tool_search_tool_bm25",
           "input": {"query": search.query}}
    if search.error is not None:
        content: dict[str, Any] = {"type": "tool_search_tool_result_error", "error_code": search.error}
    else:
        content = {"type": "tool_search_tool_search_result",
                   "tool_references": [{"type": "tool_reference", "tool_name": name} for name in search.found]}
    return [use, {"type": "tool_search_tool_result", "tool_use_id": search.id, "content": content}]


def _anthropic_content(reply: Reply) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    if reply.thinking:
        content.append({"type": "thinking", "thinking": reply.thinking, "signature": reply.signature})
    if reply.text:
        content.append({"type": "text", "text": reply.text})
    if reply.tool_search is not None:  # the model says what it is doing, then searches
        content.extend(_anthropic_search_blocks(reply.tool_search))
    for i, call in enumerate(reply.calls):
        content.append({"type": "tool_use", "id": _call_id(call, i, "toolu_"), "name": call.name, "input": call.args})
    return content


def _anthropic_stop(reply: Reply) -> str:
    return "max_tokens" if reply.finish == "length" else (reply.finish or ("tool_use" if reply.calls else "end_turn"))


def _anthropic(reply: Reply, model: str) -> dict[str, Any]:
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": model,
            "content": _anthropic_content(reply), "stop_reason": _anthropic_stop(reply), "stop_sequence": None,
            "usage": {"input_tokens": reply.usage[0], "output_tokens": reply.usage[1]}}


def _anthropic_stream(reply: Reply, model: str) -> Iterator[tuple[str, bool]]:
    def event(kind: str, data: dict[str, Any]) -> str:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"

    start = {"id": "msg_1", "type": "message", "role": "assistant", "model": model, "content": [],
             "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": reply.usage[0], "output_tokens": 1}}
    yield event("message_start", {"message": start}), False
    yield event("ping", {}), False
    index = 0
    if reply.thinking:
        yield event("content_block_start", {"index": index, "content_block": {"type": "thinking", "thinking": "",
                                                                             "signature": ""}}), False
        yield event("content_block_delta", {"index": index, "delta": {"type": "thinking_delta",
                                                                      "thinking": reply.thinking}}), False
        yield event("content_block_delta", {"index": index, "delta": {"type": "signature_delta",
                                                                      "signature": reply.signature}}), False
        yield event("content_block_stop", {"index": index}), False
        index += 1
    if reply.text:
        yield event("content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}}), False
        for piece in _pieces(reply.text, reply.chunks):
            yield event("content_block_delta", {"index": index, "delta": {"type": "text_delta", "text": piece}}), True
        yield event("content_block_stop", {"index": index}), False
        index += 1
    if reply.tool_search is not None:
        use, result = _anthropic_search_blocks(reply.tool_search)
        yield event("content_block_start", {"index": index, "content_block": {**use, "input": {}}}), False
        for piece in ["", *_pieces(json.dumps(use["input"]), reply.chunks)]:
            yield event("content_block_delta", {"index": index, "delta": {"type": "input_json_delta",
                                                                          "partial_json": piece}}), False
        yield event("content_block_stop", {"index": index}), False
        yield event("content_block_start", {"index": index + 1, "content_block": result}), False
        yield event("content_block_stop", {"index": index + 1}), False
        index += 2
    for i, call in enumerate(reply.calls):
        block = {"type": "tool_use", "id": _call_id(call, i, "toolu_"), "name": call.name, "input": {}}
        yield event("content_block_start", {"index": index, "content_block": block}), False
        # The first partial_json is "" as Anthropic's API sends it.
        for piece in ["", *_pieces(_args_text(call), reply.chunks)]:
            yield event("content_block_delta", {"index": index, "delta": {"type": "input_json_delta",
                                                                          "partial_json": piece}}), False
        yield event("content_block_stop", {"index": index}), False
        index += 1
    yield event("message_delta", {"delta": {"stop_reason": _anthropic_stop(reply), "stop_sequence": None},
                                  "usage": {"output_tokens": reply.usage[1]}}), False
    yield event("message_stop", {}), False


# --- Gemini generateContent ----------------------------------------------------------------------------------

def _gemini_call_parts(reply: Reply) -> list[dict[str, Any]]:
    parts = []
    for call in reply.calls:
        function: dict[str, Any] = {"name": call.name, "args": call.args}
        if call.id:
            function["id"] = call.id
        part: dict[str, Any] = {"functionCall": function}
        if call.signature:
            part["thoughtSignature"] = call.signature
        parts.append(part)
    return parts


def _gemini_chunk(parts: list[dict[str, Any]], reply: Reply, model: str, final: bool) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    data: dict[str, Any] = {"candidates": [candidate], "modelVersion": model, "responseId": "resp-1"}
    if final:
        # Gemini says STOP whether or not the model called functions.
        candidate["finishReason"] = "MAX_TOKENS" if reply.finish == "length" else (reply.finish or "STOP")
        data["usageMetadata"] = {"promptTokenCount": reply.usage[0], "candidatesTokenCount": reply.usage[1],
                                 "totalTokenCount": sum(reply.usage)}
    return data


def _gemini(reply: Reply, model: str) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"text": reply.thinking, "thought": True}] if reply.thinking else []
    if reply.text:
        parts.append({"text": reply.text})
    return _gemini_chunk(parts + _gemini_call_parts(reply), reply, model, True)


def _gemini_stream(reply: Reply, model: str) -> Iterator[tuple[str, bool]]:
    def sse(data: dict[str, Any]) -> str:
        return f"data: {json.dumps(data)}\r\n\r\n"

    if reply.thinking:
        yield sse(_gemini_chunk([{"text": reply.thinking, "thought": True}], reply, model, False)), False
    for piece in _pieces(reply.text, reply.chunks):
        yield sse(_gemini_chunk([{"text": piece}], reply, model, False)), True
    yield sse(_gemini_chunk(_gemini_call_parts(reply), reply, model, True)), False


# --- Ollama /api/chat ----------------------------------------------------------------------------------------

def _ollama_message(reply: Reply, content: str, calls: bool) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls and reply.calls:
        message["tool_calls"] = [{"function": {"name": c.name, "arguments": c.args}} for c in reply.calls]
    return message


def _ollama_final(reply: Reply, model: str, message: dict[str, Any]) -> dict[str, Any]:
    # Ollama says "stop" whether or not the model called tools.
    return {"model": model, "created_at": "2026-01-01T00:00:00Z", "message": message, "done": True,
            "done_reason": reply.finish or "stop", "total_duration": 1000, "load_duration": 10,
            "prompt_eval_count": reply.usage[0], "prompt_eval_duration": 100, "eval_count": reply.usage[1],
            "eval_duration": 100}


def _ollama(reply: Reply, model: str) -> dict[str, Any]:
    message = _ollama_message(reply, reply.text, True)
    if reply.thinking:
        message["thinking"] = reply.thinking
    return _ollama_final(reply, model, message)


def _ollama_stream(reply: Reply, model: str) -> Iterator[tuple[str, bool]]:
    def line(data: dict[str, Any]) -> str:
        return json.dumps(data) + "\n"

    def partial(message: dict[str, Any]) -> dict[str, Any]:
        return {"model": model, "created_at": "2026-01-01T00:00:00Z", "message": message, "done": False}

    if reply.thinking:
        yield line(partial({"role": "assistant", "content": "", "thinking": reply.thinking})), False
    for piece in _pieces(reply.text, reply.chunks):
        yield line(partial(_ollama_message(reply, piece, False))), True
    if reply.calls:
        yield line(partial(_ollama_message(reply, "", True))), False
    yield line(_ollama_final(reply, model, {"role": "assistant", "content": ""})), False


# --- OpenAI Responses ---------------------------------------------------------------------------------------

def _responses_refusal(body: Any, reply: Reply) -> str | None:
    """What the Responses API would refuse about a request using tool search (None: nothing); a scripted
    search takes the definitions it finds from the request."""
    if not isinstance(body, dict):
        return None
    tools = body.get("tools") or []
    spaces = {f.get("name"): t for t in tools if t.get("type") == "namespace" for f in t.get("tools") or []}
    functions = [*(t for t in tools if t.get("type") == "function"),
                 *(f for t in tools if t.get("type") == "namespace" for f in t.get("tools") or [])]
    deferred = {f.get("name"): f for f in functions if f.get("defer_loading")}
    searching = any(t.get("type") == "tool_search" for t in tools)
    for call in reply.calls:
        if call.name in spaces:
            call.namespace = spaces[call.name]["name"]
    if deferred and not searching:
        return "functions with defer_loading need a tool_search tool in `tools`"
    items = body.get("input") if isinstance(body.get("input"), list) else []
    kinds = [item.get("type") for item in items]
    for index, kind in enumerate(kinds):
        if kind == "tool_search_call" and "tool_search_output" not in kinds[index + 1:index + 2]:
            return "a tool_search_call item must be followed by its tool_search_output"
    search = reply.tool_search
    if search is not None:
        if not searching:
            return "the script searches, but the request carries no tool_search tool"
        unknown = [name for name in search.found if name not in deferred]
        if unknown:
            return f"the script finds {unknown}, which are not deferred functions of this request"
        search.loaded = []
        for name in search.found:  # a namespaced function comes back inside its namespace, as the API sends it
            space = spaces.get(name)
            if space is None:
                search.loaded.append(deferred[name])
                continue
            loaded = next((t for t in search.loaded if t.get("name") == space["name"]), None)
            if loaded is None:
                loaded = {"type": "namespace", "name": space["name"], "description": space["description"],
                          "tools": []}
                search.loaded.append(loaded)
            loaded["tools"].append(deferred[name])
    return None


REFUSAL = {"anthropic": _anthropic_refusal, "openai-responses": _responses_refusal}


def _responses_items(reply: Reply) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if reply.thinking:
        items.append({"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": reply.thinking}],
                      "encrypted_content": reply.signature, "status": "completed"})
    if reply.text:
        items.append({"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                      "content": [{"type": "output_text", "text": reply.text, "annotations": [], "logprobs": []}]})
    if reply.tool_search is not None:
        search = reply.tool_search
        items.append({"type": "tool_search_call", "id": f"tsc_{search.id}", "call_id": None, "execution": "server",
                      "status": "completed", "arguments": {"query": search.query}})
        items.append({"type": "tool_search_output", "id": f"tso_{search.id}", "call_id": None,
                      "execution": "server", "status": "completed", "tools": search.loaded})
    for i, call in enumerate(reply.calls):
        item = {"type": "function_call", "id": f"fc_{i}", "call_id": _call_id(call, i, "call_"),
                "name": call.name, "arguments": _args_text(call), "status": "completed"}
        if call.namespace is not None:
            item["namespace"] = call.namespace
        items.append(item)
    return items


def _responses(reply: Reply, model: str, items: list[dict[str, Any]] | None = None,
               status: str | None = None) -> dict[str, Any]:
    cut = reply.finish == "length"
    return {"id": "resp_1", "object": "response", "created_at": int(time.time()),
            "status": status or ("incomplete" if cut else "completed"), "model": model,
            "output": _responses_items(reply) if items is None else items, "parallel_tool_calls": True,
            "tool_choice": "auto", "tools": [], "error": None,
            "incomplete_details": {"reason": "max_output_tokens"} if cut else None, "instructions": None,
            "metadata": {}, "temperature": None, "top_p": None, "store": False, "truncation": "disabled",
            "text": {"format": {"type": "text"}},
            "usage": {"input_tokens": reply.usage[0],
                      "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                      "output_tokens": reply.usage[1], "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": sum(reply.usage)}}


def _responses_stream(reply: Reply, model: str) -> Iterator[tuple[str, bool]]:
    sequence = iter(range(1_000_000))

    def event(kind: str, data: dict[str, Any]) -> str:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, 'sequence_number': next(sequence), **data})}\n\n"

    yield event("response.created", {"response": _responses(reply, model, [], "in_progress")}), False
    yield event("response.in_progress", {"response": _responses(reply, model, [], "in_progress")}), False
    for index, item in enumerate(_responses_items(reply)):
        if item["type"] == "message":
            text = item["content"][0]["text"]
            yield event("response.output_item.added", {"output_index": index, "item": {**item, "content": [],
                                                                                      "status": "in_progress"}}), False
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            yield event("response.content_part.added", {"item_id": item["id"], "output_index": index,
                                                        "content_index": 0, "part": part}), False
            for piece in _pieces(text, reply.chunks):
                yield event("response.output_text.delta", {"item_id": item["id"], "output_index": index,
                                                           "content_index": 0, "delta": piece, "logprobs": []}), True
            yield event("response.output_text.done", {"item_id": item["id"], "output_index": index,
                                                      "content_index": 0, "text": text, "logprobs": []}), False
            yield event("response.content_part.done", {"item_id": item["id"], "output_index": index,
                                                       "content_index": 0, "part": item["content"][0]}), False
        elif item["type"] == "function_call":
            yield event("response.output_item.added", {"output_index": index, "item": {**item, "arguments": "",
                                                                                      "status": "in_progress"}}), False
            for piece in _pieces(item["arguments"], reply.chunks):
                yield event("response.function_call_arguments.delta", {"item_id": item["id"], "output_index": index,
                                                                       "delta": piece}), False
            yield event("response.function_call_arguments.done", {"item_id": item["id"], "output_index": index,
                                                                  "name": item["name"],
                                                                  "arguments": item["arguments"]}), False
        else:
            yield event("response.output_item.added", {"output_index": index, "item": item}), False
        yield event("response.output_item.done", {"output_index": index, "item": item}), False
    final = _responses(reply, model)
    yield event("response.incomplete" if final["status"] == "incomplete" else "response.completed",
                {"response": final}), False


RENDER = {"openai": _openai, "openai-responses": _responses, "anthropic": _anthropic, "gemini": _gemini,
          "gemini-stream": _gemini, "ollama": _ollama}
STREAM = {"openai": _openai_stream, "openai-responses": _responses_stream, "anthropic": _anthropic_stream,
          "gemini": _gemini_stream, "gemini-stream": _gemini_stream, "ollama": _ollama_stream}
