"""The two chat doors side by side: chat completions vs the Responses API, one `gateway serve` behind both.

The LLM is the tests' ScriptedLLM on 127.0.0.1 answering text at once (in this process, on its own thread),
the gateway runs in its own process, and the requests take turns (chat, responses stored and not, responses
continuing the previous one, chat with a caller tool), so load and noise fall on every door alike. What
differs between the doors is their own work: parsing the request, rendering the answer, and for responses
storing it in the SQLite store and reading it back for `previous_response_id`.

    python -m bench.chat_doors [--rounds 300]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.support import ROOT, free_port, python_module, spawned

sys.path.insert(0, str(ROOT / "tests"))

from scripted_llm import Recorded, Reply, ScriptedLLM  # noqa: E402

AGENTS = """\
providers:
  openai: {{kind: openai, base_url: "{llm}/v1", api_key: k}}
agents:
  bench:
    model: openai/m
    instructions: Bench.
gateway:
  store: {store}
"""
TOOL = {"type": "function", "function": {"name": "mine", "parameters": {"type": "object"}}}


class InstantLLM(ScriptedLLM):  # type: ignore[misc]  # tests/ is not a typed package
    def _next(self, recorded: Recorded) -> Reply | None:
        return Reply(text="Done.")  # nothing recorded: a long run must not grow the list


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=300, help="requests per door (they take turns)")
    args = parser.parse_args()
    with InstantLLM() as llm, tempfile.TemporaryDirectory() as folder:
        project = Path(folder)
        (project / "specs").mkdir()
        (project / "agents.yaml").write_text(AGENTS.format(llm=llm.url, store=project / "state.db"))
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        command = python_module("gateway", "serve", "--port", str(port), "--specs", str(project / "specs"),
                                "--agents", str(project / "agents.yaml"))
        with spawned(command, f"{url}/healthz"):
            times = _measure(url, args.rounds)
    print(f"chat doors, one request at a time, median of {args.rounds} each (instant LLM, no tools):")
    base = statistics.median(times["chat"])
    for door, values in times.items():
        median = statistics.median(values)
        print(f"  {door:<28} {median * 1000:7.3f} ms  ({median / base:.2f}x chat)")


def _measure(url: str, rounds: int) -> dict[str, list[float]]:
    chat = {"model": "bench", "messages": [{"role": "user", "content": "go"}]}
    with httpx.Client(base_url=url, timeout=30, trust_env=False) as client:
        previous = client.post("/v1/responses", json={"model": "bench", "input": "go"}).json()["id"]
        doors: dict[str, dict[str, Any]] = {
            "chat completions": {"path": "/v1/chat/completions", "json": chat},
            "responses": {"path": "/v1/responses", "json": {"model": "bench", "input": "go"}},
            "responses, store: false": {"path": "/v1/responses", "json": {"model": "bench", "input": "go",
                                                                          "store": False}},
            "responses + previous_response": {"path": "/v1/responses",
                                              "json": {"model": "bench", "input": "go", "previous_response_id":
                                                       previous}},
            "chat + a caller tool": {"path": "/v1/chat/completions", "json": {**chat, "tools": [TOOL]}},
        }
        times: dict[str, list[float]] = {door: [] for door in doors}
        keys = {"chat completions": "chat"}
        for _ in range(rounds):
            for door, request in doors.items():
                started = time.perf_counter()
                answer = client.post(request["path"], json=request["json"])
                times[door].append(time.perf_counter() - started)
                answer.raise_for_status()
    return {keys.get(door, door): values for door, values in times.items()}


if __name__ == "__main__":
    main()
