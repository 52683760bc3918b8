"""What a spec's tags say of their operations, for the search index.

An OpenAPI document's top-level `tags[]` may describe each tag, and the description often defines the API's word in
the user's words (Asana's Sections: "a header above a list of tasks in a list view or a column in a board view"),
words no operation of the tag writes itself. The compiler keeps them by tag name (`tag_descriptions`, markup out);
the index reads each (`read_description`: all of it, up to `_WHOLE` characters) once, in a table of its own
(`gateway.offer.tag_table`). Its first sentence or its first paragraph alone were measured and not kept
(bench/README.md, "Each tag's description once, in a table of its own"): bench/search_tags.py cuts them itself, before
the index reads.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from typing import Any

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


def read_description(description: str) -> str:
    """What the index reads of a tag's description: the whole, up to `_WHOLE` characters."""
    return description[:_WHOLE]
