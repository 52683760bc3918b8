"""Stand-ins shared by the loop and provider tests: provider configs for the scripted LLM, tools, an invoke."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gateway.catalog import AgentTool, Tool
from gateway.config.model import AgentConfig, ProviderConfig
from gateway.messages import ToolCall, ToolResult
from gateway.providers import get_adapter
from gateway.providers.base import ProviderAdapter
from gateway.toolsets import Toolset

KINDS = ("openai", "anthropic", "gemini", "ollama")


def provider_config(kind: str, url: str) -> ProviderConfig:
    base = url + "/v1" if kind.startswith("openai") else url
    return ProviderConfig(name=f"test-{kind}", kind=kind, base_url=base, api_key="secret-key", timeout=10)  # type: ignore[arg-type]


def adapter_for(kind: str, url: str, **options: Any) -> ProviderAdapter:
    recorded: list[float] = []

    async def no_wait(seconds: float) -> None:
        recorded.append(seconds)

    adapter = get_adapter(provider_config(kind, url), sleep=no_wait, **options)
    adapter.slept = recorded  # type: ignore[attr-defined]
    return adapter


def agent_tool(name: str, *, method: str = "GET", approval: str = "never", properties: dict | None = None,
               delegate: str | None = None) -> AgentTool:
    schema = {"type": "object", "properties": properties or {"city": {"type": "string"}}}
    tool = None if delegate else Tool(name=name, api="test", operation_id=name, method=method, path=f"/{name}",
                                      description=f"{name} tool", input_schema=schema)
    return AgentTool(name=name, description=f"{name} tool", input_schema=schema, tool=tool,
                     approval=approval, delegate=delegate)  # type: ignore[arg-type]


def toolset(*tools: AgentTool, agent: str = "clerk") -> Toolset:
    return Toolset(agent=agent, tools={t.name: t for t in tools})


def agent_config(kind: str = "openai", **policy: Any) -> AgentConfig:
    return AgentConfig(name="clerk", model=f"test-{kind}/model-x", instructions="You are the clerk.", **policy)


class StandInInvoke:
    """Records every call; answers with `respond(tool, call)` or an ok result echoing the arguments."""

    def __init__(self, respond: Callable[[AgentTool, ToolCall], ToolResult] | None = None) -> None:
        self.calls: list[tuple[str, dict[str, Any] | None]] = []
        self.respond = respond

    async def __call__(self, tool: AgentTool, call: ToolCall) -> ToolResult:
        self.calls.append((tool.name, call.arguments))
        if self.respond is not None:
            return self.respond(tool, call)
        return ToolResult(ok=True, status=200, media_type="application/json",
                          body={"tool": tool.name, "args": call.arguments})


async def run_turns(url: str, kind: str, *, stream: bool = False, invoke: StandInInvoke | None = None,
                    tools: Toolset | None = None, **policy: Any):  # type: ignore[no-untyped-def]
    """One loop run on the scripted LLM at `url` (the test scripts the replies), with text events collected."""
    from gateway.loop import run
    from gateway.messages import Message

    texts: list[str] = []

    async def on_event(event: Any) -> None:
        if event.type == "text":
            texts.append(event.text)

    adapter = adapter_for(kind, url)
    try:
        result = await run(agent_config(kind, **policy), [Message(role="user", content="What is the weather?")],
                           adapter=adapter, toolset=tools or toolset(agent_tool("weather"), agent_tool("time")),
                           invoke=invoke or StandInInvoke(), stream=stream, on_event=on_event)
    finally:
        await adapter.aclose()
    return Outcome(result, texts)


class Outcome:
    """A RunResult (attributes passed through) plus the streamed text events."""

    def __init__(self, result: Any, texts: list[str]) -> None:
        self.result = result
        self.texts = texts

    def __getattr__(self, name: str) -> Any:
        return getattr(self.result, name)
