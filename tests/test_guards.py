"""The guards (``model.guards``) skip only candidates that ``step`` refuses: the successors with them are
the successors of every candidate handed over, state by state, in every scope under both profiles and
in each seeded bug's scope with the bug on. A guard that hides an enabled action fails here, naming the
state's path, the action and what the handler made of it.

Each search is small (its first ``STATES`` states); ``test_every_guard_refuses_and_passes``
checks that between them the searches still reach every guard both ways. A guard that lets
an enabled action through somewhere would hide it there if it refused, so every guard's hiding is in reach.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from model import SCOPES, SEEDED_BUGS, Variant, initial_state, step
from model.actions import DualWriteReplyLost, DualWriteSessionExpired
from model.guards import GUARDS
from model.migration import Profile
from model.scopes import Scope
from model.step import candidate_actions, successors

# States a search discovers. Every guard is reached both ways with 100 and 50 already; with 600 and 300 (before
# test_every_guard_refuses_and_passes) this file took 46 s in one process, with these 16 s.
STATES = 150
BUG_STATES = 80

# Offered only in the scopes with write failures or lost write replies, whose drivers never leave DUAL_WRITE
# (checked on their whole state spaces): these guards never refuse there.
NEVER_REFUSE = frozenset({DualWriteSessionExpired, DualWriteReplyLost})


@dataclass(frozen=True)
class Reached:
    """The guards a search reached: those that refused a candidate, those that let an enabled action through."""

    refused: frozenset[type]
    passed: frozenset[type]


def _unguarded(state, scope: Scope, variant: Variant) -> list:
    out = []
    for action in candidate_actions(state, scope):
        nxt = step(state, action, variant)
        if nxt is not None:
            out.append((action, nxt))
    return out


def _compare(scope: Scope, variant: Variant, budget: int = STATES) -> Reached:
    """Breadth-first over ``scope``; the guarded and the unguarded successors agree at each state."""
    init = initial_state(scope)  # as the explorer starts every profile (properties.explore.scope_spec)
    paths = {init: ()}
    frontier = [init]
    refused: set[type] = set()
    passed: set[type] = set()
    while frontier and len(paths) < budget:
        next_frontier = []
        for state in frontier:
            guarded = successors(state, scope, variant)
            every = _unguarded(state, scope, variant)
            if guarded != every:
                hidden = [a for a, _ in every if a not in {g for g, _ in guarded}]
                raise AssertionError(f"{scope.name}: after {list(paths[state])}, the guards hide {hidden}")
            refused |= {
                type(a)
                for a in candidate_actions(state, scope)
                if (g := GUARDS.get(type(a))) and not g(state, a, variant)
            }
            passed |= {type(a) for a, _ in guarded if type(a) in GUARDS}
            for action, nxt in every:
                if nxt not in paths:
                    paths[nxt] = paths[state] + (action,)
                    next_frontier.append(nxt)
        frontier = next_frontier
    return Reached(frozenset(refused), frozenset(passed))


@pytest.fixture(scope="module")
def compared(run_once):
    """``compared(name, profile)`` or ``compared(bug=bug)``: the search of a scope, or of a seeded bug's scope with
    the bug on, once in the whole run (the parametrized tests and the reach test share it)."""

    def search(name: str = "", profile: Profile = Profile.KIP, bug=None) -> Reached:
        if bug is not None:
            return run_once("guards", bug.name, lambda: _compare(SCOPES[bug.scope], bug.variant, BUG_STATES))
        return run_once("guards", f"{name}@{profile.value}", lambda: _compare(SCOPES[name], Variant(profile=profile)))

    return search


def _unreached(searches: list[Reached]) -> tuple[set[type], set[type]]:
    """The guards that none of ``searches`` saw refuse (but for NEVER_REFUSE), and those none saw pass."""
    refused = set().union(*(r.refused for r in searches))
    passed = set().union(*(r.passed for r in searches))
    return set(GUARDS) - NEVER_REFUSE - refused, set(GUARDS) - passed


@pytest.mark.parametrize("profile", list(Profile), ids=lambda p: p.value)
@pytest.mark.parametrize("name", sorted(SCOPES))
def test_guards_skip_only_refused_candidates(compared, name, profile):
    assert compared(name, profile).refused, "a search whose guards refuse nothing tests nothing"


@pytest.mark.parametrize("bug", SEEDED_BUGS, ids=lambda b: b.name)
def test_guards_skip_only_refused_candidates_with_each_seeded_bug(compared, bug):
    compared(bug=bug)


def test_every_guard_refuses_and_passes(compared):
    """The small searches above are enough: some search saw every guard refuse a candidate (which ``step`` refused
    too) and let an enabled action through (which a refusing guard would have hidden)."""
    searches = [compared(name, profile) for name in sorted(SCOPES) for profile in Profile]
    searches += [compared(bug=bug) for bug in SEEDED_BUGS]
    never_refused, never_passed = _unreached(searches)
    assert never_refused == set(), f"never refused: {sorted(t.__name__ for t in never_refused)}"
    assert never_passed == set(), f"never passed: {sorted(t.__name__ for t in never_passed)}"
    assert not NEVER_REFUSE & set().union(*(r.refused for r in searches)), "NEVER_REFUSE is out of date"


def test_a_search_too_small_to_reach_every_guard_is_caught():
    """The reach check can fail: the first states of the ZooKeeper-only election scope reach no migration guard."""
    from model.actions import MigrateMetadata, RequestVote

    never_refused, never_passed = _unreached([_compare(SCOPES["election"], Variant(), budget=20)])
    assert {MigrateMetadata, RequestVote} <= never_refused & never_passed


def test_a_guard_that_hides_an_enabled_action_is_caught(monkeypatch):
    """The comparison can fail: a guard that refuses every session a broker opens hides enabled ones."""
    from model.actions import OpenSession

    monkeypatch.setitem(GUARDS, OpenSession, lambda s, a, v: False)
    with pytest.raises(AssertionError, match="the guards hide .*OpenSession"):
        _compare(SCOPES["election"], Variant())
