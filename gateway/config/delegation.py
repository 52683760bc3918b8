"""Delegation between agents: every `delegates` entry names a known agent, no cycles, bounded depth."""

from __future__ import annotations

from .checker import Checker, suggest
from .model import Manifest
from .yamlnodes import KeyPath


def check_delegation(c: Checker, manifest: Manifest) -> None:
    agents = manifest.agents
    for name, agent in agents.items():
        seen: set[str] = set()
        for index, sub in enumerate(agent.delegates):
            path: KeyPath = ("agents", name, "delegates", index)
            if sub in seen:
                c.warning(path, f"{sub!r} is listed twice")
            seen.add(sub)
            if sub not in agents and ("agents", sub) not in c.lines:
                c.error(path, f"no agent named {sub!r}" + suggest(sub, agents, what="agents"))
    graph = {name: [s for s in dict.fromkeys(agent.delegates) if s in agents] for name, agent in agents.items()}
    cycles = _find_cycles(graph)
    for cycle in cycles:
        c.error(("agents", cycle[0], "delegates"), "delegation cycle: " + " -> ".join(cycle))
    if cycles:
        return
    limit = manifest.max_delegation_depth
    chains = {name: _longest_chain(name, graph, {}) for name in graph}
    for name, chain in chains.items():
        if len(chain) - 1 > limit:
            c.error(("agents", name, "delegates"), f"delegation chain {' -> '.join(chain)} is {len(chain) - 1} deep; "
                                                   f"the limit is {limit} (gateway.max_delegation_depth)")


def _find_cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """Each cycle once, starting at its first agent in file order."""
    order = {name: index for index, name in enumerate(graph)}
    cycles: list[list[str]] = []
    found: set[frozenset[str]] = set()
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(name: str, stack: list[str]) -> None:
        state[name] = 1
        stack.append(name)
        for sub in graph[name]:
            if state.get(sub) == 1:
                cycle = stack[stack.index(sub):]
                if frozenset(cycle) not in found:
                    found.add(frozenset(cycle))
                    start = min(range(len(cycle)), key=lambda i: order[cycle[i]])
                    cycle = cycle[start:] + cycle[:start]
                    cycles.append([*cycle, cycle[0]])
            elif state.get(sub) is None:
                visit(sub, stack)
        stack.pop()
        state[name] = 2

    for name in graph:
        if name not in state:
            visit(name, [])
    return cycles


def _longest_chain(name: str, graph: dict[str, list[str]], memo: dict[str, list[str]]) -> list[str]:
    if name not in memo:
        longest = max((_longest_chain(sub, graph, memo) for sub in graph[name]), key=len, default=[])
        memo[name] = [name, *longest]
    return memo[name]
