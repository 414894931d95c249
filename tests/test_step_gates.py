"""The step properties' gates (``Property.changes``, ``Property.actions``) leave out only calls with a trivial answer.

``model.invariants`` calls a gated TRANSITION or SOMETIMES property only on a step that changed one of the parts
it names, or that is one of the actions it names; otherwise it takes the property to hold (TRANSITION) or to
witness nothing (SOMETIMES). Two checks:
- on the steps the model takes, in every scope and with each seeded bug on (where TRANSITIONs do break), the
  gated verdicts are those of calling every property;
- on steps the model cannot take, each gate alone: an explored state as ``before`` and another's as ``after``
  with the gated parts made unchanged (copied from ``before``, or the step's ghost left empty), or any action
  outside the gated types; the property must answer trivially. A gate naming a part the property reads
  besides fails here (shown below), though the model's own steps might never show it.
"""

from __future__ import annotations

import pytest

from model import CORRECT, SCOPES, SEEDED_BUGS, Variant, initial_state
from model.invariants import SOMETIMES, TRANSITIONS, broken_transitions, witnessed
from model.registry import STEP_PARTS, Kind, Property, step_changes
from model.state import ClusterState
from model.step import successors

STATES = 250  # states a search expands per scope: enough to take every gated kind of step somewhere
GATED = [p for p in TRANSITIONS + SOMETIMES if p.changes or p.actions]


def _steps(scope_name: str, variant: Variant = CORRECT, budget: int = STATES) -> list[tuple]:
    """The steps of a breadth-first search of ``budget`` states."""
    scope = SCOPES[scope_name]
    init = initial_state(scope)
    seen = {init}
    frontier = [init]
    steps = []
    while frontier and len(seen) < budget:
        next_frontier = []
        for state in frontier:
            for action, nxt in successors(state, scope, variant):
                steps.append((state, action, nxt))
                if nxt not in seen:
                    seen.add(nxt)
                    next_frontier.append(nxt)
        frontier = next_frontier
    return steps


def _unchanged(before: ClusterState, after: ClusterState, parts: tuple[str, ...]) -> ClusterState:
    """``after`` with ``parts`` (``model.registry.STEP_PARTS``) as a step from ``before`` that left them alone."""
    history, ghost = after.history, after.ghost
    for part in parts:
        if part in ("zk", "brokers", "controllers"):
            after = after.replace(**{part: getattr(before, part)})
        elif part == "committed":
            history = history.replace(committed=before.history.committed)
        elif part == "applied_writes":
            ghost = ghost.replace(applied_writes=before.ghost.applied_writes)
        else:  # what the step alone leaves in the ghost
            ghost = ghost.replace(**{part: ()})
    return after.replace(history=history, ghost=ghost)


def _trivial(p: Property) -> bool:
    return p.kind is Kind.TRANSITION


def _gate_breaches(p: Property, steps: list[tuple]) -> list[str]:
    """Steps the model cannot take on which ``p``'s gate says "trivial" and ``p`` answers otherwise."""
    states = list(dict.fromkeys(s for s, _, _ in steps))
    actions = list(dict.fromkeys(a for _, a, _ in steps))
    found = []
    for i, before in enumerate(states):
        for after in (states[(i * 7 + 3) % len(states)], states[(i + 1) % len(states)], before):
            if p.changes:
                nxt = _unchanged(before, after, p.changes)
                assert not any(step_changes(before, nxt) >> STEP_PARTS.index(part) & 1 for part in p.changes)
                action = actions[i % len(actions)]
                if p.predicate(before, action, nxt) is not _trivial(p):
                    found.append(f"{p.name} on {action} with {p.changes} unchanged")
            if p.actions:
                for action in actions[i % 5::5]:
                    if not isinstance(action, p.actions) and p.predicate(before, action, after) is not _trivial(p):
                        found.append(f"{p.name} on {action}")
    return found


@pytest.mark.parametrize("name", sorted(SCOPES))
def test_gated_verdicts_are_every_propertys(name):
    skipped = 0
    for before, action, after in _steps(name):
        assert broken_transitions(before, action, after) == [
            p.name for p in TRANSITIONS if not p.predicate(before, action, after)
        ]
        assert witnessed(before, action, after) == [p.name for p in SOMETIMES if p.predicate(before, action, after)]
        changes = step_changes(before, after)
        skipped += sum(1 for p in GATED if (p.actions and not isinstance(action, p.actions))
                       or (p.changes and not any(changes >> STEP_PARTS.index(c) & 1 for c in p.changes)))
    assert skipped > 0


@pytest.mark.parametrize("bug", SEEDED_BUGS, ids=lambda b: b.name)
def test_gated_verdicts_are_every_propertys_with_each_seeded_bug(bug):
    for before, action, after in _steps(bug.scope, bug.variant, budget=150):
        assert broken_transitions(before, action, after) == [
            p.name for p in TRANSITIONS if not p.predicate(before, action, after)
        ]


@pytest.mark.parametrize("name", ["election", "migration", "dual-write", "held-heartbeats", "reassignment"])
def test_each_gate_answers_trivially_off_the_models_steps(name):
    steps = _steps(name, budget=120)
    breaches = [b for p in GATED for b in _gate_breaches(p, steps)]
    assert not breaches, breaches[:5]


def test_a_gate_on_a_part_the_property_does_not_stop_at_is_caught():
    """The check can fail: ZxidStrictlyIncreases gated on the controllers would skip ZooKeeper's steps back."""
    p = next(p for p in TRANSITIONS if p.name == "ZxidStrictlyIncreases")
    wrong = Property(p.name, p.kind, p.meaning, p.source, p.section, p.predicate, changes=("controllers",))
    assert _gate_breaches(wrong, _steps("migration", budget=120))


def test_a_gate_on_the_wrong_action_is_caught():
    p = next(p for p in TRANSITIONS if p.name == "NoStaleControlRequestApplied")
    from model.actions import Drop

    wrong = Property(p.name, p.kind, p.meaning, p.source, p.section, p.predicate, actions=(Drop,))
    assert _gate_breaches(wrong, _steps("election", budget=400))
