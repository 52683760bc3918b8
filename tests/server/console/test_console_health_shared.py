"""The console's Health page says, for an admin, whether the store and Redis answer (what /readyz says): with Redis
gone the pages still render, since sessions live in the store, and this is where an operator reads why every call
is refused. A real Redis from Debian's packages on a loopback port, stopped under a running gateway."""

from __future__ import annotations

from pathlib import Path

from console_support import ADMIN_KEY, CONSOLE_AGENTS_YAML, WEATHER_KEY
from recording_server import RecordingServer
from safety.safety_support import safe_gateway
from server_support import LenientLLM
from shared_servers import RedisServer
from test_console_access import signed_in


def test_the_health_page_names_a_redis_that_went_away(tmp_path: Path, llm: LenientLLM,
                                                      upstream: RecordingServer) -> None:
    redis = RedisServer().start()
    try:
        agents_yaml = CONSOLE_AGENTS_YAML + f"gateway:\n  redis: {redis.url}\n"
        with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=agents_yaml) as (url, _):
            admin, _ = signed_in(url, ADMIN_KEY)
            page = admin.get("/console/health").text
            assert '<dd id="shared-store" class="shared-ok">ok</dd>' in page, page
            assert '<dd id="shared-redis" class="shared-ok">ok</dd>' in page, page
            redis.stop()
            page = admin.get("/console/health")
            assert page.status_code == 200
            assert f'id="shared-redis" class="error">Redis at {redis.url} is unreachable' in page.text, page.text
            plain, _ = signed_in(url, WEATHER_KEY)  # the deployment's addresses are an admin's to read
            assert "shared-redis" not in plain.get("/console/health").text
    finally:
        redis.stop()
