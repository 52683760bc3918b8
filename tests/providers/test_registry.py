"""The registry of provider kinds: one adapter class per kind of agents.yaml, carrying the kind's facts, and what
reads them (the missing-key check, the span's provider name)."""

from __future__ import annotations

from typing import get_args

import pytest

from gateway.config.model import AgentConfig, Manifest, ProviderConfig, ProviderKind
from gateway.dialects import FORMATS
from gateway.providers import ADAPTERS
from gateway.providers.keys import provider_problem


def test_every_kind_of_agents_yaml_has_one_adapter_with_its_facts() -> None:
    assert sorted(ADAPTERS) == sorted(get_args(ProviderKind))
    for kind, adapter in ADAPTERS.items():
        assert adapter.kind == kind
        assert adapter.default_base_url.startswith(("https://", "http://127.0.0.1"))
        assert adapter.request_path.startswith("/") and adapter.base_url_mistakes
        assert adapter.tool_format in FORMATS and adapter.telemetry_name
    assert {k for k, a in ADAPTERS.items() if a.native_tool_search} == {"anthropic", "openai-responses"}
    assert {k for k, a in ADAPTERS.items() if a.strict_mode} == {"openai", "openai-responses"}


@pytest.mark.parametrize("kind", sorted(ADAPTERS))
def test_a_missing_key_names_the_kinds_own_variable(kind: str) -> None:
    adapter = ADAPTERS[kind]
    provider = ProviderConfig(name="p", kind=kind, base_url=adapter.default_base_url)  # type: ignore[arg-type]
    agent = AgentConfig(name="a", model="p/m")
    problem = provider_problem(Manifest(providers={"p": provider}, agents={"a": agent}), agent)
    if adapter.key_variable is None:
        assert problem is None  # a local server needs no key
    else:
        assert problem is not None and adapter.key_variable in problem


def test_a_missing_key_suggests_only_what_works_for_that_provider() -> None:
    """An Anthropic provider cannot be pointed at an OpenAI-compatible server, and the Ollama to use is the one
    agents.yaml names (here `local`, not `ollama`)."""
    claude = ProviderConfig(name="claude", kind="anthropic", base_url=ADAPTERS["anthropic"].default_base_url)
    local = ProviderConfig(name="local", kind="ollama", base_url="http://127.0.0.1:11434")
    agent = AgentConfig(name="helper", model="claude/claude-sonnet-4-5")
    problem = provider_problem(Manifest(providers={"claude": claude, "local": local}, agents={"helper": agent}), agent)
    assert problem is not None and "ANTHROPIC_API_KEY" in problem
    assert "OpenAI-compatible" not in problem and "OPENAI_BASE_URL" not in problem
    assert "model: local/<model>" in problem and "ollama/<model>" not in problem


def test_a_missing_openai_key_also_suggests_a_local_server() -> None:
    openai = ProviderConfig(name="openai", kind="openai", base_url=ADAPTERS["openai"].default_base_url)
    agent = AgentConfig(name="weather", model="openai/gpt-4o-mini")
    problem = provider_problem(Manifest(providers={"openai": openai}, agents={"weather": agent}), agent)
    assert problem is not None and "OPENAI_API_KEY" in problem and "OPENAI_BASE_URL" in problem
    assert "a provider of kind: ollama" in problem


@pytest.mark.parametrize("base_url", ["http://127.0.0.1:8000/v1", "http://localhost:8000/v1", "http://[::1]:8000/v1",
                                      "http://0.0.0.0:8000/v1"])
def test_a_local_openai_compatible_server_needs_no_key(base_url: str) -> None:
    """vLLM prints `http://0.0.0.0:8000` as its URL: copied into OPENAI_BASE_URL, chat answered 503 'api_key is
    empty' though the README says a server on loopback needs none."""
    provider = ProviderConfig(name="openai", kind="openai", base_url=base_url)
    agent = AgentConfig(name="a", model="openai/m")
    assert provider_problem(Manifest(providers={"openai": provider}, agents={"a": agent}), agent) is None
