from __future__ import annotations

import sys
from pathlib import Path

# The server tests' helpers (a real `gateway serve` process) serve the tests of the commands that ask one.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))
