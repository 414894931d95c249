"""The guards (``model.guards``) skip only candidates that ``step`` refuses: the successors with them are
the successors of every candidate handed over, state by state, in every scope under both profiles and
in each seeded bug's scope with the bug on. A guard that hides an enabled action fails here, naming the
state's path, the action and what the handler made of it."""

from __future__ import annotations

import pytest

from model import SCOPES, SEEDED_BUGS, Variant, initial_state, step
from model.guards import GUARDS
from model.migration import Profile
from model.scopes import Scope
from model.step import candidate_actions, successors

STATES = 600  # states expanded a search: enough to pass every migration step's guard in the scopes that have them


def _unguarded(state, scope: Scope, variant: Variant) -> list:
    out = []
    for action in candidate_actions(state, scope):
        nxt = step(state, action, variant)
        if nxt is not None:
            out.append((action, nxt))
    return out


def _compare(scope: Scope, variant: Variant, budget: int = STATES) -> int:
    """Breadth-first over ``scope``; the guarded and the unguarded successors agree at each state. Returns
    the number of candidates the guards skipped (a test that skips nothing tests nothing)."""
    init = initial_state(scope)  # as the explorer starts every profile (properties.explore.scope_spec)
    paths = {init: ()}
    frontier = [init]
    skipped = 0
    while frontier and len(paths) < budget:
        next_frontier = []
        for state in frontier:
            guarded = successors(state, scope, variant)
            every = _unguarded(state, scope, variant)
            if guarded != every:
                hidden = [a for a, _ in every if a not in {g for g, _ in guarded}]
                raise AssertionError(f"{scope.name}: after {list(paths[state])}, the guards hide {hidden}")
            skipped += sum(
                1 for a in candidate_actions(state, scope) if (g := GUARDS.get(type(a))) and not g(state, a, variant)
            )
            for action, nxt in every:
                if nxt not in paths:
                    paths[nxt] = paths[state] + (action,)
                    next_frontier.append(nxt)
        frontier = next_frontier
    return skipped


@pytest.mark.parametrize("profile", list(Profile), ids=lambda p: p.value)
@pytest.mark.parametrize("name", sorted(SCOPES))
def test_guards_skip_only_refused_candidates(name, profile):
    assert _compare(SCOPES[name], Variant(profile=profile)) > 0


@pytest.mark.parametrize("bug", SEEDED_BUGS, ids=lambda b: b.name)
def test_guards_skip_only_refused_candidates_with_each_seeded_bug(bug):
    _compare(SCOPES[bug.scope], bug.variant, budget=300)


def test_a_guard_that_hides_an_enabled_action_is_caught(monkeypatch):
    """The comparison can fail: a guard that refuses every session a broker opens hides enabled ones."""
    from model.actions import OpenSession

    monkeypatch.setitem(GUARDS, OpenSession, lambda s, a, v: False)
    with pytest.raises(AssertionError, match="the guards hide .*OpenSession"):
        _compare(SCOPES["election"], Variant())
