"""`gateway audit` and `gateway approvals` against the store a gateway wrote."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest
from recording_server import RecordingServer
from scripted_llm import Call, Reply
from server_support import AGENTS_YAML, LenientLLM, running, write_project

from gateway.cli.commands import main

from .safety_support import SAFE_AGENTS_YAML, TRIAGE_KEY, bearer, build_app

COMMENT = Call("createIssueComment", {"owner": "acme", "repo": "app", "issue_number": 7, "body": "On it."})
WITH_STORE = SAFE_AGENTS_YAML + "gateway:\n  store: ./.gateway/state.db\n  audit_retention_days: 7\n"


def _pause_a_run(folder: Path, llm: LenientLLM, upstream: RecordingServer, runs: int = 1, *,
                 door: str = "chat") -> list[str]:
    write_project(folder, llm.url, upstream.url, WITH_STORE)
    app, safety = build_app(folder, store=folder / ".gateway" / "state.db")
    ids = []
    with running(app) as url, httpx.Client(base_url=url, headers=bearer(TRIAGE_KEY), timeout=30) as client:
        for _ in range(runs):
            llm.script(Reply(calls=[COMMENT]))
            if door == "responses":
                paused = client.post("/v1/responses", json={"model": "triage", "input": "triage"})
            else:
                paused = client.post("/v1/chat/completions",
                                     json={"model": "triage", "messages": [{"role": "user", "content": "triage"}]})
            ids.append(paused.json()["gateway"]["pending_approvals"][0]["id"])
    safety.store.close()  # type: ignore[attr-defined]
    return ids


def _cli(folder: Path, *args: str) -> list[str]:
    return [args[0], "--specs", str(folder / "specs"), "--agents", str(folder / "agents.yaml"), "--no-cache",
            *args[1:]]


def test_list_and_approve_from_the_terminal(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    first, second = _pause_a_run(tmp_path, llm, upstream, runs=2)
    assert main(_cli(tmp_path, "approvals")) == 0
    listing = capsys.readouterr().out
    assert first in listing and second in listing and "triage/createIssueComment" in listing
    # when each call was held, in UTC as the audit rows and log lines say it
    assert re.search(rf"{first}  \d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{{3}}Z  ", listing), listing

    llm.script(Reply(text="Commented from the CLI."))
    assert main(_cli(tmp_path, "approvals", "approve", first, "--args",
                     json.dumps({**COMMENT.args, "body": "Edited."}))) == 0
    assert "Commented from the CLI." in capsys.readouterr().out
    assert [json.loads(r.body) for r in upstream.requests if r.method == "POST"] == [{"body": "Edited."}]

    llm.script(Reply(text="Fine, no comment."))
    assert main(_cli(tmp_path, "approvals", "deny", second, "--reason", "duplicate", "--json")) == 0
    denied = json.loads(capsys.readouterr().out)
    assert denied["choices"][0]["message"]["content"] == "Fine, no comment."
    assert main(_cli(tmp_path, "audit", "--limit", "20")) == 0
    decision = next(line for line in capsys.readouterr().out.splitlines() if "decision" in line and "denied" in line)
    assert decision.endswith("- duplicate"), decision  # the reason, where an operator reads the audit

    assert main(_cli(tmp_path, "approvals", "approve", first)) == 1
    assert "already decided" in capsys.readouterr().err
    assert main(_cli(tmp_path, "approvals", "approve", "apr_forged")) == 1
    assert main(_cli(tmp_path, "approvals", "--json")) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert len([r for r in upstream.requests if r.method == "POST"]) == 1


def test_approving_a_responses_run_from_the_terminal_prints_its_answer(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, capsys: pytest.CaptureFixture[str]) -> None:
    """A run paused on /v1/responses is answered as a Response: the terminal prints its text all the same."""
    [waiting] = _pause_a_run(tmp_path, llm, upstream, door="responses")
    llm.script(Reply(text="Commented from the CLI."))
    assert main(_cli(tmp_path, "approvals", "approve", waiting)) == 0
    assert capsys.readouterr().out.strip() == "Commented from the CLI."
    assert [r.path for r in upstream.requests if r.method == "POST"] == ["/github/repos/acme/app/issues/7/comments"]


def test_audit_from_the_terminal(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    (approval_id,) = _pause_a_run(tmp_path, llm, upstream)
    assert main(_cli(tmp_path, "audit", "--json", "--limit", "10")) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["kind"], r["status"]) for r in rows] == [("chat", "paused"), ("tool", "approval_pending")]
    assert rows[1]["approval"] == approval_id and rows[1]["client"] == "triage-bot"
    assert main(_cli(tmp_path, "audit", "--agent", "weather")) == 0
    out, err = capsys.readouterr()
    assert out == "" and err == "gateway: no audit rows\n"  # said, not a silent nothing
    assert main(_cli(tmp_path, "audit", "--agent", "wether")) == 0  # a typo: named, with the agents there are
    assert "no audit rows (no agent 'wether' in " in capsys.readouterr().err
    assert main(_cli(tmp_path, "audit")) == 0
    assert "triage-bot" in capsys.readouterr().out


def test_bad_cli_input_is_a_message_not_a_traceback(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    write_project(tmp_path, llm.url, upstream.url, WITH_STORE)
    assert main(_cli(tmp_path, "approvals", "approve")) == 2
    assert main(_cli(tmp_path, "approvals", "approve", "x", "--args", "[1]")) == 2
    assert main(_cli(tmp_path, "approvals", "deny", "x", "--args", "{}")) == 2
    assert main(_cli(tmp_path, "audit", "--limit", "0")) == 2
    err = capsys.readouterr().err
    assert "needs the approval id" in err and "JSON object" in err and "--limit" in err


def test_a_store_that_cannot_be_opened_is_a_message(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    write_project(tmp_path, llm.url, upstream.url, SAFE_AGENTS_YAML + "gateway:\n  store: redis://localhost/0\n")
    for command in (("audit",), ("approvals", "list")):
        assert main(_cli(tmp_path, *command)) == 1
        captured = capsys.readouterr()
        assert captured.out == "" and "no 'redis' backend" in captured.err


def test_serve_refuses_a_public_host_without_client_keys(tmp_path: Path, llm: LenientLLM,
                                                         upstream: RecordingServer,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    write_project(tmp_path, llm.url, upstream.url, AGENTS_YAML)  # no `clients`
    assert main(_cli(tmp_path, "serve", "--host", "0.0.0.0", "--port", "1")) == 1
    assert "--allow-public" in capsys.readouterr().err


def test_a_decision_the_terminal_could_not_carry_out_says_it_ran_in_this_process(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, capsys: pytest.CaptureFixture[str]) -> None:
    """A user denied from a shell without the model's variables: the model could not be reached, the approval is
    pending again, and the message says why the terminal's environment matters."""
    [approval] = _pause_a_run(tmp_path, llm, upstream)
    llm.script(Reply(status=401, error="no key"))  # the model refuses this process's request
    assert main(_cli(tmp_path, "approvals", "deny", approval, "--reason", "duplicate")) == 1
    err = capsys.readouterr().err
    assert "pending again" in err and "resumes the run in its own process" in err, err
    assert "POST /approvals/{id} or the console" in err
    assert main(_cli(tmp_path, "approvals")) == 0 and approval in capsys.readouterr().out  # decide it again


def test_approving_from_a_shell_without_the_models_key_decides_nothing(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, capsys: pytest.CaptureFixture[str]) -> None:
    """The terminal resumes a chat run here: when agents.yaml read in this shell leaves the model without a key it
    says so before deciding, as `gateway chat` does, instead of running the write and failing at the model."""
    [approval] = _pause_a_run(tmp_path, llm, upstream)
    agents = tmp_path / "agents.yaml"
    agents.write_text(agents.read_text().replace(f'base_url: "{llm.url}/v1", api_key: test-key', 'api_key: ""')
                      .replace("model: ollama/llama-test", "model: openai/gpt-test"))  # triage: on the cloud
    assert main(_cli(tmp_path, "approvals", "approve", approval)) == 1
    err = capsys.readouterr().err
    assert "whose api_key is empty" in err and "). Nothing was decided." in err, err
    assert "POST /approvals/{id} or the console" in err
    assert [r for r in upstream.requests if r.method == "POST"] == []
    assert main(_cli(tmp_path, "approvals")) == 0 and approval in capsys.readouterr().out  # still pending


def test_a_model_failing_after_the_approved_call_ran_is_a_message_not_a_traceback(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, capsys: pytest.CaptureFixture[str]) -> None:
    """The approved write ran, then the model failed: the terminal says the approval is used and the call ran (as
    the POST to `/approvals/{id}` answers), exit 1."""
    [approval] = _pause_a_run(tmp_path, llm, upstream)
    llm.script(Reply(status=401, error="no key"))  # the model refuses this process's request
    assert main(_cli(tmp_path, "approvals", "approve", approval)) == 1
    err = capsys.readouterr().err
    assert "The model provider failed" in err and f"Approval {approval} is used" in err, err
    assert "Traceback" not in err
    assert len([r for r in upstream.requests if r.method == "POST"]) == 1


def test_the_audit_lines_name_the_signed_in_user_and_what_was_decided(
        tmp_path: Path, llm: LenientLLM, upstream: RecordingServer, capsys: pytest.CaptureFixture[str]) -> None:
    """Users mapped onto one client by their claims share its name: the terminal's line names each (the subject),
    and a decision reads as the decision on its tool, not as a chat."""
    import asyncio
    import time

    from gateway.store import open_store
    from gateway.store.base import AuditRow

    write_project(tmp_path, llm.url, upstream.url, WITH_STORE)

    async def write() -> None:
        store = open_store(str(tmp_path / ".gateway" / "state.db"))
        for row in (AuditRow(time=time.time() - 2, kind="tool", client="engineers", agent="triage", tool="getRepo",
                             subject="alice"),
                    AuditRow(time=time.time() - 1, kind="tool", client="engineers", agent="triage", tool="getRepo",
                             subject="bob"),
                    AuditRow(time=time.time(), kind="decision", client="reviewer", agent="triage",
                             tool="createIssueComment", status="approved")):
            await store.add_audit(row)
        await store.aclose()

    asyncio.run(write())
    assert main(_cli(tmp_path, "audit")) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "reviewer" in lines[0] and "triage/createIssueComment decision" in lines[0] and " chat" not in lines[0]
    assert "engineers (bob)" in lines[1] and "engineers (alice)" in lines[2]
