"""The Dockerfile's `docker run` example starts the gateway with the repository's example (Docker itself is not
needed: the image's ENTRYPOINT and the example's arguments go through `gateway serve`'s own checks, the ones that
run before it binds, with the mounted files read from the repository)."""

from __future__ import annotations

import asyncio
import json
import shlex
from pathlib import Path

import pytest
import yaml
from server_support import ROOT

from gateway.cli.commands import build_parser
from gateway.server.run import GRACEFUL_SHUTDOWN_SECONDS, _build_app


def _docker_run() -> list[str]:
    """The example `docker run` command of the Dockerfile's header comment (continuation lines joined)."""
    lines = (ROOT / "Dockerfile").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip("# ").startswith("docker run"))
    command = ""
    for line in lines[start:]:
        text = line.lstrip("#").strip()
        command += " " + text.removesuffix("\\")
        if not text.endswith("\\"):
            break
    return shlex.split(command)


def _image_arguments(argv: list[str]) -> tuple[dict[str, list[str]], list[str]]:
    """(`docker run`'s options by flag, the arguments after the image name, which follow the ENTRYPOINT)."""
    options: dict[str, list[str]] = {}
    rest = argv[2:]
    while rest[0].startswith("-"):
        flag, value, rest = rest[0], rest[1], rest[2:]
        options.setdefault(flag, []).append(value)
    return options, rest[1:]


def test_the_dockerfiles_docker_run_example_serves_the_example(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    options, after_image = _image_arguments(_docker_run())
    assert all(port.startswith("127.0.0.1:") for port in options["-p"])  # published on the host's loopback only
    mounts = {target: source.replace("$PWD", str(ROOT)) for source, target, _ in
              (volume.split(":") for volume in options["-v"])}
    entrypoint = json.loads(next(line for line in (ROOT / "Dockerfile").read_text().splitlines()
                                 if line.startswith("ENTRYPOINT")).removeprefix("ENTRYPOINT"))
    monkeypatch.setenv("GATEWAY_SPECS", mounts["/srv/specs"])  # the image's ENV, at the mounted files
    monkeypatch.setenv("GATEWAY_AGENTS", mounts["/srv/agents.yaml"])
    monkeypatch.chdir(tmp_path)  # WORKDIR: the store goes here
    assert entrypoint[0] == "gateway"
    args = build_parser().parse_args([*entrypoint[1:], *after_image])
    assert args.host == "0.0.0.0"

    built = _build_app(args.specs, args.agents, host=args.host, use_cache=False, allow_public=args.allow_public,
                       access_log=False)

    assert built is not None, "gateway serve would exit 1 (see its stderr above)"
    app, runtime = built
    assert set(runtime.manifest.agents) == {"weather", "triage"}
    asyncio.run(app.state.gateway_safety.aclose())


def test_compose_gives_an_instance_time_to_finish_its_requests_before_it_is_killed() -> None:
    # Docker sends SIGKILL 10 s after SIGTERM unless the service says otherwise: runs in flight would be killed
    # mid-way (no answer, their tool rows left `running`) before the gateway's own graceful timeout ended.
    compose = yaml.safe_load((ROOT / "docker-compose.yaml").read_text())
    for name in ("gateway-a", "gateway-b"):
        service = compose["services"][name]
        args = build_parser().parse_args(["serve", *service["command"]])
        graceful = GRACEFUL_SHUTDOWN_SECONDS if args.graceful_timeout is None else args.graceful_timeout
        grace = service.get("stop_grace_period", "10s")
        assert grace.endswith("s") and float(grace.removesuffix("s")) > graceful, (name, grace, graceful)
