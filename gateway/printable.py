"""Text a model or an upstream wrote, made safe to print on a terminal.

A terminal acts on what it is sent: an escape sequence sets the clipboard (OSC 52), moves the cursor or clears
what was shown, a carriage return writes over the line, a bidi override shows a line in another order. A model that
follows instructions injected in a tool result can write any of them into its answer, so `printable` shows each
such character as its JSON escape (`\\u001b`, `\\u202e`) and keeps the rest, line breaks and tabs included, so JSON
printed through it is still JSON, of the same value (redteam45).
"""

from __future__ import annotations

import re

_CODES = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_LINE_CODES = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str, *, lines: bool = True) -> str:
    """`text` with every terminal control character (C0 but newline and tab, DEL, C1, bidi controls) escaped;
    `lines=False`: newlines and tabs too (a log line, which a line break in it would make two)."""
    codes = _CODES if lines else _LINE_CODES
    if codes.search(text) is None:  # the usual text: printed as it is
        return text
    return codes.sub(lambda found: f"\\u{ord(found.group()):04x}", text)
