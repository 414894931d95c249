"""bench.campaign's seeded-bug hunt: which bugs ``--mutant`` selects."""

from __future__ import annotations

from bench.campaign import hunted
from impl.bugs import IMPL_SEEDED_BUGS, SHARED_SEEDED_BUGS, ImplBug


def test_bench_campaign_mutant_hunts_only_the_bugs_named():
    """``--mutant NAME`` (repeatable) hunts those bugs only (it hunted every one, the names unread); none: all."""
    only = (ImplBug.MIGRATION_SKIPS_UNSTARTED_PARTITION.value, ImplBug.STALE_EVENT_RUNS.value)
    assert [bug.name for bug in hunted(only)] == [b.name for b in IMPL_SEEDED_BUGS if b.name in only]
    assert len(hunted()) == len(IMPL_SEEDED_BUGS) + len(SHARED_SEEDED_BUGS)
