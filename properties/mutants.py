"""The seeded-bug score: run every seeded bug through the checks and say which check caught it.

A seeded bug is caught when a check reports a violation of the invariant the bug targets (a
violation of some other invariant does not count: it would hide a check that cannot fire).
Today the model layer has one check, the bounded breadth-first search of the bug's scope
(``explore:<scope>``); later checks (Hypothesis machines, z3) add themselves to ``CHECKS``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from model import SCOPES, SEEDED_BUGS, SeededBug, Variant
from model.actions import Action
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
    scope = SCOPES[bug.scope]
    found = explore(scope, Variant(frozenset({bug.bug})), max_depth=scope.max_depth, stop_at=bug.invariant)
    trace = found.violations.get(bug.invariant)
    return None if trace is None else (f"explore:{scope.name}", trace.actions)


CHECKS: list[Callable[[SeededBug], tuple[str, list[Action]] | None]] = [_bounded_search]


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
