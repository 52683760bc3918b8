"""What every adapter shares: argument normalization, ids, retries with Retry-After, error mapping."""

from __future__ import annotations

import socket

import pytest
from loop_support import KINDS, adapter_for, agent_tool, provider_config
from scripted_llm import Reply, ScriptedLLM

from gateway.errors import ConfigError, ProviderError
from gateway.messages import Message, ToolCall
from gateway.providers import AdapterPool, get_adapter
from gateway.providers.base import ensure_unique_ids, parse_arguments, retry_delay

pytestmark = pytest.mark.anyio
USER = [Message(role="user", content="hi")]


@pytest.mark.parametrize("raw, expected", [
    ('{"a": 1}', {"a": 1}), ("", {}), ("  ", {}), (None, {}), ({"a": [1]}, {"a": [1]}),
])
def test_parse_arguments_accepts_strings_and_objects(raw, expected) -> None:
    assert parse_arguments(raw) == (expected, None)


@pytest.mark.parametrize("raw, fragment", [('{"a": ', "not valid JSON"), ("[1, 2]", "must be a JSON object"),
                                           ("42", "must be a JSON object"), (7, "must be a JSON object")])
def test_parse_arguments_reports_what_is_wrong(raw, fragment) -> None:
    value, error = parse_arguments(raw)
    assert value is None and fragment in error


def test_missing_and_repeated_ids_become_unique() -> None:
    calls = [ToolCall(id=i, name="a") for i in ("", "x", "x", "")]
    ensure_unique_ids(calls)
    assert len({c.id for c in calls}) == 4 and all(c.id for c in calls)
    assert calls[1].id == "x" and calls[2].extras["provider_id"] == "x"


def test_retry_delay_honours_retry_after() -> None:
    import httpx

    assert retry_delay(httpx.Response(429, headers={"retry-after": "7"}), 0, 0.5) == 7.0
    assert retry_delay(httpx.Response(429, headers={"retry-after-ms": "250"}), 0, 0.5) == 0.25
    assert 0 < retry_delay(httpx.Response(503), 2, 0.5) <= 2.0
    dated = retry_delay(httpx.Response(429, headers={"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}), 0, 0.5)
    assert dated == 0.0  # a date in the past: retry now


@pytest.mark.parametrize("kind", KINDS)
async def test_429_is_retried_after_the_servers_delay(llm: ScriptedLLM, kind: str) -> None:
    llm.script(Reply(status=429, error="slow down", headers={"retry-after": "3"}), Reply(status=503), Reply(text="ok"))
    adapter = adapter_for(kind, llm.url, backoff=0.01)
    turn = await adapter.complete("m", USER)
    assert turn.message.content == "ok" and len(llm.requests) == 3
    assert adapter.slept[0] == 3.0 and len(adapter.slept) == 2
    await adapter.aclose()


@pytest.mark.parametrize("kind", KINDS)
async def test_retries_are_bounded_and_the_error_is_the_providers(llm: ScriptedLLM, kind: str) -> None:
    llm.script(*[Reply(status=429, error="quota exceeded", headers={"retry-after": "0"}) for _ in range(3)])
    adapter = adapter_for(kind, llm.url, max_retries=2)
    with pytest.raises(ProviderError) as caught:
        await adapter.complete("m", USER, on_text=None)
    assert caught.value.status == 429 and caught.value.message == "quota exceeded"
    assert caught.value.provider == f"test-{kind}" and len(llm.requests) == 3


async def test_auth_failures_say_where_the_key_is_configured(llm: ScriptedLLM) -> None:
    llm.script(Reply(status=401, error="invalid x-api-key"))
    with pytest.raises(ProviderError, match=r"invalid x-api-key \(check providers.test-anthropic.api_key"):
        await adapter_for("anthropic", llm.url).complete("m", USER)


@pytest.mark.parametrize("stream", [False, True])
async def test_client_errors_are_not_retried(llm: ScriptedLLM, stream: bool) -> None:
    llm.script(Reply(status=400, error="bad tool schema"))
    adapter = adapter_for("anthropic", llm.url)

    async def on_text(text: str) -> None:
        pass

    with pytest.raises(ProviderError, match="bad tool schema") as caught:
        await adapter.complete("m", USER, on_text=on_text if stream else None)
    assert caught.value.status == 400 and len(llm.requests) == 1


async def test_connect_errors_are_retried_then_reported() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    adapter = adapter_for("openai", f"http://127.0.0.1:{port}", max_retries=2)
    with pytest.raises(ProviderError, match="cannot reach"):
        await adapter.complete("m", USER)
    assert len(adapter.slept) == 2


async def test_a_non_json_answer_is_a_provider_error(llm: ScriptedLLM) -> None:
    import httpx

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text="<html>proxy error</html>")

    adapter = get_adapter(provider_config("openai", "http://127.0.0.1:9"), transport=httpx.MockTransport(handler))
    with pytest.raises(ProviderError, match="not JSON"):
        await adapter.complete("m", USER)


def test_unknown_kind_and_missing_provider_are_config_errors() -> None:
    from gateway.config.model import Manifest

    config = provider_config("openai", "http://x")
    config.kind = "cohere"  # type: ignore[assignment]
    with pytest.raises(ConfigError, match="unknown kind 'cohere'"):
        get_adapter(config)
    from loop_support import agent_config

    pool = AdapterPool(Manifest())
    with pytest.raises(ConfigError, match="provider 'test-openai' is not in agents.yaml"):
        pool(agent_config())


def test_pool_shares_one_adapter_per_provider() -> None:
    from loop_support import agent_config

    from gateway.config.model import Manifest

    manifest = Manifest(providers={"test-openai": provider_config("openai", "http://127.0.0.1:9")})
    pool = AdapterPool(manifest)
    assert pool(agent_config()) is pool(agent_config())


@pytest.mark.parametrize("kind", KINDS)
async def test_tools_are_rendered_in_the_dialect(llm: ScriptedLLM, kind: str) -> None:
    llm.script(Reply(text="ok"))
    await adapter_for(kind, llm.url).complete("m", USER, [agent_tool("weather")])
    body = llm.requests[0].body
    names = {
        "openai": lambda: [t["function"]["name"] for t in body["tools"]],
        "ollama": lambda: [t["function"]["name"] for t in body["tools"]],
        "anthropic": lambda: [t["name"] for t in body["tools"]],
        "gemini": lambda: [f["name"] for t in body["tools"] for f in t["functionDeclarations"]],
    }[kind]()
    assert names == ["weather"]


@pytest.mark.parametrize("kind", KINDS)
async def test_an_error_inside_the_stream_is_a_provider_error(llm: ScriptedLLM, kind: str) -> None:
    llm.script(Reply(text="Partial answer that breaks off", chunks=6, stream_error="overloaded mid-stream"))
    texts: list[str] = []

    async def on_text(text: str) -> None:
        texts.append(text)

    with pytest.raises(ProviderError, match="overloaded mid-stream") as caught:
        await adapter_for(kind, llm.url).complete("m", USER, on_text=on_text)
    assert caught.value.provider == f"test-{kind}"


async def test_a_provider_slower_than_its_timeout_is_a_provider_error(llm: ScriptedLLM) -> None:
    llm.script(Reply(text="late", delay=1.0))
    adapter = adapter_for("openai", llm.url)
    adapter.config.timeout = 0.2
    with pytest.raises(ProviderError, match="no answer"):
        await adapter.complete("m", USER)
    assert len(llm.requests) == 1  # a read timeout is not retried: the request may have been processed


def test_tool_definitions_are_rendered_once_per_tool_object() -> None:
    adapter = adapter_for("gemini", "http://127.0.0.1:9")
    calls: list[str] = []

    def render(tool):
        calls.append(tool.name)
        return {"name": tool.name}

    tool = agent_tool("weather")
    assert adapter._render_cached(tool, render) is adapter._render_cached(tool, render)
    tool.input_schema = {"type": "object", "properties": {}}  # a new schema object: rendered again
    adapter._render_cached(tool, render)
    assert calls == ["weather", "weather"]
