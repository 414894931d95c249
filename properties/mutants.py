"""The seeded-bug score: run every seeded bug through the checks and say which check caught it.

A seeded bug is caught when a check reports a violation of the invariant the bug targets (a
violation of some other invariant does not count: it would hide a check that cannot fire).
The model layer has two checks: the bounded breadth-first search of the bug's scope for safety
properties (``explore:<scope>``), and the fair-cycle search of the complete graph of its scope
for EVENTUALLY properties (``liveness:<scope>``). Later checks add themselves to ``CHECKS``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from model import SCOPES, SEEDED_BUGS, SeededBug, Variant
from model.actions import Action
from model.invariants import BY_NAME, Kind
from properties.explore import explore


@dataclass
class MutantResult:
    name: str
    layer: str
    invariant: str
    caught_by: str | None
    seconds: float
    counterexample: list[Action] | None

    def as_json(self) -> dict:
        return {
            "name": self.name,
            "layer": self.layer,
            "invariant": self.invariant,
            "caught_by": self.caught_by,
            "seconds": round(self.seconds, 3),
            "counterexample_length": None if self.counterexample is None else len(self.counterexample),
            "counterexample": None if self.counterexample is None else [repr(a) for a in self.counterexample],
        }


def _bounded_search(bug: SeededBug) -> tuple[str, list[Action]] | None:
    if BY_NAME[bug.invariant].kind is Kind.EVENTUALLY:
        return None
    scope = SCOPES[bug.scope]
    found = explore(scope, Variant(frozenset({bug.bug})), max_depth=scope.max_depth, stop_at=bug.invariant)
    trace = found.violations.get(bug.invariant)
    return None if trace is None else (f"explore:{scope.name}", trace.actions)


def _liveness_search(bug: SeededBug) -> tuple[str, list[Action]] | None:
    if BY_NAME[bug.invariant].kind is not Kind.EVENTUALLY:
        return None
    from properties.liveness import VIOLATED, check_liveness

    result = check_liveness(bug.scope, Variant(frozenset({bug.bug})), props=[bug.invariant])
    verdict = result.verdicts[0]
    if verdict.result != VIOLATED:
        return None
    return f"liveness:{bug.scope}", list(verdict.lasso.prefix) + list(verdict.lasso.loop)


CHECKS: list[Callable[[SeededBug], tuple[str, list[Action]] | None]] = [_bounded_search, _liveness_search]


def run_mutant(bug: SeededBug) -> MutantResult:
    start = time.perf_counter()
    for check in CHECKS:
        caught = check(bug)
        if caught is not None:
            by, trace = caught
            return MutantResult(bug.name, "model", bug.invariant, by, time.perf_counter() - start, trace)
    return MutantResult(bug.name, "model", bug.invariant, None, time.perf_counter() - start, None)


def run_all(names: list[str] | None = None) -> list[MutantResult]:
    chosen = [b for b in SEEDED_BUGS if names is None or b.name in names]
    return [run_mutant(b) for b in chosen]
