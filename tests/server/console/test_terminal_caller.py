"""Calls made at a terminal carry one caller name, `cli` (as the terminal's approval decisions do), wherever the
audit is read: `gateway audit`, its `--json`, `GET /audit` and the console's audit page."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from console_support import ADMIN_KEY, CONSOLE_AGENTS_YAML
from recording_server import RecordingServer
from safety.safety_support import bearer, build_app
from scripted_llm import Call, Reply
from server_support import LenientLLM, running, write_project
from test_console_access import signed_in

from gateway.cli.commands import main
from gateway.kernel.caller import TERMINAL_CLIENT

FORECAST = {"latitude": 52.52, "longitude": 13.41, "current": ["temperature_2m"]}


def _cli(folder: Path, *args: str) -> list[str]:
    return [args[0], "--specs", str(folder / "specs"), "--agents", str(folder / "agents.yaml"), "--no-cache",
            *args[1:]]


def test_terminal_calls_are_audited_as_the_terminal_everywhere(tmp_path: Path, llm: LenientLLM,
                                                               upstream: RecordingServer,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    write_project(tmp_path, llm.url, upstream.url, CONSOLE_AGENTS_YAML + "gateway:\n  store: ./state.db\n")
    assert main(_cli(tmp_path, "call", "weather", "getForecast", "--args", json.dumps(FORECAST))) == 0
    assert main(_cli(tmp_path, "call", "weather", "getForecast", "--args", "{bad")) == 1  # refused, still audited
    llm.script(Reply(calls=[Call("getForecast", FORECAST)]), Reply(text="3.5 degrees."))
    assert main(_cli(tmp_path, "chat", "weather", "How warm is it?")) == 0
    assert "3.5 degrees." in capsys.readouterr().out

    assert main(_cli(tmp_path, "audit", "--json")) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert sorted((r["kind"], r["status"]) for r in rows) == [
        ("chat", "ok"), ("tool", "invalid_arguments"), ("tool", "ok"), ("tool", "ok")], rows
    assert {r["client"] for r in rows} == {TERMINAL_CLIENT} == {"cli"}  # was None (`-`) for every one of them

    assert main(_cli(tmp_path, "audit")) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and all(line.split()[1] == "cli" for line in lines), lines

    app, safety = build_app(tmp_path, store=tmp_path / "state.db")
    try:
        with running(app) as url:
            answer = httpx.get(f"{url}/audit", params={"limit": 10}, headers=bearer(ADMIN_KEY), timeout=30)
            assert [r["client"] for r in answer.json()["data"]] == ["cli"] * 4, answer.text
            console, _ = signed_in(url, ADMIN_KEY)
            try:
                page = console.get("/console/audit?client=cli").text
            finally:
                console.close()
            assert page.count("<td>cli</td>") == 4, page  # the client column, as the filter finds it
    finally:
        safety.store.close()  # type: ignore[attr-defined]


def test_a_client_named_like_the_terminal_is_warned_about(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    write_project(tmp_path, llm.url, upstream.url, CONSOLE_AGENTS_YAML + "  cli: {{key: ck-cli-0123456789}}\n")
    assert main(_cli(tmp_path, "validate")) == 0  # usable, but the audit could not tell the two apart
    captured = capsys.readouterr()
    assert "clients.cli" in captured.out + captured.err and "rename this client" in captured.out + captured.err


@pytest.mark.parametrize("name", ["stdio", '"stdio:claude-ai"'])
def test_a_client_named_like_the_stdio_door_is_warned_about(tmp_path: Path, llm: LenientLLM,
                                                            upstream: RecordingServer,
                                                            capsys: pytest.CaptureFixture[str], name: str) -> None:
    """`gateway mcp` audits its calls as `stdio` or `stdio:<the declared name>` (`kernel.caller.stdio_client`)."""
    write_project(tmp_path, llm.url, upstream.url, CONSOLE_AGENTS_YAML + f"  {name}: {{{{key: ck-io-0123456789}}}}\n")
    assert main(_cli(tmp_path, "validate")) == 0
    captured = capsys.readouterr()
    assert ("clients.stdio:" if name == "stdio" else "clients['stdio:claude-ai']:") in captured.out, captured
    assert "gateway mcp AGENT" in captured.out and "rename this client" in captured.out
