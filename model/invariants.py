"""The registry's queries over every property of the model, each part's registered in its order.

``model.registry`` holds the kinds and the decorators; the properties are in a module per part
(``model.zk_invariants``: the ZooKeeper era; ``model.kraft_invariants``: the KRaft quorum and
brokers on KRaft; ``model.migration_invariants``: the migration, and the KRaft side's witnesses
and liveness; ``model.end_to_end_invariants``: the model-independent properties), imported here in
that order, which is the catalogue's. Read ``BY_NAME`` and the kind lists, and check states and
steps with ``violations`` and ``witnessed``; ``independent`` chooses the model-independent
properties (True), the others (False) or all of them (None), for a check that evaluates the two
kinds on different states (``properties.differential``).
"""

from __future__ import annotations

# isort: off
from model import zk_invariants  # noqa: F401 - registers the ZooKeeper era's properties first,
from model import kraft_invariants  # noqa: F401 - then the KRaft quorum's and brokers',
from model import migration_invariants  # noqa: F401 - then the migration's: the catalogue's order,
from model import end_to_end_invariants  # noqa: F401 - and last the model-independent ones
# isort: on
from typing import overload

from model.actions import Action
from model.registry import PROPERTIES as PROPERTIES  # the registry, read from here too
from model.registry import STEP_PARTS, StepPredicate, step_changes
from model.registry import Kind as Kind
from model.registry import Property as Property
from model.state import ClusterState

BY_NAME: dict[str, Property] = {p.name: p for p in PROPERTIES}
ALWAYS = [p for p in PROPERTIES if p.kind is Kind.ALWAYS]
TRANSITIONS = [p for p in PROPERTIES if p.kind is Kind.TRANSITION]
SOMETIMES = [p for p in PROPERTIES if p.kind is Kind.SOMETIMES]
EVENTUALLY = [p for p in PROPERTIES if p.kind is Kind.EVENTUALLY]


_CHOSEN: dict[bool | None, tuple[list[Property], list[Property]]] = {
    None: (ALWAYS, TRANSITIONS),
    **{
        independent: ([p for p in ALWAYS if p.independent is independent],
                      [p for p in TRANSITIONS if p.independent is independent])
        for independent in (True, False)
    },
}


def broken_always(state: ClusterState, independent: bool | None = None) -> list[str]:
    """Names of the ALWAYS properties ``state`` breaks. They read only the state's identity, so a
    state need be checked once, however many steps lead to it."""
    return [p.name for p in _CHOSEN[independent][0] if not p.predicate(state)]


def broken_transitions(
    before: ClusterState, action: Action, after: ClusterState, independent: bool | None = None,
    skip: frozenset[str] = frozenset(),
) -> list[str]:
    """Names of the TRANSITION properties the step breaks, leaving out those named in ``skip`` (unchecked:
    a search that has its counterexample for a property need not check it again)."""
    plan = _plan(_CHOSEN[independent][1], skip, type(action), step_changes(before, after))
    return [name for name, predicate in plan if not predicate(before, action, after)]


# Per list of properties: the ``skip`` set last asked with, and for it the plan of each (action type, changes).
_PLANS: dict[int, tuple[frozenset[str], dict[tuple[type, int], tuple[tuple[str, StepPredicate], ...]]]] = {}


def _plan(
    properties: list[Property], skip: frozenset[str], kind: type, changes: int
) -> tuple[tuple[str, StepPredicate], ...]:
    """The (name, predicate) of the step properties of ``properties`` to call on a step of action type ``kind``
    that changed the ``changes`` parts (``model.registry.step_changes``), without those named in ``skip``.

    Why: most steps touch a small part of the state (in the migration scope ZooKeeper changes in 3 steps of a
    hundred), and a property gated on the parts it reads (``Property.changes``) or on its actions
    (``Property.actions``) answers the rest trivially; leaving it out of the plan saves its call. Sound because a
    gate is the predicate's own trivial answer: the plan's verdicts are those of calling every property. The
    plans of a list are kept for its latest ``skip`` only: a search's set only grows, and a plan per (type,
    changes) and set would be kept for nothing."""
    key = id(properties)  # the lists are module constants, alive as long as the cache
    kept = _PLANS.get(key)
    if kept is None or kept[0] is not skip and kept[0] != skip:
        kept = _PLANS[key] = (skip, {})
    plans = kept[1]
    plan = plans.get((kind, changes))
    if plan is None:
        plan = plans[(kind, changes)] = tuple(
            (p.name, p.predicate) for p in properties
            if p.name not in skip
            and (not p.changes or any(changes >> STEP_PARTS.index(part) & 1 for part in p.changes))
            and (not p.actions or issubclass(kind, p.actions))
        )
    return plan


@overload
def violations(before: None, action: None, after: ClusterState, independent: bool | None = None) -> list[str]: ...
@overload
def violations(
    before: ClusterState, action: Action, after: ClusterState, independent: bool | None = None
) -> list[str]: ...
def violations(
    before: ClusterState | None, action: Action | None, after: ClusterState, independent: bool | None = None
) -> list[str]:
    """Names of the ALWAYS properties ``after`` breaks and the TRANSITION properties the step breaks
    (a step when ``before`` and ``action`` are given, the initial state when both are None)."""
    broken = broken_always(after, independent)
    if before is not None and action is not None:
        broken += broken_transitions(before, action, after, independent)
    return broken


def witnessed(
    before: ClusterState, action: Action, after: ClusterState, skip: frozenset[str] = frozenset()
) -> list[str]:
    """Names of the SOMETIMES properties the step witnesses, leaving out those named in ``skip``
    (unchecked: a search that has a witness for a property need not look for another)."""
    plan = _plan(SOMETIMES, skip, type(action), step_changes(before, after))
    return [name for name, predicate in plan if predicate(before, action, after)]
