"""A package's public names imported when first used (PEP 562), so that importing one module of the package does
not import every other one: `gateway`, `gateway.assembly` and `gateway.providers` list their names this way.

    __getattr__, __dir__ = lazy_names(__name__, _WHERE, globals(), __all__)

`_WHERE` maps each public name to the module (relative to the package) that defines it. A name is imported once:
its value is then a global of the package. A name must not be the name of one of the package's submodules
(importing that submodule sets the package's attribute to the module).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any


def lazy_names(package: str, where: Mapping[str, str], namespace: MutableMapping[str, Any],
               names: Sequence[str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The package's `__getattr__` and `__dir__`."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value  # asked once
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *names})

    return __getattr__, __dir__
