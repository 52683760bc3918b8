"""`gateway serve --workers 2`: one `/metrics` counts every worker's requests, whichever worker answers the scrape
(prometheus_client's multiprocess mode). A real `gateway serve` with two uvicorn workers; calls on new
connections spread over both."""

from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from recording_server import RecordingServer
from server_support import LenientLLM

import gateway

from .counted_writes import write_counter_project
from .instances import GatewayProcess

pytestmark = pytest.mark.slow


def test_metrics_count_every_workers_requests(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> None:
    write_counter_project(tmp_path, llm.url, upstream.url)
    served = GatewayProcess(tmp_path, "workers", workers=2).wait_ready()
    try:
        def call(n: int) -> int:
            with httpx.Client(timeout=30) as client:  # a connection of its own: any worker may take it
                return client.post(f"{served.url}/agents/writer/tools/write", json={"n": n}).status_code

        with ThreadPoolExecutor(8) as pool:
            assert set(pool.map(call, range(60))) == {200}
        scrapes = []
        for _ in range(6):
            with httpx.Client(timeout=30) as client:
                scrapes.append(client.get(f"{served.url}/metrics").text)
    finally:
        served.stop()
    for text in scrapes:
        found = re.search(r'gateway_requests_total\{door="direct",status="200"\} (\S+)', text)
        assert found is not None and float(found.group(1)) == 60.0
        calls = re.search(r'gateway_tool_calls_total\{api="counter",outcome="ok",tool="write"\} (\S+)', text)
        assert calls is not None and float(calls.group(1)) == 60.0
        # the version, and one start time (the workers' latest), whichever worker answered
        assert f'gateway_build_info{{version="{gateway.__version__}"}} 1.0' in text
        assert len(re.findall(r"^process_start_time_seconds ", text, re.M)) == 1
        assert "process_cpu_seconds_total" not in text  # one worker's, not the gateway's
    starts = {re.findall(r"^process_start_time_seconds (\S+)", text, re.M)[0] for text in scrapes}
    assert len(starts) == 1 and 0 < float(starts.pop()) <= time.time()
