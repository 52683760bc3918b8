"""`/readyz` asks the store for a write, not only an answer: a store whose disk is full is not ready (503), on SQLite
(a full 1 MiB tmpfs: tests/safety/test_record_first.py) and on PostgreSQL (here: the database's tablespace on a
small tmpfs, filled while the server runs)."""

from __future__ import annotations

import os
import pwd
import subprocess
import uuid
from pathlib import Path

import httpx
import psycopg
import pytest
from recording_server import RecordingServer
from server_support import LenientLLM, running
from shared_servers import PostgresServer

from .counted_writes import write_counter_project
from .safety_support import build_app
from .test_audit_fails_closed import fill


@pytest.mark.slow
def test_postgresql_with_a_full_disk_is_not_ready(tmp_path: Path, llm: LenientLLM, upstream: RecordingServer,
                                                  postgres_server: PostgresServer) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    name = f"full_{uuid.uuid4().hex[:10]}"
    disk = postgres_server.folder / name  # a folder the server's user can reach (the test's own tmp_path is not)
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        postgres = pwd.getpwnam("postgres")
        space = disk / "space"
        space.mkdir()
        os.chown(space, postgres.pw_uid, postgres.pw_gid)
        with psycopg.connect(postgres_server.url(), autocommit=True) as conn:
            conn.execute(f"CREATE TABLESPACE {name} LOCATION '{space}'".encode())
            conn.execute(f"CREATE DATABASE {name} TABLESPACE {name}".encode())
        url = postgres_server.url(name)
        write_counter_project(tmp_path, llm.url, upstream.url)
        app, _ = build_app(tmp_path, store=url)  # type: ignore[arg-type]
        with running(app) as gateway, httpx.Client(base_url=gateway, timeout=30) as client:
            assert client.get("/readyz").json() == {"status": "ready", "store": "ok"}
            filler = fill(disk)
            answers = [client.post("/agents/writer/tools/write", json={"n": n}).status_code for n in range(400)]
            ready = client.get("/readyz")
            filler.unlink()
            again = client.get("/readyz")
        assert 503 in answers  # the audit table could not grow
        assert ready.status_code == 503 and "No space left" in ready.json()["store"]
        assert again.status_code == 200
    finally:
        with psycopg.connect(postgres_server.url(), autocommit=True) as conn:
            for statement in (f"DROP DATABASE IF EXISTS {name} WITH (FORCE)", f"DROP TABLESPACE IF EXISTS {name}"):
                conn.execute(statement.encode())
        subprocess.run(["umount", "-l", str(disk)], check=False)


@pytest.mark.slow
def test_a_stopped_postgresql_is_named_as_refusing_not_as_silent(tmp_path: Path, llm: LenientLLM,
                                                                upstream: RecordingServer) -> None:
    # user46: a PostgreSQL that refuses connections (stopped) was reported "no answer within 2 s", which sends the
    # operator looking for a hang; the driver's own error says what it is, as Redis's does.
    database = PostgresServer().start()
    try:
        write_counter_project(tmp_path, llm.url, upstream.url)
        app, _ = build_app(tmp_path, store=database.url())  # type: ignore[arg-type]
        with running(app) as gateway, httpx.Client(base_url=gateway, timeout=30) as client:
            assert client.get("/readyz").json() == {"status": "ready", "store": "ok"}
            database.halt()  # fast shutdown, as `systemctl stop postgresql` does
            stopped = client.get("/readyz")
            database.restart()
            again = client.get("/readyz")
        assert stopped.status_code == 503, stopped.text
        said = stopped.json()["store"]
        assert "Connection refused" in said and "no answer within" not in said, said
        assert said.startswith(f"the store postgresql://gateway@127.0.0.1:{database.port}/"), said  # not a class name
        assert again.status_code == 200, again.text
    finally:
        database.halt()
