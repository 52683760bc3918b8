"""Self-supervised pairs from the specs' own text, for fine-tuning the local model (bench/search_finetune.py
`prepare-pairs`, then `train --pairs specs`): what else than the labelled requests can teach the model each API's own
words for its resources and operations?

The older pairs (`search_adapter.corpus_pairs`: an operation's description past its summary, its first sentence, as
the request for its own tool, among that spec's tools) skip the six first-measured APIs (GitHub, Stripe, Graph, Slack,
Jira, Kubernetes), so the model never read those specs' descriptions, and take every operation a spec has, so a
large spec weighs as much as its size. The pairs here, fixed before any figure of them (bench/README.md, "The
specs' own text as pairs"):
- every corpus spec that compiles and has at least 5 operations, the six included (their specs are the product's
  input, not requests: no request text enters a pair), GitHub Enterprise 3.4 still out (GitHub's own operations
  again, which would double GitHub's share);
- from each operation's description past its summary: its first sentence, cut as before (`FIRST`), and up to two
  later sentences of at least six words, markup out (`LATER`), which often name the resource in the API's own words
  ("Retrieves folder lock details for a given folder", "You must be the owner or co-owner of the folder");
- from each of its arguments' descriptions (a parameter's, or a body property's; markup out), the first sentence of
  at least four words (`ARGUMENT`): Slack, Kubernetes, Twilio and NetBox write no description past the summary, and
  an argument's words often name the operation in the API's own terms ("ID of conversation to archive", "The ID of
  the field to return screens for");
- a text that several operations of a spec share is boilerplate ("Required scopes: ...", Graph's national clouds) or
  one operation's copies (Graph's `me/...` and `users/{id}/...`): kept as one pair with every such operation as a
  positive when at most `SHARED` operations share it, dropped above that (so an argument shared by every operation
  under a path, "The ID of the user", gives nothing);
- not taken: a tag's description (it names a group of operations, while the misses left are a neighbour of the
  right path ranked above it: a pair whose positives are the whole group teaches nothing between them);
- at most `CAP` pairs a spec: its `FIRST` pairs first, then its `LATER` ones, then its `ARGUMENT` ones, each kind in
  a seeded random order (and at most `ARGUMENTS_CAP` of `ARGUMENT`), so that Graph's 11,000 operations (and
  GitHub's, Stripe's) do not swamp the batches, and a spec's own sentences about an operation come before its
  arguments' words.
"""

from __future__ import annotations

import html
import random
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.search import SPECS  # noqa: E402  (run as a script)
from bench.search_adapter import corpus_specs  # noqa: E402

CAP = 150
"""Pairs a spec gives at most (the old pairs' largest specs gave 370, 297 and 252)."""
ARGUMENTS_CAP = CAP // 2
"""`ARGUMENT` pairs a spec gives at most: an argument's words name a part of an operation, the weaker teacher, so
they weigh at most half of a spec's share."""
SHARED = 4
"""A text at most this many operations of a spec share is one pair with all of them as positives; above, dropped."""
SEED = 30
SKIPPED = {"ghes-3.4.json"}
FIRST, LATER, ARGUMENT = "first", "later", "argument"
KINDS = (FIRST, LATER, ARGUMENT)
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\[`\"'])")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_MARKUP = re.compile(r"<[^>]+>|[*`_]{1,3}(?=\w)|(?<=\w)[*`_]{1,3}")


def plain(text: str) -> str:
    """Markdown links to their text, HTML tags and emphasis out, whitespace collapsed."""
    text = html.unescape(_MARKUP.sub("", _LINK.sub(r"\1", text or "")))
    return re.sub(r"[ \t]+", " ", text).strip()


def sentences_of(tool_description: str, summary: str) -> tuple[str, list[str]]:
    """An operation's description past its summary: the first sentence (as `search_adapter.corpus_pairs` cut it)
    and the later sentences of every paragraph, each at most 200 characters (longer ones dropped, not cut)."""
    from gateway.dialects.brevity import first_sentences

    described = tool_description.strip()
    if described.startswith(summary):
        described = described[len(summary):].strip()
    first = first_sentences(described, 200)
    later = []
    for paragraph in plain(described).split("\n\n"):
        for sentence in _SENTENCE.split(" ".join(paragraph.split())):
            sentence = sentence.strip()
            if sentence and len(sentence) <= 200 and len(sentence.split()) >= 6:
                later.append(sentence)
    first_plain = " ".join(plain(first).split())
    return first, [s for s in later if s not in first_plain]


def argument_texts(tool: Any) -> list[str]:
    """The first sentence (at most 200 characters, longer ones dropped) of each of `tool`'s arguments' descriptions
    that has at least four words."""
    texts = []
    for schema in (tool.input_schema.get("properties") or {}).values():
        described = plain(str(schema.get("description") or "")) if isinstance(schema, dict) else ""
        first = _SENTENCE.split(" ".join(described.split("\n\n", 1)[0].split()), maxsplit=1)[0].strip()
        if first and len(first) <= 200 and len(first.split()) >= 4:
            texts.append(first)
    return texts


def spec_pairs(cap: int = CAP, seed: int = SEED
               ) -> tuple[list[str], list[str], list[list[int]], list[tuple[int, int]], dict[str, dict[str, int]]]:
    """The tools' texts (as the gateway embeds them) of every spec giving pairs, the requests, each one's tools
    (indices into the texts), each spec's span of the texts, and per spec how many pairs of each kind it gave."""
    from gateway.offer.embeddings import embedding_text
    from gateway.offer.index_build import summary_of

    tools_all: list[str] = []
    queries: list[str] = []
    positives: list[list[int]] = []
    spans: list[tuple[int, int]] = []
    counts: dict[str, dict[str, int]] = {}
    corpus = SPECS["github"].parent.parent
    for spec, tools in corpus_specs(SKIPPED):
        start = len(tools_all)
        tools_all.extend(embedding_text(tool) for tool in tools)
        found: dict[str, dict[str, set[int]]] = {kind: {} for kind in KINDS}
        for i, tool in enumerate(tools):
            summary = summary_of(tool)
            first, later = sentences_of(tool.description, summary)
            if first and first != summary and len(first.split()) >= 4:
                found[FIRST].setdefault(first, set()).add(start + i)
            for sentence in later[:2]:
                if sentence != summary:
                    found[LATER].setdefault(sentence, set()).add(start + i)
            for text in argument_texts(tool):
                found[ARGUMENT].setdefault(text, set()).add(start + i)
        chooser = random.Random(f"{seed}-{spec.relative_to(corpus)}")
        taken: dict[str, int] = {}
        left = cap
        seen: set[str] = set()
        for kind in KINDS:
            texts = [text for text, owners in found[kind].items() if len(owners) <= SHARED and text not in seen]
            seen |= set(found[kind])
            chooser.shuffle(texts)
            texts = texts[:min(left, ARGUMENTS_CAP if kind == ARGUMENT else left)]
            for text in texts:
                queries.append(text)
                positives.append(sorted(found[kind][text]))
            taken[kind] = len(texts)
            left -= taken[kind]
        spans.append((start, len(tools_all)))
        counts[str(spec.relative_to(corpus))] = {"tools": len(tools), **taken}
    return tools_all, queries, positives, spans, counts


def main() -> int:
    tools, queries, positives, spans, counts = spec_pairs()
    for name, count in counts.items():
        print(f"{name}: {count}")
    kinds = ", ".join(f"{sum(count[kind] for count in counts.values())} {kind}" for kind in KINDS)
    print(f"{len(spans)} specs, {len(tools)} tools, {len(queries)} pairs ({kinds}; "
          f"{sum(len(wanted) > 1 for wanted in positives)} with more than one operation)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
