"""The `gateway:` section: typed with the rest of agents.yaml, every mistake at its key and line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.catalog import Diagnostic
from gateway.config.loader import parse_manifest
from gateway.config.mcp_limits import SessionLimits
from gateway.config.settings import GatewaySettings, GuardSettings, Limit, RateLimits, parse_limit, store_location


def _gateway(section: dict[str, Any]) -> tuple[GatewaySettings, dict[str, str]]:
    """The section's settings and its errors by key path."""
    manifest, diagnostics = parse_manifest(yaml.safe_dump({"gateway": section}), environ={})
    return manifest.gateway, _errors(diagnostics)


def _errors(diagnostics: list[Diagnostic]) -> dict[str, str]:
    return {d.pointer: d.message for d in diagnostics if d.level == "error"}


def test_the_defaults() -> None:
    settings = GatewaySettings()
    assert (settings.store, settings.redis, settings.audit_retention_days, settings.conversation_retention_days) == (
        None, None, 30, 30)
    assert settings.guard == GuardSettings() and not settings.rate_limits and settings.mcp == SessionLimits()
    assert settings.max_delegation_depth == 3 and settings.search_embeddings is None and settings.auth is None
    assert (settings.tool_budget, settings.allowed_hosts) == (None, [])


def test_a_wrong_type_and_an_unknown_key_are_both_named_with_their_lines() -> None:
    text = "gateway:\n  allowed_hosts: 5\n  unknown_key_xyz: 1\n"
    _, diagnostics = parse_manifest(text, environ={})
    assert sorted((d.level, d.line, d.pointer) for d in diagnostics) == [
        ("error", 2, "gateway.allowed_hosts"), ("error", 3, "gateway.unknown_key_xyz")]
    messages = _errors(diagnostics)
    assert messages["gateway.allowed_hosts"] == "expected a list, got a number (5)"
    assert messages["gateway.unknown_key_xyz"].startswith("unknown key 'unknown_key_xyz'")


@pytest.mark.parametrize(("section", "pointer", "suggestion"), [
    ({"alowed_hosts": ["x"]}, "gateway.alowed_hosts", "allowed_hosts"),
    ({"breaker": {"failure": 2}}, "gateway.breaker.failure", "failures"),
    ({"mcp": {"max_session": 2}}, "gateway.mcp.max_session", "max_sessions"),
    ({"search_embeddings": {"kind": "ollama", "model": "m", "batchsize": 3}}, "gateway.search_embeddings.batchsize",
     "batch_size"),
    ({"rate_limits": {"clientz": "1/s"}}, "gateway.rate_limits.clientz", "client"),
    ({"auth": {"issuer": "https://id.example.com", "audience": "gw", "jwks": "x"}}, "gateway.auth.jwks", "jwks_uri"),
])
def test_unknown_keys_anywhere_under_gateway_get_a_did_you_mean(section: dict[str, Any], pointer: str,
                                                                suggestion: str) -> None:
    _, errors = _gateway(section)
    assert list(errors) == [pointer] and f"did you mean {suggestion!r}" in errors[pointer]


def test_retention() -> None:
    assert _gateway({"audit_retention_days": 7})[0].audit_retention_days == 7
    assert _gateway({"audit_retention_days": 0})[0].audit_retention_days is None  # 0 keeps rows forever
    assert _gateway({"conversation_retention_days": None})[0].conversation_retention_days is None
    _, errors = _gateway({"audit_retention_days": "a week", "conversation_retention_days": -1})
    assert errors == {"gateway.audit_retention_days": "expected a number, got a string ('a week')",
                      "gateway.conversation_retention_days": "must be at least 0, got -1"}


def test_rate_limits_in_every_form() -> None:
    assert parse_limit("60/min") == Limit(rate=1.0, burst=60.0)
    assert parse_limit("10/s") == Limit(rate=10.0, burst=10.0)
    assert parse_limit({"rate": "1/s", "burst": 5}) == Limit(rate=1.0, burst=5.0)
    settings, errors = _gateway({"rate_limits": {"client": "2/min", "tools": {"createItem": "1/h"}}})
    assert errors == {} and settings.rate_limits.client == Limit(rate=2 / 60, burst=2)
    assert settings.rate_limits.tools["createItem"].burst == 1
    for bad in ("ten/min", "5/fortnight", "0/s", 5, {"burst": 3}, {"rate": "1/s", "burst": 0}, {"rat": "1/s"}):
        _, errors = _gateway({"rate_limits": {"agents": {"clerk": bad}}})
        assert errors and all(where.startswith("gateway.rate_limits.agents.clerk") for where in errors), bad
    errors = _gateway({"rate_limits": {"tool": {"rat": "1/s"}}})[1]
    assert "did you mean 'rate'" in errors["gateway.rate_limits.tool.rat"]
    assert not RateLimits()


def test_breaker_and_concurrency_are_the_guard() -> None:
    settings, errors = _gateway({"breaker": {"failures": 2}, "max_concurrency": 3})
    assert errors == {} and settings.guard == GuardSettings(failures=2, reset_after=30.0, max_concurrency=3)
    _, errors = _gateway({"breaker": {"failures": 0, "reset_after": "soon"}, "max_concurrency": True})
    assert errors == {"gateway.breaker.failures": "must be at least 1, got 0",
                      "gateway.breaker.reset_after": "expected a number, got a string ('soon')",
                      "gateway.max_concurrency": "expected an integer, got a boolean (True)"}


def test_store_and_redis(tmp_path: Path) -> None:
    assert store_location(None, tmp_path) == str(tmp_path / ".gateway/state.db")
    assert store_location("data/x.db", tmp_path) == str(tmp_path / "data/x.db")
    assert store_location("/abs/x.db", tmp_path) == "/abs/x.db"
    assert store_location("memory:", tmp_path) == "memory:"
    settings, errors = _gateway({"store": "postgresql://db/gw", "redis": "redis://127.0.0.1:6379/0"})
    assert errors == {} and settings.store_location(tmp_path) == "postgresql://db/gw"
    assert settings.redis == "redis://127.0.0.1:6379/0"
    assert _gateway({"redis": ""})[0].redis is None  # `${GATEWAY_REDIS:-}` unset
    _, errors = _gateway({"store": ["x"], "redis": "localhost:6379"})
    assert errors == {"gateway.store": "expected a string, got a list",
                      "gateway.redis": "expected a redis://, rediss:// or unix:// URL, got 'localhost:6379'"}


def test_budgets_of_what_a_model_is_offered() -> None:
    settings, errors = _gateway({"tool_budget": 1000, "tool_definitions_budget": 5000})
    assert errors == {} and (settings.tool_budget, settings.tool_definitions_budget) == (1000, 5000)
    _, errors = _gateway({"tool_budget": 10})
    assert errors == {"gateway.tool_budget": "must be at least 200, got 10"}


def test_allowed_hosts_and_origins() -> None:
    settings, errors = _gateway({"allowed_hosts": "gw.example.com", "allowed_origins": ["https://c.example.com"]})
    assert errors == {} and settings.allowed_hosts == ["gw.example.com"]
    _, errors = _gateway({"allowed_hosts": ["ok", 3.5, True]})
    assert errors == {"gateway.allowed_hosts[2]": "expected a string, got a boolean (True)"}


def test_mcp_session_limits() -> None:
    settings, errors = _gateway({"mcp": {"session_idle_timeout": 60, "max_sessions_per_client": 5}})
    assert errors == {} and (settings.mcp.session_idle_timeout, settings.mcp.max_sessions_per_client) == (60.0, 5)
    _, errors = _gateway({"mcp": {"max_sessions": 0, "max_sessions_per_client": 2.5, "session_idle_timeout": "soon"}})
    assert set(errors) == {"gateway.mcp.max_sessions", "gateway.mcp.max_sessions_per_client",
                           "gateway.mcp.session_idle_timeout"}
    assert _gateway({"mcp": [1]})[1] == {"gateway.mcp": "expected a mapping, got a list"}


def test_search_embeddings() -> None:
    settings, errors = _gateway({"search_embeddings": {"kind": "ollama", "model": " m "}})
    assert errors == {} and settings.search_embeddings is not None
    assert (settings.search_embeddings.base_url, settings.search_embeddings.model) == ("http://127.0.0.1:11434", "m")
    assert _gateway({"search_embeddings": {"kind": "openai"}})[1] == {
        "gateway.search_embeddings": "'model' is required"}
    assert _gateway({"search_embeddings": {"kind": "cohere", "model": "m"}})[1] == {
        "gateway.search_embeddings.kind": "'cohere' is not one of openai, ollama, local"}
    errors = _gateway({"search_embeddings": {"kind": "ollama", "model": "m", "dimensions": 256}})[1]
    assert "`dimensions` is OpenAI's" in errors["gateway.search_embeddings.dimensions"]
    settings, errors = _gateway({"search_embeddings": {"kind": "ollama", "model": "m", "weight": 0.25}})
    assert errors == {} and settings.search_embeddings is not None and settings.search_embeddings.weight == 0.25
    assert _gateway({"search_embeddings": {"kind": "ollama", "model": "m", "weight": 0}})[1] == {
        "gateway.search_embeddings.weight": "must be greater than 0, got 0"}


def test_a_local_model_takes_the_packaged_one_and_its_measured_weight() -> None:
    from gateway.config.embeddings_endpoint import SearchEmbeddings

    # The section alone: whether the model is installed here is `gateway validate`'s check (tests/test_search_*).
    local = SearchEmbeddings.model_validate({"kind": "local"})
    assert (local.model, local.tuned, local.weight) == ("all-MiniLM-L6-v2", True, 1.5)  # the fine-tuned model's
    released = SearchEmbeddings.model_validate({"kind": "local", "tuned": False})
    assert (released.adapter, released.weight) == (True, 1.5)  # as released (with its adapter): measured the same
    assert SearchEmbeddings.model_validate({"kind": "local", "tuned": False, "weight": 2}).weight == 2
    assert SearchEmbeddings.model_validate({"kind": "local", "weight": 0.5}).weight == 0.5
    assert SearchEmbeddings.model_validate({"kind": "local", "model": "/models/mine"}).weight == 1.0  # not measured
    for key, value in (("base_url", "http://127.0.0.1:9"), ("api_key", "k"), ("headers", {"x": "y"})):
        errors = _gateway({"search_embeddings": {"kind": "local", key: value}})[1]
        assert "a local model runs in the gateway's own process" in errors[f"gateway.search_embeddings.{key}"]


def test_the_query_adapter_is_the_packaged_models_only() -> None:
    from gateway.config.embeddings_endpoint import SearchEmbeddings

    # the packaged model is fine-tuned by default, and the adapter was learned on the released model's vectors
    tuned = SearchEmbeddings.model_validate({"kind": "local"})
    assert (tuned.tuned, tuned.adapter) == (True, False)  # as measured on round11 (bench/README.md)
    assert SearchEmbeddings.model_validate({"kind": "local", "tuned": False}).adapter is True
    assert SearchEmbeddings.model_validate({"kind": "local", "tuned": False, "adapter": False}).adapter is False
    assert SearchEmbeddings.model_validate({"kind": "local", "model": "/models/mine"}).adapter is False
    for section in ({"kind": "local", "model": "/models/mine", "adapter": True},
                    {"kind": "ollama", "model": "m", "adapter": True}):
        errors = _gateway({"search_embeddings": section})[1]
        assert "learned on all-MiniLM-L6-v2's vectors" in errors["gateway.search_embeddings.adapter"]


def test_the_oauth_resource_server_section_is_typed() -> None:
    settings, errors = _gateway({"auth": {"issuer": "https://id.example.com/", "audience": "https://gw.example.com",
                                          "introspection": {"url": "https://id.example.com/introspect",
                                                            "client_id": "gw", "client_secret": "s3cret"}}})
    assert errors == {} and settings.auth is not None and settings.auth.issuer == "https://id.example.com"
    _, errors = _gateway({"auth": {"issuer": "id.example.com"}})
    assert errors == {"gateway.auth": "'audience' is required",
                      "gateway.auth.issuer": "expected an http:// or https:// URL, got 'id.example.com'"}
