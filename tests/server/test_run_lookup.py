"""docs/safety.md: a chat's run id is its answer's `id`, so one conversation's audit rows and its console page are
found from the answer a client got (chat completions and the Responses API)."""

from __future__ import annotations

from pathlib import Path

import httpx
import openai
import pytest
from recording_server import RecordingServer
from scripted_llm import Call, Reply
from server_support import LenientLLM, gateway, write_project

from gateway.runtime import load_runtime
from gateway.server.supervision import Safety


@pytest.mark.parametrize("door", ["chat", "responses"])
def test_the_answers_id_finds_its_run(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, door: str) -> None:
    # the store is opened on the project's runtime, as `gateway serve` does; gateway() serves the same files
    safety = Safety.open(load_runtime(*write_project(tmp_path, llm.url, upstream.url), use_cache=False),
                         store=str(tmp_path / "state.db"))
    try:
        with gateway(tmp_path, llm.url, upstream.url, **safety.app_options()) as (url, _):
            llm.script(Reply(calls=[Call("getForecast", {"latitude": 52.52, "longitude": 13.41})]), Reply(text="3 °C"))
            client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
            if door == "chat":
                answer_id = client.chat.completions.create(
                    model="weather", messages=[{"role": "user", "content": "Berlin?"}]).id
            else:
                answer_id = client.responses.create(model="weather", input="Berlin?").id
            rows = httpx.get(f"{url}/audit", params={"run_id": answer_id}).json()["data"]
            assert sorted((row["kind"], row["tool"]) for row in rows) == [("chat", None), ("tool", "getForecast")]
            page = httpx.get(f"{url}/console/runs/{answer_id}")
            assert page.status_code == 200 and "getForecast" in page.text
    finally:
        safety.store.close()  # type: ignore[attr-defined]

