"""The fusion's trust in BM25 (`Weights.held`, `gateway.offer.fusion.trusted`) through the door: a search over
`GET /agents/{agent}/tools/search`, answered with an embeddings endpoint.

Real parts: uvicorn serving the gateway, the scripted LLM on 127.0.0.1 answering OpenAI's `/v1/embeddings` with
hashed bag-of-words vectors (tests/test_scripted_llm.py proves their shape with the official SDK), `httpx` as the
caller. The vectors share words only, so the spec is written for them: the snooze's summary shares the request's
small words ("all of ... on my ... for me"), which BM25 does not read, and none of its match terms.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import httpx
import pytest
from server_support import LenientLLM, running
from test_search_embeddings import embedded_runtime, openai_embeddings

from gateway.offer import embeddings
from gateway.offer.index import index_of
from gateway.offer.signals import WEIGHTS
from gateway.runtime import RuntimeHolder
from gateway.server import create_app

SPEC = """\
openapi: 3.0.3
info: {title: Chat, version: "1"}
servers: [{url: "http://127.0.0.1:9/api"}]
paths:
  /conversations/{id}/archive:
    post: {operationId: archiveConversation, summary: Archive the channel, parameters: [{name: id, in: path,
           required: true, schema: {type: string}}], responses: {"200": {description: ok}}}
  /conversations/{id}/leave:
    post: {operationId: leaveConversation, summary: Leave the channel, parameters: [{name: id, in: path,
           required: true, schema: {type: string}}], responses: {"200": {description: ok}}}
  /conversations/{id}/rename:
    post: {operationId: renameConversation, summary: Rename the channel, parameters: [{name: id, in: path,
           required: true, schema: {type: string}}], responses: {"200": {description: ok}}}
  /dnd/snooze:
    post: {operationId: setSnooze, summary: Pause all of them on my side for me, responses: {"200": {description: ok}}}
  /users:
    get: {operationId: listUsers, summary: List the users, responses: {"200": {description: ok}}}
"""
HUSH = "hush all of the channel notifications on my phone for me"
"""BM25 reads hush, channel, notifications (and its run-on "notificationson") and phone: the conversations hold
"channel" in their summaries, one term of five, and nothing holds the rest."""

pytestmark = pytest.mark.usefixtures("fresh_embeddings")


def _found(url: str) -> list[str]:
    answer = httpx.get(f"{url}/agents/clerk/tools/search", params={"q": HUSH, "limit": 3}, timeout=30)
    assert answer.status_code == 200, answer.text
    return [tool["operation_id"] for tool in answer.json()["data"]]


def test_the_door_trusts_the_model_where_bm25s_first_three_hold_little_of_the_request(
        tmp_path: Path, llm: LenientLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    runtime = embedded_runtime(tmp_path, llm, openai_embeddings(llm), spec=SPEC)
    bm25 = index_of(runtime.catalog).search(HUSH, limit=50)
    first = [hit.tool for hit in bm25[:3]]
    assert {tool.name for tool in first} == {"archiveConversation", "leaveConversation", "renameConversation"}
    assert "setSnooze" not in [hit.tool.name for hit in bm25]  # no word of the request BM25 reads is the snooze's
    assert index_of(runtime.catalog).held(HUSH, first) == 0.2
    with running(create_app(RuntimeHolder(runtime), watch=False)) as url:
        # the model's confident first (the snooze) over the conversations, which BM25 put first on one word
        assert _found(url)[0] == "setSnooze"
        # the same search without the trust: BM25's first stands, the model's first under it
        monkeypatch.setattr(embeddings, "WEIGHTS", dataclasses.replace(WEIGHTS, held=0.0))
        untrusted = _found(url)
        assert untrusted[0] == bm25[0].tool.operation_id and "setSnooze" not in untrusted
    assert any(request.path == "/v1/embeddings" for request in llm.requests)  # fused with the endpoint's vectors
