from __future__ import annotations

import sys
from pathlib import Path

# The server tests' helpers (a real uvicorn gateway over the example specs) serve these tests too.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))

from server_support import llm, upstream  # noqa: E402, F401  (the server tests' fixtures)
