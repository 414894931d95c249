"""Pinned regressions: every trace in tests/regressions/ (written by `kraftcheck pin`) replayed on every run.

Issue 6 §3 "Counterexamples": a failing seed becomes a pinned regression test. A trace with seeded
bugs pins a check: with its bugs on, the recorded violation must still reproduce (the checks still
catch the bug); with them off, the correct implementation and model must replay it clean (the
trace shows the bug, not a difference of the correct code). A trace without seeded bugs is a real
bug the campaign found: it must replay clean, which is the fix it guards.
"""

import dataclasses
from pathlib import Path

import pytest

from properties import traces
from properties.shrink import replay_trace

PINNED = sorted((Path(__file__).parent / "regressions").glob("*.json"))


def seeded(trace) -> bool:
    return bool(trace.bugs) or bool(getattr(trace, "impl_bugs", ()))


@pytest.mark.parametrize("path", PINNED, ids=[p.stem for p in PINNED])
def test_pinned_trace_reproduces_with_its_seeded_bugs(path):
    trace = traces.load_trace(path)
    if not seeded(trace):
        pytest.skip("a real bug's trace: it must replay clean (the other test)")
    if isinstance(trace, traces.DifferentialTrace):
        replayed = replay_trace(trace)
        assert replayed.signature == trace.signature, f"{path.name}: {replayed.signature} at {replayed.failed_at}"
        assert replayed.failed_at == len(trace.steps) - 1
    else:
        assert traces.replay(trace).reproduced, traces.replay(trace).summary()


@pytest.mark.parametrize("path", PINNED, ids=[p.stem for p in PINNED])
def test_pinned_trace_replays_clean_without_seeded_bugs(path):
    trace = traces.load_trace(path)
    if isinstance(trace, traces.DifferentialTrace):
        replayed = replay_trace(trace, with_bugs=False)
        assert replayed.disagreement is None, f"{path.name}: {replayed.disagreement}"
    else:
        result = traces.replay(dataclasses.replace(trace, bugs=frozenset()))
        assert result.violation_step is None, result.summary()


def test_at_least_one_regression_is_pinned():
    """The directory is not empty by accident (a glob over a moved directory would pass vacuously)."""
    assert any(seeded(traces.load_trace(p)) for p in PINNED)
