"""Without Node.js, without `npm ci`, or with a Node too old for the packages, the identity tests skip and say
which: a fresh clone without them still runs the rest of the suite."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import oidc
import pytest


def _missing() -> str | None:
    return oidc._missing_provider.__wrapped__()


def test_no_node_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert _missing() == "Node.js is not installed: the identity tests run panva's oidc-provider under it"


def _fake_node(folder: Path, script: str) -> None:
    node = folder / "node"
    node.write_text(f"#!/bin/sh\n{script}\n")
    node.chmod(node.stat().st_mode | stat.S_IXUSR)


def test_packages_not_installed_are_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _fake_node(tmp_path, "exit 0")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(oidc, "PROVIDER_DIR", tmp_path / "provider")
    reason = _missing()
    assert reason is not None and "npm ci" in reason and "tests/identity/provider" in reason


def test_a_node_that_cannot_load_them_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _fake_node(tmp_path, "echo 'SyntaxError: Unexpected token' >&2; exit 1")
    (tmp_path / "provider" / "node_modules" / "oidc-provider").mkdir(parents=True)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(oidc, "PROVIDER_DIR", tmp_path / "provider")
    assert _missing() == ("Node.js cannot load oidc-provider from tests/identity/provider: "
                          "SyntaxError: Unexpected token")
