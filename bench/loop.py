"""Loop overhead per iteration, with an instant LLM and an instant tool.

The LLM answers from memory through an `httpx.MockTransport` (no socket), in each wire format, so what is
measured is the gateway's own work per iteration: rendering the conversation and tools, parsing the answer,
normalizing calls, running the (instant) tool, recording steps. With `--http` the same scripted answers
come from the tests' ScriptedLLM server on 127.0.0.1 instead, adding a real HTTP round trip.

    /work/venv/bin/python bench/loop.py [--iterations 20] [--repeats 15] [--tools 20] [--http]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx

from gateway.catalog import AgentTool
from gateway.config.model import AgentConfig, ProviderConfig
from gateway.loop import run
from gateway.messages import Message, ToolCall, ToolResult
from gateway.providers import get_adapter
from gateway.toolsets import Toolset

KINDS = ("openai", "openai-responses", "anthropic", "gemini", "ollama")


def _answer(kind: str, call: bool) -> dict[str, Any]:
    """One non-streamed answer in `kind`'s format: a tool call, or the final text."""
    args = {"city": "Paris", "days": 3}
    if kind == "openai":
        message: dict[str, Any] = {"role": "assistant", "content": None if call else "Done."}
        if call:
            message["tool_calls"] = [{"id": "call_1", "type": "function",
                                      "function": {"name": "tool_0", "arguments": json.dumps(args)}}]
        return {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if call else "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
    if kind == "openai-responses":
        output: list[dict[str, Any]] = [{"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "tool_0",
                                         "arguments": json.dumps(args), "status": "completed"}] if call else [
            {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": "Done.", "annotations": []}]}]
        return {"id": "resp_1", "object": "response", "status": "completed", "model": "m", "output": output,
                "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}}
    if kind == "anthropic":
        content = [{"type": "tool_use", "id": "toolu_1", "name": "tool_0", "input": args}] if call else [
            {"type": "text", "text": "Done."}]
        return {"id": "x", "type": "message", "role": "assistant", "model": "m", "content": content,
                "stop_reason": "tool_use" if call else "end_turn", "usage": {"input_tokens": 10, "output_tokens": 5}}
    if kind == "gemini":
        parts = [{"functionCall": {"name": "tool_0", "args": args}}] if call else [{"text": "Done."}]
        return {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}],
                "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5}}
    message = {"role": "assistant", "content": "" if call else "Done."}
    if call:
        message["tool_calls"] = [{"function": {"name": "tool_0", "arguments": args}}]
    return {"model": "m", "message": message, "done": True, "done_reason": "stop", "prompt_eval_count": 10,
            "eval_count": 5}


def _toolset(count: int) -> Toolset:
    schema = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
              "required": ["city"]}
    tools = [AgentTool(name=f"tool_{i}", description=f"Tool number {i}.", input_schema=schema) for i in range(count)]
    return Toolset(agent="bench", tools={t.name: t for t in tools})


async def _invoke(tool: AgentTool, call: ToolCall) -> ToolResult:
    return ToolResult(ok=True, status=200, body={"temperature": 20, "city": (call.arguments or {}).get("city")})


async def _one_run(kind: str, iterations: int, tools: Toolset, base_url: str,
                   transport: httpx.AsyncBaseTransport | None, script: Any) -> float:
    config = ProviderConfig(name=kind, kind=kind, base_url=base_url, api_key="k")  # type: ignore[arg-type]
    adapter = get_adapter(config, transport=transport)
    agent = AgentConfig(name="bench", model=f"{kind}/m", instructions="Bench.", max_iterations=iterations + 1)
    script(kind, iterations)
    try:
        started = time.perf_counter()
        result = await run(agent, [Message(role="user", content="go")], adapter=adapter, toolset=tools,
                           invoke=_invoke)
        elapsed = time.perf_counter() - started
    finally:
        await adapter.aclose()
    assert result.message.content == "Done." and len(result.steps) == iterations, "the bench run went wrong"
    return elapsed * 1000 / (iterations + 1)


async def _bench(args: argparse.Namespace) -> dict[str, float]:
    tools = _toolset(args.tools)
    medians: dict[str, float] = {}
    if args.http:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
        from scripted_llm import Call, Reply, ScriptedLLM

        with ScriptedLLM() as llm:
            def script(kind: str, n: int) -> None:
                llm.replies.clear()
                llm.requests.clear()
                llm.script(*[Reply(calls=[Call("tool_0", {"city": "Paris", "days": 3}, id="c1")]) for _ in range(n)],
                           Reply(text="Done."))

            for kind in KINDS:
                base = llm.url + "/v1" if kind.startswith("openai") else llm.url
                times = [await _one_run(kind, args.iterations, tools, base, None, script) for _ in range(args.repeats)]
                medians[kind] = statistics.median(times)
        return medians

    for kind in KINDS:
        counter = {"n": 0, "limit": 0}

        def script(kind: str, n: int, counter: dict[str, int] = counter) -> None:
            counter.update(n=0, limit=n)

        def handler(request: httpx.Request, kind: str = kind, counter: dict[str, int] = counter) -> httpx.Response:
            call = counter["n"] < counter["limit"]
            counter["n"] += 1
            return httpx.Response(200, json=_answer(kind, call))

        transport = httpx.MockTransport(handler)
        times = [await _one_run(kind, args.iterations, tools, "http://llm.invalid/v1", transport, script)
                 for _ in range(args.repeats)]
        medians[kind] = statistics.median(times)
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=20, help="tool-call iterations per run")
    parser.add_argument("--repeats", type=int, default=15, help="runs per provider (the median is reported)")
    parser.add_argument("--tools", type=int, default=20, help="tools offered to the model each call")
    parser.add_argument("--http", action="store_true", help="answer over HTTP from a 127.0.0.1 server")
    args = parser.parse_args()
    medians = anyio.run(_bench, args)
    where = "HTTP 127.0.0.1" if args.http else "in-process transport"
    print(f"loop overhead per iteration ({where}, {args.iterations} iterations, {args.tools} tools, "
          f"median of {args.repeats} runs):")
    for kind, value in medians.items():
        print(f"  {kind:<16} {value:.3f} ms")


if __name__ == "__main__":
    main()
