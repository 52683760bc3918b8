"""A provider whose base_url is the gateway's own address (OPENAI_BASE_URL exported for a client, in the shell that
started `gateway serve`): the chat is refused before any model request, saying so, rather than the gateway calling
itself and showing its own "Unknown agent" as the provider's failure."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest
from recording_server import RecordingServer
from server_support import AGENTS_YAML, free_socket, running, write_project

from gateway.runtime import RuntimeHolder, load_runtime
from gateway.server import create_app


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_a_provider_that_is_the_gateway_itself_is_refused(tmp_path: Path, upstream: RecordingServer,
                                                          host: str) -> None:
    sock = free_socket()
    own = f"http://{host}:{sock.getsockname()[1]}"
    specs, agents = write_project(tmp_path, own, upstream.url, AGENTS_YAML)  # the providers' base_url: itself
    app = create_app(RuntimeHolder(load_runtime(specs, agents, use_cache=False)), watch=False)
    with running(app, sock=sock) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
        hello = [{"role": "user", "content": "hi"}]
        for call in (lambda: client.chat.completions.create(model="weather", messages=hello),  # type: ignore[arg-type]
                     lambda: client.responses.create(model="weather", input="hi")):
            with pytest.raises(openai.APIStatusError) as caught:
                call()
            assert caught.value.status_code == 503
            assert "is this gateway itself" in caught.value.message and "OPENAI_BASE_URL" in caught.value.message


def test_a_provider_on_another_port_of_the_same_host_is_not(tmp_path: Path, upstream: RecordingServer) -> None:
    other = free_socket()  # bound, never served: the model request fails as any unreachable provider's does
    specs, agents = write_project(tmp_path, f"http://127.0.0.1:{other.getsockname()[1]}", upstream.url, AGENTS_YAML)
    app = create_app(RuntimeHolder(load_runtime(specs, agents, use_cache=False)), watch=False)
    with running(app) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
        with pytest.raises(openai.APIStatusError) as caught:
            client.chat.completions.create(model="weather", messages=[{"role": "user", "content": "hi"}])
        assert caught.value.status_code == 502 and "is this gateway itself" not in caught.value.message
    other.close()
