"""Tool search: an action the request's verb names (gateway.offer.actions), on a small Asana-shaped catalog."""

from __future__ import annotations

from gateway.catalog import Catalog, Tool
from gateway.offer.actions import action_of, performs
from gateway.offer.index import index_of
from gateway.offer.query import read


def _tool(name: str, method: str, path: str, summary: str) -> Tool:
    return Tool(name=name, api="tasks", operation_id=name, method=method, path=path, description=summary,
                input_schema={"type": "object"}, summary=summary)


_FILLER = [_tool(f"{verb}{thing}", method, f"/{thing.lower()}s", f"{verb} {thing.lower()}")
           for thing in ("Order", "Store", "Vet", "Invoice", "Coupon")
           for verb, method in (("list", "GET"), ("add", "POST"))]
"""Other operations, so that the words under test are rare enough to weigh."""
_TASKS = [_tool("deleteProject", "DELETE", "/projects/{project_gid}", "Delete a project"),
          _tool("getProject", "GET", "/projects/{project_gid}", "Get a project"),
          _tool("removeMembersForProject", "POST", "/projects/{project_gid}/removeMembers",
                "Remove users from a project"),
          _tool("deleteTask", "DELETE", "/tasks/{task_gid}", "Delete a task"),
          _tool("removeTagForTask", "POST", "/tasks/{task_gid}/removeTag", "Remove a tag from a task"),
          _tool("deleteTag", "DELETE", "/tags/{tag_gid}", "Delete a tag")]


def _names(query: str) -> list[str]:
    return [hit.tool.name for hit in index_of(Catalog(_TASKS + _FILLER)).search(query, limit=3)]


def test_a_verb_that_names_an_action_asks_for_it_though_the_action_is_a_post() -> None:
    # "remove" asks for DELETE; the api removes a tag from a task by POST /tasks/{gid}/removeTag, not by deleting it
    assert _names("remove the urgent tag from the printer task")[0] == "removeTagForTask"


def test_a_verb_that_names_no_action_keeps_its_method() -> None:
    assert _names("delete the website project")[0] == "deleteProject"
    assert _names("delete the urgent tag")[0] == "deleteTag"


def test_the_action_is_the_verb_meant_and_a_read_names_none() -> None:
    assert read("take Lena off the website project").verb == "remove"  # take ... off: remove
    assert action_of("remove", frozenset({"DELETE"})) == "remov"
    assert action_of("close", frozenset({"PATCH"})) == "close"
    assert action_of("get", frozenset({"GET"})) == ""  # Graph's thousands of getX functions are not asked for
    assert performs("remov", "POST", False, ("remove", "tag"))
    assert not performs("remov", "POST", True, ("remove", "tag"))  # an item, not an action
    assert not performs("remov", "DELETE", False, ("remove", "tag"))


def test_the_actions_a_verb_names_are_candidates_as_the_things_named_are() -> None:
    # under hundreds of better matches of its words, the action is still scored (Graph's removeAllDevicesFromManagement)
    assert '"remov"*' in read("take every one of her devices out of Intune management").addressed
    assert "remov" not in read("list the devices in Intune management").addressed
