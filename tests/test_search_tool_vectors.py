"""The tool vectors' file (`gateway.offer.tool_vectors`): written, read back whole, and refused when it is not."""

from __future__ import annotations

import json
from pathlib import Path

from gateway.offer.tool_vectors import ToolVectors, read, write


def _vectors() -> ToolVectors:
    vectors = ToolVectors.of([[3.0, 4.0], [1.0, 0.0], [0.0, -2.0]])
    assert vectors is not None
    return vectors


def test_the_vectors_read_back_as_they_were_written(tmp_path: Path) -> None:
    path = tmp_path / "api.f32"
    write(path, _vectors())
    back = read(path, 3)
    assert back is not None and (back.count, back.dim) == (3, 2)
    assert back.flat.tolist() == _vectors().flat.tolist() == [0.6000000238418579, 0.800000011920929, 1.0, 0.0, 0.0,
                                                              -1.0]


def test_a_file_that_is_not_whole_or_not_this_apis_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "api.f32"
    write(path, _vectors())
    body = path.read_bytes()
    header, vectors = body.split(b"\n", 1)
    for name, content in {"one float short": header + b"\n" + vectors[:-4],
                          "one float more": body + vectors[:4],
                          "another count": json.dumps({**json.loads(header), "count": 2}).encode() + b"\n" + vectors,
                          "a header that is not an object": b"[1, 2]\n" + vectors,
                          "no header": vectors}.items():
        path.write_bytes(content)
        assert read(path, 3) is None, name
    assert read(tmp_path / "absent.f32", 3) is None
