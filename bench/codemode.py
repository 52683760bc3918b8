"""Code mode against one call per step: what the model is sent and how often, for the same multi-step tasks.

    python bench/codemode.py [--repeats 5] [--calls 50]

Three tasks over the example GitHub spec (specs/github.yaml), each run by the loop with the tests' scripted LLM
(tests/scripted_llm.py, OpenAI format over HTTP on 127.0.0.1) and a recording upstream answering like GitHub
(30 issues of about 600 bytes each): the same plan written once as one call per step (`code_mode: off`) and
once as one `run_code` script (`on`: beside the tools; `only`: with search_tools/describe_tool alone). Every call
goes through the real pipeline (validation, output check, redaction). The model's answers are scripted, so what
differs is what the gateway sends: model calls, the bytes of every request body, and the input tokens those
bytes make (estimated at 4 bytes per token: the scripted LLM's own counts are fixed), and the upstream calls.

The sandbox's overhead is measured apart, with a host that answers at once (no HTTP): a script's fixed cost
(check out a worker, run, check in) and the cost of one tool call inside a script (a round trip through the
sandbox's stop and resume), medians over `--repeats` runs of scripts making `--calls` calls.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from recording_server import Recorded, RecordingServer, Reply  # noqa: E402
from scripted_llm import Call, ScriptedLLM  # noqa: E402
from scripted_llm import Reply as LLMReply  # noqa: E402

BYTES_PER_TOKEN = 4
AGENTS = """\
providers:
  llm: {{kind: openai, base_url: "{llm}/v1", api_key: unused}}
apis:
  github: {{base_url: "{upstream}", auth: {{type: bearer, token: unused}}}}
agents:
  off: {{model: llm/m, tools: [github], code_mode: "off", max_result_bytes: 200000}}
  on: {{model: llm/m, tools: [github], code_mode: "on", max_result_bytes: 200000}}
  only: {{model: llm/m, tools: [github], code_mode: only, max_result_bytes: 200000}}
"""
REPO = {"owner": "acme", "repo": "app"}
LOREM = ("The app crashes on start when the config file is missing; the log shows a stack trace in the loader. "
         "Steps: remove the file, start the app, see the error. Expected a default configuration instead. ")


def _issue(number: int) -> dict[str, Any]:
    return {"id": 1000 + number, "number": number, "title": f"Issue {number}: " + ("crash" if number % 4 == 0
                                                                                  else "question"),
            "state": "open", "body": LOREM * 2, "html_url": f"https://github.com/acme/app/issues/{number}",
            "user": {"login": f"user{number % 7}", "id": number % 7}, "labels": [], "comments": number % 9}


ISSUES = [_issue(n) for n in range(1, 31)]


def _answer(request: Recorded) -> Reply:
    path = request.path
    if path.endswith("/comments"):
        return Reply(201, {"id": 99, "body": "ack", "html_url": "https://github.com/acme/app/issues/1#c99"})
    if "/issues/" in path:
        number = int(path.rsplit("/", 1)[-1])
        return Reply(200, ISSUES[number - 1])
    if path.endswith("/issues"):
        page = dict(request.query).get("page", "1")
        return Reply(200, ISSUES[:15] if page == "1" else ISSUES[15:])
    repo = path.rsplit("/", 1)[-1]
    return Reply(200, {"id": len(repo), "name": repo, "full_name": f"acme/{repo}", "private": False,
                       "owner": {"login": "acme", "id": 1}, "html_url": f"https://github.com/acme/{repo}",
                       "open_issues_count": len(repo) * 3})


def _comment_on_crashes() -> tuple[list[LLMReply], list[LLMReply]]:
    crashes = [i["number"] for i in ISSUES[:15] if "crash" in i["title"]]
    direct = [LLMReply(calls=[Call("listIssues", {**REPO, "state": "open"})]),
              LLMReply(calls=[Call("createIssueComment", {**REPO, "issue_number": n, "body": "Looking into it."})
                              for n in crashes]),
              LLMReply(text=f"Commented on {len(crashes)} crash reports.")]
    code = """
crashes = [i["number"] for i in listIssues(owner="acme", repo="app", state="open") if "crash" in i["title"]]
for n in crashes:
    createIssueComment(owner="acme", repo="app", issue_number=n, body="Looking into it.")
crashes
"""
    return direct, [LLMReply(calls=[Call("run_code", {"code": code})]),
                    LLMReply(text=f"Commented on {len(crashes)} crash reports.")]


def _busiest_repo() -> tuple[list[LLMReply], list[LLMReply]]:
    repos = ["app", "website", "infrastructure"]
    direct = [LLMReply(calls=[Call("getRepo", {"owner": "acme", "repo": r}) for r in repos]),
              LLMReply(text="infrastructure has the most open issues.")]
    code = """
repos = [getRepo(owner="acme", repo=r) for r in ["app", "website", "infrastructure"]]
max(repos, key=lambda r: r["open_issues_count"])["name"]
"""
    return direct, [LLMReply(calls=[Call("run_code", {"code": code})]),
                    LLMReply(text="infrastructure has the most open issues.")]


def _most_discussed() -> tuple[list[LLMReply], list[LLMReply]]:
    direct = [LLMReply(calls=[Call("listIssues", {**REPO, "page": 1})]),
              LLMReply(calls=[Call("listIssues", {**REPO, "page": 2})]),
              LLMReply(calls=[Call("getIssue", {**REPO, "issue_number": 8})]),
              LLMReply(text="Issue 8 is the most discussed.")]
    code = """
issues = listIssues(owner="acme", repo="app", page=1) + listIssues(owner="acme", repo="app", page=2)
top = max(issues, key=lambda i: i["comments"])
issue = getIssue(owner="acme", repo="app", issue_number=top["number"])
{"number": issue["number"], "title": issue["title"], "comments": issue["comments"]}
"""
    return direct, [LLMReply(calls=[Call("run_code", {"code": code})]), LLMReply(text="Issue 8 is the most "
                                                                                       "discussed.")]


TASKS: dict[str, Callable[[], tuple[list[LLMReply], list[LLMReply]]]] = {
    "comment on each crash report (list, filter, 3 writes)": _comment_on_crashes,
    "busiest of 3 repositories (3 reads, compare)": _busiest_repo,
    "most discussed issue over 2 pages (3 reads, pick)": _most_discussed,
}


async def _run_task(state: Any, agent: str, replies: list[LLMReply], llm: ScriptedLLM,
                    upstream: RecordingServer) -> tuple[int, int, int, float]:
    from gateway.loop import run
    from gateway.messages import Message

    llm.requests.clear()
    upstream.requests.clear()
    llm.script(*replies)
    generation = state.current
    config = generation.runtime.manifest.agents[agent]
    started = time.perf_counter()
    result = await run(config, [Message(role="user", content="Do the task.")],
                       adapter=generation.adapter(config.provider), toolset=generation.toolset(agent),
                       invoke=generation.runner.for_agent(agent))
    elapsed = time.perf_counter() - started
    assert result.message.content, result
    sent = sum(len(json.dumps(r.body, separators=(",", ":"))) for r in llm.requests)
    return len(llm.requests), sent, len(upstream.requests), elapsed


async def measure_tasks(repeats: int) -> list[tuple[str, str, int, int, int, float]]:
    from gateway.assembly import GatewayState
    from gateway.runtime import RuntimeHolder, load_runtime

    rows = []
    with ScriptedLLM() as llm, RecordingServer() as upstream, tempfile.TemporaryDirectory() as folder:
        upstream.route("/", _answer)
        specs = Path(folder) / "specs"
        specs.mkdir()
        (specs / "github.yaml").write_text((ROOT / "specs" / "github.yaml").read_text())
        agents = Path(folder) / "agents.yaml"
        agents.write_text(AGENTS.format(llm=llm.url, upstream=upstream.url))
        state = GatewayState(RuntimeHolder(load_runtime(specs, agents, use_cache=False)))
        try:
            for task, plans in TASKS.items():
                direct, code = plans()
                for agent, replies in (("off", direct), ("on", code), ("only", code)):
                    runs = [await _run_task(state, agent, replies, llm, upstream) for _ in range(repeats)]
                    calls, sent, upstream_calls, _ = runs[-1]
                    rows.append((task, agent, calls, sent, upstream_calls, statistics.median(r[3] for r in runs)))
        finally:
            await state.aclose()
    return rows


class _InstantHost:
    def __init__(self) -> None:
        from gateway.catalog import AgentTool

        self.echo = AgentTool(name="echo", description="", input_schema={"type": "object"})

    def tool(self, name: str) -> Any:
        return self.echo if name == "echo" else None

    async def needs_pause(self, tool: Any, call: Any) -> bool:
        return False

    async def call(self, tool: Any, call: Any, approval: str | None) -> Any:
        from gateway.messages import ToolResult

        return ToolResult(ok=True, body=call.arguments)


async def measure_sandbox(repeats: int, calls: int) -> tuple[float, float]:
    """(ms of a script that calls nothing, ms per tool call), medians."""
    from gateway.codemode import FunctionNames, Limits, Script

    host = _InstantHost()

    async def once(code: str) -> float:
        started = time.perf_counter()
        result = await Script("bench", FunctionNames(["echo"]), host, Limits(tool_calls=calls + 1),
                              64_000).run({"code": code})
        assert result.ok, result  # type: ignore[union-attr]
        return time.perf_counter() - started

    await once("1")  # the pool's first worker
    empty = [await once("1") for _ in range(repeats)]
    busy = [await once(f"[echo(i=i) for i in range({calls})]") for _ in range(repeats)]
    fixed = statistics.median(empty) * 1000
    return fixed, (statistics.median(busy) * 1000 - fixed) / calls


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args()
    rows = anyio.run(measure_tasks, args.repeats)
    print(f"{'task':54} {'code_mode':9} {'model calls':>11} {'bytes sent':>11} {'input tokens':>12} "
          f"{'API calls':>9} {'run ms':>8}")
    base: dict[str, int] = {}
    for task, mode, calls, sent, upstream_calls, seconds in rows:
        base.setdefault(task, sent)
        ratio = f" ({sent / base[task]:.2f}x)" if mode != "off" else ""
        print(f"{task:54} {mode:9} {calls:11d} {sent:11,d} {sent // BYTES_PER_TOKEN:12,d} {upstream_calls:9d} "
              f"{seconds * 1000:8.1f}{ratio}")
    fixed, per_call = anyio.run(measure_sandbox, args.repeats, args.calls)
    print(f"sandbox: a script that calls nothing {fixed:.2f} ms; each tool call inside a script {per_call:.3f} ms "
          f"(median of {args.repeats}, {args.calls} calls, a host that answers at once)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
