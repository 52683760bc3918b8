"""Values across the sandbox's edge: what a script hands a tool or returns, as JSON.

A script computes with Python values (tuples, sets, dates, decimals, its own dataclasses); a tool's arguments and
the script's result are JSON. `jsonable` maps one to the other without losing what JSON can say: sequences and
sets become lists, dates their ISO text, a decimal a number, a dataclass made in the script its fields, bytes
their UTF-8 text (or base64); what JSON cannot hold (NaN, infinity, a function) becomes text that says what it was.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import math
import reprlib
from collections.abc import Mapping
from typing import Any

MAX_DEPTH = 64
_SHORT = reprlib.Repr()
"""What a value JSON cannot hold is shown as: a bounded repr (a few levels, a few items, short texts), made without
rendering the whole value. A plain `repr` of a script's 100,000-deep list recursed past Python's limit (the
gateway's RecursionError, audited as a call that may have run), and one of a huge string rendered all of it."""
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother = 4, 160, 160


def jsonable(value: Any, depth: int = 0) -> Any:
    """`value` as JSON data (dicts with string keys, lists, strings, numbers, booleans, None)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if depth >= MAX_DEPTH:
        return _SHORT.repr(value)[:200]
    if isinstance(value, Mapping):
        return {_key(k): jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value, key=_SHORT.repr) if isinstance(value, set | frozenset) else value
        return [jsonable(v, depth + 1) for v in items]
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, bytes | bytearray):
        try:
            return bytes(value).decode()
        except UnicodeDecodeError:
            return base64.b64encode(bytes(value)).decode()
    attributes = getattr(value, "attributes", None)  # a dataclass instance made in the script (MontyClassProxy)
    if isinstance(attributes, Mapping):
        return {_key(k): jsonable(v, depth + 1) for k, v in attributes.items()}
    return _SHORT.repr(value)[:200]


def _key(key: Any) -> str:
    return key if isinstance(key, str) else str(jsonable(key))
