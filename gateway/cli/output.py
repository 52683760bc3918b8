"""What the `gateway` commands write: JSON on stdout and diagnostics on stderr, their terminal control characters
made inert (a spec's names, descriptions and `$ref`s are an API owner's or a vendor's text)."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..printable import printable

if TYPE_CHECKING:
    from ..catalog import Diagnostic


def write_json_array(items: Iterable[Any]) -> None:
    """A JSON array on stdout as `orjson.dumps(list(items), option=OPT_INDENT_2)` writes it, byte for byte, but one
    item at a time: a catalog's listing (Microsoft Graph's 11,422 tools, hundreds of megabytes of JSON) is never
    held whole, neither as the rendered list nor as its JSON text (three copies of it before)."""
    import orjson

    out = sys.stdout.buffer
    first = True
    for item in items:
        text = orjson.dumps(item, option=orjson.OPT_INDENT_2).decode().replace("\n", "\n  ")
        out.write(("[\n  " if first else ",\n  ").encode() + printable(text).encode())
        first = False
    out.write(b"[]\n" if first else b"\n]\n")


def say(diagnostic: Diagnostic) -> None:
    """A diagnostic on stderr, one line, its control characters escaped: it quotes a spec's text (a name, a `$ref`,
    a server URL), which an API owner or a vendor wrote (redteam46: an OSC 52 in a `$ref` set the operator's
    clipboard through `gateway tools` and `gateway validate`, a line break wrote a diagnostic of the spec's making)."""
    print(printable(f"{diagnostic.level}: {diagnostic}", lines=False), file=sys.stderr)


def write_json(data: bytes) -> None:
    """JSON on stdout with its terminal control characters as JSON escapes (orjson leaves C1 and bidi controls raw):
    still the same JSON, of a spec's names and descriptions."""
    text = data.decode()
    shown = printable(text)
    sys.stdout.buffer.write((data if shown is text else shown.encode()) + b"\n")
