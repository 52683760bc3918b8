from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))

from server_support import gw, llm, upstream  # noqa: E402, F401  (the running-gateway fixtures)
