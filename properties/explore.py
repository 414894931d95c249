"""Breadth-first exploration of a scope: every reachable state up to a depth, every step checked.

How it works:
- BFS over ``successors`` from ``initial_state(scope)``, with a seen-set of states (the
  states are hashable; equality ignores per-step ghosts, see ``model.state``). Each state remembers the
  state and action it was first reached by, so a trace is rebuilt by walking back: BFS makes
  it a shortest one.
- Every generated step is checked before it is merged into the seen-set: the TRANSITION
  properties on the step, the SOMETIMES witnesses recorded, and the ALWAYS properties on the
  new state the first time it is reached (they read only the state's identity).
- The first violation of each property is kept (the shortest, since BFS goes level by level).
  ``stop_at`` ends the search at the first violation of the named property.

How this fits with the rest: docs/design.md §6.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from model import CORRECT, SCOPES, Scope, Variant, initial_state, successors
from model.actions import Action
from model.invariants import broken_always, broken_transitions, violations, witnessed
from model.state import ClusterState
from model.symmetry import canonical


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
    complete: bool = False  # True when no unexplored state remained within max_depth
    seconds: float = 0.0
    violations: dict[str, Trace] = field(default_factory=dict)
    witnesses: dict[str, Trace] = field(default_factory=dict)
    action_counts: dict[str, int] = field(default_factory=dict)


def explore(
    scope: Scope | str,
    variant: Variant = CORRECT,
    max_depth: int | None = None,
    stop_at: str | None = None,
    max_states: int | None = None,
    progress: Callable[[ExploreResult], None] | None = None,
    symmetry: bool = False,
) -> ExploreResult:
    """Explore ``scope`` breadth-first to ``max_depth`` levels (all of it when None).

    With ``symmetry``, states that differ only by the names of interchangeable KRaft controllers
    count as one (``model.symmetry``): the first state reached of each class is the one explored,
    so counterexamples are still real action sequences from the initial state.
    """
    if isinstance(scope, str):
        scope = SCOPES[scope]
    start = time.perf_counter()
    result = ExploreResult(scope.name)
    init = initial_state(scope)
    key = canonical if symmetry else _identity
    parents: dict[ClusterState, tuple[ClusterState | None, Action | None]] = {init: (None, None)}
    seen = {key(init)}
    for name in violations(None, None, init):
        result.violations[name] = Trace([])
    frontier = [init]
    depth = 0
    while frontier and (max_depth is None or depth < max_depth):
        if stop_at is not None and stop_at in result.violations:
            break
        next_frontier: list[ClusterState] = []
        for state in frontier:
            for action, nxt in successors(state, scope, variant):
                result.generated += 1
                kind = type(action).__name__
                result.action_counts[kind] = result.action_counts.get(kind, 0) + 1
                if symmetry:
                    canon = key(nxt)
                    fresh = canon not in seen
                else:
                    canon, fresh = nxt, nxt not in parents
                broken = broken_transitions(state, action, nxt)
                if fresh:
                    broken += broken_always(nxt)
                for name in broken:
                    if name not in result.violations:
                        result.violations[name] = Trace(path_to(parents, state) + [action])
                for name in witnessed(state, action, nxt):
                    if name not in result.witnesses:
                        result.witnesses[name] = Trace(path_to(parents, state) + [action])
                if fresh:
                    if symmetry:
                        seen.add(canon)
                    parents[nxt] = (state, action)
                    next_frontier.append(nxt)
            if stop_at is not None and stop_at in result.violations:
                break
            if max_states is not None and len(parents) >= max_states:
                break
        frontier = next_frontier
        depth += 1
        result.depth = depth
        result.distinct_states = len(parents)
        if progress is not None:
            progress(result)
        if max_states is not None and len(parents) >= max_states:
            break
    result.complete = not frontier
    result.distinct_states = len(parents)
    result.seconds = time.perf_counter() - start
    return result


def _identity(state: ClusterState) -> ClusterState:
    return state


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
