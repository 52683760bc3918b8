"""The safety layer `gateway mcp` opens (`ServingSafeguards`): the safeguards every door shares, users' connections
built when a call first needs them, and the errors at start (a bad connections key, a store that will not open)
that the HTTP door's `Safety` gives too."""

from __future__ import annotations

from pathlib import Path

import pytest
from recording_server import RecordingServer
from server_support import AGENTS_YAML, write_project

from gateway.assembly import GatewayState
from gateway.cli import main
from gateway.errors import ConfigError
from gateway.identity.connections import Connections
from gateway.runtime import RuntimeHolder, load_runtime
from gateway.safety.serving import ServingSafeguards
from gateway.server.mcp.answering import answer_call
from gateway.server.supervision import Safety
from gateway.store import MemoryStore

USER_OAUTH = """\
gateway:
  auth: {{issuer: "https://issuer.test", audience: "https://gateway.test/"}}
apis:
  open-meteo:
    base_url: "{upstream}/meteo"
    auth: {{type: user_oauth, authorization_url: "https://issuer.test/authorize", token_url: "https://issuer.test/token",
            client_id: gateway-connector}}
"""


def _user_oauth_project(folder: Path, upstream_url: str) -> tuple[Path, Path]:
    """The example project whose Open-Meteo api is called with each user's own connection."""
    agents_yaml = AGENTS_YAML.replace('apis:\n  open-meteo: {{base_url: "{upstream}/meteo"}}\n', USER_OAUTH)
    assert agents_yaml != AGENTS_YAML
    return write_project(folder, "http://127.0.0.1:9", upstream_url, agents_yaml)


@pytest.mark.anyio
async def test_connections_are_built_when_first_asked_for_and_follow_reloads(tmp_path: Path) -> None:
    specs, agents = _user_oauth_project(tmp_path, "http://127.0.0.1:9")
    runtime = load_runtime(specs, agents, use_cache=False)
    safety = ServingSafeguards(MemoryStore(), runtime.manifest, redact_log_records=False)
    try:
        assert "connections" not in vars(safety)  # nothing of the identity layer built at start
        connections = safety.connections
        assert isinstance(connections, Connections) and safety.connections is connections
        settings = connections.apis["open-meteo"]
        assert settings.client_id == "gateway-connector"
        # The default callback is under gateway.auth's audience, as the HTTP door's is.
        assert settings.redirect_uri == "https://gateway.test/connections/callback"
        agents.write_text(agents.read_text().replace("client_id: gateway-connector", "client_id: renamed"))
        safety.sync(load_runtime(specs, agents, use_cache=False).manifest)
        assert safety.connections is connections and connections.apis["open-meteo"].client_id == "renamed"
    finally:
        await safety.aclose()


@pytest.mark.anyio
async def test_the_http_door_builds_its_connections_at_once_on_its_identity_client(tmp_path: Path) -> None:
    specs, agents = _user_oauth_project(tmp_path, "http://127.0.0.1:9")
    safety = Safety(MemoryStore(), load_runtime(specs, agents, use_cache=False).manifest)
    try:
        assert "connections" in vars(safety)
        assert safety.connections.http is safety._identity_http
        assert safety.connections.apis["open-meteo"].redirect_uri == "https://gateway.test/connections/callback"
    finally:
        await safety.aclose()


@pytest.mark.anyio
async def test_a_stdio_call_needing_a_users_connection_gets_the_same_refusal(tmp_path: Path,
                                                                             upstream: RecordingServer) -> None:
    """`gateway mcp` acts for no signed-in user: a `user_oauth` api is refused before anything is sent, as when the
    server's safety layer was opened at start; its connections are built at that first call, not before."""
    specs, agents = _user_oauth_project(tmp_path, upstream.url)
    runtime = load_runtime(specs, agents, use_cache=False)
    safety = ServingSafeguards(MemoryStore(), runtime.manifest, redact_log_records=False)
    state = GatewayState(RuntimeHolder(runtime), safety=safety, metrics=False, calls_on_first_use=True)
    try:
        assert "connections" not in vars(safety)
        answer = await answer_call(state, "weather", "getForecast", {"latitude": 52.52, "longitude": 13.41},
                                   "2025-06-18", None)
    finally:
        await state.aclose()
        await safety.aclose()
    assert answer is not None and answer["isError"] is True
    text = answer["content"][0]["text"]
    assert "open-meteo is called as the signed-in user (the user's own connection)" in text
    assert "nothing was sent" in text
    assert "connections" in vars(safety)
    assert not upstream.requests


def test_gateway_mcp_with_a_bad_connections_key_stops_at_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    specs, agents = write_project(tmp_path, "http://127.0.0.1:9", "http://127.0.0.1:9")
    monkeypatch.setenv("GATEWAY_CONNECTIONS_KEY", "not-a-fernet-key")
    with pytest.raises(ConfigError, match="GATEWAY_CONNECTIONS_KEY must hold Fernet keys"):
        ServingSafeguards(MemoryStore(), load_runtime(specs, agents, use_cache=False).manifest,
                          redact_log_records=False)
    assert main(["mcp", "weather", "--specs", str(specs), "--agents", str(agents), "--no-cache"]) == 1
    assert "GATEWAY_CONNECTIONS_KEY must hold Fernet keys" in capsys.readouterr().err


def test_gateway_mcp_with_a_store_that_will_not_open_stops_at_start(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    specs, agents = write_project(tmp_path, "http://127.0.0.1:9", "http://127.0.0.1:9",
                                  AGENTS_YAML + f"gateway:\n  store: {tmp_path / 'a-file' / 'state.db'}\n")
    assert main(["mcp", "weather", "--specs", str(specs), "--agents", str(agents), "--no-cache"]) == 1
    assert "cannot open the store" in capsys.readouterr().err


@pytest.mark.anyio
async def test_connecting_without_a_connections_key_says_how_to_make_one() -> None:
    """identity.md's reader sets up user_oauth with no key yet: the refusal says which variable and how to make
    its value (found trying the docs: it named a 'Fernet key' and nothing more)."""
    import httpx

    from gateway.errors import ApiSetupError
    from gateway.identity.connections import UserOAuthSettings

    async with httpx.AsyncClient() as http:
        connections = Connections(MemoryStore(), http, cipher=None)
        connections.configure({"tracker": UserOAuthSettings(
            api="tracker", authorization_url="http://127.0.0.1:9/auth", token_url="http://127.0.0.1:9/token",
            client_id="gw", redirect_uri="http://127.0.0.1:9/connections/callback")})
        with pytest.raises(ApiSetupError) as refused:
            await connections.begin("tracker", "alice", None)
    assert "GATEWAY_CONNECTIONS_KEY" in str(refused.value) and "Fernet.generate_key()" in str(refused.value)
