"""The executor makes a request whose arguments are large in a worker thread: percent-encoding them is Python's, value
by value, and a caller sizes them (a 2 MB direct call, a model's 16 MiB arguments). One that is small is made on the
event loop, as before (no thread's hop on the usual call). Which thread made each request is recorded around the
gateway's own `RequestPlan.build`; the upstream is a real server on 127.0.0.1."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from executor_helpers import arg, executor_for, make_tool
from recording_server import RecordingServer

from gateway.http.request import RequestPlan

pytestmark = pytest.mark.anyio


@pytest.fixture
def builders(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    build = RequestPlan.build

    def recorded(plan: RequestPlan, arguments: dict[str, Any]) -> Any:
        seen.append(threading.current_thread().name)
        return build(plan, arguments)

    monkeypatch.setattr(RequestPlan, "build", recorded)
    return seen


@pytest.mark.parametrize("value", [["a"] * 40_000, "é" * 70_000, {f"k{i}": "a" for i in range(10_000)}])
async def test_large_arguments_are_made_into_a_request_off_the_event_loop(builders: list[str], value: Any) -> None:
    schema = {"type": "object"} if isinstance(value, dict) else {"type": "array", "items": {"type": "string"}} \
        if isinstance(value, list) else {"type": "string"}
    tool = make_tool(arg("q", "query", schema, style="deepObject" if isinstance(value, dict) else None))
    loop_thread = threading.current_thread().name
    with RecordingServer() as server:
        async with executor_for(server.url, tool) as executor:
            await executor.execute(tool, {"q": value})
            small = {"a": "b"} if isinstance(value, dict) else ["a"] if isinstance(value, list) else "ab"
            await executor.execute(tool, {"q": small})
    assert builders[0] != loop_thread
    assert builders[1] == loop_thread
