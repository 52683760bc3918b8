"""What in a request is an argument rather than words of an operation: ids, versions and amounts (a token with a
digit), names (#support, @frontend, a name after "called"), files (src/main.py), email addresses, the content after
a colon that follows a request ("log a bug: ..."; after a situation the request itself follows it, as it may follow
a comma: "the reader died, remove it"); and what an argument says it is (node-3 is a node, PROJ-7 an issue,
src/main.py a file). How the rest is read: `gateway.offer.query`."""

from __future__ import annotations

import re

from .vocabulary import INTENTS, PHRASAL_VERBS, VERB_SENSES

_CONTENT = re.compile(r"(^|\s)([^\s:]*[A-Za-z0-9]):\s(.*)$")
"""A colon after a word, and what follows it."""
_VERBS = frozenset({*(verb for verbs in INTENTS.values() for verb in verbs), *VERB_SENSES,
                    *(verb for verb, _ in PHRASAL_VERBS)})
_BEFORE_VERB = frozenset("please i we you let s just now then so ok okay".split())
_WORD = re.compile(r"[A-Za-z]+")


def asked(query: str) -> str:
    """`query` without the content after a colon when what comes before it asks ("log a bug: checkout crashes on
    Safari", "ping #design: mockups are up": the bug's text and the message are arguments). When what comes before
    it does not ask (it starts with no verb: "Lea lost her phone: wipe the company data", "the Wi-Fi profile: on how
    many devices did it fail"), the colon joins a situation or a thing to the request, and both are read: what
    follows first when it starts with a verb (the request's verb is its first word)."""
    found = _CONTENT.search(query)
    if found is None:
        return _request_first(query)
    before, after = query[:found.start()] + found.group(1) + found.group(2), found.group(3)
    if _asks(before):
        return before
    return f"{after} {before}" if _asks(after) else f"{before} {after}"


def _request_first(query: str) -> str:
    """`query` with the request after a comma read first when what precedes the comma is a situation (it starts with
    no verb: "the brewery's old card reader died, remove it from our account"): the request's verb is its first word."""
    before, comma, after = query.partition(",")
    if not comma or _asks(before) or not _asks(after):
        return query
    return f"{after.strip()} {before}"


def _asks(text: str) -> bool:
    """Whether `text` starts with a verb (an imperative), past "please", "I", "let's", ..."""
    for word in _WORD.findall(text.lower()):
        if word not in _BEFORE_VERB:
            return word in _VERBS
    return False


def arguments_named(query: str) -> str:
    """`query` (as `asked` reads its colon) with each argument replaced by what it names, or nothing: "drain
    node-7" -> "drain node", "show me src/config.yaml" -> "show me file", "a channel called incident" -> "a channel
    called"."""
    tokens = asked(query).split()
    return " ".join(_argument(tokens, position) if _ARGUMENT.search(token) or _HANDLE.match(token)
                    else "file" if _FILE_NAME.match(token) else "email" if _EMAIL.match(token) else token
                    for position, token in enumerate(tokens)
                    if not (position and tokens[position - 1].lower() in NAMING))


def keyed(query: str) -> bool:
    """Whether `query` names an item by a tracker's key (PROJ-7)."""
    return any(_TRACKER_KEY.match(token) for token in query.split())


def identifies(query: str) -> bool:
    """Whether `query` names an item by an id that says it is one (`_IDENTIFIER`)."""
    return bool(_IDENTIFIER.search(query))


_ARGUMENT = re.compile(r"[0-9]")
"""A query's token with a digit is an argument (an id, a version, an amount: 482, cus_123, v1.2.0, $5, 3pm),
not a word of the operation."""
_KINDED = re.compile(r"^([A-Za-z]{3,})[-_][A-Za-z0-9-_]*[0-9]")
"""An argument that says what it is before its number: node-3, pod-web-1 (a node, a pod)."""
_TRACKER_KEY = re.compile(r"^[A-Z][A-Z0-9]{1,9}-[0-9]+\b")
"""An issue tracker's key: PROJ-123, WEB-7 (Jira, YouTrack, Linear)."""


def _argument(tokens: list[str], position: int) -> str:
    """What the argument at `position` names (`_kind_of_argument`); a channel where something is said ("post the
    metrics to #leadership", "what did people decide in #support") names a message too."""
    token = tokens[position]
    if token.startswith("#") and position and tokens[position - 1].lower() in _WHERE_SAID:
        return "message " + _kind_of_argument(token)
    return _kind_of_argument(token)


_WHERE_SAID = frozenset("to in into".split())


def _kind_of_argument(token: str) -> str:
    """What an argument with a digit names, when it says: `node-3` is a node, `PROJ-7` an issue; else nothing."""
    if _TRACKER_KEY.match(token):
        return "issue"
    if token.startswith("#"):
        return "channel"
    if token.startswith("@"):
        return ""
    kinded = _KINDED.match(token)
    return kinded.group(1) if kinded else ""


_FILE_NAME = re.compile(r"^[\w./-]*\w\.(?:md|txt|py|js|ts|go|rs|java|rb|c|h|cpp|cs|json|ya?ml|toml|xml|csv|tsv|pdf|"
                        r"docx?|xlsx?|pptx?|png|jpe?g|gif|svg|zip|gz|tar|log|html?|css|sh|sql|ipynb)[,.;:?!]?$",
                        re.IGNORECASE)
"""A file's name (README.md, src/main.py, budget.docx): an argument that names a file."""
_EMAIL = re.compile(r"^\(?[\w.+-]+@[\w-]+(?:\.[\w-]+)+\)?[,.;:?!]?$")
"""An email address (jo@acme.com): an argument that names an email."""
_IDENTIFIER = re.compile(r"(?:^|\s)(?:[A-Za-z]{2,5}_\w*[0-9]|[A-Z][A-Z0-9]{1,9}-[0-9]+\b|[a-z]{3,}-[a-z0-9-]*[0-9])")
"""An id that says it is one: cus_42, PROJ-7, node-3 (a bare number may be an amount, a count, a time)."""
_HANDLE = re.compile(r"^[#@][A-Za-z]")
"""A channel (#support) or someone's handle (@frontend, @octocat): a name, an argument."""
NAMING = frozenset("called named titled".split())
"""The word after these is an argument (a name: "a channel called incident"), not a word of the operation."""
