from __future__ import annotations

import subprocess
import sys

import anyio
import pytest

from gateway.server.mcp.lazy import LazyMCP

pytestmark = pytest.mark.anyio


def test_starting_the_gateway_does_not_import_the_mcp_sdk() -> None:
    code = ("import sys, gateway.server.app, gateway.server.run, gateway.server.supervision; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'mcp_types')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


class _Manager:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def run(self):  # type: ignore[no-untyped-def]
        import contextlib

        @contextlib.asynccontextmanager
        async def running():  # type: ignore[no-untyped-def]
            self.log.append("start")
            try:
                yield
            finally:
                self.log.append("stop")

        return running()


class _Endpoint:
    def __init__(self, log: list[str]) -> None:
        self.run = _Manager(log).run  # the endpoint's lifetime: the SDK's session manager and the idle sweep
        self.log = log

    async def __call__(self, scope, receive, send) -> None:  # type: ignore[no-untyped-def]
        self.log.append(scope["path"])


async def test_built_once_on_first_request_and_stopped_with_the_lifespan() -> None:
    log: list[str] = []
    builds: list[int] = []

    def build() -> _Endpoint:
        builds.append(1)
        return _Endpoint(log)

    lazy = LazyMCP(build)
    async with lazy.running():
        assert lazy.endpoint is None and log == []
        async with anyio.create_task_group() as group:  # concurrent first requests build it once
            for path in ("/mcp/a", "/mcp/b"):
                group.start_soon(lazy, {"path": path}, None, None)
        await lazy({"path": "/mcp/c"}, None, None)
        assert builds == [1]
        assert log[0] == "start" and sorted(log[1:]) == ["/mcp/a", "/mcp/b", "/mcp/c"]
    assert log[-1] == "stop"


async def test_outside_the_lifespan_it_says_so() -> None:
    with pytest.raises(RuntimeError, match="lifespan"):
        await LazyMCP(lambda: _Endpoint([]))({"path": "/mcp/a"}, None, None)


async def test_the_preload_runs_in_the_background_once_started() -> None:
    loaded: list[int] = []
    lazy = LazyMCP(lambda: _Endpoint([]), preload=lambda: loaded.append(1))
    async with lazy.running():
        with anyio.fail_after(5):
            while not loaded:
                await anyio.sleep(0.01)
    assert loaded == [1]


async def test_after_preload_callbacks_run_once_the_import_succeeded() -> None:
    done: list[str] = []
    lazy = LazyMCP(lambda: _Endpoint([]), preload=lambda: done.append("import"))
    lazy.after_preload.append(lambda: done.append("after"))
    async with lazy.running():
        with anyio.fail_after(5):
            while "after" not in done:
                await anyio.sleep(0.01)
    assert done == ["import", "after"]


async def test_after_preload_callbacks_do_not_run_when_the_import_failed(caplog: pytest.LogCaptureFixture) -> None:
    def broken() -> None:
        raise ImportError("no SDK")

    called: list[str] = []
    lazy = LazyMCP(lambda: _Endpoint([]), preload=broken)
    lazy.after_preload.append(lambda: called.append("after"))
    async with lazy.running():
        with anyio.fail_after(5):
            while "preloading the MCP endpoint failed" not in caplog.text:
                await anyio.sleep(0.01)
        await anyio.sleep(0.01)  # the callbacks would run right after the warning
    assert called == []
