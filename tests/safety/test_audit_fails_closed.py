"""No answer without its audit row: a store on a full disk gives 503 with a clear error on every door, never an
unrecorded success; a read-only store stops the gateway from starting. Real disks: a 1 MiB tmpfs."""

from __future__ import annotations

import contextlib
import errno
import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR
from recording_server import RecordingServer
from scripted_llm import Call, Reply
from server_support import AGENTS_YAML, LenientLLM, write_project

from gateway.cli.commands import main
from gateway.store import SQLiteStore

from .safety_support import safe_gateway

FORECAST = {"latitude": 52.52, "longitude": 13.41, "current": ["temperature_2m"]}


@contextlib.contextmanager
def tiny_disk(folder: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs at `folder` (skips the test when this process may not mount one)."""
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip() or mounted.returncode}): needs root")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def fill(disk: Path) -> Path:
    """Take every free byte of `disk`; returns the filler file (delete it to free the space)."""
    filler = disk / "filler"
    with filler.open("wb", buffering=0) as out:  # unbuffered: nothing left to flush on close
        try:
            while True:
                out.write(b"\0" * 4096)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return filler


@pytest.mark.slow
def test_a_full_disk_gives_503_not_an_unrecorded_success(tmp_path: Path, llm: LenientLLM,
                                                         upstream: RecordingServer) -> None:
    with tiny_disk(tmp_path / "disk") as disk:
        store = disk / "state.db"
        with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=AGENTS_YAML, store=store) as (url, _), \
                httpx.Client(base_url=url, timeout=30) as client:
            assert client.post("/agents/weather/tools/getForecast", json=FORECAST).status_code == 200
            filler = fill(disk)
            answers = [client.post("/agents/weather/tools/getForecast", json=FORECAST) for _ in range(30)]
            llm.script(Reply(calls=[Call("getForecast", FORECAST)]), Reply(text="3.5 °C"))
            chat = client.post("/v1/chat/completions",
                               json={"model": "weather", "messages": [{"role": "user", "content": "Berlin?"}]})

            async def over_mcp() -> MCPError | str:
                async with Client(f"{url}/mcp/weather") as session:
                    try:
                        result = await session.call_tool("getForecast", FORECAST)
                    except MCPError as exc:  # a JSON-RPC error answer
                        return exc
                    return result.content[0].text if result.is_error else "served"

            sent_before = len(upstream.requests)
            mcp_answer = anyio.run(over_mcp)
            mcp_sent = len(upstream.requests) - sent_before
            filler.unlink()  # room again: the rows that were written can be counted
            rows = [r for r in client.get("/audit", params={"limit": 1000}).json()["data"]
                    if r["tool"] == "getForecast"]
        served = [a for a in answers if a.status_code == 200]
        refused = [a for a in answers if a.status_code == 503]
        assert len(served) + len(refused) == len(answers)
        assert refused, "a full disk must refuse calls"
        error = refused[0].json()["error"]
        assert error["code"] == "audit_unavailable" and "audit log cannot record" in error["message"]
        assert chat.status_code == 503 and chat.json()["error"]["code"] == "audit_unavailable"
        # Over MCP a JSON-RPC error (a server error, as MCP's spec sorts them; the chat door ends its run with 503
        # before its model is told), not a tool result with isError the model would retry, carrying the HTTP
        # doors' status and code; nothing was sent (mend44's left item).
        assert isinstance(mcp_answer, MCPError), mcp_answer
        assert mcp_answer.code == INTERNAL_ERROR and "did not send it" in mcp_answer.message
        assert mcp_answer.data == {"status": 503, "code": "audit_unavailable"} and mcp_sent == 0
        # Every call answered 200 has its row (plus the first one, before the disk filled).
        assert len(rows) >= len(served) + 1


def test_a_read_only_store_stops_the_gateway_from_starting(tmp_path: Path, llm: LenientLLM,
                                                           upstream: RecordingServer,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    # A running store cannot be made read-only under the gateway (Linux refuses to remount a file system with
    # files open for writing), so the read-only store is one the gateway finds at start.
    with tiny_disk(tmp_path / "disk") as disk:
        SQLiteStore(str(disk / "state.db")).close()
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        specs, agents = write_project(tmp_path, llm.url, upstream.url,
                                      AGENTS_YAML + f"gateway:\n  store: {disk / 'state.db'}\n")
        common = ["--specs", str(specs), "--agents", str(agents), "--no-cache"]
        assert main(["serve", *common, "--port", "0"]) == 1
        assert main(["call", *common, "weather", "getForecast", "--args", '{"latitude": 1, "longitude": 2}']) == 1
        err = capsys.readouterr().err
        assert err.count("cannot open the store") == 2
        assert not upstream.requests  # nothing ran without a store to record it
