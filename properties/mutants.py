"""The seeded-bug score: run every seeded bug through the checks and say which check caught it.

A seeded bug is caught when a check reports a violation of the invariant the bug targets (a
violation of some other invariant does not count: it would hide a check that cannot fire).
The model layer's checks, in ``CHECKS``: the bounded breadth-first search of the bug's scope for
safety properties (``explore:<scope>``), the fair-cycle search of the complete graph of its scope
for EVENTUALLY properties (``liveness:<scope>``), the scope's Hypothesis machine
(``hypothesis:<scope>``) and z3 bounded model checking for the bugs a z3 encoding switches
(``z3-bmc:<scope>``). By default the first two run (they are exhaustive within their bounds);
``kraftcheck mutants --check NAME`` runs the named checks, in order, to score one check alone.
The implementation layer's bugs (``impl.bugs``, layer "impl") are caught by differential testing
(``differential:<scope>``): seeded random walks of the bug's scope drive the buggy implementation
and the model together until they disagree or a model property breaks on the implementation's
state (``properties.differential``); the report names the properties that broke, if any. A bug
that only shows in a race the walks almost never take is caught by its scripted differential run
(``properties.regressions``, ``differential:script <name>``), tried first. A bug that stalls
progress (its property is an EVENTUALLY one) never disagrees with the model at a step: it is
caught by seeded simulator runs of its scope as a campaign runs them, each ending in a quiet
continuation whose progress goals must be met (``properties.progress``; ``differential:progress
<scope> seed N``).
A mistake of the design (``impl.bugs.SHARED_SEEDED_BUGS``, layer "shared") is made by the model and
the implementation alike, so it is scored by differential testing with both switched on
(``shared:<scope>``): the model's bounded search finds its shortest counterexample, which both
then take step by step (then seeded walks, if that does not break it). It counts as caught only when
the implementation agrees with the model at every step and nothing but its own model-independent
property breaks: caught by anything else, the pair would not be showing what it is for.

How this fits with the rest: docs/design.md §5.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from impl.bugs import IMPL_SEEDED_BUGS, SHARED_SEEDED_BUGS, ImplSeededBug, SharedSeededBug
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
    if isinstance(bug, ImplSeededBug | SharedSeededBug):
        return None
    if BY_NAME[bug.invariant].kind is Kind.EVENTUALLY:
        return None
    scope = SCOPES[bug.scope]
    found = explore(scope, bug.variant, max_depth=scope.max_depth, stop_at=bug.invariant)
    trace = found.violations.get(bug.invariant)
    return None if trace is None else (f"explore:{scope.name}", trace.actions)


def _liveness_search(bug: SeededBug) -> tuple[str, list[Action]] | None:
    if isinstance(bug, ImplSeededBug | SharedSeededBug):
        return None
    if BY_NAME[bug.invariant].kind is not Kind.EVENTUALLY:
        return None
    from properties.liveness import VIOLATED, check_liveness

    result = check_liveness(bug.scope, bug.variant, props=[bug.invariant])
    verdict = result.verdicts[0]
    if verdict.result != VIOLATED:
        return None
    return f"liveness:{bug.scope}", list(verdict.lasso.prefix) + list(verdict.lasso.loop)


HYPOTHESIS_EXAMPLES = 1_000  # Hypothesis stops at the first failure; a clean run of this many is an escape


def _hypothesis_machine(bug: SeededBug) -> tuple[str, list[Action]] | None:
    """The scope's Hypothesis machine with the bug switched on (derandomized, so a verdict repeats)."""
    if isinstance(bug, ImplSeededBug | SharedSeededBug):
        return None
    if BY_NAME[bug.invariant].kind is Kind.EVENTUALLY:
        return None
    import tempfile

    from properties.machines import InvariantViolation, machine_class, run_machine

    with tempfile.TemporaryDirectory() as traces_dir:
        machine = machine_class(bug.scope, bug.variant, trace_dir=traces_dir)
        try:
            run_machine(
                machine, max_examples=HYPOTHESIS_EXAMPLES, derandomize=True, database=None, deadline=None,
                stateful_step_count=50,
            )
        except (InvariantViolation, BaseExceptionGroup) as raised:
            for violation in _violations(raised):
                if bug.invariant in violation.invariants:
                    return f"hypothesis:{bug.scope}", list(violation.trace.actions)
    return None


def _violations(error: BaseException) -> list:
    if isinstance(error, BaseExceptionGroup):
        return [v for e in error.exceptions for v in _violations(e)]
    return [error] if hasattr(error, "invariants") else []


def _z3_bmc(bug: SeededBug) -> tuple[str, list[Action]] | None:
    """Bounded model checking, from the bug's scope, of a z3 encoding that switches the bug and encodes
    its invariant (properties.proofs.fencing: the fencing core; properties.proofs.migration: the migration's;
    properties.proofs.heartbeats: KRaft brokers' registrations and heartbeats). A bug whose scope has
    states the core does not model is searched for from the core's own scopes instead."""
    from properties.proofs import cores
    from properties.proofs.engine import OutsideProjection

    if isinstance(bug, ImplSeededBug | SharedSeededBug):
        return None
    for core in cores():
        if bug.bug not in core.encoded_bugs or bug.invariant not in core.property_names:
            continue
        for scope in (bug.scope, *core.scopes):
            try:
                result = core.bmc_in_scope(20, bug.variant, scope=scope, properties=(bug.invariant,))
            except OutsideProjection:
                continue  # the scope has states this core does not model
            for p in result.properties:
                if p.name == bug.invariant and not p.holds and p.counterexample is not None:
                    return f"z3-bmc:{scope}", list(p.counterexample.actions)
            break  # the bug's scope (or the first of the core's that projects) was searched to the depth
    return None


DIFFERENTIAL_SEEDS = 300  # walks per implementation bug before it counts as an escape
DIFFERENTIAL_STEPS = 60
# Simulator runs per implementation bug that stalls progress before it counts as an escape.
PROGRESS_SEEDS = 24


def _progress(bug: ImplSeededBug) -> tuple[str, list[Action]] | None:
    """Seeded runs of the bug's scope as a campaign's (its default plan), until one stalls on the bug's goal; for a
    safety bug registered for a simulator scenario (reached only by what a campaign draws: its configurations,
    its admin's requests), until one disagrees."""
    from properties.plan import Plan
    from properties.progress import Stall
    from properties.runs import run_seed

    plan = Plan(scope=bug.scope, mutant=bug.name)
    for seed in range(PROGRESS_SEEDS):
        run = run_seed(plan, seed, coverage=False)
        if isinstance(run.disagreement, Stall) and run.disagreement.goal.name == bug.invariant:
            return f"differential:progress {bug.scope} seed {seed}", [s.action for s in run.record]
        if run.disagreement is not None and BY_NAME[bug.invariant].kind is not Kind.EVENTUALLY:
            broken = getattr(run.disagreement, "broken", [])
            broke = f" (broke {', '.join(broken)})" if broken else ""
            return f"differential:campaign run {bug.scope} seed {seed}{broke}", [s.action for s in run.record]
    return None


def _differential(bug: SeededBug | ImplSeededBug) -> tuple[str, list[Action]] | None:
    """Seeded differential walks of the bug's scope with the implementation bug switched on."""
    if not isinstance(bug, ImplSeededBug):
        return None
    if BY_NAME[bug.invariant].kind is Kind.EVENTUALLY or bug.scope not in SCOPES:
        stalled = _progress(bug)
        if stalled is not None or bug.scope not in SCOPES:
            return stalled  # (else: a bug that breaks progress in the model's sense may disagree at a step too)
    from properties.differential import Disagreement, walk
    from properties.regressions import CATCHING_SCRIPT, run_script

    scope = SCOPES[bug.scope]
    script = CATCHING_SCRIPT.get(bug.bug)
    if script is not None:
        try:
            run_script(script, frozenset({bug.bug}))
        except Disagreement as found:
            broke = f" (broke {', '.join(found.broken)})" if found.broken else ""
            return f"differential:script {script}{broke}", list(found.steps)
    for seed in range(DIFFERENTIAL_SEEDS):
        swarm = seed % 2 == 1  # plain and swarm walks in turn (properties.differential.walk)
        try:
            walk(scope, seed, DIFFERENTIAL_STEPS, bugs=frozenset({bug.bug}), swarm=swarm)
        except Disagreement as found:
            broke = f" (broke {', '.join(found.broken)})" if found.broken else ""
            kind = "swarm walk" if swarm else "walk"
            return f"differential:{scope.name} {kind} {seed}{broke}", list(found.steps)
    return None


def shared_counterexample(bug: SharedSeededBug) -> list[Action] | None:
    """The model bug's shortest counterexample in its scope (a bounded search), or None."""
    scope = SCOPES[bug.scope]
    found = explore(scope, Variant(frozenset({bug.model_bug})), max_depth=scope.max_depth, stop_at=bug.invariant)
    trace = found.violations.get(bug.invariant)
    return None if trace is None else trace.actions


def _shared(bug: SeededBug | ImplSeededBug | SharedSeededBug) -> tuple[str, list[Action]] | None:
    """The model and the implementation with the same mistake, driven together: only its property may break."""
    if not isinstance(bug, SharedSeededBug):
        return None
    from properties.differential import Differential, Disagreement, walk

    scope = SCOPES[bug.scope]
    bugs, variant = frozenset({bug.bug}), Variant(frozenset({bug.model_bug}))

    def only_its_own(found: Disagreement) -> bool:
        """Its properties broke on states that agree (a disagreement of state carries details)."""
        return set(found.broken) == bug.breaks and not found.details

    steps = shared_counterexample(bug)
    if steps is not None:
        diff = Differential(scope, bugs=bugs, variant=variant)
        try:
            for action in steps:
                diff.apply(action)
        except Disagreement as found:
            if only_its_own(found):
                return f"shared:{scope.name} (its counterexample)", list(found.steps)
            return None
    for seed in range(DIFFERENTIAL_SEEDS):
        swarm = seed % 2 == 1
        try:
            walk(scope, seed, DIFFERENTIAL_STEPS, bugs=bugs, variant=variant, swarm=swarm)
        except Disagreement as found:
            if only_its_own(found):
                return f"shared:{scope.name} {'swarm walk' if swarm else 'walk'} {seed}", list(found.steps)
            return None
    return None


# In order: the first check that catches a bug is credited. ``--check`` narrows the list, to see
# what one check alone catches.
CHECKS: dict[str, Callable[[SeededBug], tuple[str, list[Action]] | None]] = {
    "explore": _bounded_search,
    "liveness": _liveness_search,
    "hypothesis": _hypothesis_machine,
    "z3": _z3_bmc,
    "differential": _differential,
    "shared": _shared,
}
DEFAULT_CHECKS = ("explore", "liveness", "differential", "shared")


def layer_of(bug: SeededBug | ImplSeededBug | SharedSeededBug) -> str:
    return "shared" if isinstance(bug, SharedSeededBug) else "impl" if isinstance(bug, ImplSeededBug) else "model"


def run_mutant(
    bug: SeededBug | ImplSeededBug | SharedSeededBug, checks: tuple[str, ...] = DEFAULT_CHECKS
) -> MutantResult:
    layer = layer_of(bug)
    start = time.perf_counter()
    for name in checks:
        caught = CHECKS[name](bug)
        if caught is not None:
            by, trace = caught
            return MutantResult(bug.name, layer, bug.invariant, by, time.perf_counter() - start, trace)
    return MutantResult(bug.name, layer, bug.invariant, None, time.perf_counter() - start, None)


ALL_SEEDED_BUGS: tuple[SeededBug | ImplSeededBug | SharedSeededBug, ...] = (
    *SEEDED_BUGS, *IMPL_SEEDED_BUGS, *SHARED_SEEDED_BUGS
)


def run_all(names: list[str] | None = None, checks: tuple[str, ...] = DEFAULT_CHECKS) -> list[MutantResult]:
    chosen = [b for b in ALL_SEEDED_BUGS if names is None or b.name in names]
    return [run_mutant(b, checks) for b in chosen]
