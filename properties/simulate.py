"""Random simulation: long seeded walks for scopes too big to explore exhaustively.

One ``random.Random(seed)`` picks each next step uniformly among the enabled ones, so the same
seed, scope and variant replay the same walk. Every step is checked like the explorer does.
A walk ends at ``steps``, at a deadlock (nothing enabled), or at the first violation; a broken
property named in ``findings`` (the scope's documented findings) is recorded and the walk goes on.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from model import CORRECT, SCOPES, Scope, Variant, initial_state, successors
from model.actions import Action
from model.invariants import violations, witnessed
from model.state import ClusterState


@dataclass
class WalkResult:
    scope: str
    seed: int
    steps: int = 0
    deadlocked: bool = False
    seconds: float = 0.0
    violation: str | None = None
    trace: list[Action] = field(default_factory=list)
    witnesses: set[str] = field(default_factory=set)
    findings: set[str] = field(default_factory=set)  # documented findings the walk showed
    action_counts: dict[str, int] = field(default_factory=dict)


def random_path(
    scope: Scope, seed: int, steps: int, variant: Variant = CORRECT
) -> Iterator[tuple[ClusterState, list[tuple[Action, ClusterState]], int]]:
    """The seeded walk itself: each visited state, its successors, and the index of the one taken.

    Ends after ``steps`` steps or at a state with no successor (yielded with index -1).
    """
    rng = random.Random(seed)
    state = initial_state(scope)
    for _ in range(steps):
        choices = successors(state, scope, variant)
        if not choices:
            yield state, choices, -1
            return
        chosen = rng.randrange(len(choices))
        yield state, choices, chosen
        state = choices[chosen][1]


def walk(scope: Scope | str, seed: int, steps: int, variant: Variant = CORRECT,
         findings: frozenset[str] = frozenset()) -> WalkResult:
    if isinstance(scope, str):
        scope = SCOPES[scope]
    start = time.perf_counter()
    result = WalkResult(scope.name, seed)
    for state, choices, chosen in random_path(scope, seed, steps, variant):
        if chosen < 0:
            result.deadlocked = True
            break
        action, nxt = choices[chosen]
        result.trace.append(action)
        result.steps += 1
        kind = type(action).__name__
        result.action_counts[kind] = result.action_counts.get(kind, 0) + 1
        result.witnesses.update(witnessed(state, action, nxt))
        broken = violations(state, action, nxt)
        result.findings.update(b for b in broken if b in findings)
        broken = [b for b in broken if b not in findings]
        if broken:
            result.violation = broken[0]
            break
    result.seconds = time.perf_counter() - start
    return result
