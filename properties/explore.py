"""Breadth-first exploration: every reachable state up to a depth, every step checked.

The engine (``search``) takes any model written in the model API, as a ``Spec``: an initial
state, a successor function listing (action, state) pairs in a fixed order, and the checks.
``explore`` runs it on a scope of the Kafka model; ``bench.twophase`` runs it on TwoPhase commit,
the model TLC is calibrated with, so that its figures are this engine's.

How it works:
- BFS over ``successors`` from the initial state, with a seen-set of states (the states are
  hashable; equality ignores per-step ghosts, see ``model.state``). Each state remembers the
  state and action it was first reached by, so a trace is rebuilt by walking back: BFS makes
  it a shortest one.
- Every generated step is checked before it is merged into the seen-set: the TRANSITION
  properties on the step, the SOMETIMES witnesses recorded, and the ALWAYS properties on the
  new state the first time it is reached (they read only the state's identity). A stuttering
  step, one that hands back its state itself, is checked but never looked up: it reaches
  nothing new.
- The first violation of each property is kept (the shortest, since BFS goes level by level).
  ``stop_at`` ends the search at the first violation of the named property.
- The cyclic garbage collector is kept off the seen-set: the states kept are frozen records,
  which cannot form cycles, so after each level they are moved out of its reach
  (``gc.freeze``) instead of being scanned again at every full collection as the set grows.

How this fits with the rest: docs/design.md §6.
"""

from __future__ import annotations

import functools
import gc
import time
from collections import Counter
from collections import _count_elements as count_elements  # Counter.update's C loop, see search
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Generic, TypeVar

from model import CORRECT, SCOPES, Scope, Variant, initial_state, successors
from model.actions import Action
from model.invariants import broken_always, broken_transitions, witnessed
from model.symmetry import canonical

S = TypeVar("S", bound=Hashable)
A = TypeVar("A")
first = itemgetter(0)


@dataclass
class Trace:
    """How a state was reached: the actions from the scope's initial state, in order."""

    actions: list[Action]

    def __len__(self) -> int:
        return len(self.actions)


@dataclass
class ExploreResult:
    scope: str
    distinct_states: int = 0
    generated: int = 0
    depth: int = 0  # the deepest level reached
    frontier: int = 0  # states of the last level, still to expand
    complete: bool = False  # True when no unexplored state remained within max_depth
    seconds: float = 0.0
    violations: dict[str, Trace] = field(default_factory=dict)
    witnesses: dict[str, Trace] = field(default_factory=dict)
    action_counts: dict[str, int] = field(default_factory=dict)
    workers: int = 1  # processes the search ran on (1: the serial engine)
    # The parallel (64-bit) and Spark (128-bit) engines keep fingerprints in their seen-sets: the chance
    # that two states shared one (and one was lost); None for the serial engine, which compares states.
    collision_chance: float | None = None


@dataclass(frozen=True)
class Spec(Generic[S, A]):
    """A model for the engine, in the model API: frozen hashable states and one transition function.

    ``successors(state)`` lists every enabled action with the state it leads to, in a fixed
    order that does not depend on hashing (``model.step.successors``). ``broken_always(state)``
    names the state invariants ``state`` breaks. The step checks are optional: a model with
    none (TwoPhase) pays nothing for them. They take a keyword ``skip``, the names the search
    has already decided (a counterexample or a witness found), which they may leave unchecked:
    the search keeps the first step found per property, so checking again changes nothing.
    ``canonical`` maps a state to the representative of its symmetry class; states with the same
    representative count as one.
    """

    name: str
    initial: S
    successors: Callable[[S], Sequence[tuple[A, S]]]
    broken_always: Callable[[S], list[str]]
    broken_transitions: Callable[..., list[str]] | None = None  # (before, action, after, skip=frozenset())
    witnessed: Callable[..., list[str]] | None = None  # (before, action, after, skip=frozenset())
    canonical: Callable[[S], Hashable] | None = None


def explore(
    scope: Scope | str,
    variant: Variant = CORRECT,
    max_depth: int | None = None,
    stop_at: str | None = None,
    max_states: int | None = None,
    progress: Callable[[ExploreResult], None] | None = None,
    symmetry: bool = False,
    workers: int = 1,
) -> ExploreResult:
    """Explore ``scope`` breadth-first to ``max_depth`` levels (all of it when None).

    With ``symmetry``, states that differ only by the names of interchangeable KRaft controllers
    count as one (``model.symmetry``): the first state reached of each class is the one explored,
    so counterexamples are still real action sequences from the initial state.

    ``workers`` other than 1 runs the search on that many processes (``properties.parallel``;
    0: one per core), with the same counts and traces.
    """
    spec = scope_spec(scope, variant, symmetry)
    if workers != 1:
        from properties.parallel import parallel_search

        return parallel_search(spec, workers or None, max_depth, stop_at, max_states, progress)
    return search(spec, max_depth, stop_at, max_states, progress)


def scope_spec(scope: Scope | str, variant: Variant = CORRECT, symmetry: bool = False) -> Spec:
    """The Kafka model on ``scope`` as a ``Spec``: every ALWAYS, TRANSITION and SOMETIMES property."""
    if isinstance(scope, str):
        scope = SCOPES[scope]
    return Spec(
        name=scope.name,
        initial=initial_state(scope),
        successors=functools.partial(successors, scope=scope, variant=variant),
        broken_always=broken_always,
        broken_transitions=broken_transitions,
        witnessed=witnessed,
        canonical=canonical if symmetry else None,
    )


def search(
    spec: Spec,
    max_depth: int | None = None,
    stop_at: str | None = None,
    max_states: int | None = None,
    progress: Callable[[ExploreResult], None] | None = None,
) -> ExploreResult:
    """Explore ``spec`` breadth-first to ``max_depth`` levels (all of it when None)."""
    start = time.perf_counter()
    result = ExploreResult(spec.name)
    next_states, broken_always_in = spec.successors, spec.broken_always
    broken_by_step, witnessed_by_step, canonical_of = spec.broken_transitions, spec.witnessed, spec.canonical
    init = spec.initial
    parents: dict[Hashable, tuple[Hashable | None, object | None]] = {init: (None, None)}
    # With symmetry the seen-set holds representatives; without, ``parents`` is the seen-set.
    seen = {canonical_of(init)} if canonical_of is not None else parents
    for name in broken_always_in(init):
        result.violations[name] = Trace([])
    counts: Counter[type] = Counter()  # per action type, named in ``result.action_counts`` after each level
    check_steps = broken_by_step is not None or witnessed_by_step is not None
    generated = 0
    frontier = [init]
    depth = 0
    frozen = not gc.isenabled() or gc.get_freeze_count()

    def found(names: Iterable[str], table: dict[str, Trace], state: Hashable, action: object) -> bool:
        """Keep the first trace per name; True when a name is new."""
        new = False
        for name in names:
            if name not in table:
                table[name] = Trace(path_to(parents, state) + [action])
                new = True
        return new

    decided_broken: frozenset[str] = frozenset()  # the step checks leave these unchecked (Spec)
    decided_witnessed: frozenset[str] = frozenset()

    try:
        while frontier and (max_depth is None or depth < max_depth):
            if stop_at is not None and stop_at in result.violations:
                break
            next_frontier: list[Hashable] = []
            for state in frontier:
                steps = next_states(state)
                generated += len(steps)
                # In C, and without Counter.update's isinstance(Mapping), which costs more than the count.
                count_elements(counts, map(type, map(first, steps)))
                for action, nxt in steps:
                    if check_steps:
                        if broken_by_step is not None:
                            broken = broken_by_step(state, action, nxt, skip=decided_broken)
                            if broken and found(broken, result.violations, state, action):
                                decided_broken = frozenset(result.violations)
                        if witnessed_by_step is not None:
                            seen_now = witnessed_by_step(state, action, nxt, skip=decided_witnessed)
                            if seen_now and found(seen_now, result.witnesses, state, action):
                                decided_witnessed = frozenset(result.witnesses)
                    if nxt is state:  # a stutter: its state is already in the seen-set
                        continue
                    if canonical_of is not None:
                        key = canonical_of(nxt)
                        if key in seen:
                            continue
                        seen.add(key)
                    elif nxt in parents:
                        continue
                    broken = broken_always_in(nxt)
                    if broken:
                        found(broken, result.violations, state, action)
                    parents[nxt] = (state, action)
                    next_frontier.append(nxt)
                if stop_at is not None and stop_at in result.violations:
                    break
                if max_states is not None and len(parents) >= max_states:
                    break
            frontier = next_frontier
            depth += 1
            if not frozen:
                gc.freeze()  # the level's states stay for good: no collection need scan them again
            result.depth = depth
            result.frontier = len(frontier)
            result.distinct_states = len(parents)
            result.generated = generated
            result.action_counts = {kind.__name__: n for kind, n in counts.items()}
            if progress is not None:
                progress(result)
            if max_states is not None and len(parents) >= max_states:
                break
    finally:
        if not frozen:
            gc.unfreeze()
    result.complete = not frontier
    result.distinct_states = len(parents)
    result.generated = generated
    result.action_counts = {kind.__name__: n for kind, n in counts.items()}
    result.seconds = time.perf_counter() - start
    return result


def path_to(parents: dict, state) -> list[Action]:
    """The actions from the root to ``state``, walking back over a map of state -> (parent, action)."""
    actions: list[Action] = []
    while True:
        parent, action = parents[state]
        if parent is None:
            break
        actions.append(action)
        state = parent
    actions.reverse()
    return actions
