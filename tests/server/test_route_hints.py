"""The 404s a developer meets while wiring a client say what was meant: a base_url without `/v1`, an Anthropic SDK
pointed at the gateway (which has no Messages door), a `previous_response_id` of a response that was not kept,
a model id where an agent is named, a GET where a POST is taken."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx
import openai
import pytest
from scripted_llm import Reply
from server_support import LenientLLM


def test_a_base_url_without_v1_is_told_where_the_endpoints_are(gw: tuple[str, Any]) -> None:
    url, _ = gw
    client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0)
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model="weather", messages=[{"role": "user", "content": "hi"}])
    assert "under /v1" in caught.value.message
    with pytest.raises(openai.NotFoundError) as caught:
        client.responses.create(model="weather", input="hi")
    assert "under /v1" in caught.value.message


def test_an_anthropic_client_is_told_how_to_use_the_tools(gw: tuple[str, Any]) -> None:
    url, _ = gw
    for base in (url, f"{url}/v1"):
        client = anthropic.Anthropic(base_url=base, api_key="unused", max_retries=0)
        with pytest.raises(anthropic.NotFoundError) as caught:
            client.messages.create(model="weather", max_tokens=100, messages=[{"role": "user", "content": "hi"}])
        assert "no Anthropic Messages endpoint" in str(caught.value)
        assert "format=anthropic" in str(caught.value)


def test_a_response_not_stored_says_why_it_may_be_missing(gw: tuple[str, Any], llm: LenientLLM) -> None:
    url, _ = gw
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
    llm.script(Reply(text="first"))
    first = client.responses.create(model="weather", input="hi", store=False)
    with pytest.raises(openai.NotFoundError) as caught:
        client.responses.create(model="weather", input="and?", previous_response_id=first.id)
    assert "store: false" in caught.value.message


@pytest.mark.parametrize("model", ["gpt-test", "openai/gpt-test"])
def test_a_model_id_for_model_is_told_that_model_names_an_agent(gw: tuple[str, Any], model: str) -> None:
    url, _ = gw
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}])
    assert "`model` names an agent" in caught.value.message and "model of weather" in caught.value.message
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model="wether", messages=[{"role": "user", "content": "hi"}])
    assert caught.value.body["message"] == "Unknown agent 'wether'; the agents are: triage, weather."  # a typo: no hint


def test_a_direct_call_by_get_is_told_it_takes_post(gw: tuple[str, Any]) -> None:
    url, _ = gw
    answer = httpx.get(f"{url}/agents/weather/tools/getForecast", params={"latitude": 1, "longitude": 2})
    assert answer.status_code == 405 and answer.json()["error"]["message"].endswith("; it takes POST")
