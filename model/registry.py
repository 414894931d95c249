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


PROPERTIES: list[Property] = []
_section = ""


def section(title: str) -> None:
    """Properties registered after this call belong to ``title`` in the catalogue."""
    global _section
    _section = title


def _register(
    kind: Kind, name: str, meaning: str, source: str, when: StatePredicate | None = None, independent: bool = False
) -> Callable[[P], P]:
    def wrap(fn: P) -> P:
        if any(p.name == name for p in PROPERTIES):
            raise ValueError(f"duplicate property {name}")
        PROPERTIES.append(Property(name, kind, meaning, source, _section, fn, when, independent))
        return fn

    return wrap


def always(
    name: str, meaning: str, source: str, independent: bool = False
) -> Callable[[StatePredicate], StatePredicate]:
    return _register(Kind.ALWAYS, name, meaning, source, independent=independent)


def transition(
    name: str, meaning: str, source: str, independent: bool = False
) -> Callable[[StepPredicate], StepPredicate]:
    return _register(Kind.TRANSITION, name, meaning, source, independent=independent)


def sometimes(
    name: str, meaning: str, source: str, independent: bool = False
) -> Callable[[StepPredicate], StepPredicate]:
    return _register(Kind.SOMETIMES, name, meaning, source, independent=independent)


def eventually(
    name: str, meaning: str, source: str, when: StatePredicate | None = None
) -> Callable[[StatePredicate], StatePredicate]:
    """``when ~> goal``: the decorated function is the goal, ``goal(state) -> bool``; ``when(state)``
    is the trigger (None: from the initial state). Checked under weak fairness of non-perturbations."""
    return _register(Kind.EVENTUALLY, name, meaning, source, when)
