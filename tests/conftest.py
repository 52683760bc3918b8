from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.skip("../shared/corpus is absent")
    return CORPUS
