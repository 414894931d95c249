"""Every seeded bug breaks the invariant it targets, in a bounded search of its scope.

The seeded-bug score is what shows that the invariants can fail: an invariant that no plausible
mistake breaks, or a search too shallow to reach the break, would pass vacuously.
"""

import pytest

from model import PROPERTIES, SCOPES, SEEDED_BUGS, Kind, Variant, initial_state, step
from model.invariants import BY_NAME, violations
from properties.mutants import run_mutant as _run_mutant


@pytest.fixture(scope="session")
def run_mutant(run_once):
    """One search per bug in the whole test run, shared by the tests below whichever worker runs them."""
    return lambda bug: run_once("mutant", bug.name, lambda: _run_mutant(bug))


SAFETY_BUGS = [b for b in SEEDED_BUGS if BY_NAME[b.invariant].kind is not Kind.EVENTUALLY]
LIVENESS_BUGS = [b for b in SEEDED_BUGS if BY_NAME[b.invariant].kind is Kind.EVENTUALLY]


# The one search that takes over half a minute (activate_on_uncommitted_log: about 36 s of a test worker) runs under
# the slow marker; its invariant, MigrationStateOnlyMovesForward, is caught in every run through its other bug.
SLOW_SEARCHES = {"activate_on_uncommitted_log"}


def _safety_params():
    return [pytest.param(b, marks=pytest.mark.slow) if b.name in SLOW_SEARCHES else b for b in SAFETY_BUGS]


@pytest.mark.parametrize("bug", _safety_params(), ids=lambda b: b.name)
def test_seeded_bug_is_caught_by_its_invariant_and_replays(bug, run_mutant):
    """The shortest counterexample the search returns replays step by step and ends in the violation."""
    result = run_mutant(bug)
    assert result.caught_by == f"explore:{bug.scope}", f"{bug.name} escaped the bounded search of {bug.scope}"
    variant = bug.variant
    state = initial_state(SCOPES[bug.scope])
    for i, action in enumerate(result.counterexample):
        nxt = step(state, action, variant)
        assert nxt is not None, f"step {i + 1} ({action!r}) of the counterexample is not enabled"
        broken = violations(state, action, nxt)
        if i < len(result.counterexample) - 1:
            assert not broken, f"the counterexample breaks {broken} before its last step"
        state, last = nxt, broken
    assert bug.invariant in last


@pytest.mark.parametrize("bug", LIVENESS_BUGS, ids=lambda b: b.name)
def test_liveness_seeded_bug_is_caught_by_a_lasso_that_replays(bug, correct_liveness):
    """A liveness bug comes back as a lasso; replayed through the model, its loop never reaches the goal."""
    from properties.liveness import VIOLATED, check_liveness, replay_lasso

    result = check_liveness(bug.scope, bug.variant, props=[bug.invariant])
    (verdict,) = result.verdicts
    assert verdict.result == VIOLATED, f"{bug.name} escaped the liveness check of {bug.scope}"
    replayed = replay_lasso(bug.scope, bug.variant, verdict.lasso, BY_NAME[bug.invariant])
    assert replayed.ok, replayed.problem
    correct = {v.name: v.result for v in correct_liveness(bug.scope, bug.profile).verdicts}
    assert correct[bug.invariant] != VIOLATED


@pytest.mark.parametrize("bug", _safety_params(), ids=lambda b: b.name)
def test_seeded_bug_counterexample_is_harmless_without_the_bug(bug, run_mutant):
    """The same actions under the correct model break nothing: the bug, not the scope, is to blame."""
    result = run_mutant(bug)
    state = initial_state(SCOPES[bug.scope])
    correct = Variant(profile=bug.profile)
    for action in result.counterexample:
        nxt = step(state, action, correct)
        if nxt is None:
            break  # the correct model does not even allow this path
        assert not violations(state, action, nxt)
        state = nxt


def test_every_safety_property_is_the_target_of_a_seeded_bug():
    targeted = {b.invariant for b in SEEDED_BUGS}
    checked = {p.name for p in PROPERTIES if p.kind in (Kind.ALWAYS, Kind.TRANSITION, Kind.EVENTUALLY)}
    assert checked - targeted == set()


def test_seeded_bugs_name_real_invariants_and_scopes():
    for bug in SEEDED_BUGS:
        assert bug.invariant in BY_NAME and BY_NAME[bug.invariant].kind is not Kind.SOMETIMES
        assert bug.scope in SCOPES
        assert bug.scope in SCOPES
    assert len({b.name for b in SEEDED_BUGS}) == len(SEEDED_BUGS)
