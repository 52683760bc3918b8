"""Which client a token is: `clients.<name>.claims` of agents.yaml.

```yaml
clients:
  engineers: {agents: [triage], claims: {groups: eng}}            # anyone whose `groups` holds eng
  ann:       {agents: ["*"], admin: true, claims: {sub: [ann, ann@corp]}}
```

Every claim a rule names must match: the rule's value, or one of its list of values, equals the token's claim,
or one of the token's values when the claim is a list (`groups`, `roles`). A dotted name reads a nested claim
(`realm_access.roles`). The first client whose rule matches, in the order of agents.yaml, is the token's; a
client without `claims` is never matched by a token.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any


class ClaimRules:
    """Clients' claim rules, in order.

    Args:
        rules: (client name, {claim: accepted values}) pairs; clients without claims may be left out.
    """

    def __init__(self, rules: Iterable[tuple[str, Mapping[str, Sequence[str] | str]]]) -> None:
        self._rules = [
            (name, {claim: frozenset([values] if isinstance(values, str) else (str(v) for v in values))
                    for claim, values in claims.items()})
            for name, claims in rules if claims
        ]

    def __bool__(self) -> bool:
        return bool(self._rules)

    def client_for(self, claims: Mapping[str, Any]) -> str | None:
        """The first client whose every claim matches; None when none does."""
        for name, rule in self._rules:
            if all(_matches(_claim(claims, claim), accepted) for claim, accepted in rule.items()):
                return name
        return None


def _claim(claims: Mapping[str, Any], name: str) -> Any:
    if name in claims:
        return claims[name]
    value: Any = claims
    for part in name.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def _matches(value: Any, accepted: frozenset[str]) -> bool:
    if isinstance(value, list):
        return any(_scalar(v) in accepted for v in value)
    return value is not None and _scalar(value) in accepted


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
