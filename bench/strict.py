"""How many tools OpenAI strict mode takes, and why the others are sent `strict: false`.

    python bench/strict.py [FOLDER ...] [--json]

Default folders: the example `specs/` and `../shared/corpus` (APIs.guru and GitHub). For each: tools,
tools sent strict, the share, the reasons of the others (as `gateway validate` counts them), the number
of strict tools that break one of OpenAI's documented rules (the tests' checker, `tests/strict_rules.py`:
it must be 0), and the time to render every tool strict once, from a fresh process (no memo yet).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FOLDERS = [ROOT / "specs", ROOT.parent / "shared" / "corpus"]


def measure(folder: Path) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT / "tests"))
    from strict_rules import strict_violations

    from gateway.dialects import strict_reason, strict_schema
    from gateway.openapi import compile_specs

    catalog = compile_specs(folder)
    tools = list(catalog)
    started = time.perf_counter()
    for tool in tools:
        strict_schema(tool.input_schema)
    seconds = time.perf_counter() - started
    reasons = Counter(r for t in tools if (r := strict_reason(t.input_schema)) is not None)
    broken = sum(1 for t in tools if (s := strict_schema(t.input_schema)) is not None and strict_violations(s))
    strict = len(tools) - sum(reasons.values())
    return {"folder": str(folder), "tools": len(tools), "strict": strict,
            "share": strict / len(tools) if tools else 1.0, "reasons": dict(reasons.most_common()),
            "strict_breaking_rules": broken, "render_seconds": seconds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", type=Path, default=DEFAULT_FOLDERS)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    results = [measure(folder) for folder in args.folders if folder.is_dir()]
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    for r in results:
        print(f"{r['folder']}: {r['strict']}/{r['tools']} tools strict ({r['share']:.2%}), "
              f"{r['strict_breaking_rules']} strict tools breaking a documented rule, "
              f"rendered in {r['render_seconds']:.2f} s")
        for reason, count in r["reasons"].items():
            print(f"  {count:>6}  {reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
