"""The caller context: each binding sets the fields it names and keeps the rest, for the block only."""

from __future__ import annotations

import asyncio

import pytest

from gateway.kernel.caller import Caller, UserToken, bind_caller, current_caller


def test_a_binding_sets_what_it_names_and_keeps_the_rest() -> None:
    token = UserToken(value="t", subject="ann")
    with bind_caller(client="ci", subject="ann", token=token, notes={}) as outer:
        assert type(outer) is Caller and outer == current_caller()
        with bind_caller(agent="clerk") as inner:
            assert inner == Caller(client="ci", agent="clerk", notes={}, subject="ann", token=token)
            assert inner.agent == "clerk" and inner.client == "ci" and inner.token is token
            assert inner._replace(agent=None) == outer  # a real named tuple: its own methods work on it
        assert current_caller() is outer
    assert current_caller() == Caller()


def test_a_binding_may_set_a_field_back_to_none() -> None:
    with bind_caller(client="ci"), bind_caller(client=None) as inner:
        assert inner.client is None


def test_an_unknown_field_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="no field colour"), bind_caller(colour="red"):
        pass
    assert current_caller() == Caller()


def test_tasks_started_inside_inherit_the_binding() -> None:
    async def main() -> str | None:
        with bind_caller(agent="clerk"):
            task = asyncio.create_task(asyncio.sleep(0, current_caller().agent))
        return await task

    assert asyncio.run(main()) == "clerk"


def test_a_stdio_sessions_client_is_the_door_and_the_declared_name() -> None:
    from gateway.kernel.caller import stdio_client

    assert stdio_client("claude-ai") == "stdio:claude-ai"
    assert stdio_client("Claude Desktop") == "stdio:Claude-Desktop"  # one column in the terminal's lists
    assert stdio_client("a\x1b]52;c;x\x07b\r\nc") == "stdio:a-]52;c;x-b-c"  # no control character reaches the audit
    assert stdio_client(None) == stdio_client("") == stdio_client(" \t") == "stdio"  # declared none: the door alone
    assert stdio_client("x" * 500) == "stdio:" + "x" * 64
