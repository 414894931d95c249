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
    chosen = _CHOSEN[independent][1]
    if skip:
        chosen = _left(chosen, skip)
    return [p.name for p in chosen if not p.predicate(before, action, after)]


_LEFT: dict[tuple[int, frozenset[str]], list[Property]] = {}


def _left(properties: list[Property], skip: frozenset[str]) -> list[Property]:
    """``properties`` without those named in ``skip``, kept per list and set: a search asks with the same
    few sets again and again, and filtering on every step would cost more than it saves."""
    key = (id(properties), skip)  # the lists are module constants, alive as long as the cache
    left = _LEFT.get(key)
    if left is None:
        left = _LEFT[key] = [p for p in properties if p.name not in skip]
    return left


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
    return [p.name for p in (_left(SOMETIMES, skip) if skip else SOMETIMES) if p.predicate(before, action, after)]
