"""`gateway chat`: live steps on stderr, streamed answer on stdout, REPL memory, approvals asked on the terminal."""

from __future__ import annotations

import io
import textwrap
from pathlib import Path

import pytest
import recording_server as upstream_mod
from scripted_llm import Call, Reply, ScriptedLLM

from gateway.cli.commands import main
from gateway.cli.terminal_chat import chat_command

SPEC = """
openapi: 3.1.0
info: {title: shop, version: "1"}
paths:
  /items/{id}:
    get:
      operationId: getItem
      parameters: [{name: id, in: path, required: true, schema: {type: string}}]
      responses: {"200": {description: ok, content: {application/json: {schema: {type: object}}}}}
    delete:
      operationId: deleteItem
      parameters: [{name: id, in: path, required: true, schema: {type: string}}]
      responses: {"204": {description: gone}}
"""


@pytest.fixture
def workspace(tmp_path: Path):
    with ScriptedLLM() as llm, upstream_mod.RecordingServer() as upstream:
        upstream.route("/items/", lambda r: upstream_mod.Reply(200, {"id": r.path.rsplit("/", 1)[-1], "name": "pen"}))
        (tmp_path / "specs").mkdir()
        (tmp_path / "specs" / "shop.yaml").write_text(textwrap.dedent(SPEC))
        (tmp_path / "agents.yaml").write_text(textwrap.dedent(f"""
            providers:
              llm: {{kind: ollama, base_url: "{llm.url}"}}
            apis:
              shop: {{base_url: "{upstream.url}"}}
            agents:
              clerk:
                model: llm/model-x
                instructions: You are the clerk.
                tools: [{{api: shop}}]
                approval: writes
            """))
        yield tmp_path, llm, upstream


def _chat(workspace, message, answers=()):
    path, _, _ = workspace
    out, err = io.StringIO(), io.StringIO()
    lines = list(answers)

    def ask(prompt: str) -> str:
        err.write(prompt)
        if not lines:
            raise EOFError
        return lines.pop(0)

    code = chat_command(path / "specs", path / "agents.yaml", "clerk", message, use_cache=False, ask=ask, out=out,
                        err=err)
    return code, out.getvalue(), err.getvalue()


def test_one_message_shows_steps_and_streams_the_answer(workspace) -> None:
    _, llm, upstream = workspace
    llm.script(Reply(calls=[Call("getItem", {"id": "7"})]), Reply(text="Item 7 is a pen.", chunks=3))
    code, out, err = _chat(workspace, "what is item 7?")
    assert code == 0 and out == "Item 7 is a pen.\n"
    assert '-> getItem({"id": "7"})' in err and "<- getItem: 200" in err
    assert "1 step(s), 2 LLM call(s)" in err
    assert upstream.requests[0].path == "/items/7" and llm.requests[0].body["stream"] is True


def test_repl_keeps_the_conversation(workspace) -> None:
    _, llm, _ = workspace
    llm.script(Reply(text="Hello."), Reply(text="You said hi."))
    code, out, _ = _chat(workspace, None, ["hi", "what did I say?", ""])
    assert code == 0 and out == "Hello.\nYou said hi.\n"
    second = llm.requests[1].body["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert second[1]["content"] == "hi" and second[3]["content"] == "what did I say?"


@pytest.mark.parametrize("answer, deleted", [("y", True), ("n", False)])
def test_approval_is_asked_on_the_terminal(workspace, answer: str, deleted: bool) -> None:
    _, llm, upstream = workspace
    llm.script(Reply(calls=[Call("deleteItem", {"id": "7"})]), Reply(text="Done."))
    code, out, err = _chat(workspace, "delete item 7", [answer])
    assert code == 0 and out == "Done.\n"
    assert 'approve deleteItem({"id": "7"})? [y/N]' in err
    assert [r.method for r in upstream.requests] == (["DELETE"] if deleted else [])
    if not deleted:
        assert "refused" in llm.requests[1].body["messages"][-1]["content"]


def test_provider_failure_and_unknown_agent_exit_nonzero(workspace) -> None:
    path, llm, _ = workspace
    llm.script(Reply(status=400, error="model not found"))
    code, _, err = _chat(workspace, "hi")
    assert code == 1 and "model not found" in err
    assert main(["chat", "--specs", str(path / "specs"), "--agents", str(path / "agents.yaml"), "--no-cache",
                 "nobody", "hi"]) == 2


def test_a_sub_agents_steps_show_under_its_name(workspace) -> None:
    path, llm, upstream = workspace
    with (path / "agents.yaml").open("a") as manifest:
        manifest.write("  boss:\n    model: llm/model-x\n    delegates: [clerk]\n")
    llm.script(Reply(calls=[Call("ask_clerk", {"task": "What is item 7?"})]),
               Reply(calls=[Call("getItem", {"id": "7"})]), Reply(text="A pen."), Reply(text="Item 7 is a pen."))
    out, err = io.StringIO(), io.StringIO()
    code = chat_command(path / "specs", path / "agents.yaml", "boss", "what is item 7?", use_cache=False, out=out,
                        err=err)
    lines = err.getvalue().splitlines()
    assert code == 0 and out.getvalue() == "Item 7 is a pen.\n" and upstream.requests[0].path == "/items/7"
    started = lines.index('-> ask_clerk({"task": "What is item 7?"})')
    assert lines[started + 1] == '   [clerk] -> getItem({"id": "7"})'
    assert lines[started + 2].startswith("   [clerk] <- getItem: 200")
    assert lines[started + 3].startswith("<- ask_clerk: ok (")  # no HTTP status: "ok", never "None"


def test_a_script_asks_for_its_write_on_the_terminal_and_goes_on(workspace) -> None:
    path, llm, upstream = workspace
    yaml = (path / "agents.yaml").read_text().replace("approval: writes", "approval: writes\n    code_mode: on")
    (path / "agents.yaml").write_text(yaml)
    code = "item = getItem(id='7')\ndeleteItem(id=item['id'])\nitem['name']"
    llm.script(Reply(calls=[Call("run_code", {"code": code})]), Reply(text="Deleted the pen."))
    status, out, err = _chat(workspace, "delete item 7", ["y"])
    assert status == 0 and out == "Deleted the pen.\n"
    assert 'approve deleteItem({"id": "7"})? [y/N]' in err
    assert [(r.method, r.path) for r in upstream.requests] == [("GET", "/items/7"), ("DELETE", "/items/7")]
    assert llm.requests[1].body["messages"][-1]["content"] == "pen"  # the script's result


def test_chat_from_another_folder_says_where_it_looked_for_agents_yaml(tmp_path: Path) -> None:
    err = io.StringIO()
    code = chat_command(tmp_path / "specs", tmp_path / "agents.yaml", "weather", "hi", use_cache=False,
                        out=io.StringIO(), err=err)
    assert code == 2
    assert f"gateway: no agents manifest at {(tmp_path / 'agents.yaml').resolve()}" in err.getvalue()
    assert "pass --agents FILE (or set GATEWAY_AGENTS)" in err.getvalue()


def test_the_approval_prompt_shows_every_argument_and_the_answer_no_terminal_codes(workspace) -> None:
    """redteam45: a model that follows injected instructions wrote past what the approval prompt showed (200
    characters, then "..."), so the person at the terminal approved arguments they could not read; and its answer
    went to the terminal as it was, escape sequences and all (OSC 52 sets the clipboard in many terminals, a
    carriage return or CSI codes rewrite what was shown)."""
    _, llm, upstream = workspace
    hidden = "7" + "-" * 240 + "-and-the-part-the-prompt-cut"
    llm.script(Reply(calls=[Call("deleteItem", {"id": hidden})]),
               Reply(text="Done.\x1b]52;c;ZXZpbA==\x07\r\x1b[2KAll fine\u009b31m\u202e."))
    code, out, err = _chat(workspace, "delete item 7", ["y"])
    assert code == 0
    prompt = err[err.index("approve deleteItem"):]
    assert hidden in prompt and "..." not in prompt.split("? [y/N]")[0]  # everything, before the question
    assert [r.method for r in upstream.requests] == ["DELETE"]
    for control in ("\x1b", "\x07", "\r", "\u009b", "\u202e"):
        assert control not in out and control not in err, repr(control)
    assert out.startswith("Done.") and "All fine" in out  # the text itself is kept, its codes shown as text


def test_json_printed_on_the_terminal_is_the_same_json_without_terminal_codes() -> None:
    import json

    from gateway.printable import printable

    value = {"body": "ok\x1b]52;c;ZXZpbA==\x07 \u009b31m \u202eevil\u202c", "plain": "café\tnew\nline"}
    for text in (json.dumps(value, ensure_ascii=False), json.dumps(value, ensure_ascii=False, indent=2)):
        shown = printable(text)
        assert json.loads(shown) == value and not any(c in shown for c in "\x1b\x07\u009b\u202e\u202c")
    assert printable("café\tnew\nline") == "café\tnew\nline"
