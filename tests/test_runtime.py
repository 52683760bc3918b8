from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path

import anyio
import pytest

from gateway.errors import ConfigError
from gateway.runtime import Runtime, RuntimeHolder, input_digest, load_runtime

pytestmark = pytest.mark.anyio

AGENTS = """\
providers: {local: {kind: ollama}}
agents:
  clerk:
    model: local/llama3
    tools:
      - api: shop
        operations: [{operations}]
"""


def _spec(*operation_ids: str) -> str:
    paths = {f"/{op.lower()}": {"get": {"operationId": op, "responses": {"200": {"description": "ok"}}}}
             for op in operation_ids}
    return json.dumps({"openapi": "3.0.3", "info": {"title": "Shop", "version": "1"},
                       "servers": [{"url": "http://127.0.0.1:9/"}], "paths": paths})


@pytest.fixture
def config(tmp_path: Path) -> tuple[Path, Path]:
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "shop.json").write_text(_spec("listItems", "getItem", "getStats"))
    agents = tmp_path / "agents.yaml"
    agents.write_text(AGENTS.replace("{operations}", "listItems, getItem"))
    return specs, agents


def _load(config: tuple[Path, Path]) -> Runtime:
    return load_runtime(*config, use_cache=False)


def _names(runtime: Runtime) -> list[str]:
    return [tool.name for tool in runtime.tools("clerk")]


def test_load_runtime_builds_catalog_manifest_and_toolsets(config: tuple[Path, Path]) -> None:
    runtime = _load(config)
    assert runtime.agents == ["clerk"]
    assert _names(runtime) == ["listItems", "getItem"]
    assert runtime.toolset("clerk").names == _names(runtime)
    assert runtime.agent("clerk").model_id == "llama3"
    tool = runtime.tool("clerk", "getItem")
    assert tool is not None and tool.tool is runtime.catalog.get("getItem")  # one catalog shared by all agents
    assert runtime.tool("clerk", "getStats") is None
    with pytest.raises(KeyError, match="no agent named 'nobody' .known: clerk."):
        runtime.toolset("nobody")
    assert runtime.fingerprint == input_digest(*config)


_opened: list[str] | None = None
"""While a list: the paths `open()` is called with in this process (an audit hook, added once)."""


def _record_open(event: str, args: tuple[object, ...]) -> None:
    if event == "open" and _opened is not None and isinstance(args[0], str | Path):
        _opened.append(str(args[0]))


sys.addaudithook(_record_open)


def test_a_cached_spec_is_read_once_for_the_fingerprint_and_the_compiler(config: tuple[Path, Path],
                                                                          tmp_path: Path) -> None:
    """The runtime's fingerprint and the compiler's cache key come from one read and one hash of each spec (a 13 MB
    spec's second SHA-256 was a sizeable part of `gateway mcp`'s start); an edited spec is compiled from its new
    content."""
    global _opened
    specs, agents = config
    load_runtime(specs, agents, cache_dir=tmp_path / "cache")  # fills the cache
    _opened = []
    try:
        runtime = load_runtime(specs, agents, cache_dir=tmp_path / "cache")
        reads = [path for path in _opened if path == str(specs / "shop.json")]
    finally:
        _opened = None
    assert len(reads) == 1
    assert runtime.fingerprint == input_digest(specs, agents) and _names(runtime) == ["listItems", "getItem"]
    (specs / "shop.json").write_text(_spec("listItems", "getItem", "getStats", "newOne"))
    edited = load_runtime(specs, agents, cache_dir=tmp_path / "cache")
    assert edited.catalog.get("newOne") is not None and edited.fingerprint != runtime.fingerprint


def test_a_missing_manifest_means_no_agents(config: tuple[Path, Path]) -> None:
    specs, agents = config
    agents.unlink()
    runtime = _load(config)
    assert runtime.agents == [] and len(runtime.catalog) == 3


def test_an_unusable_manifest_raises_with_every_diagnostic(config: tuple[Path, Path]) -> None:
    specs, agents = config
    agents.write_text(AGENTS.replace("local/llama3", "nowhere/llama3").replace("api: shop", "api: shopp")
                      .replace("{operations}", "x"))
    with pytest.raises(ConfigError) as caught:
        _load(config)
    errors = [d for d in caught.value.diagnostics if d.level == "error"]
    assert [d.pointer for d in errors] == ["agents.clerk.model", "agents.clerk.tools[0].api"]
    assert "agents.yaml:4: agents.clerk.model" in str(caught.value)


def _edit_manifest(agents: Path, operations: str) -> None:
    agents.write_text(AGENTS.replace("{operations}", operations))


async def test_reload_swaps_in_an_edited_manifest_and_runs_callbacks(config: tuple[Path, Path]) -> None:
    specs, agents = config
    seen: list[list[str]] = []

    async def on_reload_async(runtime: Runtime) -> None:
        seen.append(_names(runtime))

    holder = RuntimeHolder(_load(config), on_reload=[on_reload_async])
    holder.on_reload.append(lambda runtime: seen.append(["sync", *_names(runtime)]))
    first = holder.current
    assert await holder.reload() is False  # nothing changed
    _edit_manifest(agents, "getStats")
    assert await holder.reload() is True
    assert _names(holder.current) == ["getStats"] and holder.generation == 1
    assert _names(first) == ["listItems", "getItem"]  # a runtime already handed out is never mutated
    assert seen == [["getStats"], ["sync", "getStats"]]


async def test_a_spec_edit_changes_the_tool_list(config: tuple[Path, Path]) -> None:
    specs, agents = config
    holder = RuntimeHolder(_load(config))
    _edit_manifest(agents, '"*"')
    await holder.reload()
    assert _names(holder.current) == ["listItems", "getItem", "getStats"]
    (specs / "shop.json").write_text(_spec("listItems", "getStats", "searchItems"))
    assert await holder.reload() is True
    assert _names(holder.current) == ["listItems", "getStats", "searchItems"]


async def test_a_broken_manifest_keeps_the_last_good_runtime(
    config: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    specs, agents = config
    holder = RuntimeHolder(_load(config))
    good = holder.current
    agents.write_text(AGENTS.replace("{operations}", "listItems").replace("model:", "modle:"))
    with caplog.at_level(logging.ERROR, logger="gateway.runtime"):
        assert await holder.reload() is False
    assert holder.current is good and holder.generation == 0
    assert holder.last_error is not None
    assert [d.pointer for d in holder.last_error.diagnostics if d.level == "error"] == [
        "agents.clerk", "agents.clerk.modle"]  # 'model' is required; 'modle' is unknown
    assert "agents.clerk.modle" in caplog.text and "keeps serving" in caplog.text
    # one line per record (a record's line breaks are written as escapes): the reason, then each error
    assert all("\n" not in record.getMessage() for record in caplog.records), caplog.text
    assert [r.getMessage() for r in caplog.records if r.name == "gateway.runtime"][-1].startswith(
        "reload refused: agents.yaml:")
    assert await holder.reload() is False  # the same broken content is not retried
    _edit_manifest(agents, "listItems")
    assert await holder.reload() is True
    assert _names(holder.current) == ["listItems"] and holder.last_error is None


async def test_a_broken_spec_keeps_the_last_good_runtime(config: tuple[Path, Path]) -> None:
    specs, agents = config
    holder = RuntimeHolder(_load(config))
    good = holder.current
    (specs / "shop.json").write_text('{"openapi": "3.0.3", "paths": {')
    assert await holder.reload() is False
    assert holder.current is good and _names(holder.current) == ["listItems", "getItem"]
    assert holder.last_error is not None and "shop.json" in str(holder.last_error)


async def test_a_broken_spec_that_no_agent_uses_is_refused_too(config: tuple[Path, Path]) -> None:
    specs, agents = config
    (specs / "extra.json").write_text(_spec("other"))
    holder = RuntimeHolder(_load(config))
    (specs / "extra.json").write_text("openapi: [")
    assert await holder.reload() is False
    (specs / "extra.json").unlink()  # a deleted spec is a deliberate change, not a broken edit
    assert await holder.reload() is True
    assert "extra" not in holder.current.catalog.apis


async def test_a_spec_added_broken_is_served_around_and_its_error_logged(
    config: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    """An owner drops a new spec with a YAML typo into specs/ while serving: nothing is lost, so the reload goes on,
    and the log said only "reloaded" (the error was in `gateway validate` and nowhere the owner was looking)."""
    specs, _ = config
    holder = RuntimeHolder(_load(config))
    (specs / "billing.yaml").write_text("openapi: 3.0.3\ninfo: {title: billing, version: '1'\npaths: {}\n")
    with caplog.at_level(logging.WARNING, logger="gateway.runtime"):
        assert await holder.reload() is True
    assert _names(holder.current) == ["listItems", "getItem"]
    [record] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert record.getMessage().startswith("reloaded around an error (the rest serves): billing.yaml:3: invalid YAML")
    caplog.clear()
    (specs / "shop.json").write_text(_spec("listItems", "getItem", "getStats", "getMore"))
    with caplog.at_level(logging.WARNING, logger="gateway.runtime"):
        assert await holder.reload() is True
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]  # said once, not at every reload


async def test_a_failing_callback_does_not_undo_the_reload(config: tuple[Path, Path]) -> None:
    specs, agents = config

    def explode(runtime: Runtime) -> None:
        raise RuntimeError("boom")

    holder = RuntimeHolder(_load(config), on_reload=[explode])
    _edit_manifest(agents, "getStats")
    assert await holder.reload() is True
    assert _names(holder.current) == ["getStats"]


async def test_watch_notices_edits_under_a_live_holder(config: tuple[Path, Path]) -> None:
    specs, agents = config
    holder = RuntimeHolder(_load(config))
    reloaded = anyio.Event()
    holder.on_reload.append(lambda runtime: reloaded.set())
    async with anyio.create_task_group() as group:
        _edit_manifest(agents, "getStats, listItems")  # watch compares contents from its first poll on
        group.start_soon(holder.watch, 0.02)
        with anyio.fail_after(30):  # a generous safety net, not a timing expectation
            await reloaded.wait()
        assert _names(holder.current) == ["listItems", "getStats"]
        # a touch without a change is no reload
        generation = holder.generation
        stat = agents.stat()
        os.utime(agents, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
        assert await holder.reload() is False and holder.generation == generation
        group.cancel_scope.cancel()


def test_the_watcher_loads_an_edit_only_once_it_has_settled(config: tuple[Path, Path],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A file seen mid-write (truncated, then written) changes between two polls: it is not loaded until it
    looks the same on two polls in a row."""
    import gateway.runtime as runtime_module

    holder = RuntimeHolder(load_runtime(*config))
    polls = iter([(("a", 1, 10),), (("a", 2, 0),), (("a", 3, 90),), (("a", 3, 90),), (("a", 3, 90),)])
    reloads: list[int] = []
    seen: list[int] = []

    class Done(Exception):
        pass

    def stats(*_: object) -> tuple[tuple[str, int, int], ...]:
        value = next(polls, None)
        if value is None:
            raise Done
        seen.append(value[0][1])
        return value

    async def reload(**_: object) -> bool:
        reloads.append(seen[-1])
        return True

    monkeypatch.setattr(runtime_module, "input_stats", stats)
    monkeypatch.setattr(holder, "reload", reload)

    async def main() -> None:
        with anyio.fail_after(5):
            await holder.watch(interval=0)

    with pytest.raises(Done):  # every poll was seen
        anyio.run(main)
    assert reloads == [3]  # neither the first look nor the half-written state (mtime 2) was loaded


async def test_a_reload_that_changes_a_setting_read_at_start_says_it_waits_for_a_restart(
    config: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    # Seen in a trial: `redis:` and `shared_state_timeout` edited on a serving pair, the log said "reloaded" and
    # the processes went on with the old Redis and timeout, with no word of it.
    specs, agents = config
    holder = RuntimeHolder(_load(config))
    started = agents.read_text()
    agents.write_text(started + "gateway:\n  redis: redis://127.0.0.1:6399/3\n  shared_state_timeout: 5\n"
                                "  max_delegation_depth: 2\n")
    with caplog.at_level(logging.WARNING, logger="gateway.runtime"):
        assert await holder.reload()
    [said] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert said == ("agents.yaml changes gateway.redis, gateway.shared_state_timeout, read at start only: this "
                    "process keeps the values it started with until it is restarted")
    assert holder.current.manifest.gateway.max_delegation_depth == 2  # the rest of the edit is in force
    caplog.clear()
    agents.write_text(started + "gateway:\n  max_delegation_depth: 4\n")  # back to what it started with
    with caplog.at_level(logging.WARNING, logger="gateway.runtime"):
        assert await holder.reload()
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]
