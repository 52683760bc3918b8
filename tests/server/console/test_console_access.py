"""Who may use the console and what each key sees, over HTTP (the browser tests drive the same pages)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from console_support import ADMIN_KEY, CONSOLE_AGENTS_YAML, PLAIN_TRIAGE_KEY, TRIAGE_KEY, WEATHER_KEY
from recording_server import RecordingServer
from safety.safety_support import build_app, safe_gateway
from scripted_llm import Call, Reply
from server_support import AGENTS_YAML, LenientLLM, running, write_project

COMMENT = {"owner": "acme", "repo": "app", "issue_number": 7, "body": "On it."}


@pytest.fixture
def served(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> Iterator[str]:
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=CONSOLE_AGENTS_YAML) as (url, _):
        yield url


def signed_in(url: str, key: str) -> tuple[httpx.Client, dict[str, str]]:
    """A client with the session cookie, and the CSRF header its pages carry."""
    client = httpx.Client(base_url=url, timeout=30)
    assert client.post("/console/signin", json={"key": key}).status_code == 200
    page = client.get("/console/agents").text
    token = re.search(r'name="csrf-token" content="([^"]+)"', page)
    assert token is not None
    return client, {"X-CSRF-Token": token.group(1)}


def test_sign_in_sets_a_strict_http_only_cookie(served: str) -> None:
    with httpx.Client(base_url=served) as client:
        first = client.get("/console/agents/weather")
        assert first.status_code == 303 and first.headers["location"] == "/console/signin?next=/agents/weather"
        assert client.post("/console/signin", json={"key": "ck-made-up"}).status_code == 401
        assert client.post("/console/signin", json={}).json()["error"]["param"] == "key"
        answer = client.post("/console/signin", json={"key": WEATHER_KEY, "next": "//evil.example/x"})
        assert answer.json() == {"next": "/console/agents"}  # never sent off-site
        cookie = answer.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie and "path=/console" in cookie
        assert client.get("/console/agents").status_code == 200
        assert client.get("/agents").status_code == 401  # the cookie opens the console only, not the API
        signed = client.cookies["gateway_console"]
        forged = signed[:-2] + ("00" if signed[-2:] != "00" else "11")  # a hex signature ending "00" once in 256
        client.cookies.set("gateway_console", forged, path="/console")
        assert client.get("/console/agents").status_code == 303  # a forged signature is no session


def test_signing_out_ends_the_session_on_the_server(tmp_path: Path, served: str) -> None:
    client, csrf = signed_in(served, WEATHER_KEY)
    other, _ = signed_in(served, WEATHER_KEY)  # the same key signed in elsewhere: another session
    copied = client.cookies["gateway_console"]  # what a shared machine or a proxy's log may have kept
    assert client.post("/console/signout", headers=csrf).status_code == 200
    with httpx.Client(base_url=served) as replay:
        replay.cookies.set("gateway_console", copied, path="/console")
        assert replay.get("/console/agents").status_code == 303  # off to the sign-in page
        refused = replay.post("/console/agents/weather/tools/getForecast/run", json={}, headers=csrf)
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "console_signin"
    assert other.get("/console/agents").status_code == 200  # only the session signed out ended
    # Recorded in the store, not in this process: a restarted gateway (or another instance) refuses it too.
    app, safety = build_app(tmp_path, store=tmp_path / "state.db", watch=False)
    try:
        with running(app) as url, httpx.Client(base_url=url) as replay:
            replay.cookies.set("gateway_console", copied, path="/console")
            assert replay.get("/console/agents").status_code == 303
            replay.cookies.set("gateway_console", other.cookies["gateway_console"], path="/console")
            assert replay.get("/console/agents").status_code == 200
    finally:
        safety.store.close()  # type: ignore[attr-defined]


def test_every_console_answer_forbids_framing_and_foreign_files(served: str) -> None:
    client, csrf = signed_in(served, WEATHER_KEY)
    answers = [client.get(path) for path in ("/console/agents", "/console/agents/triage", "/console/approvals",
                                             "/console/audit", "/console/health", "/console/static/console.js",
                                             "/console/static/console.css", "/console/")]
    answers.append(client.post("/console/agents/weather/tools/getForecast/run", json={}, headers=csrf))
    with httpx.Client(base_url=served) as anonymous:
        answers += [anonymous.get("/console/signin"), anonymous.get("/console/audit"),
                    anonymous.post("/console/approvals/apr_x", json={"decision": "approve"})]
    for answer in answers:
        where = f"{answer.request.method} {answer.request.url.path} ({answer.status_code})"
        policy = answer.headers.get("content-security-policy", "")
        assert "frame-ancestors 'none'" in policy and answer.headers.get("x-frame-options") == "DENY", where
        assert "default-src 'none'" in policy and "script-src 'self'" in policy, where
        assert "unsafe-inline" not in policy and "http" not in policy, where


def test_every_state_changing_request_needs_the_csrf_token(served: str, upstream: RecordingServer) -> None:
    client, csrf = signed_in(served, WEATHER_KEY)
    run = "/console/agents/weather/tools/getForecast/run"
    arguments = {"arguments": {"latitude": 52.52, "longitude": 13.41}}
    assert client.post(run, json=arguments).status_code == 403
    assert client.post(run, json=arguments, headers={"X-CSRF-Token": "0" * 64}).status_code == 403
    assert upstream.requests == []
    answer = client.post(run, json=arguments, headers=csrf)
    assert answer.status_code == 200 and answer.json()["result"]["status"] == 200
    assert len(upstream.requests) == 1
    with httpx.Client(base_url=served) as anonymous:
        assert anonymous.post(run, json=arguments, headers=csrf).status_code == 401  # no session, no call


def test_a_key_sees_only_its_agents_and_admin_sees_all(served: str, llm: LenientLLM) -> None:
    llm.script(Reply(calls=[Call("createIssueComment", COMMENT)]))
    triage, triage_csrf = signed_in(served, TRIAGE_KEY)
    chat = triage.post("/console/chat/triage", json={"messages": [{"role": "user", "content": "ack 7"}]},
                       headers=triage_csrf)
    assert chat.status_code == 200 and "approval_pending" in chat.text

    weather, csrf = signed_in(served, WEATHER_KEY)
    assert "triage" not in weather.get("/console/agents").text
    assert "getIssue" not in weather.get("/console/agents?q=issue").text
    for page in ("/console/agents/triage", "/console/agents/triage/tools/getIssue"):
        assert weather.get(page).status_code == 404
    assert weather.post("/console/agents/triage/tools/getIssue/run", json={"arguments": {}},
                        headers=csrf).status_code == 404
    assert weather.post("/console/chat/triage", json={"messages": [{"role": "user", "content": "x"}]},
                        headers=csrf).status_code == 404
    assert "createIssueComment" not in weather.get("/console/approvals").text
    assert "createIssueComment" not in weather.get("/console/audit").text
    pending = re.search(r'data-id="([^"]+)"', triage.get("/console/approvals").text)
    assert pending is not None
    refused = weather.post(f"/console/approvals/{pending.group(1)}", json={"decision": "approve"}, headers=csrf)
    assert refused.status_code == 403

    admin, _ = signed_in(served, ADMIN_KEY)
    page = admin.get("/console/agents").text
    assert "/console/agents/weather" in page and "/console/agents/triage" in page
    assert pending.group(1) in admin.get("/console/approvals").text
    assert "createIssueComment" in admin.get("/console/audit").text
    assert admin.get("/audit", headers={"Authorization": f"Bearer {ADMIN_KEY}"}).json()["data"]  # the API too


def test_edited_arguments_are_validated_before_the_approval_is_used(served: str, llm: LenientLLM,
                                                                    upstream: RecordingServer) -> None:
    llm.script(Reply(calls=[Call("createIssueComment", COMMENT)]), Reply(text="Done."))
    client, csrf = signed_in(served, TRIAGE_KEY)
    client.post("/console/chat/triage", json={"messages": [{"role": "user", "content": "ack 7"}]}, headers=csrf)
    approval = re.search(r'data-id="([^"]+)"', client.get("/console/approvals").text)
    assert approval is not None
    url = f"/console/approvals/{approval.group(1)}"
    bad = client.post(url, json={"decision": "approve", "arguments": {**COMMENT, "issue_number": "seven"}},
                      headers=csrf)
    assert bad.status_code == 422 and any("issue_number" in p for p in bad.json()["problems"])
    assert approval.group(1) in client.get("/console/approvals").text  # still waiting
    good = client.post(url, json={"decision": "approve", "arguments": {**COMMENT, "body": "Edited."}}, headers=csrf)
    assert good.status_code == 200 and good.json()["choices"][0]["message"]["content"] == "Done."
    (write,) = [r for r in upstream.requests if r.method == "POST"]
    assert json.loads(write.body) == {"body": "Edited."}
    rows = client.get("/console/audit?kind=decision").text
    assert "triage-bot" in rows and "approved" in rows


def test_the_right_to_decide_is_checked_before_an_edit(served: str, llm: LenientLLM,
                                                      upstream: RecordingServer) -> None:
    llm.script(Reply(calls=[Call("createIssueComment", COMMENT)]), Reply(text="Done."))
    plain, plain_csrf = signed_in(served, PLAIN_TRIAGE_KEY)
    plain.post("/console/chat/triage", json={"messages": [{"role": "user", "content": "ack 7"}]}, headers=plain_csrf)
    page = plain.get("/console/approvals").text
    approval = re.search(r'data-id="([^"]+)"', page)
    assert approval is not None and "Waits for an approver" in page and 'class="approve"' not in page
    url = f"/console/approvals/{approval.group(1)}"
    for key in (PLAIN_TRIAGE_KEY, WEATHER_KEY):  # its own call, and another agent's: neither may decide
        client, csrf = signed_in(served, key)
        bad_edit = client.post(url, json={"decision": "approve", "arguments": {**COMMENT, "issue_number": "seven"}},
                               headers=csrf)
        assert bad_edit.status_code == 403 and "problems" not in bad_edit.json()  # nothing of the tool is judged
        assert client.post(url, json={"decision": "approve"}, headers=csrf).status_code == 403
    assert upstream.requests == []
    admin, admin_csrf = signed_in(served, ADMIN_KEY)
    decided = admin.post(url, json={"decision": "approve"}, headers=admin_csrf)
    assert decided.status_code == 200 and "Done." not in decided.text  # the answer is the owner's
    run = decided.json()["run"]["id"]
    assert "Done." in plain.get(f"/console/runs/{run}").text and "Done." not in admin.get(f"/console/runs/{run}").text
    assert [r.method for r in upstream.requests] == ["POST"]


def test_without_clients_the_console_is_open(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> None:
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=AGENTS_YAML) as (url, _), \
            httpx.Client(base_url=url) as client:
        page = client.get("/console/agents")
        assert page.status_code == 200
        assert "/console/agents/weather" in page.text and "/console/agents/triage" in page.text
        assert client.get("/console/signin").status_code == 303
        token = re.search(r'name="csrf-token" content="([^"]+)"', page.text)
        assert token is not None
        run = "/console/agents/weather/tools/getForecast/run"
        arguments = {"arguments": {"latitude": 1, "longitude": 2}}
        assert client.post(run, json=arguments).status_code == 403  # still no state change without the token
        assert client.post(run, json=arguments, headers={"X-CSRF-Token": token.group(1)}).status_code == 200


def test_health_shows_a_refused_reload(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> None:
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=CONSOLE_AGENTS_YAML, watch=True,
                      watch_interval=0.05) as (url, _):
        client, _ = signed_in(url, ADMIN_KEY)
        page = client.get("/console/health").text
        assert "open-meteo" in page and "refused-reload" not in page
        agents = tmp_path / "agents.yaml"
        agents.write_text(agents.read_text().replace("model: openai/gpt-test", "model: nosuchprovider/x"))
        for _ in range(200):
            page = client.get("/console/health").text
            if "refused-reload" in page:
                break
            time.sleep(0.05)
        assert "The last reload was refused" in page and "nosuchprovider" in page
        weather, _ = signed_in(url, WEATHER_KEY)
        page = weather.get("/console/health").text
        assert "The last reload was refused" in page and "nosuchprovider" not in page  # why: the admin's to see


def test_health_shows_a_key_its_own_agents_and_specs_only(served: str) -> None:
    weather, _ = signed_in(served, WEATHER_KEY)
    page = weather.get("/console/health").text
    assert "open-meteo" in page and "weather" in page
    for others in ("github", "triage", "getIssue", "triage-bot", "ops"):
        assert others not in page, others
    admin, _ = signed_in(served, ADMIN_KEY)
    page = admin.get("/console/health").text
    assert "github" in page and "triage" in page


def test_console_runs_are_charged_to_the_keys_rate_limit(tmp_path: Path, llm: LenientLLM,
                                                         upstream: RecordingServer) -> None:
    limited = CONSOLE_AGENTS_YAML + "gateway: {{rate_limits: {{client: 1/min}}}}\n"
    with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=limited) as (url, _):
        client, csrf = signed_in(url, WEATHER_KEY)
        run = "/console/agents/weather/tools/getForecast/run"
        arguments = {"arguments": {"latitude": 1, "longitude": 2}}
        assert client.post(run, json=arguments, headers=csrf).status_code == 200
        refused = client.post(run, json=arguments, headers=csrf)
        assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
        assert len(upstream.requests) == 1


def test_one_runs_steps(served: str, llm: LenientLLM) -> None:
    llm.script(Reply(calls=[Call("getForecast", {"latitude": 52.52, "longitude": 13.41})]), Reply(text="Mild."))
    client, csrf = signed_in(served, WEATHER_KEY)
    chat = client.post("/console/chat/weather", json={"messages": [{"role": "user", "content": "weather?"}]},
                       headers=csrf)
    run_id = json.loads(chat.text.split("data: ", 2)[1].split("\n")[0])["id"]
    page = client.get("/console/audit?kind=chat").text
    assert f"/console/runs/{run_id}" in page
    steps = client.get(f"/console/runs/{run_id}").text
    assert "getForecast" in steps and "52.52" in steps  # the tool call, with its (redacted) arguments
    audit = client.get(f"/audit?run_id={run_id}", headers={"Authorization": f"Bearer {ADMIN_KEY}"}).json()["data"]
    assert [(r["kind"], r["tool"]) for r in audit] == [("chat", None), ("tool", "getForecast")]


def test_the_audit_pages_kind_filter_offers_every_kind_the_audit_records(served: str) -> None:
    """The filter's choices are the store's kinds, conversations removed past a client's cap among them (an
    admin looking for why a stored response is gone)."""
    from gateway.store import AUDIT_KINDS

    client, _ = signed_in(served, ADMIN_KEY)
    page = client.get("/console/audit?kind=conversation").text
    for kind in AUDIT_KINDS:
        assert f'<option value="{kind}"' in page
    assert '<option value="conversation" selected>' in page


def test_behind_a_proxy_with_a_root_path(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer) -> None:
    write_project(tmp_path, llm.url, upstream.url, CONSOLE_AGENTS_YAML)
    app, safety = build_app(tmp_path, store=tmp_path / "state.db")
    try:
        with running(app, root_path="/gw") as url, httpx.Client(base_url=url) as client:  # the proxy strips /gw
            assert client.get("/console/agents").headers["location"] == "/gw/console/signin?next=/agents"
            signed = client.post("/console/signin", json={"key": WEATHER_KEY})
            assert signed.json() == {"next": "/gw/console/agents"}
            assert "Path=/gw/console" in signed.headers["set-cookie"]
            client.cookies.set("gateway_console", signed.cookies["gateway_console"])  # as the browser sends it
            page = client.get("/console/agents").text
            assert 'href="/gw/console/static/console.css"' in page and 'href="/gw/console/agents/weather"' in page
            token = re.search(r'name="csrf-token" content="([^"]+)"', page)
            assert token is not None
            run = client.post("/console/agents/weather/tools/getForecast/run",
                              headers={"X-CSRF-Token": token.group(1)},
                              json={"arguments": {"latitude": 1, "longitude": 2}})
            assert run.status_code == 200 and run.json()["result"]["status"] == 200
    finally:
        safety.store.close()  # type: ignore[attr-defined]


def test_what_a_model_or_caller_wrote_is_shown_as_text(served: str) -> None:
    client, csrf = signed_in(served, WEATHER_KEY)
    hostile = "<script>alert(1)</script>"
    client.post("/console/agents/weather/tools/getForecast/run", headers=csrf,
                json={"arguments": {"latitude": 1, "longitude": 2, "timezone": hostile}})
    page = client.get("/console/audit").text
    assert hostile not in page and "getForecast" in page
    assert "\\u003cscript\\u003e" in page or "&lt;script&gt;" in page
