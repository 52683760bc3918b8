"""How many real tools the exponential-validation check (`gateway.openapi._ambiguity`) changes, and what it costs.

    python bench/ambiguity.py [--spec PATH ...]

For each spec of the corpus (default: GitHub, Stripe, Kubernetes, Microsoft Graph, and every other corpus spec
with `--all`): compiled once without the cache, then every tool's input schema is walked by `excessive_defs`
again (the check the compiler runs, timed here alone). Printed: tools, tools with a `$defs` entry left unjudged,
the entries, the walk's time beside the whole compile's (which includes it), what the compile itself told (tools
with a `judged_schema`, its warnings, path templates left out), and the load average.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

CORPUS = Path(__file__).resolve().parent.parent.parent / "shared" / "corpus"
DEFAULT_SPECS = [CORPUS / "github" / "api.github.com.json", *(CORPUS / "apis-guru" / name for name in (
    "stripe.com.json", "kubernetes.io.json", "microsoft.com/graph.json"))]


def measure(spec: Path) -> None:
    from gateway.openapi import compile_specs
    from gateway.openapi._ambiguity import ExcessCheck

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "specs"
        folder.mkdir()
        (folder / spec.name).symlink_to(spec)
        started = time.perf_counter()
        catalog = compile_specs(folder, use_cache=False)
        compiled = time.perf_counter() - started
    started = time.perf_counter()
    changed: dict[str, list[str]] = {}
    recursive = 0
    check = ExcessCheck()
    for tool in catalog:
        names = check.excessive_defs(tool.input_schema)
        recursive += bool(tool.input_schema.get("$defs"))
        if names:
            changed[tool.name] = names
    walked = time.perf_counter() - started
    unjudged = sorted({name for names in changed.values() for name in names})
    told = [d for d in catalog.diagnostics if "exponentially often" in d.message]
    templates = [d for d in catalog.diagnostics if "no call could fill" in d.message]
    judged = sum(tool.judged_schema is not None for tool in catalog)
    print(f"{spec.name}: {len(catalog.tools)} tools ({recursive} with $defs), {len(changed)} with an entry left "
          f"unjudged {unjudged[:6]}{' ...' if len(unjudged) > 6 else ''}; walk {walked:.2f} s beside compile "
          f"{compiled:.2f} s ({walked / compiled:.1%}); at load: {judged} tools judged otherwise, "
          f"{len(told)} warnings, {len(templates)} templates left out; load {os.getloadavg()[0]:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", type=Path, action="append")
    parser.add_argument("--all", action="store_true", help="every spec of the corpus")
    options = parser.parse_args()
    specs = options.spec or (sorted(CORPUS.rglob("*.json")) if options.all else DEFAULT_SPECS)
    for spec in specs:
        measure(spec)


if __name__ == "__main__":
    main()
