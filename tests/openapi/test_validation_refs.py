"""`gateway validate`'s full validation never follows a `$ref` the compiler refuses, in whatever file of a split
spec it is written (redteam46: a URL `$ref` in a second file was fetched by openapi-spec-validator, and a
`../../etc/hostname` there read and its text quoted in a finding; the check looked at the main file only)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from recording_server import RecordingServer, Reply

from gateway.openapi import compile_specs
from gateway.openapi.spec_validation import spec_reports

SECRET = "text-outside-the-specs-folder"


@pytest.mark.parametrize("kind", ["url", "outside", "id"])
def test_a_refused_ref_in_a_second_file_stops_full_validation(tmp_path: Path, kind: str) -> None:
    (tmp_path / "outside.json").write_text(json.dumps(SECRET))  # a string where a schema belongs: quoted if read
    with RecordingServer() as remote:
        remote.route("/", Reply(200, json.dumps(SECRET)))
        second = {"S": {"type": "object", "properties": {"x": {
            "url": {"$ref": f"{remote.url}/remote.json"},
            "outside": {"$ref": "../../outside.json"},
            "id": {"$id": f"{remote.url}/base/", "properties": {"y": {"$ref": "remote.json"}}},
        }[kind]}}}
        specs = tmp_path / "specs"
        os.makedirs(specs / "parts")
        (specs / "parts" / "second.json").write_text(json.dumps(second))
        ok = {"200": {"description": "ok", "content": {"application/json": {"schema": {
            "$ref": "parts/second.json#/S"}}}}}
        (specs / "main.json").write_text(json.dumps({
            "openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "servers": [{"url": "http://127.0.0.1:9"}],
            "paths": {"/a": {"get": {"operationId": "a", "responses": ok}}}}))
        reports = spec_reports(specs, compile_specs(specs, use_cache=False))
        assert remote.requests == []
    said = " ".join(d.message for report in reports for d in report.diagnostics)
    assert SECRET not in said and "full validation skipped" in said, said
