"""The scripted LLM's answers are the real wire formats: the official SDKs parse them, streamed and not."""

from __future__ import annotations

import base64
import json
import struct

import anthropic
import httpx
import ollama
import openai
import pytest
from anthropic.types import Message as AnthropicMessage
from google import genai
from google.genai import types as genai_types
from openai.types import CreateEmbeddingResponse
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response as ResponsesResponse
from scripted_llm import EMBEDDING_DIM, Call, Reply, ScriptedLLM, ToolSearch, bag_of_words

WEATHER = [Call("get_weather", {"city": "Paris", "days": 2}, id="c1"), Call("get_time", {"tz": "CET"}, id="c2")]


def test_openai_sdk_parses_answer_and_stream(llm: ScriptedLLM) -> None:
    client = openai.OpenAI(base_url=llm.url + "/v1", api_key="k", max_retries=0)
    llm.script(Reply(text="Checking.", calls=WEATHER), Reply(calls=WEATHER), Reply(text="Sunny in Paris."))
    answer = client.chat.completions.create(model="gpt-x", messages=[{"role": "user", "content": "hi"}])
    ChatCompletion.model_validate(answer.model_dump())
    calls = answer.choices[0].message.tool_calls
    assert [c.function.name for c in calls] == ["get_weather", "get_time"]
    assert json.loads(calls[0].function.arguments) == {"city": "Paris", "days": 2}
    assert answer.choices[0].finish_reason == "tool_calls"

    with client.chat.completions.stream(model="gpt-x", messages=[{"role": "user", "content": "hi"}]) as stream:
        final = stream.get_final_completion()
    assert [json.loads(c.function.arguments) for c in final.choices[0].message.tool_calls] == [
        {"city": "Paris", "days": 2}, {"tz": "CET"}]

    chunks = list(client.chat.completions.create(model="gpt-x", messages=[{"role": "user", "content": "hi"}],
                                                 stream=True, stream_options={"include_usage": True}))
    for chunk in chunks:
        ChatCompletionChunk.model_validate(chunk.model_dump())
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Sunny in Paris."
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens == 15


def test_anthropic_sdk_parses_answer_and_stream(llm: ScriptedLLM) -> None:
    client = anthropic.Anthropic(base_url=llm.url, api_key="k", max_retries=0)
    llm.script(Reply(text="Checking.", calls=WEATHER, thinking="let me think"),
               Reply(text="Checking.", calls=WEATHER, thinking="let me think"))
    message = client.messages.create(model="claude-x", max_tokens=100, messages=[{"role": "user", "content": "hi"}])
    AnthropicMessage.model_validate(message.model_dump())
    assert [b.type for b in message.content] == ["thinking", "text", "tool_use", "tool_use"]
    assert message.content[2].input == {"city": "Paris", "days": 2}
    assert message.stop_reason == "tool_use"

    with client.messages.stream(model="claude-x", max_tokens=100,
                                messages=[{"role": "user", "content": "hi"}]) as stream:
        final = stream.get_final_message()
    assert [b.type for b in final.content] == ["thinking", "text", "tool_use", "tool_use"]
    assert final.content[0].signature == "sig-123"
    assert final.content[1].text == "Checking."
    assert [b.input for b in final.content[2:]] == [{"city": "Paris", "days": 2}, {"tz": "CET"}]
    assert final.usage.output_tokens == 5


DEFERRED_TOOLS = [
    {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"},
    {"name": "get_weather", "description": "d", "input_schema": {"type": "object"}, "defer_loading": True},
    {"name": "get_time", "description": "d", "input_schema": {"type": "object"}, "defer_loading": True},
]


def test_anthropic_sdk_parses_tool_search_blocks_answered_and_streamed(llm: ScriptedLLM) -> None:
    client = anthropic.Anthropic(base_url=llm.url, api_key="k", max_retries=0)
    search = ToolSearch("weather", found=["get_weather"])
    llm.script(Reply(text="Searching.", tool_search=search, calls=WEATHER[:1]),
               Reply(text="Searching.", tool_search=search, calls=WEATHER[:1]))
    ask = {"model": "claude-x", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}],
           "tools": DEFERRED_TOOLS}
    message = client.messages.create(**ask)  # type: ignore[call-overload]
    AnthropicMessage.model_validate(message.model_dump())
    assert [b.type for b in message.content] == ["text", "server_tool_use", "tool_search_tool_result", "tool_use"]
    assert message.content[1].name == "tool_search_tool_bm25" and message.content[1].input == {"query": "weather"}
    assert [r.tool_name for r in message.content[2].content.tool_references] == ["get_weather"]

    with client.messages.stream(**ask) as stream:  # type: ignore[arg-type]
        final = stream.get_final_message()
    assert [b.type for b in final.content] == ["text", "server_tool_use", "tool_search_tool_result", "tool_use"]
    assert final.content[1].input == {"query": "weather"}
    assert final.content[2].content.tool_references[0].tool_name == "get_weather"
    assert final.content[3].input == {"city": "Paris", "days": 2}


def test_the_scripted_anthropic_refuses_what_the_api_refuses(llm: ScriptedLLM) -> None:
    client = anthropic.Anthropic(base_url=llm.url, api_key="k", max_retries=0)
    llm.script(Reply(text="x"), Reply(text="x"), Reply(text="x", tool_search=ToolSearch("q", found=["nope"])))
    hi = [{"role": "user", "content": "hi"}]
    with pytest.raises(anthropic.BadRequestError, match="tool search tool"):
        client.messages.create(model="m", max_tokens=10, messages=hi, tools=DEFERRED_TOOLS[1:])  # type: ignore[arg-type]
    unanswered = [*hi, {"role": "assistant", "content": [{"type": "server_tool_use", "id": "srvtoolu_9",
                                                          "name": "tool_search_tool_bm25", "input": {"query": "q"}}]}]
    with pytest.raises(anthropic.BadRequestError, match="followed by its tool_search_tool_result"):
        client.messages.create(model="m", max_tokens=10, messages=unanswered, tools=DEFERRED_TOOLS)  # type: ignore[arg-type]
    with pytest.raises(anthropic.BadRequestError, match="not deferred tools"):
        client.messages.create(model="m", max_tokens=10, messages=hi, tools=DEFERRED_TOOLS)  # type: ignore[arg-type]


RESPONSES_TOOLS = [
    {"type": "tool_search"},
    {"type": "function", "name": "get_weather", "description": "d", "parameters": {"type": "object"},
     "defer_loading": True},
    {"type": "function", "name": "get_time", "description": "d", "parameters": {"type": "object"},
     "defer_loading": True},
]


def test_openai_sdk_parses_tool_search_items_answered_and_streamed(llm: ScriptedLLM) -> None:
    client = openai.OpenAI(base_url=llm.url + "/v1", api_key="k", max_retries=0)
    search = ToolSearch("weather", found=["get_weather"])
    llm.script(Reply(text="Searching.", tool_search=search, calls=WEATHER[:1]),
               Reply(text="Searching.", tool_search=ToolSearch("weather", found=["get_weather"]), calls=WEATHER[:1]),
               Reply(text="x"))
    answer = client.responses.create(model="gpt-x", input="hi", tools=RESPONSES_TOOLS)  # type: ignore[arg-type]
    ResponsesResponse.model_validate(answer.model_dump())
    assert [i.type for i in answer.output] == ["message", "tool_search_call", "tool_search_output", "function_call"]
    assert answer.output[1].arguments == {"query": "weather"} and answer.output[1].execution == "server"
    assert [t.name for t in answer.output[2].tools] == ["get_weather"]
    assert answer.output[2].tools[0].defer_loading is True

    with client.responses.stream(model="gpt-x", input="hi", tools=RESPONSES_TOOLS) as stream:  # type: ignore[arg-type]
        final = stream.get_final_response()
    assert [i.type for i in final.output] == ["message", "tool_search_call", "tool_search_output", "function_call"]
    with pytest.raises(openai.BadRequestError, match="need a tool_search tool"):
        client.responses.create(model="gpt-x", input="hi", tools=RESPONSES_TOOLS[1:])  # type: ignore[arg-type]


def test_gemini_sdk_parses_answer_and_stream(llm: ScriptedLLM) -> None:
    client = genai.Client(api_key="k", http_options=genai_types.HttpOptions(base_url=llm.url))
    calls = [Call("get_weather", {"city": "Paris"}, signature="c2lnbmF0dXJl"), Call("get_time", {"tz": "CET"})]
    llm.script(Reply(calls=calls), Reply(text="Sunny in Paris today."))
    answer = client.models.generate_content(model="gemini-x", contents="hi")
    assert [(c.name, c.args, c.id) for c in answer.function_calls] == [
        ("get_weather", {"city": "Paris"}, None), ("get_time", {"tz": "CET"}, None)]
    assert answer.candidates[0].finish_reason == genai_types.FinishReason.STOP
    assert answer.candidates[0].content.parts[0].thought_signature == b"signature"

    chunks = list(client.models.generate_content_stream(model="gemini-x", contents="hi"))
    assert len(chunks) > 1
    assert "".join(c.text or "" for c in chunks) == "Sunny in Paris today."
    assert chunks[-1].usage_metadata.total_token_count == 15
    assert "streamGenerateContent" in llm.requests[-1].path and "alt=sse" in llm.requests[-1].path


def test_ollama_sdk_parses_answer_and_stream(llm: ScriptedLLM) -> None:
    client = ollama.Client(host=llm.url)
    calls = [Call("get_weather", {"city": "Paris"}), Call("get_time", {"tz": "CET"})]
    llm.script(Reply(calls=calls, thinking="hmm"), Reply(text="Sunny.", calls=calls))
    answer = client.chat(model="llama-x", messages=[{"role": "user", "content": "hi"}], stream=False)
    assert [(c.function.name, dict(c.function.arguments)) for c in answer.message.tool_calls] == [
        ("get_weather", {"city": "Paris"}), ("get_time", {"tz": "CET"})]
    assert answer.done_reason == "stop" and answer.message.thinking == "hmm"

    parts = list(client.chat(model="llama-x", messages=[{"role": "user", "content": "hi"}], stream=True))
    assert "".join(p.message.content or "" for p in parts) == "Sunny."
    assert [c.function.name for p in parts for c in p.message.tool_calls or []] == ["get_weather", "get_time"]
    assert parts[-1].done and parts[-1].eval_count == 5


def test_errors_use_each_formats_shape(llm: ScriptedLLM) -> None:
    llm.script(Reply(status=429, error="slow down", headers={"retry-after": "0"}))
    with pytest.raises(openai.RateLimitError, match="slow down"):
        openai.OpenAI(base_url=llm.url + "/v1", api_key="k", max_retries=0).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}])
    llm.script(Reply(status=529, error="overloaded"))
    with pytest.raises(anthropic.APIStatusError, match="overloaded"):
        anthropic.Anthropic(base_url=llm.url, api_key="k", max_retries=0).messages.create(
            model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    llm.script(Reply(status=500, error="boom"))
    with pytest.raises(ollama.ResponseError, match="boom"):
        ollama.Client(host=llm.url).chat(model="m", messages=[{"role": "user", "content": "hi"}], stream=False)


def test_requests_are_recorded(llm: ScriptedLLM) -> None:
    llm.script(Reply(text="ok"))
    httpx.post(llm.url + "/v1/chat/completions", json={"model": "m", "messages": []}, headers={"X-Probe": "1"})
    assert llm.requests[0].body == {"model": "m", "messages": []}
    assert llm.requests[0].headers["x-probe"] == "1"
    assert httpx.post(llm.url + "/v1/chat/completions", json={}).status_code == 500  # the script is exhausted


def test_openai_sdk_parses_responses_answer_and_stream(llm: ScriptedLLM) -> None:
    from openai.types.responses import Response, ResponseFunctionToolCall, ResponseReasoningItem

    client = openai.OpenAI(base_url=llm.url + "/v1", api_key="k", max_retries=0)
    llm.script(Reply(text="Checking.", calls=WEATHER, thinking="let me think"),
               Reply(text="Checking.", calls=WEATHER, thinking="let me think"), Reply(text="Sunny in Paris."),
               Reply(text="It is 3", finish="length"))
    answer = client.responses.create(model="gpt-x", input="hi")
    Response.model_validate(answer.model_dump(exclude_unset=True))  # validated, not just constructed
    assert [item.type for item in answer.output] == ["reasoning", "message", "function_call", "function_call"]
    assert isinstance(answer.output[0], ResponseReasoningItem) and answer.output[0].encrypted_content == "sig-123"
    assert answer.output_text == "Checking."
    call = answer.output[2]
    assert isinstance(call, ResponseFunctionToolCall) and call.call_id == "c1"
    assert json.loads(call.arguments) == {"city": "Paris", "days": 2}

    with client.responses.stream(model="gpt-x", input="hi") as stream:
        events = list(stream)
        final = stream.get_final_response()
    assert [e.type for e in events][:2] == ["response.created", "response.in_progress"]
    assert [item.type for item in final.output] == ["reasoning", "message", "function_call", "function_call"]
    assert [json.loads(i.arguments) for i in final.output if i.type == "function_call"] == [
        {"city": "Paris", "days": 2}, {"tz": "CET"}]

    events = list(client.responses.create(model="gpt-x", input="hi", stream=True))
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == "Sunny in Paris."
    assert events[-1].type == "response.completed" and events[-1].response.usage.total_tokens == 15
    assert [e.sequence_number for e in events] == list(range(len(events)))

    cut = client.responses.create(model="gpt-x", input="hi", max_output_tokens=4)
    assert cut.status == "incomplete" and cut.incomplete_details.reason == "max_output_tokens"
    assert llm.requests[-1].path == "/v1/responses"


def test_openai_sdk_parses_embeddings_floats_and_base64(llm: ScriptedLLM) -> None:
    client = openai.OpenAI(base_url=llm.url + "/v1", api_key="k", max_retries=0)
    texts = ["Create an issue", "Merge a pull request"]
    answer = client.embeddings.create(model="embed-x", input=texts, encoding_format="float")
    assert isinstance(answer, CreateEmbeddingResponse)
    assert [d.index for d in answer.data] == [0, 1] and answer.model == "embed-x"
    assert [d.embedding for d in answer.data] == [bag_of_words(t) for t in texts]
    packed = client.embeddings.create(model="embed-x", input=texts, encoding_format="base64")  # handed over as is
    assert [list(struct.unpack(f"<{EMBEDDING_DIM}f", base64.b64decode(d.embedding))) for d in packed.data] == [
        bag_of_words(t) for t in texts]
    default = client.embeddings.create(model="embed-x", input="Create an issue")  # the SDK asks for base64
    assert default.data[0].embedding == bag_of_words("Create an issue") and len(default.data[0].embedding) == 64
    assert llm.embedding_inputs()[-1] == ["Create an issue"] and llm.replies == []  # no script consumed
    llm.embedding_status = 503
    with pytest.raises(openai.InternalServerError, match="embeddings are down"):
        client.embeddings.create(model="embed-x", input="x")


def test_ollama_sdk_parses_embed(llm: ScriptedLLM) -> None:
    answer = ollama.Client(host=llm.url).embed(model="nomic-embed-text", input=["close an issue", "list repos"])
    assert [list(v) for v in answer.embeddings] == [bag_of_words("close an issue"), bag_of_words("list repos")]
    assert len(answer.embeddings[0]) == EMBEDDING_DIM
    llm.embedding_status = 500
    with pytest.raises(ollama.ResponseError, match="embeddings are down"):
        ollama.Client(host=llm.url).embed(model="m", input="x")
