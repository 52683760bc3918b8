"""The ranking signals: what multiplies each candidate's BM25 once the index (`gateway.offer.index`) has chosen the
candidates. BM25 weighs words; it does not know that "delete this email" asks for a DELETE, that "list my chats" wants
`/me/chats` and not a chat's messages, or that Graph answers one operation under many nested paths. Each signal is
one such fact of the tool (`Facts`, read from the index's `facts` table when it is opened) held against the request
(`gateway.offer.query.Request`); its weight is a field of `Weights`, and `WEIGHTS` is the product's.

What each rewards (`weighed`), and why:

- the method asked for (`intent`): "delete this email" asks for a DELETE; an api without it is asked for its other
  update method (Jira's PUT for a PATCH) or else for POST (Slack deletes with POST, Stripe updates with it:
  `answerable`), and a verb the path performs counts as asked (`gateway.offer.actions`);
- a short path, not deprecated: the facts' `weight` (`1 + 0.1 * depth`, halved when deprecated, computed when the
  index is built: `gateway.offer.index_build`);
- all items when the request names its thing in the plural (`plural`): a GET of a collection for "show my to-do
  lists";
- a name and a summary made of the request's words (`name_coverage`, `summary_coverage`: times 1 + the share of
  their words the request holds): `issues/create` for "create an issue", not `orgs/create-issue-type`;
- what the path addresses (`_addresses`): `acted` when its resource is the request's verb acting on what it names
  (`/me/events/{id}/accept` for "accept the meeting invite"), `addressed` when it is the thing named (`/sites` for
  "list the SharePoint sites", not Graph's usage report `getSharePointSiteUsagePages`), only `addressed_by_synonym`
  when it names it by a synonym while another path names it as said (`/me/calendars`, not `/me/events`, for "create
  a new calendar");
- a property of a target (`property`, `property_elsewhere`, `displaced`: `gateway.offer.targets`): "add a label to
  the pod" changes the pod's item; "set the fix version of API-77" edits the issue, far under what the thing's own
  operations score by BM25, and divides those (`updateVersion`) by `displaced`;
- one item (`one_item`): a path with a parameter when the request names an item by an id (cus_42, PROJ-7, node-3);
- a quoted path (`quoted`): the operations at a path the request quotes (`gateway.offer.quoted_paths`);
- the owner meant (`owner`, or divided by it when the path is another's): `/me/...` for "my", `/users/{id}/...` for
  "alice's".

Then `collapsed`: of the candidates of one kind (one method, summary and resource: Graph's one operation under many
nested paths) the one of the owner meant, else under the thing named after a preposition, else with the shortest path,
takes their best score, and the others fall behind it (times `duplicate`).

The weights were chosen on the tuning parts of tests/openapi/search_tasks (`tasks`, `holdout`, `fresh`, `tune`; from
the third round of #30 also `heldout` and `final`, from the fourth `round3`, from the fifth `round4`; `quoted` on
`round12`..`round20`), never on the part measured at the end of a round (bench/README.md). A bench script that
sweeps them passes its own `Weights` to `ToolIndex`; the product never changes `WEIGHTS`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..catalog import Tool
from .actions import action_of, performs
from .path_words import prefixes, suffixes
from .query import Request
from .quoted_paths import Quoted, ends_with
from .targets import UPDATES

__all__ = ["WEIGHTS", "Facts", "Weights", "answerable", "collapsed", "weighed"]


@dataclass(frozen=True, slots=True)
class Weights:
    """The factors of the signals (`weighed`, `collapsed`)."""

    intent: float = 1.8
    """The method the request asks for (or one the path performs as its verb)."""
    name_coverage: float = 1.0
    """Times the share of the name's words the request holds, plus 1."""
    summary_coverage: float = 2.0
    """Times the share of the summary's words the request holds, plus 1."""
    plural: float = 1.3
    """A GET of all items when the request names its thing in the plural."""
    duplicate: float = 0.7
    """A copy of one operation under another path, behind the one kept (`collapsed`)."""
    addressed: float = 1.5
    """The path's resource is the thing the request names."""
    addressed_by_synonym: float = 1.2
    """... by a synonym, while another path names it as the request says."""
    acted: float = 3.0
    """The path's resource is the request's verb acting on what it names (or the verb's doer)."""
    owner: float = 1.6
    """The path is the owner's the request means (divided by it when it is another's)."""
    one_item: float = 1.2
    """A path with a parameter for a request that names an item by an id."""
    quoted: float = 10.0
    """The operations at a path the request quotes."""
    property: float = 2.0
    """The target's change (or read) for a request about a property of the target."""
    property_elsewhere: float = 20.0
    """The target's change, further, when the api has the thing named but not under the target: "set the fix version
    of API-77" edits the issue (Jira's versions are the project's), far under what the thing's own operations score
    by BM25."""
    displaced: float = 3.0
    """The divisor of the thing's own operations then (`updateVersion` for "set the fix version of API-77")."""
    service_check: float = 1.2
    """A service's own health or version check, where the request names the service and asks whether it answers or
    which version it runs: times the api's first score (`gateway.offer.service_checks`; 0, never lifted)."""
    held: float = 0.3
    """The fusion's trust in BM25 by how much of the request its first three places hold: the model's weight divided
    by that share (at least `fusion.LEAST_HELD`) to this power (`gateway.offer.fusion.trusted`; 0, never)."""


WEIGHTS = Weights()
"""The product's weights."""


@dataclass(slots=True, frozen=True, eq=False)
class Facts:
    """What the signals read of one tool (its row of the index's `facts` table), read once per api when its index
    is opened. Word sets are bit masks over the api's vocabulary (the index's `vocabulary` table): a query's words are
    compared with a hundred candidates' names and summaries in each search."""

    tool: Tool
    method: str
    depth: float
    """`1 + _DEPTH_PENALTY * (segments + _PARAMETER_DEPTH * parameters)`: the divisor of a long path."""
    weight: float
    """`_DEPRECATED` (for a deprecated operation, else 1) over the depth."""
    item: bool
    """Whether the path ends with a parameter: one item, not all of them."""
    named: int
    """The stems of the name's words, stop words out."""
    name_size: int
    summarized: int
    """The stems of the summary's words, stop words out."""
    summary_size: int
    kind: int
    """The method, whether the path ends with a parameter (one item or all), the last resource (an action with
    the one before it) and the summary, numbered: Graph answers one operation under many nested paths, with one
    summary (`/me/messages/{id}/forward`, `/me/mailFolders/{id}/messages/{id}/forward`, `/users/{id}/messages/...`:
    "Invoke action forward")."""
    resource: str
    """The words of what the path addresses, lower case: `messages`, `accept` (an action), `get share point site
    usage pages`, `persistentvolumeclaims`, `post message` (Slack's `/chat.postMessage`)."""
    parent: str
    """The last word of the resource before it (`messages` for `/me/messages/{id}/microsoft.graph.forward`)."""
    owner: str
    """Whose things the path answers (`index_build._owner_of`): "self", "other" or ""."""
    family: str
    """For a function (`/reports/microsoft.graph.getSharePointSiteUsagePages(period='{period}')`), the path it is
    called on: Graph's 124 usage reports are one family, which takes at most two of the first places."""
    words: tuple[str, ...]
    """The resource's words, each singular (`gateway.offer.path_words.singulars`)."""
    last_stem: str
    """The stem of the resource's last word: whether it is one of the things a request names is one `endswith`."""
    parent_stem: str
    """The stem of `parent`."""
    above_stems: tuple[str, ...]
    """The stems of the resources the path addresses its own under (`/sites/{id}/drives`: `site`)."""
    parameterized: bool
    """Whether the path has a parameter (`/users/{id}/...`)."""


def answerable(methods: frozenset[str], used: frozenset[str]) -> frozenset[str]:
    """The methods asked for as an api that uses `used` answers them: an update it makes by the other update method
    (Jira, Asana, Box and Apacta change their things by PUT alone, Adyen's Management API by PATCH alone), anything
    else by POST (Stripe updates with POST, Slack deletes with POST)."""
    if not methods or methods & used:
        return methods
    if methods & UPDATES and UPDATES & used:
        return methods | (UPDATES & used)
    return methods | {"POST"}


def weighed(candidates: list[tuple[Facts, float]], methods: frozenset[str], terms: int,
            request: Request, owner: str | None, changes: frozenset[str],
            within: frozenset[str], displaced: frozenset[str],
            runs: tuple[Quoted, ...], weights: Weights) -> list[tuple[Facts, float]]:
    """Each candidate's BM25 times its signals: the method the query asks for, a short path, not deprecated, a
    name and a summary made of the query's words (`terms`, a mask: `issues/create` for "create an issue", over
    `orgs/create-issue-type`), the thing the query names or its verb as what the path addresses, whose it is."""
    scored = []
    addressing: dict[tuple[str, str], float] = {}  # of one resource under one parent: Graph's copies share them
    things, within_ends, displaced_ends = suffixes(request.things), suffixes(within), suffixes(displaced)
    plural, identified = request.plural, request.identified
    action = action_of(request.verb, methods)
    for facts, score in candidates:
        method = facts.method
        asked = method in methods or (action and performs(action, method, facts.item, facts.words))
        factor = -score * facts.weight * (weights.intent if asked else 1.0)
        if plural and method == "GET" and not facts.item:
            factor *= weights.plural
        said = (facts.resource, facts.parent)
        addressed = addressing.get(said)
        if addressed is None:
            addressed = addressing[said] = (_addresses(facts, request, weights) if not within
                                            or facts.parent_stem.endswith(within_ends) else 1.0)
        factor *= addressed
        if changes and facts.item and method in changes and facts.last_stem.endswith(things):
            factor *= weights.property * (weights.property_elsewhere if displaced else 1.0)
        if displaced and facts.last_stem.endswith(displaced_ends):
            factor /= weights.displaced
        if identified and facts.parameterized:
            factor *= weights.one_item
        if runs and ends_with(method, facts.tool.path, runs):
            factor *= weights.quoted
        if owner and facts.owner:
            factor *= weights.owner if owner == facts.owner else 1 / weights.owner
        if facts.name_size:
            factor *= 1 + weights.name_coverage * (facts.named & terms).bit_count() / facts.name_size
        if facts.summary_size:
            factor *= 1 + weights.summary_coverage * (facts.summarized & terms).bit_count() / facts.summary_size
        scored.append((facts, factor))
    return scored


def _addresses(facts: Facts, request: Request, weights: Weights) -> float:
    """`acted` when a path's resource is the request's verb (`accept`, `attachments` for "attach", `reviews` for
    "who reviewed") and acts on what it names (`/me/events/{id}/accept` for "accept the meeting invite", not
    `/me/messages/{id}/move` for "move the meeting"); `addressed` when the resource is the thing the request names
    (`messages` for "read my latest emails", `persistentvolumeclaims` for a claim) or the verb's doer (a
    `horizontalpodautoscaler` for "autoscale"); else 1."""
    named = facts.words
    if not named:
        return 1.0
    beginnings = prefixes(request.acts)
    acted = bool(beginnings) and any(word.startswith(beginnings) for word in named)
    if acted and (not facts.parent or not request.phrase or facts.parent_stem.endswith(suffixes(request.phrase))):
        return weights.acted
    if request.agents and named[-1].endswith(request.agents):  # autoscale -> horizontalpodautoscalers
        return weights.acted
    if request.act_nouns and named[-1].endswith(request.act_nouns):  # bind -> clusterrolebindings
        return weights.acted
    if facts.last_stem.endswith(suffixes(request.things)):
        return (weights.addressed if not request.named or facts.last_stem.endswith(suffixes(request.named))
                else weights.addressed_by_synonym)
    return 1.0


def collapsed(scored: list[tuple[Facts, float]], owner: str | None, target: frozenset[str],
              weights: Weights) -> list[tuple[Facts, float]]:
    """Of the candidates of one kind (one operation under several paths), the one of the owner the query means
    (`/users/{id}/manager` for "alice's manager"), else under the thing the query names after a preposition
    (`/sites/{id}/drives` for "the document libraries of the site"), else with the shortest path (and not
    deprecated), takes the best score of them all; the others fall behind it, times `duplicate`."""
    best: dict[int, tuple[Facts, float]] = {}
    for facts, score in scored:
        held = best.get(facts.kind)
        if held is None:
            best[facts.kind] = (facts, score)
        else:
            mine = (facts.owner == owner, _under(facts, target), facts.weight, score)
            theirs = (held[0].owner == owner, _under(held[0], target), held[0].weight, held[1])
            preferred = facts if mine > theirs else held[0]
            best[facts.kind] = (preferred, max(score, held[1]))
    return [(facts, best[facts.kind][1] if best[facts.kind][0] is facts else score * weights.duplicate)
            for facts, score in scored]


def _under(facts: Facts, target: frozenset[str]) -> bool:
    """Whether the path addresses its resource under one of the `target` things (`/sites/{id}/drives`, a site's
    drives) and of no user: `/me/mailFolders/{id}/messages` are some of `/me/messages`, a site's drives are not some
    of `/me/drives`."""
    return bool(target) and not facts.owner and any(stem.endswith(suffixes(target)) for stem in facts.above_stems)
