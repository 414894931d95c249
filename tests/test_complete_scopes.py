"""bench.complete_scopes: a scope explored to completion within its budget, or stopped with the depth reached."""

from __future__ import annotations

import json
from pathlib import Path

from bench import complete_scopes


def _one_runs() -> set[int]:
    """Processes running a budgeted exploration (``--one-run``): the child and its workers share its command."""
    found = set()
    for proc in Path("/proc").iterdir():
        try:
            command = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if proc.name.isdigit() and b"bench.complete_scopes\x00--one-run" in command:
            found.add(int(proc.name))
    return found


def test_a_scope_that_completes_gets_its_counts_and_liveness():
    row = complete_scopes.measure("handover", "kip", minutes=2, workers=1)
    assert row["complete"] and (row["distinct_states"], row["depth"]) == (3_552, 30)
    assert row["liveness"] and set(row["liveness"].values()) == {"holds"}
    assert "complete: 3,552 states" in complete_scopes.describe(row)


def test_a_scope_out_of_budget_says_how_far_it_got_and_leaves_nothing_running():
    before = _one_runs()
    row = complete_scopes.measure("migration", "kip", minutes=0.1, workers=2)
    # how far 6 s gets depends on the machine's load (depth 4 to 6 seen): at least one finished level
    assert not row["complete"] and row["depth_reached"] >= 1 and row["distinct_states"] > 1
    assert row["seconds"] <= 6 + 5  # killed in the budget (6 s), not at the end of a level
    assert _one_runs() <= before
    assert "NOT complete in 0.1 min" in complete_scopes.describe(row)


def test_pinned_completion_rows_are_well_formed():
    """Each pinned row is complete with counts, or says how far it got (what docs/manifest.md shows)."""
    if not complete_scopes.COMPLETION.exists():
        return
    for key, row in json.loads(complete_scopes.COMPLETION.read_text()).items():
        assert key == f"{row['scope']}@{row['profile']}"
        assert row["distinct_states"] > 0
        assert ("depth" in row) if row["complete"] else ("depth_reached" in row and "last_level" in row)
