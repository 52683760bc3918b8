"""bench/search_direct.py: the weak mark's rule decided on direct counts (bench/README.md, "The weak mark's rule
decided again on direct counts"), on rows made here, and the parts it may read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import search_direct, search_match, search_same
from bench.search_direct import DELTA32, NEW, answered, cosine, largest, load, passes, thousandths


def _row(api: str, part: str, value: float, kind: str = "in", hit: bool = True) -> dict[str, Any]:
    return {"api": api, "kind": kind, "part": part, "q": f"{api} {part} {value}", "delta": DELTA32, "cosine": value,
            "cosines": [value], "fused_hit": hit, "fused_empty": False}


def _rows(low: dict[tuple[str, str], list[float]]) -> list[dict[str, Any]]:
    """Five APIs, 40 answered requests each a part (200 a part: 2% pooled allows four flags, 5% of an API two): the
    `low` cosines given, the rest at 0.9."""
    rows = []
    for api in ("adyen", "box", "docker", "graph", "here"):
        for part in NEW:
            given = low.get((api, part), [])
            rows += [_row(api, part, value) for value in [*given, *[0.9] * (40 - len(given))]]
    return rows


def test_the_parts_run_to_round34_and_never_to_the_judged_or_the_written() -> None:
    assert search_match.parts[-1] == "round34" and not {"round35", "round36"} & set(search_match.parts)
    assert set(NEW) <= set(search_match.parts) and not set(NEW) & search_same.UNMEASURED


def test_a_row_of_a_part_no_script_reads_is_refused(tmp_path: Path) -> None:
    judged = tmp_path / "rows.json"
    judged.write_text(json.dumps([_row("adyen", "round35", 0.5)]))
    with pytest.raises(AssertionError, match="a part the scripts never read"):
        load([judged])


def test_every_api_may_have_five_percent_of_each_set_flagged_and_no_more() -> None:
    """Two flags of 40 are 5%: the third request sets the threshold, on whichever set it sits."""
    rows = _rows({("adyen", "round33"): [0.1, 0.2, 0.3], ("box", "round34"): [0.25]})
    sets = [answered(rows, part) for part in NEW] + [answered(rows)]
    assert passes(sets, cosine, 0.3) and not passes(sets, cosine, 0.301)
    assert largest(sets, cosine, thousandths()) == 0.3


def test_the_pooled_share_binds_where_no_api_is_over() -> None:
    """Five flags on one set, no API more than two: the fifth binds (2% of 200 is four)."""
    rows = _rows({("adyen", "round33"): [0.1, 0.2], ("box", "round33"): [0.15, 0.22], ("docker", "round33"): [0.12]})
    sets = [answered(rows, part) for part in NEW] + [answered(rows)]
    assert largest(sets, cosine, thousandths()) == 0.22


def test_the_rule_ships_the_candidate_that_marks_most_a_tie_to_the_lower(capsys: pytest.CaptureFixture[str]) -> None:
    rows = _rows({("adyen", "round33"): [0.1, 0.27, 0.28]})
    unrelated = _row("adyen", "round34", 0.2, kind="unrelated")
    assert search_direct.report_rule([*rows, unrelated, _row("box", "offtopic", 0.26, kind="offtopic")]) == 0.28
    assert "the rule: D: the largest that passes, weak under 0.280" in capsys.readouterr().out
    # D (0.28) and A (0.255) both pass and mark the same: the lower ships
    assert search_direct.report_rule([*rows, unrelated, _row("box", "offtopic", 0.29, kind="offtopic")]) == 0.255
