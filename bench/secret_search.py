"""What the search for the gateway's secrets costs a call: in its arguments (`Redactor.found_in`, every call, since
mend63) and in an answer's text (`Redactor.appears_in`, every answer), by how many forms the redactor knows.

    python -m bench.secret_search [--repeat 7] [--number 20000]

Each figure is the median of `--repeat` runs of `--number` searches (microseconds a search), for a redactor of the
bench's one token and for one of five secrets (tokens, client keys and a password with every character an encoder
escapes, as tests/safety/test_reply_secrets.py has it), each searched two ways: a substring test per form, in C
(`any(map(text.__contains__, forms))`), and one precompiled pattern (an `re` alternation of the same forms); the
ratio is the pattern's time over the per-form test's (below 1, the pattern is faster); and `found_in` itself, which
searches a call's arguments form by form up to `PATTERN_FROM` forms and with the pattern past that (an answer's
text is searched form by form: `appears_in`).
"""

from __future__ import annotations

import argparse
import re
import statistics
import timeit
from collections.abc import Callable
from typing import Any

import orjson

from bench.support import CALL_ARGS, TOKEN
from gateway.kernel.redaction import Redactor

FIVE = [TOKEN, "ck-weather-5f1e2d3c4b5a6978", "ck-triage-a1b2c3d4e5f60718", "test-key-0042",
        'pw/ä+"q"\\&<x>-0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFGHIJ']
ANSWER = [{"id": i, "title": f"Issue number {i} about something", "state": "open", "user": {"login": "ann", "id": 3},
           "labels": ["bug"]} for i in range(80)]
"""A list answer of about 9 KB as JSON (80 issues)."""


def _median(run: Callable[[], Any], repeat: int, number: int) -> float:
    return statistics.median(timeit.repeat(run, repeat=repeat, number=number)) / number * 1e6


def _rows(secrets: list[str], number: int) -> list[tuple[str, int, Callable[[], Any], Callable[[], Any], int]]:
    redactor = Redactor(secrets)
    forms = redactor._json_variants  # noqa: SLF001 - the bench measures the redactor's own forms
    pattern = re.compile("|".join(map(re.escape, forms)))
    arguments = orjson.dumps(CALL_ARGS).decode()
    answer = orjson.dumps(ANSWER).decode()
    return [
        ("found_in(a call's arguments)", len(forms), lambda: redactor.found_in(CALL_ARGS), lambda: None, number),
        ("the arguments' JSON (~110 B)", len(forms), lambda: any(map(arguments.__contains__, forms)),
         lambda: pattern.search(arguments) is not None, number),
        ("an answer's JSON (9 KB)", len(forms), lambda: any(map(answer.__contains__, forms)),
         lambda: pattern.search(answer) is not None, max(1, number // 50)),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--number", type=int, default=20000)
    args = parser.parse_args()
    print(f"{'redactor':<10} {'forms':>5} {'what':<30} {'per form':>9} {'pattern':>9} {'ratio':>6}")
    for name, secrets in (("1 token", [TOKEN]), ("5 secrets", FIVE)):
        for what, forms, per_form, pattern, number in _rows(secrets, args.number):
            mine = _median(per_form, args.repeat, number)
            if what.startswith("found_in"):  # the redactor's own choice: one figure
                print(f"{name:<10} {forms:>5} {what:<30} {mine:>8.2f}u")
                continue
            other = _median(pattern, args.repeat, number)
            print(f"{name:<10} {forms:>5} {what:<30} {mine:>8.2f}u {other:>8.2f}u {other / mine:>6.2f}")


if __name__ == "__main__":
    main()
