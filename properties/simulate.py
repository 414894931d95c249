"""Random simulation: long seeded walks for scopes too big to explore exhaustively.

One ``random.Random(seed)`` picks each next step uniformly among the enabled ones, so the same
seed, scope and variant replay the same walk. Every step is checked like the explorer does.
A walk ends at ``steps``, at a deadlock (nothing enabled), or at the first violation.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

from model import CORRECT, SCOPES, Scope, Variant, initial_state, successors
from model.actions import Action
from model.invariants import violations, witnessed


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
    action_counts: dict[str, int] = field(default_factory=dict)


def walk(scope: Scope | str, seed: int, steps: int, variant: Variant = CORRECT) -> WalkResult:
    if isinstance(scope, str):
        scope = SCOPES[scope]
    rng = random.Random(seed)
    start = time.perf_counter()
    result = WalkResult(scope.name, seed)
    state = initial_state(scope)
    for _ in range(steps):
        choices = successors(state, scope, variant)
        if not choices:
            result.deadlocked = True
            break
        action, nxt = choices[rng.randrange(len(choices))]
        result.trace.append(action)
        result.steps += 1
        kind = type(action).__name__
        result.action_counts[kind] = result.action_counts.get(kind, 0) + 1
        result.witnesses.update(witnessed(state, action, nxt))
        broken = violations(state, action, nxt)
        if broken:
            result.violation = broken[0]
            break
        state = nxt
    result.seconds = time.perf_counter() - start
    return result
