"""What every dialect renders: anything with a name, a description and the exact input/output schemas."""

from __future__ import annotations

from typing import Any, Protocol


class ToolLike(Protocol):
    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
