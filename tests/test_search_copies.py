"""One operation at several addresses (Graph's `/me/...` and `/users/{id}/...`) takes one place in a search's answer.

A small spec shaped as Graph's mail: moving a message and moving a mail folder, each at a person's two addresses, and a
group's conversations, compiled by the gateway and searched as every door searches (`toolsearch.search`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gateway.offer.copies import address
from gateway.offer.toolsearch import SEARCH_TOOL, ToolOffer, search
from gateway.runtime import Runtime, load_runtime

AGENTS = """\
providers: {local: {kind: ollama}}
agents:
  mail:
    model: local/llama3
    tool_search: "on"
    tools:
      - api: mail
"""


def _operation(operation_id: str, summary: str) -> dict[str, Any]:
    return {"post": {"operationId": operation_id, "summary": summary, "responses": {"204": {"description": "moved"}}}}


PATHS = {
    "/me/messages/{message-id}/move": _operation("me_messages_move", "Move a message to another folder"),
    "/users/{user-id}/messages/{message-id}/move": _operation("users_messages_move",
                                                              "Move a message to another folder"),
    "/me/mailFolders/{mailFolder-id}/move": _operation("me_mailFolders_move", "Move a mail folder to another folder"),
    "/users/{user-id}/mailFolders/{mailFolder-id}/move": _operation("users_mailFolders_move",
                                                                    "Move a mail folder to another folder"),
    "/groups/{group-id}/threads/{thread-id}/reply": _operation("groups_threads_reply", "Reply to a thread"),
}


@pytest.fixture
def runtime(tmp_path: Path) -> Runtime:
    specs = tmp_path / "specs"
    specs.mkdir()
    spec = {"openapi": "3.0.3", "info": {"title": "Mail", "version": "1"},
            "servers": [{"url": "http://127.0.0.1:9/"}], "paths": PATHS}
    (specs / "mail.json").write_text(json.dumps(spec))
    agents = tmp_path / "agents.yaml"
    agents.write_text(AGENTS)
    return load_runtime(specs, agents, use_cache=False)


def test_an_operations_copies_take_one_place_and_are_named_with_it(runtime: Runtime) -> None:
    found = search(None, runtime.toolset("mail"), "move the message to another folder", 2)
    # both addresses of moving a message score alike: before, they took both places and moving a folder had none
    assert [item["operation_id"] for item in found] == ["me_messages_move", "me_mailFolders_move"]
    assert found[0]["copies"] == ["users_messages_move"]
    assert found[1]["copies"] == ["users_mailFolders_move"]


def test_an_operation_without_copies_is_answered_as_before(runtime: Runtime) -> None:
    [item] = search(None, runtime.toolset("mail"), "reply to the group thread", 1)
    assert item["operation_id"] == "groups_threads_reply" and "copies" not in item


def test_a_search_loads_each_operation_and_then_its_copies(runtime: Runtime) -> None:
    toolset = runtime.toolset("mail")
    offer = ToolOffer(runtime.agent("mail"), toolset)
    ok, body = offer.answer(SEARCH_TOOL, {"query": "move the message to another folder", "limit": 2})
    assert ok and [item["name"] for item in body["tools"]] == ["me_messages_move", "me_mailFolders_move"]
    # the operations first (the caps keep them before any copy), then their other addresses, callable by name
    assert offer.loaded == ["me_messages_move", "me_mailFolders_move", "users_messages_move", "users_mailFolders_move"]


def _tool(method: str, path: str, api: str = "graph") -> Any:
    class Named:
        pass

    tool = Named()
    tool.api, tool.method, tool.path = api, method, path  # type: ignore[attr-defined]
    return tool


def test_copies_are_one_method_and_path_under_a_persons_or_a_teams_addresses() -> None:
    assert address(_tool("POST", "/me/messages/{message-id}/move")) == \
        address(_tool("POST", "/users/{user-id}/messages/{id}/move"))
    team = {address(_tool("GET", path)) for path in ("/teams/{team-id}/channels", "/groups/{group-id}/team/channels",
                                                     "/me/joinedTeams/{team-id}/channels",
                                                     "/users/{user-id}/joinedTeams/{team-id}/channels")}
    assert len(team) == 1
    # another owner's calendar, another method, another path: other operations
    assert address(_tool("GET", "/groups/{group-id}/events")) != address(_tool("GET", "/me/events"))
    assert address(_tool("DELETE", "/me/events/{id}")) != address(_tool("GET", "/me/events/{id}"))
    assert address(_tool("GET", "/me/calendar/events")) != address(_tool("GET", "/me/events"))
    assert address(_tool("GET", "/users")) != address(_tool("GET", "/me"))
    assert address(_tool("GET", "/me/messages", "graph")) != address(_tool("GET", "/me/messages", "graph-beta"))
