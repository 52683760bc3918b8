"""A script's result kept in its sandbox and handed to the gateway bounded, as an api's answer is read.

The value of a script's last expression is its result. Handed over as it stood, it crossed into the gateway whole: up
to the script's heap (100 MB of text or 2,000,000 numbers under the default 256 MB; 16 scripts at once), where an
api's answer is read only up to `hard_cap(max_result_bytes)` (4 MiB by default). So the last expression is kept in
the sandbox under a name of the gateway's (`keep_result`: the script's text rewritten where Python's own parser
finds that expression, nothing else of it changed), and after the script finishes its size is measured there
(`HAND_OVER`: the sandbox's own `json`, or a walk that stops at the cap): within the cap the value is handed over
and cut to `max_result_bytes` like any tool result (`gateway.truncation.shrink_json`); past it only its beginning,
about the cap's worth, is, and the model reads it as an api's answer past the cap reads: text cut at a boundary,
"N of M bytes left out" ("at least" where the walk stopped counting; `gateway.truncation.cut_text_at_boundary`).
When that line raises, the sandbox's traceback quotes it as rewritten: `as_written` takes the gateway's words out of
it again, so the model reads its own line as it wrote it, under the same marks.
"""

from __future__ import annotations

import ast
import re

NAME = "__gateway_result"
"""The script's result in its sandbox (a name no script has reason to use)."""

_LINE_ENDS = re.compile(r"\r\n|\r|\n")
"""Where Python's parser ends a line (its line numbers count these)."""
_KEEPS = f"{NAME} = "
"""What `keep_result` writes into the script's last line."""
_FRAME = re.compile(r'^  (?:File "[^"]*", )?line \d+, in \S+$')
"""A traceback frame's header (as the sandbox writes it, or with the file name taken out); its source line follows."""
_MARKS = re.compile(r"^ *[~^]+ *$")
"""The marks under a frame's source line: where in it the error is."""

SIZE = '''
def __gateway_size(value, cap):
    size = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, (str, bytes)):
            size += len(item) + 2
        elif isinstance(item, dict):
            size += 2 + 2 * len(item)
            for key in item:
                stack.append(key)
                stack.append(item[key])
        elif isinstance(item, (list, tuple, set, frozenset)):
            size += 2 + len(item)
            stack.extend(item)
        elif hasattr(item, '__dataclass_fields__'):
            size += 2
            for field in item.__dataclass_fields__:
                stack.append(getattr(item, field))
        else:
            size += 8
        if size > cap:
            return size
    return size
'''
"""About the bytes of the result as JSON, counted in the sandbox up to just past `cap` (never all of a larger one)."""

HEAD = SIZE + '''
def __gateway_head(value, budget):
    if isinstance(value, (str, bytes)):
        return value[:budget]
    if isinstance(value, dict):
        out = {}
        for key in value:
            if budget <= 0:
                break
            out[key] = __gateway_head(value[key], budget)
            budget -= __gateway_size(out[key], budget) + __gateway_size(key, budget) + 2
        return out
    if isinstance(value, (list, tuple, set, frozenset)):
        out = []
        for item in value:
            if budget <= 0:
                break
            out.append(__gateway_head(item, budget))
            budget -= __gateway_size(out[-1], budget) + 1
        return out
    return value
'''
"""The result's beginning, about `budget` bytes of it as JSON: the leading items of lists, fields of objects, the
start of a text."""

HAND_OVER = HEAD + '''
import json

def __gateway_hand_over(value, cap):
    if isinstance(value, (str, bytes)):
        return (len(value), True, value[:cap])
    try:
        text = json.dumps(value)
    except Exception:
        text = None
    if text is not None:
        return (len(text), True, value if len(text) <= cap else text[:cap])
    size = __gateway_size(value, cap)
    return (size, size <= cap, value if size <= cap else __gateway_head(value, cap))
'''
"""Run in the sandbox once the script has finished: (its result's size as JSON, whether that size is exact, the
value whole when within the cap, else its beginning: the JSON text's when the sandbox's `json` can write the value
(natively, fast), else the leading items and fields, walked). One exchange with the sandbox a script."""


def keep_result(code: str) -> tuple[str, bool]:
    """`code` with its last expression kept under `NAME` (`x = 1; x + 1` -> `x = 1; NAME = x + 1`), and whether it
    has one. Code Python's parser refuses is left as it is (the sandbox says what is wrong with it)."""
    try:
        body = ast.parse(code).body
    except (SyntaxError, ValueError):
        return code, False
    if not body or not isinstance(body[-1], ast.Expr):
        return code, False
    last = body[-1]
    starts = [0, *(end.end() for end in _LINE_ENDS.finditer(code))]
    start = starts[last.lineno - 1]
    line = code[start:start + last.col_offset]  # the parser counts UTF-8 bytes: at least as many as characters
    column = len(line.encode()[:last.col_offset].decode(errors="ignore"))
    at = start + column
    return f"{code[:at]}{NAME} = {code[at:]}", True


def as_written(traceback: str) -> str:
    """`traceback` (a sandbox's, of a script `keep_result` rewrote) with the script's last line quoted as it was
    written: in each frame's source line the words `keep_result` added are cut out, and the same columns of the
    marks under it (so they stay under the same characters; marks that were only under those words go)."""
    lines: list[str | None] = list(traceback.split("\n"))
    for at in range(1, len(lines)):
        header, line = lines[at - 1], lines[at]
        if header is None or line is None or not _FRAME.match(header) or _KEEPS not in line:
            continue
        cut = line.index(_KEEPS)
        lines[at] = _cut(line, cut)
        marks = lines[at + 1] if at + 1 < len(lines) else None
        if marks is not None and _MARKS.match(marks):
            left = _cut(marks, cut)
            lines[at + 1] = left if left.strip() else None
    return "\n".join(line for line in lines if line is not None)


def _cut(line: str, at: int) -> str:
    return line[:at] + line[at + len(_KEEPS):]
