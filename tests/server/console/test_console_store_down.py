"""The console when the store goes away: its own page saying what is down and what to do (the API's doors keep their
OpenAI-shaped JSON 503), and the same session working again once the store is back. A real PostgreSQL from
Debian's packages on a loopback port, stopped and started again under a running gateway."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
from console_support import ADMIN_KEY, CONSOLE_AGENTS_YAML
from recording_server import RecordingServer
from safety.safety_support import safe_gateway
from server_support import LenientLLM
from shared_servers import PostgresServer
from test_console_access import signed_in


def test_the_console_says_the_store_is_down_on_a_page_of_its_own(tmp_path: Path, llm: LenientLLM,
                                                                  upstream: RecordingServer) -> None:
    database = PostgresServer().start()
    try:
        with safe_gateway(tmp_path, llm.url, upstream.url, agents_yaml=CONSOLE_AGENTS_YAML,
                          store=database.url()) as (url, _):
            client, csrf = signed_in(url, ADMIN_KEY)
            assert client.get("/console/audit").status_code == 200
            database.halt()
            for path in ("/console/agents", "/console/audit?limit=5", "/console/approvals"):
                page = client.get(path)
                assert page.status_code == 503, (path, page.text)
                assert page.headers["content-type"].startswith("text/html"), (path, page.text)
                assert page.headers["retry-after"] and "frame-ancestors 'none'" in page.headers[
                    "content-security-policy"]
                assert "The gateway&#39;s store is unavailable" in page.text, page.text
                assert f"127.0.0.1:{database.port}" in page.text  # which server: the driver's own words
                assert "gateway.store" in page.text and "/readyz" in page.text  # what to do
                assert f'href="{path.replace("&", "&amp;")}" id="try-again"' in page.text
            # the API's doors and the console's own JSON requests keep the OpenAI-shaped error
            api = httpx.get(f"{url}/approvals", headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=60)
            assert api.status_code == 503 and api.json()["error"]["code"] == "store_unavailable", api.text
            run = client.post("/console/agents/weather/tools/getForecast/run", headers=csrf,
                              json={"arguments": {"latitude": 1, "longitude": 2}})
            assert run.status_code == 503 and run.json()["error"]["code"] in ("store_unavailable",
                                                                              "audit_unavailable"), run.text
            database.restart()
            deadline = time.monotonic() + 60  # the driver's pool reconnects with a backoff
            while (back := client.get("/console/audit")).status_code == 503 and time.monotonic() < deadline:
                time.sleep(0.5)
            # the same session: it was kept in the store
            assert back.status_code == 200 and 'id="viewer-name"' in back.text, back.text
    finally:
        database.stop()
