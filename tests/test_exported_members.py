from __future__ import annotations

import gateway


def test_all_is_sorted_and_exported() -> None:
    assert gateway.__all__ == sorted(gateway.__all__)
    for name in gateway.__all__:
        assert hasattr(gateway, name), name
