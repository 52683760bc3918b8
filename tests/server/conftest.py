from __future__ import annotations

from server_support import gw, llm, upstream  # noqa: F401  (the fixtures live there: tests/safety shares them)
