"""Which agent sees what: the catalog's tools filtered, renamed and narrowed per agent.

See `Toolset` for the per-agent view and `build_toolsets` (to come) for the selection rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .catalog import JSONSchema, Tool
from .manifest import Approval


@dataclass(slots=True, kw_only=True)
class AgentTool:
    """A tool as one agent sees it."""

    name: str
    """Unique within the agent's set; what the model calls."""
    description: str
    input_schema: JSONSchema
    """The catalog tool's schema without the fixed `args`."""
    output_schema: JSONSchema | None = None
    tool: Tool | None = None
    """The catalog tool (its binding); None for a delegation tool."""
    fixed_args: dict[str, Any] = field(default_factory=dict)
    approval: Approval = "never"
    """The effective approval policy for this tool (agent policy, or the per-tool override)."""
    delegate: str | None = None
    """For a delegation tool: the sub-agent it runs."""
    timeout: float | None = None
    max_result_bytes: int | None = None

    @property
    def needs_approval(self) -> bool:
        if self.approval == "always":
            return True
        if self.approval == "writes":
            return self.tool is None or self.tool.is_write
        return False


@dataclass(slots=True, kw_only=True)
class Toolset:
    """One agent's tools, by name, in a stable order."""

    agent: str
    tools: dict[str, AgentTool] = field(default_factory=dict)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.tools.values())

    def __len__(self) -> int:
        return len(self.tools)

    def get(self, name: str) -> AgentTool | None:
        return self.tools.get(name)

    @property
    def names(self) -> list[str]:
        return list(self.tools)
