"""What a reload leaves behind, where operators look: /healthz, the log, the console's Health page."""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_support import running

from gateway.runtime import RuntimeHolder, load_runtime
from gateway.server import create_app
from gateway.server.supervision import Safety

AGENTS = """\
providers: {local: {kind: ollama, base_url: "http://127.0.0.1:9"}}
agents:
  clerk:
    model: local/llama3
    tools:
      - api: shop
        operations: [listItems, getItem]
"""


def _spec(*operation_ids: str) -> str:
    paths = {f"/{op.lower()}": {"get": {"operationId": op, "responses": {"200": {"description": "ok"}}}}
             for op in operation_ids}
    return json.dumps({"openapi": "3.0.3", "info": {"title": "Shop", "version": "1"},
                       "servers": [{"url": "http://127.0.0.1:9/"}], "paths": paths})


def _project(folder: Path, agents_yaml: str = AGENTS) -> tuple[Path, Path]:
    specs = folder / "specs"
    specs.mkdir()
    (specs / "shop.json").write_text(_spec("listItems", "getItem"))
    agents = folder / "agents.yaml"
    agents.write_text(agents_yaml)
    return specs, agents


@contextmanager
def _served(folder: Path, agents_yaml: str = AGENTS) -> Iterator[str]:
    """`gateway serve` on the project: watching its files, the safety layer (and so the console) on."""
    specs, agents = _project(folder, agents_yaml)
    runtime = load_runtime(specs, agents, use_cache=False)
    safety = Safety.open(runtime, store=str(folder / "state.db"))
    try:
        with running(create_app(RuntimeHolder(runtime), watch=True, watch_interval=0.05,
                                **safety.app_options())) as url:
            yield url
    finally:
        safety.store.close()  # type: ignore[attr-defined]


def _replace(path: Path, text: str) -> None:
    """Write `path` in one step (a watcher polling mid-write would see a half-written file)."""
    temporary = path.with_suffix(".tmp")
    temporary.write_text(text)
    temporary.replace(path)


def _wait_for(url: str, done: Any, timeout: float = 20) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        health: dict[str, Any] = httpx.get(f"{url}/healthz").json()
        if done(health) or time.monotonic() > deadline:
            return health
        time.sleep(0.05)


def test_putting_back_the_last_good_agents_yaml_ends_the_degraded_state(tmp_path: Path) -> None:
    agents = tmp_path / "agents.yaml"
    with _served(tmp_path) as url:
        good = agents.read_text()
        _replace(agents, good + "\nagents: [this is not a mapping\n")
        assert _wait_for(url, lambda h: h["status"] != "ok")["status"] == "degraded"
        _replace(agents, good)  # exactly what serves: nothing to reload, and nothing is refused any more
        health = _wait_for(url, lambda h: h["status"] == "ok")
        assert health["status"] == "ok" and "reload_error" not in health
        assert health["reloads"] == 0
        page = httpx.get(f"{url}/console/health")
        assert page.status_code == 200 and "refused-reload" not in page.text


def test_a_spec_edit_that_drops_an_agents_tool_is_a_warning_where_operators_look(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="gateway")
    specs = tmp_path / "specs"
    with _served(tmp_path) as url:
        assert "reload_warnings" not in httpx.get(f"{url}/healthz").json()
        serving_since = re.search(r"Serving since</dt><dd>([^<]+)<", httpx.get(f"{url}/console/health").text)
        assert serving_since is not None
        time.sleep(1.1)  # the page says the time to the second: the reload comes a second later
        _replace(specs / "shop.json", _spec("listItems", "searchItems"))  # getItem is gone from the spec
        health = _wait_for(url, lambda h: h["reloads"] >= 1)
        assert health["status"] == "ok" and health["reloads"] == 1  # served: the agent runs without it
        [warning] = health["reload_warnings"]
        assert "'clerk'" in warning and "'getItem'" in warning and "shop.json" in warning
        page = httpx.get(f"{url}/console/health").text
        assert 'id="reload-warnings"' in page and "getItem" in page
        # the process serves since it started, not since the last reload (shown beside Reloads)
        assert f"Serving since</dt><dd>{serving_since.group(1)}<" in page, page
        logged = [r for r in caplog.records if r.name == "gateway.runtime" and r.levelno == logging.WARNING]
        assert any("getItem" in r.getMessage() for r in logged)
        # the reload said once in serve's log (two loggers said it in other words)
        said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("reloaded")]
        assert said == ["reloaded: 1 agents, 2 tools in the catalog"], said
        _replace(specs / "shop.json", _spec("listItems", "getItem"))  # put back: the warning goes
        health = _wait_for(url, lambda h: h["reloads"] >= 2)
        assert "reload_warnings" not in health


def test_a_refused_reload_names_each_error_once_and_no_warning(tmp_path: Path) -> None:
    """The reason in /healthz is the refusal's errors, each once: not the errors again, nor the file's warnings."""
    agents = tmp_path / "agents.yaml"
    with _served(tmp_path) as url:
        # An unknown key (the error) beside strict mode on an Ollama provider (a warning).
        _replace(agents, AGENTS.replace('127.0.0.1:9"}', '127.0.0.1:9", strict: true}') + "    bogus: 1\n")
        health = _wait_for(url, lambda h: h["status"] != "ok")
        error = health["reload_error"]
        assert health["status"] == "degraded" and error.count("unknown key 'bogus'") == 1, error
        assert "warning" not in error and "strict mode" not in error, error
        page = httpx.get(f"{url}/console/health").text  # the console's Health page says the same
        assert page.count("unknown key &#39;bogus&#39;") == 1 and "strict mode" not in page, page


OPS_KEY = "ck-ops-0a1b2c3d4e5f6789"
GUARDED = AGENTS + f"""clients:
  clerk-bot: {{key: ck-clerk-9f8e7d6c5b4a3210, agents: [clerk]}}
  ops: {{key: {OPS_KEY}, admin: true}}
"""


def test_with_clients_healthz_says_degraded_without_quoting_the_refused_files(tmp_path: Path) -> None:
    """redteam44: /healthz needs no key, and its reason quoted the refused agents.yaml: an api's base URL with its
    password, whatever value a field refused, every tenant's agents and tools. With `clients` it says that a
    reload was refused and where an admin reads why."""
    agents = tmp_path / "agents.yaml"
    password = "s3cret-Passw0rd-in-a-url"
    broken = GUARDED + f'apis:\n  shop: {{base_url: "htps://shop:{password}@shop.example/v1"}}\n'
    with _served(tmp_path, GUARDED) as url:
        _replace(agents, broken)
        health = _wait_for(url, lambda h: h["status"] != "ok")
        with httpx.Client(base_url=url) as admin:
            assert admin.post("/console/signin", json={"key": OPS_KEY}).status_code == 200
            page = admin.get("/console/health").text
    told = json.dumps(health)
    assert health["status"] == "degraded" and "an admin sees why" in health["reload_error"]
    assert password not in told and "shop" not in told and "clerk" not in told
    assert "apis.shop.base_url" in page  # the admin's Health page has the reason
