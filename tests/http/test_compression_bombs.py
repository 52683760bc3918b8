"""Compression bombs against a real `gateway serve`: a ~10 KB answer that says `Content-Encoding: gzip, gzip`
(4 GiB decoded) and a 4 MB `gzip` one (4 GiB too), from a tool's upstream, an OAuth token endpoint and the
LLM. Each is cut (or refused) while decoding: the gateway's memory grows by less than 64 MB and `/healthz`
keeps answering meanwhile."""

from __future__ import annotations

import gzip
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from raw_server import RawServer, raw_answer

pytestmark = pytest.mark.slow

GIB4_OF_ZEROS_CRC32 = 0xD202EF8D
"""`zlib.crc32` of 4 GiB of zeros (computing it takes seconds)."""


def _gzip_of_zeros(mib: int, crc: int) -> bytes:
    """A valid gzip stream of `mib` MiB of zeros, built from one repeated deflate block (after a full flush
    the compressor's state is fresh, so every block of a MiB of zeros compresses alike)."""
    zeros = bytes(1 << 20)
    block = zlib.compressobj(9, zlib.DEFLATED, -15)
    piece = block.compress(zeros) + block.flush(zlib.Z_FULL_FLUSH)
    last = zlib.compressobj(9, zlib.DEFLATED, -15).flush(zlib.Z_FINISH)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    return header + piece * mib + last + struct.pack("<II", crc, (mib << 20) & 0xFFFFFFFF)


def test_the_bomb_builder_makes_valid_gzip() -> None:
    small = _gzip_of_zeros(3, zlib.crc32(bytes(3 << 20)))
    assert gzip.decompress(small) == bytes(3 << 20)


@pytest.fixture(scope="module")
def bombs() -> Iterator[RawServer]:
    single = _gzip_of_zeros(4096, GIB4_OF_ZEROS_CRC32)  # ~4 MB -> 4 GiB
    stacked = gzip.compress(single, 9)  # ~10 KB -> 4 GiB
    answers = {
        "stacked": raw_answer(stacked, "Content-Type: application/json", "Content-Encoding: gzip, gzip"),
        "single": raw_answer(single, "Content-Type: application/json", "Content-Encoding: gzip"),
        "ok": raw_answer(b'{"ok": true}', "Content-Type: application/json"),
    }

    def answer(head: bytes) -> bytes:
        path = head.split(b" ")[1].decode()
        return next((raw for name, raw in answers.items() if f"/{name}" in path), answers["ok"])

    server = RawServer(answer)
    yield server
    server.close()


def _spec(name: str, paths: list[str]) -> dict[str, object]:
    ok = {"200": {"description": "ok", "content": {"application/json": {"schema": {}}}}}
    return {"openapi": "3.0.3", "info": {"title": name, "version": "1"},
            "paths": {f"/{p}": {"get": {"operationId": p, "responses": ok}} for p in paths}}


@pytest.fixture(scope="module")
def gateway(bombs: RawServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    folder = tmp_path_factory.mktemp("bombs")
    (folder / "specs").mkdir()
    (folder / "specs" / "files.json").write_text(json.dumps(_spec("files", ["stacked", "single", "ok"])))
    (folder / "specs" / "vault.json").write_text(json.dumps(_spec("vault", ["fetch"])))
    llm = {"single": f"{bombs.url}/single/v1", "stacked": f"{bombs.url}/stacked/v1"}
    (folder / "agents.yaml").write_text(f"""
providers:
  single: {{kind: openai, base_url: "{llm['single']}", api_key: k}}
  stacked: {{kind: openai, base_url: "{llm['stacked']}", api_key: k}}
apis:
  files: {{base_url: "{bombs.url}"}}
  vault:
    base_url: "{bombs.url}"
    auth: {{type: oauth2_client_credentials, token_url: "{bombs.url}/stacked/token", client_id: i, client_secret: s}}
agents:
  clerk: {{model: stacked/m, tools: [{{api: files}}, {{api: vault}}]}}
  reader: {{model: single/m, tools: [{{api: files}}]}}
""")
    port = _free_port()
    env = {**os.environ, "GATEWAY_CACHE_DIR": str(folder / "cache")}
    process = subprocess.Popen(
        [sys.executable, "-m", "gateway", "serve", "--port", str(port), "--specs", str(folder / "specs"),
         "--agents", str(folder / "agents.yaml")], cwd=folder, env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/healthz", trust_env=False).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"gateway serve did not start (exit {process.poll()})")
            time.sleep(0.05)
        yield url, process.pid
    finally:
        process.terminate()
        process.wait(30)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


class _Watch:
    """While a bomb is served: the gateway's peak RSS, and the slowest `/healthz` answer."""

    def __init__(self, url: str, pid: int) -> None:
        self.url, self.pid = url, pid
        self.peak = _rss_mb(pid)
        self.slowest = 0.0
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._memory), threading.Thread(target=self._health)]

    def __enter__(self) -> _Watch:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _memory(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, _rss_mb(self.pid))
            time.sleep(0.005)

    def _health(self) -> None:
        with httpx.Client(trust_env=False, timeout=5) as client:
            while not self._stop.is_set():
                started = time.monotonic()
                try:
                    if client.get(f"{self.url}/healthz").status_code != 200:
                        self.failures.append("not 200")
                except httpx.HTTPError as error:
                    self.failures.append(repr(error))
                self.slowest = max(self.slowest, time.monotonic() - started)
                time.sleep(0.02)


def _post(url: str, path: str, body: dict[str, object]) -> httpx.Response:
    return httpx.post(f"{url}{path}", json=body, trust_env=False, timeout=60)


@pytest.mark.parametrize(("path", "body"), [
    ("/agents/clerk/tools/stacked", {}),
    ("/agents/clerk/tools/single", {}),
    ("/agents/clerk/tools/fetch", {}),  # its OAuth token endpoint answers the bomb
    ("/v1/chat/completions", {"model": "clerk", "messages": [{"role": "user", "content": "hi"}]}),
    ("/v1/chat/completions", {"model": "reader", "messages": [{"role": "user", "content": "hi"}]}),
])
def test_a_compression_bomb_is_cut_while_decoding(gateway: tuple[str, int], path: str,
                                                  body: dict[str, object]) -> None:
    url, pid = gateway
    assert _post(url, "/agents/clerk/tools/ok", {}).json()["ok"] is True  # warm: pools, caches, validators
    before = _rss_mb(pid)
    with _Watch(url, pid) as watch:
        answer = _post(url, path, body)
    assert watch.peak - before < 64, f"RSS grew from {before:.0f} MB to {watch.peak:.0f} MB"
    assert watch.failures == [] and watch.slowest < 1.0
    if path.startswith("/agents/"):
        data = answer.json()
        result = data.get("result", data)  # a failed call is a 502 that carries its result
        # Refused (a stacked coding), or cut at the body limit (one layer): never 4 GiB in memory.
        assert result["ok"] is False or result["truncated"] is True, result
        assert result["bytes"] <= 4 * 1024 * 1024 + 65536, result
    else:
        assert answer.status_code >= 500 and "error" in answer.json(), answer.text[:500]
