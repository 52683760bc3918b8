"""What a spec's tags say of their operations, for the search index.

An OpenAPI document's top-level `tags[]` may describe each tag, and the description often defines the API's word in
the user's words (Asana's Sections: "a header above a list of tasks in a list view or a column in a board view"),
words no operation of the tag writes itself. The index reads each tool's tags' descriptions as a column of its own
(`tagged` in `gateway.offer.index_build`, at 2). How much of a description is read (`AMOUNT`): its first sentence, its
first paragraph, or all of it up to `_WHOLE` characters; the whole, and the column's weight, were chosen on the
development requests leaving one API out, fused with the model (bench/README.md, "What a spec's tags say", branch
tags39). BM25 alone pays for it: a description is the same text on every tool of its tag, so the rows grow longer
and their other matches weigh less (-23 of 6,949 alone, +16 fused).
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from .views import first_sentences

Amount = Literal["sentence", "paragraph", "whole"]
AMOUNT: Amount = "whole"
"""How much of a tag's description the index reads."""
_PARAGRAPH = 600
"""The characters of the first paragraph read (Asana's Sections says "column" at its 140th)."""
_SENTENCE = 300
_WHOLE = 2000
"""The characters of a whole description read: Asana's custom fields' runs to 10,634, a guide to their use."""
_HTML = re.compile(r"<[^>]+>")
_LINKS = re.compile(r"(?<=\])\([^)]*\)|https?://\S+")
"""A Markdown link's target (its text is kept) and bare links: their words (docs, asana, com) say nothing of the tag.
The other marks go with the index's reading of words (letters and digits)."""


def tag_descriptions(document: Mapping[str, Any]) -> dict[str, str]:
    """The descriptions of a spec's tags by name (`tags[].description`, OpenAPI 3.x and Swagger 2.0 alike), markup
    out; a tag without one, or written otherwise than the specification says, is left out."""
    found: dict[str, str] = {}
    tags = document.get("tags")
    for tag in tags if isinstance(tags, list) else ():
        if not isinstance(tag, dict):
            continue
        name, description = tag.get("name"), tag.get("description")
        if isinstance(name, str) and isinstance(description, str) and description.strip():
            found[name] = _plain(description)
    return found


def _plain(text: str) -> str:
    return _LINKS.sub("", html.unescape(_HTML.sub(" ", text))).strip()


def tag_text(tags: Iterable[str], descriptions: Mapping[str, str]) -> str:
    """What the index reads of the descriptions of a tool's `tags` (`AMOUNT` of each)."""
    return " ".join(_read(descriptions[tag]) for tag in tags if tag in descriptions)


def _read(description: str) -> str:
    if AMOUNT == "sentence":
        return first_sentences(description, _SENTENCE)
    if AMOUNT == "paragraph":
        return description.split("\n\n", 1)[0][:_PARAGRAPH]
    return description[:_WHOLE]
