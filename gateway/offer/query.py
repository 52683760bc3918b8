"""How a request to tool search is read: its words, their synonyms, its verb and the method that verb asks for, and the
full-text match (FTS5) of what it names. No model: word lists, written for APIs in general
(`gateway.offer.vocabulary`).

A query's words are matched with OR, each widened by synonyms (close -> state, email -> mail message, file -> drive
item, bugs -> issue; a verb's regular ending off: saved -> save -> star; a verb undoing another, its thing: unpin ->
pin), a compound as one word (OneNote, to-do) and two neighbours as one word ("pay out" -> payout). Generic verbs
(create, list, update, ...), question words and pronouns pick the method or count in the ranking signals instead of
matching: each would match thousands of operations (past the verb, a few are things: "a new SharePoint list"). Tokens
with a digit (ids, versions, amounts) are arguments, not words of the operation, but for what one says it is (node-3 is
a node, PROJ-7 an issue, #support a channel, src/main.py a file; @frontend is a handle). A request is an imperative: its
first word is its verb, which picks the method (close -> PATCH, refund -> POST; with its particle: take ... off ->
DELETE) and takes its senses as a verb (to email is to send mail); "issue" or "charge" later in it are things. Pronouns
do not match: they say whose thing it is (`Request.owner`). The head of the noun phrase after the verb is the thing it
acts on (`Request.things`: "sites" in "list the SharePoint sites in this group"), which the ranking compares with what
each path addresses; a name after "called" or "named" is an argument."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .actions import action_of
from .arguments import arguments_named, asked, identifies, keyed
from .questions import PERMISSION, asks_over_period, asks_permission
from .vocabulary import INTENTS, PHRASAL_VERBS, SYNONYMS, VERB_SENSES


def synonyms(word: str) -> tuple[str, ...]:
    """`SYNONYMS` of a word, of its singular (bugs -> issue) or of its root as a verb (watching -> watch, saved ->
    save); a verb undoing another (unpin, unarchive) also means that other's thing (pins)."""
    root = _root(word)
    found = (SYNONYMS.get(word) or SYNONYMS.get(singular(word)) or SYNONYMS.get(root)
             or (SYNONYMS.get(root + "e", ()) if root != word else ()))
    undone = ((word[2:], *(a for a in SYNONYMS.get(word[2:], ()) if a not in _GENERIC_VERBS))
              if word.startswith("un") and len(word) >= 5 and word[2:] not in STOP else ())
    return (*found, *undone) if undone else found


STOP = frozenset("a an the of to for in on at by with from and or is are be am our this that it its as we "
                 "you your please can could would should want need all some any into up out do does did have has had "
                 "called named titled".split())
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SPLIT = re.compile(r"[^A-Za-z0-9]+")


def words(text: str) -> str:
    """`text` as plain lower-case words: camelCase, `_`, `/`, `.`, `-` and braces all split."""
    return " ".join(part.lower() for chunk in _SPLIT.split(text or "") for part in _CAMEL.split(chunk) if part)


_GENERIC_VERBS = frozenset("create add new make get list show fetch read view retrieve find see update edit change "
                           "modify set delete remove destroy post put what who which when where how".split())
"""Verbs (and question words) that name a method rather than a thing: they pick the method (`intended_methods`)
and count for the name's coverage, but are left out of the full-text match, where each would match thousands of
operations."""


def query_words(query: str) -> list[tuple[str, tuple[str, ...]]]:
    """A query's words, each with its parts when it is a compound: "OneNote" -> `("onenote", ("one", "note"))`,
    "to-do" -> `("todo", ("to", "do"))`, "issue" -> `("issue", ())`. A compound is one word to match (a product,
    "todo"), not its parts, each of which (and their synonyms) would match something else."""
    found: list[tuple[str, tuple[str, ...]]] = []
    kept = arguments_named(query)
    for chunk in _QUERY_SPLIT.split(_CONTRACTION.sub("", kept)):
        if _ACRONYMS.fullmatch(chunk):  # CRDs, PVCs: one word, not CR and Ds
            found.append((chunk.lower(), ()))
            continue
        pieces = [part.lower() for piece in chunk.split("-") for part in _CAMEL.split(piece) if part]
        if len(pieces) > 1 and all(piece.isalpha() for piece in pieces):
            found.append(("".join(pieces), tuple(pieces)))
        else:
            found.extend((piece, ()) for piece in pieces)
    for position, (word, _) in enumerate(found):
        if word not in STOP:  # the verb
            particles = {w for w, _ in found[position + 1:]}
            meant = next((m for (verb, particle), m in PHRASAL_VERBS.items() if verb == word and particle in particles),
                         None)
            if meant is not None:  # past its object, the particle says where from: "take carol off the team"
                rest = found[position + 1:]
                found = [*found[:position], (meant, ()),
                         *(("from", ()) if _says_where_from(rest, at) else pair
                           for at, pair in enumerate(rest) if pair[0] not in _PARTICLES or _says_where_from(rest, at))]
            break
    return found


def _says_where_from(rest: list[tuple[str, tuple[str, ...]]], at: int) -> bool:
    """Whether the particle at `at`, past the verb's object and before a noun phrase, says where the object is taken
    from ("take carol off the team"; not "kick bob out of the channel", "turn notifications off")."""
    return (rest[at][0] in _PARTICLES and at > 0 and rest[at - 1][0] not in STOP | _PRONOUNS | _PARTICLES
            and at + 1 < len(rest) and rest[at + 1][0] != "of")


_QUERY_SPLIT = re.compile(r"[^A-Za-z0-9-]+")
_ACRONYMS = re.compile(r"[A-Z]{2,}s")
_CONTRACTION = re.compile(r"['’](?:s|t|re|ve|ll|d|m)\b", re.IGNORECASE)
"""The customer's, don't, what's: the word without its ending."""
_PARTICLES = frozenset("out up in off on back".split())
"""Words that make one word with the verb before them: pay out (payout), set up (setup), log in, check out."""


def match_expression(query: str) -> str:
    """The FTS5 query for a user's words: each word or one of its alternatives (`match_terms`), any of them."""
    return expression_of(match_terms(query))


def expression_of(terms: Iterable[tuple[str, ...]]) -> str:
    """The FTS5 match of words with their alternatives (`Request.expression`): each alternative quoted (a phrase
    when it has several words), the words' groups ORed."""
    return " OR ".join("(" + " OR ".join(f'"{alternative}"' for alternative in alternatives) + ")"
                       for alternatives in terms)


def match_terms(query: str) -> list[tuple[str, ...]]:
    """Each word of the query to match with its alternatives: its synonyms; generic verbs are left out unless
    nothing else is left. A compound matches as one word, as the phrase of its parts, or as its last part (the
    head: OneDrive -> drive); two neighbours also as one word ("pay out" -> payout). The verb (the first word)
    takes its senses as a verb: to email is to send mail."""
    return _match_terms(query_words(query))


def _match_terms(given: list[tuple[str, tuple[str, ...]]]) -> list[tuple[str, ...]]:
    verb = _verb(given)
    nouns = _nouns(given, verb)
    content = [w for p, (w, _) in enumerate(given) if w not in STOP and (w not in _GENERIC_VERBS or p in nouns)]
    skip = STOP | _GENERIC_VERBS if content else STOP
    terms: list[tuple[str, ...]] = []
    for position, (word, parts) in enumerate(given):
        if (word in skip and position not in nouns) or word in _PRONOUNS:  # whose it is is read apart
            continue  # (`Request.owner`); their words still count
        following, following_parts = given[position + 1] if position + 1 < len(given) else ("", ())
        joined = (word + following,) if (not parts and not following_parts and following.isalpha()
                                         and (following not in STOP or following in _PARTICLES)) else ()
        spelled = (" ".join(parts), *(parts[-1:] if parts[-1] not in STOP else ())) if parts else ()
        senses = VERB_SENSES.get(word, ()) if position == verb else ()
        own = (word,) if word not in _PRONOUNS else ()
        others = (a for a in (*senses, *synonyms(word), *spelled, *joined) if a not in skip | _PRONOUNS)
        if alternatives := tuple(dict.fromkeys((*own, *others))):
            terms.append(alternatives)
        if joined and following in _PARTICLES:  # "pay out" is a payout more than it is paying
            terms.append(joined)
    return terms


_NOUN_TOO = frozenset("list post update view set".split())
"""Generic verbs that are also things: "create a new SharePoint list", "delete my last post"."""


def _nouns(given: list[tuple[str, tuple[str, ...]]], verb: int | None) -> frozenset[int]:
    """Where a generic verb is a thing: past the request's verb, after a word that is not "to" ("I want to list"),
    and not a quantity ("the list of members")."""
    if verb is None:
        return frozenset()
    return frozenset(position for position in range(verb + 1, len(given)) if given[position][0] in _NOUN_TOO
                     and given[position - 1][0] not in ("to", "and", "or")
                     and (position + 1 == len(given) or given[position + 1][0] != "of"))


def _verb(given: list[tuple[str, tuple[str, ...]]]) -> int | None:
    """The position of a request's verb: its first word after "please", "I want to", ...; none when it starts with a
    determiner ("the sprint board needs a 'Ready for QA' column": a noun phrase, whose first noun is no verb)."""
    if given and (given[0][0] in _DETERMINERS or given[0][0] in _ALL):
        return None
    for position, (word, _) in enumerate(given):
        if word not in STOP and word not in _PRONOUNS:
            return position
    return None


def intended_methods(query: str) -> list[str]:
    """The HTTP methods the query's verb suggests (a request is an imperative: "issue", "comment" or "charge"
    later in it are things, not the verb), or its question word."""
    return [method for method in INTENTS if method in read(query).methods]


_PRONOUNS = frozenset("i me my mine".split())


def stems(text: str) -> set[str]:
    """Crude stems of the words of `text` (quotes and OR out; plurals singular), to compare names with a query."""
    return {singular(word) for word in re.findall(r"[a-z0-9]+", text.lower()) if word not in ("or", "and")}


def singular(word: str) -> str:
    """A plural's singular, roughly: repositories -> repository, statuses -> status, branches -> branch, pods -> pod."""
    if len(word) <= 3 or not word.endswith("s") or word.endswith(("ss", "us", "is")):
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("ses", "xes", "zes", "ches", "shes")):
        return word[:-2]
    return word[:-1]


@dataclass(slots=True, frozen=True)
class Request:
    """A query, read once for every api it is searched in."""

    terms: list[tuple[str, ...]]
    """Each word to match with its alternatives (`match_terms`)."""
    expression: str
    """The FTS5 match of `terms`."""
    methods: frozenset[str]
    """The HTTP methods its verb asks for."""
    stems: frozenset[str]
    """The stems of its words and their synonyms, generic verbs and pronouns included, to compare with a name."""
    plural: bool
    """Whether the thing it names last is plural (all of them: "show my to-do lists", "list the branches")."""
    things: frozenset[str]
    """The stems of the thing it acts on (the head of the noun phrase after its verb: "sites" in "list the SharePoint
    sites in this group") and their synonyms, to compare with the resource an operation addresses."""
    phrase: frozenset[str]
    """The stems of every word of that noun phrase ("meeting", "invite" in "accept the meeting invite"), to check that
    an action (`/me/events/{id}/accept`) acts on what the request names."""
    acts: tuple[str, ...]
    """Its verb when the verb is not generic ("accept", "attach"; for "who": what the people do, "who reviewed"),
    with a regular ending off, to compare with the beginning of a resource (accept, attachments, reviews)."""
    agents: tuple[str, ...]
    """What does the verb's act, when it is not generic ("autoscaler" for "autoscale", "scheduler"): a resource that
    is its doer is what the request asks for."""
    owner: str | None
    """Whose thing it is: "self" (my, me, I), "other" (the user's), or None: an api that answers both under two paths
    (`/me/...`, `/users/{id}/...`) is asked for the one meant. A possessive of a word the api does not know ("alice's")
    makes it "other" too (`owner_in`)."""
    possessors: tuple[str, ...]
    """The words before an 's ("alice" in "alice's manager", "subscription" in "the subscription's price") and the
    subject of a question ("bob" in "which teams is bob part of")."""
    target: frozenset[str]
    """The stems of the head of the noun phrase after a preposition that follows the thing named, with its synonyms
    ("pod" in "add a label to the pod", "meeting" in "invite carol to the meeting"): when the api has no resource for
    the thing named, the request changes a property of the target (`target_addressed`)."""
    target_addressed: str
    """The FTS5 match of a resource that is the target, or ""."""
    addressed: str
    """The FTS5 match of a resource that is the thing named or the verb's (`resource : ("chat" OR "message")`,
    `resource : (accep*)`), or "": the operations that address what the request names are candidates even when
    the words of others outscore them (`/me/chats` for "list my chats", under hundreds of chat messages)."""

    act_nouns: tuple[str, ...] = ()
    """What its verb's act is called as a thing (bind -> binding, evict -> eviction, assign -> assignment): a resource
    so named is the verb's action (`clusterrolebindings` for "bind the cluster role")."""
    named: frozenset[str] = frozenset()
    """The stems of the thing it acts on as said, without synonyms: a resource named as said outranks one named by a
    synonym ("create a new calendar": `/me/calendars` before `/me/events`)."""
    capitals: frozenset[str] = frozenset()
    """Its words written in capitals, lower case (CRDs, PVC): initials, maybe (`gateway.offer.index`)."""
    keyed: bool = False
    """Whether it names an item by a tracker's key (PROJ-7): what it says of a thing of that item is of the item."""
    over_period: bool = False
    """Whether it asks how much or how many over a stretch of time ("how many emails did people send last month"):
    a usage report answers it."""
    determined: bool = False
    """Whether the thing it acts on follows a determiner ("the summary", "a label"): a common noun, not a person's
    name ("remove bob from the group")."""
    identified: bool = False
    """Whether it names one item by an id (cus_42, PROJ-7, node-3): an operation on one item answers it."""
    verb: str = ""
    """Its verb's root, generic or not ("remove" for "take him out", "close", "restart"): the action it may name, a
    POST to a path named for it (`gateway.offer.actions`)."""

    def owner_in(self, known: Callable[[str], bool]) -> str | None:
        """`owner` in an api whose words `known` tells: a possessive of a word it does not know names a person."""
        if any(not known(word) for word in self.possessors):
            return "other"
        return self.owner


def read(query: str) -> Request:
    """`query` read: its words to match, its methods, its stems."""
    query = asked(query)
    given = query_words(query)
    terms = _match_terms(given)
    verb = _verb(given)
    methods = frozenset() if verb is None else frozenset(m for m, verbs in INTENTS.items() if given[verb][0] in verbs)
    if not methods and given and (given[0][0] in _AUXILIARIES or given[0][0] in _ASKING_WHY):
        methods = frozenset({"GET"})  # "is the PVC bound", "did the refund go through", "why is the pod pending"
    if verb is not None and given[verb][0] in _GIVING and verb + 1 < len(given) and given[verb + 1][0] in _TO_ME:
        methods = frozenset({"GET"})  # "give me the raw diff": show it me
    if verb is not None and given[verb][0] in _MAKING and (verb + 1 == len(given) or given[verb + 1][0] not in _A_NEW):
        methods = _WRITES  # "make it the most urgent thing we have": a change, as much as a new thing
    if not methods and any(word in _WISHES for word, _ in given) and not (given and given[0][0] in _OURS):
        methods = _WRITES  # "the sign-up form should require a Company field", "the service needs a fixed IP"
    elif not methods and given and given[0][0] in _ALL:
        methods = frozenset({"GET"})  # "every payout that failed this year": all of them, listed
    said = " ".join(w for word in words(query).split() for w in (word, *synonyms(word)))
    things = [word for word, _ in given if word not in STOP and word not in _GENERIC_VERBS and word not in _PRONOUNS]
    plural = bool(things) and things[-1].endswith("s") and not things[-1].endswith(("ss", "us", "is"))
    things_named, phrase, named = _things(given, verb)
    if asks_permission(query):  # "who can see this file", "can I delete pods": who is allowed, not the act
        terms = [*terms, PERMISSION]
        things_named = phrase = named = frozenset(stems(" ".join(PERMISSION)))
        methods = frozenset({"GET"}) if given and given[0][0] == "who" else frozenset()
    target = frozenset() if _TO_VALUE.search(query) else _target(given, verb)
    acts = _acts(given, verb)
    root = _root(given[verb][0]) if verb is not None else ""
    named_action = (root,) if action_of(root, methods) else ()  # its operations are candidates, as things named
    return Request(terms, expression_of(terms), methods,
                   frozenset(stems(" ".join(a for alternatives in terms for a in alternatives)) | stems(said)), plural,
                   things_named, phrase, acts, tuple(_agent(act) for act in acts if len(act) >= 5), _owner(given),
                   _possessors(query),
                   target, addressed_of(target, ()), addressed_of(things_named, acts or named_action), _act_nouns(acts),
                   named,
                   frozenset(word.lower() for word in _CAPITALS.findall(query)),
                   keyed(query), asks_over_period(word for word, _ in given),
                   _determined(given, verb),
                   identified=identifies(query), verb=root)


_WISHES = frozenset("should must needs need".split())
_WRITES = frozenset({"POST", "PUT", "PATCH"})
"""A request that reads no verb but says what should be or what is needed asks for a change (a new thing, or one
set): 122 of the 134 such development requests (`round12`..`round15`, nine APIs) were answered by a POST, PUT or
PATCH (bench/README.md, branch rank32)."""
_OURS = frozenset({"our"})
"""A wish of ours ("our audit tool must hear about every secret change", "our bot needs the DM channel ID") is what
one of the caller's programs should do or needs, not a state of the api's things: no method. Of the development
requests (`round12`..`round19`) that read a write for their wish and begin with "our", 35 were answered by a GET
(Kubernetes 25, Slack 6, Jira 3, Stripe 1) and 31 by a write (nine APIs) (bench/README.md, branch rank35)."""
_MAKING = frozenset({"make"})
_A_NEW = frozenset("a an new another".split())
"""Make asks for a new thing when one follows it ("make a coupon"); else it makes a thing something ("make it the
most urgent", "make Blocker come first", "make the tag red"): a change as often as a new thing."""
_GIVING = frozenset({"give"})
_TO_ME = frozenset({"me", "us"})
"""A verb of giving to the one who asks asks to be shown: "give me a rundown of the pods"."""


_CAPITALS = re.compile(r"\b[A-Z]{2,}s?\b")


_ALL = frozenset("every each all everything".split())
"""Words that begin a request for all of some things, with no verb ("every invoice we voided this year", "all the
refunds we've given out this week"): a read."""
_DETERMINERS = frozenset("the a an this that these those its their our your my his her".split())


def _determined(given: list[tuple[str, tuple[str, ...]]], verb: int | None) -> bool:
    """Whether the thing a request acts on follows a determiner (`Request.determined`): the word after its verb, or
    its first word when it has none (it starts with a noun phrase)."""
    at = 0 if verb is None else verb + 1
    return at < len(given) and given[at][0] in _DETERMINERS


_ASKING_WHY = frozenset("why how".split())
"""With an auxiliary first (is, did, can), the words that begin a question: a question reads."""
def addressed_of(things: frozenset[str], acts: tuple[str, ...]) -> str:
    """The FTS5 match of a resource that is one of the things or one of the acts (`Request.addressed`)."""
    alternatives = [f'"{thing}"' for thing in sorted(things) if len(thing) >= 3 and thing.isalnum()]
    alternatives += [f'"{act[:5]}"*' for act in acts if len(act) >= 3 and act.isalpha()]
    return f"resource : ({' OR '.join(alternatives)})" if alternatives else ""


_BREAKS = frozenset("in on of to for from with at by into about as via than without during over under per after before "
                    "since until called named titled saying that which so when where while because if and or".split())
"""Words that end a noun phrase: the thing a request names comes before them ("the items in the list")."""
_AUXILIARIES = frozenset("is are was were be been being do does did have has had can could will would should may might "
                         "must am".split())
_PEOPLE = ("member", "user")
"""What "who is in this team" asks for."""


def _things(given: list[tuple[str, tuple[str, ...]]],
            verb: int | None) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """The stems of the head of the first noun phrase after the verb, with its synonyms (and a compound's last part:
    OneDrive -> drive); those of all the phrase's words; and the head's own, without synonyms."""
    start = 0 if verb is None else verb + 1
    if verb is not None and given[verb][0] == "who":
        following = [word for word, _ in given[start:] if word not in _AUXILIARIES]
        if following and following[0] in _BREAKS:  # "who is in this team": its people
            people = frozenset(stems(" ".join(_PEOPLE)))
            return people, people, people
    if verb is not None and given[verb][0] == "who" and _acts(given, verb):
        start += 1 + next(i for i, (w, _) in enumerate(given[start:]) if w not in _AUXILIARIES)  # past its verb
    phrase: list[tuple[str, tuple[str, ...]]] = []
    nouns = _nouns(given, verb)
    for position, (word, parts) in enumerate(given[start:], start):
        if word in _BREAKS or word in _AUXILIARIES:
            if phrase:
                break
            continue
        if word not in STOP and word not in _PRONOUNS and (word not in _GENERIC_VERBS or position in nouns):
            phrase.append((word, parts))
    if not phrase:
        return frozenset(), frozenset(), frozenset()
    word, parts = phrase[-1]
    every = " ".join(w for said, _ in phrase for w in (said, *synonyms(said)))
    return (frozenset(stems(" ".join((word, *synonyms(word), *parts[-1:])))), frozenset(stems(every)),
            frozenset(stems(" ".join((word, *parts[-1:])))))


_TARGETING = frozenset("to of on from in for into".split())
"""Prepositions before the thing whose property a request changes: "add a label to the pod", "the priority of the
ticket"."""


_TO_VALUE = re.compile(r"^(?:(?!\b(?:of|on|from|in|for|into)\b)[^,;])*?\b(?:to|at)\s+"
                       r"(?:(?:max|min|maximum|minimum|about|around)\s+)?[$€£]?[0-9]", re.IGNORECASE)
"""A value the thing is set to, before any other preposition ("change the autoscaler to max 20 pods", "move the
meeting to 3pm"), where a target would be: "20 pods" is how many, not whose."""


def _target(given: list[tuple[str, tuple[str, ...]]], verb: int | None) -> frozenset[str]:
    """The stems (with synonyms) of the head of the noun phrase after the first noun phrase past the verb and one of
    `_TARGETING`: "pod" in "add a label to the pod"; none when no such phrase follows."""
    start = 0 if verb is None else verb + 1
    seen_thing = False
    for position in range(start, len(given)):
        word = given[position][0]
        if word in _TARGETING and seen_thing:
            head = ""
            for following, _ in given[position + 1:]:
                if following in _BREAKS or following in _AUXILIARIES:
                    break
                if following not in STOP and following not in _PRONOUNS and following not in _GENERIC_VERBS:
                    head = following
            return frozenset(stems(" ".join((head, *synonyms(head))))) if head else frozenset()
        if word in _BREAKS:
            return frozenset()
        if word not in STOP and word not in _PRONOUNS and word not in _GENERIC_VERBS and word not in _AUXILIARIES:
            seen_thing = True
    return frozenset()


def _acts(given: list[tuple[str, tuple[str, ...]]], verb: int | None) -> tuple[str, ...]:
    """The verb's root (not a generic one): "accept", "attach"; after "who", the next verb ("who reviewed")."""
    if verb is None:
        return ()
    word = given[verb][0]
    if word == "who":  # "who reviewed", "who is watching": a verb with its ending, else none
        following = [w for w, _ in given[verb + 1:] if w not in _AUXILIARIES]
        word = following[0] if following and following[0].endswith(("s", "ed", "ing")) else ""
    if not word or word in _GENERIC_VERBS or word in _PRONOUNS:
        return ()
    if word.startswith("un") and len(word) >= 5 and word[2:] not in STOP:  # unpin: a pin removed
        return (_root(word), *_UNDOING)
    return (_root(word),)


_UNDOING = ("remove", "delete")
"""What a verb that undoes another does to that other's thing (`/pins.remove` for "unpin")."""


def _act_nouns(acts: tuple[str, ...]) -> tuple[str, ...]:
    """The nouns of the acts: bind -> binding, evict -> eviction, assign -> assignment, migrate -> migration."""
    return tuple(noun for act in acts if len(act) >= 4 and act.isalpha()
                 for noun in (act + "ing", act + "ment", act[:-1] + "ion" if act.endswith("e") else act + "ion"))


def _agent(verb: str) -> str:
    """Who does what a verb says: autoscale -> autoscaler, schedule -> scheduler, watch -> watcher."""
    return verb + ("r" if verb.endswith("e") else "er")


def _root(word: str) -> str:
    """A verb without a regular ending: reviewed -> review, starred -> star, watching -> watch, follows -> follow."""
    for ending in ("ing", "ed", "es", "s"):
        if word.endswith(ending) and len(word) - len(ending) >= 3:
            word = word[:-len(ending)]
            if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "ls":
                word = word[:-1]
            break
    return word


_POSSESSIVE = re.compile(r"\b([A-Za-z]+)['’]s\b")
_SUBJECT = re.compile(r"^(?:which|what|when|where|how)\s+(?:[a-z-]+\s+){0,2}?"
                      r"(?:is|are|does|do|did|has|have|was|were)\s+([a-z]+)\b|^(?:is|are|does|did|has)\s+([a-z]+)\b")
"""The subject of a question ("which teams is bob part of", "is alice available"): a word the api does not know
there is a person, whose things the question asks for."""


def _possessors(query: str) -> tuple[str, ...]:
    """The words before an 's and a question's subject (`Request.possessors`)."""
    subjects = (match.group(1) or match.group(2) for match in _SUBJECT.finditer(query))
    return tuple(word.lower() for word in (*_POSSESSIVE.findall(query), *subjects)
                 if word.lower() not in _NOT_OWNERS | STOP | _PRONOUNS | _DETERMINERS)


_NOT_OWNERS = frozenset("it that what who there here let he she this".split())


def _owner(given: list[tuple[str, tuple[str, ...]]]) -> str | None:
    """"self" for mine, "other" for a user's, else None."""
    said = {word for word, _ in given}
    if said & _PRONOUNS:
        return "self"
    return "other" if said & {"user", "users"} else None
