"""The registry of named properties: their kinds, and the decorators each part's properties register with.

Kinds (after stateright's ``always`` / ``sometimes`` and TLA+'s action properties):
- ``ALWAYS``: a predicate on every reachable state.
- ``TRANSITION``: a predicate on every step ``(before, action, after)``; monotonicity lives here.
- ``SOMETIMES``: a witness on a step that some reachable step must satisfy. Each keeps an
  ALWAYS or TRANSITION property from being vacuous (the situation it guards does happen).
- ``EVENTUALLY``: a leads-to property ``when ~> goal`` on states: on every fair behaviour, from any
  reachable state where ``when`` holds (the initial state when ``when`` is None), a state where
  the goal (the predicate) holds eventually comes. Fairness: weak fairness of every action
  instance whose type is not in ``model.actions.PERTURBATIONS``; perturbations get none (the
  rule is ``properties.liveness.is_fair``, which checks these on the explored graph).

Every property names the seed section it comes from (``KIP-nnn §Section``); the invariant
catalogue in docs/ is generated from this registry. The properties live in a module per part of
the model (``model.zk_invariants``, ``model.kraft_invariants``, ``model.migration_invariants``), and
the model-independent ones, registered ``independent``, in ``model.end_to_end_invariants``;
``model.invariants`` imports them in order and answers the queries over all of them
(``BY_NAME``, ``violations``). Predicates read ground truth from ZooKeeper and compare it with
what nodes believe; they never call ``step``. An ALWAYS predicate reads only what is part of a state's identity (never
``state.ghost``), so checking each distinct state once is enough; what depends on per-step
ghosts is a TRANSITION property.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import TypeVar

from model.actions import Action
from model.state import ClusterState

# What a property's predicate is, by kind: ALWAYS and EVENTUALLY (and an EVENTUALLY's trigger) read a
# state, TRANSITION and SOMETIMES a step.
StatePredicate = Callable[[ClusterState], bool]
StepPredicate = Callable[[ClusterState, Action, ClusterState], bool]
P = TypeVar("P", StatePredicate, StepPredicate)


class Kind(Enum):
    ALWAYS = "always"
    TRANSITION = "transition"
    SOMETIMES = "sometimes"
    EVENTUALLY = "eventually"


@dataclass(frozen=True)
class Property:
    name: str
    kind: Kind
    meaning: str
    source: str
    section: str  # the part of the control plane it is about, for the catalogue
    # A StatePredicate or a StepPredicate, as ``kind`` says; the decorators below check which at
    # registration, so a caller that has chosen properties by kind calls it with those arguments.
    predicate: Callable[..., bool]
    when: StatePredicate | None = None  # EVENTUALLY only: the trigger; None: from the initial state
    # Stated over what a user can see, not over the model's rules (``model.end_to_end_invariants``): it holds
    # however the protocol is written, so it can fail where the model and the implementation share a mistake.
    independent: bool = False
    # TRANSITION and SOMETIMES only, a step's cheap facts without which the predicate is trivially answered (it
    # holds, or witnesses nothing), so that ``model.invariants`` need not call it: ``changes``, parts of the
    # step (``STEP_PARTS``) one of which must have changed; ``actions``, action types one of which the action
    # must be. Empty: no such fact. Each is the predicate's own first test, or follows from what it reads (a
    # ZooKeeper left alone holds the same znodes; a ghost list the step left empty has no bad entry and
    # witnesses nothing); tests/test_step_gates.py checks every declaration on steps the model cannot take.
    changes: tuple[str, ...] = ()
    actions: tuple[type[Action], ...] = ()


# The parts of a step a property may be gated on (``Property.changes``): bit i of ``step_changes`` is set when
# part i may have changed. Identity is what is compared, so an equal but rebuilt part counts as changed (the
# property is then called, which is always sound); a part of the ghost that describes only the step counts
# as changed when the step left anything in it.
STEP_PARTS = ("zk", "brokers", "controllers", "committed", "applied_writes", "last_multi", "kraft_writes",
              "attempted_kraft_write")


def step_changes(before: ClusterState, after: ClusterState) -> int:
    """The bit mask of the ``STEP_PARTS`` the step from ``before`` to ``after`` may have changed."""
    ghost = after.ghost
    return ((after.zk is not before.zk)
            | (after.brokers is not before.brokers) << 1
            | (after.controllers is not before.controllers) << 2
            | (after.history.committed is not before.history.committed) << 3
            | (ghost.applied_writes is not before.ghost.applied_writes) << 4
            | bool(ghost.last_multi) << 5
            | bool(ghost.kraft_writes) << 6
            | bool(ghost.attempted_kraft_write) << 7)


PROPERTIES: list[Property] = []
_section = ""


def section(title: str) -> None:
    """Properties registered after this call belong to ``title`` in the catalogue."""
    global _section
    _section = title


def _register(
    kind: Kind, name: str, meaning: str, source: str, when: StatePredicate | None = None, independent: bool = False,
    changes: tuple[str, ...] = (), actions: tuple[type[Action], ...] = (),
) -> Callable[[P], P]:
    def wrap(fn: P) -> P:
        if any(p.name == name for p in PROPERTIES):
            raise ValueError(f"duplicate property {name}")
        unknown = [part for part in changes if part not in STEP_PARTS]
        if unknown:
            raise ValueError(f"{name}: no step part {unknown[0]!r} (model.registry.STEP_PARTS)")
        PROPERTIES.append(Property(name, kind, meaning, source, _section, fn, when, independent, changes, actions))
        return fn

    return wrap


def always(
    name: str, meaning: str, source: str, independent: bool = False
) -> Callable[[StatePredicate], StatePredicate]:
    return _register(Kind.ALWAYS, name, meaning, source, independent=independent)


def transition(
    name: str, meaning: str, source: str, independent: bool = False,
    changes: tuple[str, ...] = (), actions: tuple[type[Action], ...] = (),
) -> Callable[[StepPredicate], StepPredicate]:
    """``changes``/``actions``: the step holds unless one of those parts changed / it is one of those actions."""
    return _register(Kind.TRANSITION, name, meaning, source, independent=independent, changes=changes,
                     actions=actions)


def sometimes(
    name: str, meaning: str, source: str, independent: bool = False,
    changes: tuple[str, ...] = (), actions: tuple[type[Action], ...] = (),
) -> Callable[[StepPredicate], StepPredicate]:
    """``changes``/``actions``: the step witnesses nothing unless one of those parts changed / it is one of those
    actions."""
    return _register(Kind.SOMETIMES, name, meaning, source, independent=independent, changes=changes,
                     actions=actions)


def eventually(
    name: str, meaning: str, source: str, when: StatePredicate | None = None
) -> Callable[[StatePredicate], StatePredicate]:
    """``when ~> goal``: the decorated function is the goal, ``goal(state) -> bool``; ``when(state)``
    is the trigger (None: from the initial state). Checked under weak fairness of non-perturbations."""
    return _register(Kind.EVENTUALLY, name, meaning, source, when)
