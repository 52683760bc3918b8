"""The gateway uses other packages through their public surfaces only (no `_private` names of theirs).

A minor release of uvicorn, Starlette, the MCP SDK, httpx or logging may rename or remove anything private without
notice; code that reads, overrides or replaces such names breaks silently. This test walks every module of
`gateway/` and fails on:

* an import of a `_`-prefixed module or name from another package (`from mcp.server._otel import ...`);
* an attribute `x._name` read or written where `x` is not our own object: the name is neither `self`/`cls` nor
  defined anywhere in `gateway/` (a private attribute of ours read from a sibling object is fine);
* a `_`-prefixed method defined in a class whose bases come from another package (overriding a private hook);
* `getattr`/`setattr`/`hasattr` with a literal `_`-prefixed name that `gateway/` does not define;
* an assignment to an attribute of an imported module (`logging._srcfile = None`, `logging.logThreads = False`).
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "gateway"


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _modules() -> dict[Path, ast.Module]:
    return {path: ast.parse(path.read_text(), str(path)) for path in sorted(PACKAGE.rglob("*.py"))}


def _own_names(trees: dict[Path, ast.Module]) -> set[str]:
    """Every name `gateway/` itself defines: functions, classes, attributes it assigns, slots, parameters."""
    names: set[str] = set()
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and isinstance(
                    node.value, ast.Name) and node.value.id in ("self", "cls"):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__slots__"
                                                     for t in node.targets):
                names.update(c.value for c in ast.walk(node.value)
                             if isinstance(c, ast.Constant) and isinstance(c.value, str))
    return names


def _imported(tree: ast.Module) -> tuple[set[str], dict[str, str]]:
    """(names bound to other packages' modules, each name imported from another package -> its dotted origin)."""
    modules: set[str] = set()
    foreign: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not alias.name.startswith("gateway"):
                    bound = alias.asname or alias.name.split(".")[0]
                    modules.add(bound)
                    foreign[bound] = alias.name if alias.asname else bound
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and not node.module.startswith(
                "gateway"):
            for alias in node.names:
                foreign[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return modules, foreign


def _resolve(dotted: str) -> object:
    """The object a dotted name of another package stands for (None when it cannot be imported here)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            value = getattr(value, part, None)
        return value
    return None


def _foreign_base(base: ast.expr, foreign: dict[str, str]) -> object:
    dotted = ast.unparse(base)
    head, _, rest = dotted.partition(".")
    if head not in foreign:
        return None
    return _resolve(foreign[head] + (f".{rest}" if rest else ""))


def _findings() -> list[str]:
    trees = _modules()
    own = _own_names(trees)
    found: list[str] = []
    for path, tree in trees.items():
        where = path.relative_to(PACKAGE.parent)
        modules, foreign = _imported(tree)
        for node in ast.walk(tree):
            line = f"{where}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and not node.module.startswith(
                    "gateway"):
                if any(_private(part) for part in node.module.split(".")):
                    found.append(f"{line}: imports the private module {node.module}")
                found += [f"{line}: imports the private name {node.module}.{a.name}" for a in node.names
                          if _private(a.name)]
            elif isinstance(node, ast.Import):
                found += [f"{line}: imports the private module {a.name}" for a in node.names
                          if not a.name.startswith("gateway") and any(_private(p) for p in a.name.split("."))]
            elif isinstance(node, ast.Attribute):
                base = node.value.id if isinstance(node.value, ast.Name) else None
                if isinstance(node.ctx, ast.Store) and base in modules:
                    found.append(f"{line}: assigns {ast.unparse(node)} (patches another package)")
                elif _private(node.attr) and base not in ("self", "cls") and (node.attr not in own or base in modules):
                    found.append(f"{line}: uses the private attribute {ast.unparse(node)}")
            elif isinstance(node, ast.ClassDef):
                bases = [b for b in (_foreign_base(base, foreign) for base in node.bases) if isinstance(b, type)]
                found += [f"{where}:{item.lineno}: {node.name} overrides the private {item.name} of "
                          f"{base.__module__}.{base.__qualname__}" for item in node.body for base in bases
                          if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and _private(item.name)
                          and hasattr(base, item.name)]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in (
                    "getattr", "setattr", "hasattr", "delattr") and len(node.args) > 1:
                name = node.args[1]
                if isinstance(name, ast.Constant) and isinstance(name.value, str) and _private(name.value) and (
                        name.value not in own):
                    found.append(f"{line}: {node.func.id}(..., {name.value!r}) reaches a private name")
    return found


def test_no_private_names_of_other_packages() -> None:
    findings = _findings()
    assert not findings, "private names of other packages:\n" + "\n".join(findings)


@pytest.mark.parametrize("source, expected", [
    ("from mcp.server._otel import X\n", "private module"),
    ("import logging\nlogging._srcfile = None\n", "patches another package"),
    ("import logging\nlogging.logThreads = False\n", "patches another package"),
    ("def f(client):\n    return client._cookies\n", "private attribute"),
    ("def f(m):\n    return getattr(m, '_server_instances', None)\n", "reaches a private name"),
    ("from mcp.server.streamable_http_manager import StreamableHTTPSessionManager as M\n"
     "class Q(M):\n    async def _handle_stateful_request(self):\n        pass\n", "overrides the private"),
])
def test_the_walker_finds_each_kind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str,
                                    expected: str) -> None:
    package = tmp_path / "gateway"
    package.mkdir()
    (package / "probe.py").write_text(source)
    monkeypatch.setattr(__import__(__name__), "PACKAGE", package)
    assert any(expected in line for line in _findings())
