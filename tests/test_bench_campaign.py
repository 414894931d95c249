"""bench.campaign's seeded-bug hunt: which bugs ``--mutant`` selects; bench.campaign_against's bad input."""

from __future__ import annotations

import pytest

from bench import campaign_against
from bench.campaign import hunted
from impl.bugs import IMPL_SEEDED_BUGS, SHARED_SEEDED_BUGS, ImplBug


def test_bench_campaign_mutant_hunts_only_the_bugs_named():
    """``--mutant NAME`` (repeatable) hunts those bugs only (it hunted every one, the names unread); none: all."""
    only = (ImplBug.MIGRATION_SKIPS_UNSTARTED_PARTITION.value, ImplBug.STALE_EVENT_RUNS.value)
    assert [bug.name for bug in hunted(only)] == [b.name for b in IMPL_SEEDED_BUGS if b.name in only]
    assert len(hunted()) == len(IMPL_SEEDED_BUGS) + len(SHARED_SEEDED_BUGS)


@pytest.mark.parametrize("argv, names", [
    (["--against", "no-such-commit"], "--against no-such-commit"),
    (["--seeds", "0"], "--seeds"),
    (["--repeats", "0"], "--repeats"),
])
def test_bench_campaign_against_refuses_bad_input_before_running_anything(argv, names, capsys):
    """One line naming what is wrong, exit 2, and no campaign run (nothing printed on stdout)."""
    assert campaign_against.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and names in err
