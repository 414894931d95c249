"""Counterexamples of the implementation: a violation's signature, its replay without the simulator, its shrinking.

A checked simulator run that disagrees with the model (``properties.runs.run_seed``) leaves its
record: every event as a ``SimStep`` (the clock, the node pairs a partition separated, the model
action). This module turns that record into a short trace a person can read:

- ``signature_of(disagreement)`` is the key violations are grouped by: the broken invariants,
  sorted, when there are any (``"MultiIsAllOrNothing,ZkEqualsImageAtMigrationOffset"``); else
  ``Disagreement:<kind>@<action>:<fields>``, the kind of disagreement (``state``, ``metrics``,
  ``not-allowed``, ``refused``), the kind of action it came after, and the fields that differ
  with any index or number inside brackets replaced by ``*``
  (``Disagreement:state@BecomeZkController:controllers[*].driver.migration_version``). Nothing
  run-specific (zxids, times, which broker) goes in, so two seeds hitting one bug group together.
- ``replay_steps(scope, seed, bugs, variant, steps)`` performs the steps on a fresh
  ``Differential`` (the implementation and the model, with the run's seed: the cluster's rng
  draws incarnation ids), each at its recorded time and with its recorded partitions, and
  returns the Disagreement it raises, or None. Replay, shrinking and ``kraftcheck pin`` share it.
- A stall (``properties.progress``) is replayed with its ``Handover``: the steps of the fault
  window as recorded, then the quiet continuation generated again from where they leave the
  cluster (its recorded steps are for the reader). Its shrinking removes steps of the fault window
  only, each candidate followed by its own continuation, and keeps a candidate whose continuation
  still heals and then stalls on the same goal: it stays a liveness counterexample.
- ``shrink_violation`` first cuts the record after the event that disagreed, then runs delta
  debugging (ddmin, complements only: a trace without its start-up is never a run): it removes
  chunks of steps, halving the chunk size whenever no chunk can go, down to single steps, until
  no single step can be removed (1-minimal) or the time budget runs out (``minimal`` says
  which). A candidate is kept when its replay raises a Disagreement with the same signature; if
  it raises before its last step, the steps after that one go too.
- Replays dominate the cost (~0.5 ms a step), so a candidate does not start from the cold
  cluster: the shrinker keeps copies of the Differential after every ``CHECKPOINT_EVERY``-th step
  of the current trace, and chunks are tried from the end backwards, so that a removal leaves
  every checkpoint before it valid. The result is replayed once more from a fresh cluster;
  ``reproduced`` is that replay's verdict.
- Deterministic: the same record and signature give the same shrunk trace when it finishes
  within its budget.
"""

from __future__ import annotations

import copy
import re
import time
from dataclasses import dataclass, field, replace

from impl.bugs import ImplBug
from impl.sim.simulator import SimStep
from model.actions import Action
from model.bugs import Variant
from model.invariants import BY_NAME
from model.scopes import Scope
from properties.differential import Differential, Disagreement
from properties.plan import Plan, resolve_mutant  # noqa: F401 - resolve_mutant: read from here too
from properties.progress import Handover, ProgressMonitor, Stall, goal_of, quiet_continuation, run_quietly
from properties.traces import DifferentialTrace

CHECKPOINT_EVERY = 16  # steps of the current trace between two saved copies of the Differential

# ---- signatures ------------------------------------------------------------------------------

_KINDS = (  # how Differential words each way of disagreeing, and the kind a signature names
    ("which the model does not allow here", "not-allowed"),
    ("which the model takes", "refused"),
    ("metrics are not the model's", "metrics"),
    ("state is not the model's", "state"),
)
_BRACKETED = re.compile(r"\[[^\]]*\]")
_NUMBER = re.compile(r"\d+")
_TOOK = re.compile(r"the implementation (?:took|refused) (\w+)\(")


def signature_of(disagreement: Disagreement) -> str:
    """The key that groups violations: the broken invariants, or the kind of disagreement and the fields that differ."""
    if isinstance(disagreement, Stall):
        return disagreement.signature
    broken = sorted({name if name in BY_NAME else "PropertiesNotEvaluable" for name in disagreement.broken})
    if broken:
        return ",".join(broken)
    kind = next((k for phrase, k in _KINDS if phrase in disagreement.summary), "other")
    took = _TOOK.search(disagreement.summary)
    if took is not None:  # the step the implementation took or refused, not only the one it was asked for
        action = took.group(1)
    else:
        action = type(disagreement.steps[-1]).__name__ if disagreement.steps else "start"
    fields = sorted({_field(detail) for detail in disagreement.details if not detail.startswith("... and ")})
    return f"Disagreement:{kind}@{action}:{','.join(fields)}"


def _field(detail: str) -> str:
    """``brokers[2].epoch: impl 1, model 8`` -> ``brokers[*].epoch``; the ghost's send order -> ``sent-order``."""
    name = detail.split(": ", 1)[0]
    if name.startswith("sent, in order"):
        return "sent-order"
    return _BRACKETED.sub(lambda m: _NUMBER.sub("*", m.group()), name)


def invariant_of(signature: str) -> str:
    """The violations table's ``invariant``: the first broken invariant, the goal a stall names, or
    "Disagreement"."""
    first = goal_of(signature) or signature.split(",")[0]
    return first if first in BY_NAME else "Disagreement"


def slug(signature: str) -> str:
    """A file name for a signature group: ``Disagreement-state-BecomeZkController-controllers-driver...``."""
    return re.sub(r"[^A-Za-z0-9_]+", "-", signature).strip("-")[:120] or "violation"


def _scope(scope: Scope | str) -> Scope:
    from impl.sim.scenarios import scenario

    return scenario(scope) if isinstance(scope, str) else scope


# ---- replay ----------------------------------------------------------------------------------


class _Cuts:
    """A replayed cluster's reachability: the node pairs the step being replayed had partitioned."""

    __slots__ = ("cuts",)

    def __init__(self) -> None:
        self.cuts: tuple[tuple[int, int], ...] = ()

    def __call__(self, source: int, dest: int) -> bool:
        return (min(source, dest), max(source, dest)) not in self.cuts


def _fresh(scope: Scope, seed: int, bugs: frozenset[ImplBug], variant: Variant) -> Differential:
    diff = Differential(scope, bugs=bugs, variant=variant, seed=seed, bounded=False, strict=False)
    diff.cluster.reachable = _Cuts()
    return diff


def _perform(diff: Differential, sim_step: SimStep) -> list[Action]:
    diff.cluster.now = sim_step.now
    diff.cluster.reachable.cuts = sim_step.cuts
    return diff.apply(sim_step.action)


@dataclass
class Replayed:
    """What a replay did: per step performed, the actions the implementation said it took; how it ended."""

    taken: list[tuple[Action, ...]]
    disagreement: Disagreement | None
    failed_at: int | None  # 0-based index of the step that raised; None when it replayed clean
    record: list[SimStep] = field(default_factory=list)  # the steps performed: a quiet continuation's regenerated

    @property
    def signature(self) -> str | None:
        return None if self.disagreement is None else signature_of(self.disagreement)


def replay_record(scope: Scope | str, seed: int, bugs: frozenset[ImplBug], variant: Variant,
                  steps: list[SimStep] | tuple[SimStep, ...], handover: Handover | None = None,
                  runbook: str = "finalize") -> Replayed:
    """Perform ``steps`` on a fresh Differential, each at its time and with its partitions; stops at a Disagreement.
    With a ``handover``: the steps before it, then the quiet continuation (``runbook``) generated again."""
    scope = _scope(scope)
    taken: list[tuple[Action, ...]] = []
    record = list(steps if handover is None else steps[:handover.at])
    quiet = None
    try:
        diff = _fresh(scope, seed, bugs, variant)
        monitor = None if handover is None else ProgressMonitor()
        for sim_step in record:
            taken.append(tuple(_perform(diff, sim_step)))
            if monitor is not None:
                monitor.observe(diff.model, sim_step.now)
        if handover is not None:
            quiet = quiet_continuation(scope, seed, diff, runbook, handover, monitor,
                                       lambda _sim, _action, traces: taken.append(tuple(traces)))
            run_quietly(quiet, diff, handover.events, monitor)
    except Disagreement as found:
        if quiet is not None:
            record += quiet.record
            return Replayed(taken, found, len(record) - 1, record)
        return Replayed(taken, found, len(taken), record)
    if quiet is not None:
        record += quiet.record
    return Replayed(taken, None, None, record)


def replay_steps(scope: Scope | str, seed: int, bugs: frozenset[ImplBug], variant: Variant,
                 steps: list[SimStep] | tuple[SimStep, ...]) -> Disagreement | None:
    """The Disagreement replaying ``steps`` raises, or None when the implementation and the model agree throughout."""
    return replay_record(scope, seed, bugs, variant, steps).disagreement


def replay_trace(trace: DifferentialTrace, with_bugs: bool = True) -> Replayed:
    """Replay a differential trace file; ``with_bugs=False``: the correct implementation and model."""
    bugs, variant = (trace.impl_bugs, trace.variant) if with_bugs else (frozenset(), Variant(profile=trace.profile))
    return replay_record(trace.scope, trace.seed, bugs, variant, trace.steps, trace.handover,
                         trace.runbook or "finalize")


def render_replay(trace: DifferentialTrace, replayed: Replayed) -> str:
    """The replay as a table (step, simulated time, actor, action, what happened), a verdict, the disagreement."""
    from properties.mermaid import name, verdict, view

    rows = [("step", "at (ms)", "actor", "action", "result")]
    quiet_at = None if trace.handover is None else trace.handover.at
    for index, sim_step in enumerate(replayed.record):
        if index >= len(replayed.taken) and index != replayed.failed_at:
            break
        if index == quiet_at:
            rows.append(("", "", "", "(the faults stop: the quiet continuation, generated again)", ""))
        shown = view(sim_step.action)
        if index == replayed.failed_at:
            result = verdict(replayed.signature or "")
        else:
            result = _what_happened(sim_step.action, replayed.taken[index])
        rows.append((str(index + 1), str(sim_step.now), name(shown.actor), shown.text, result))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = [f"{r[0]:>{widths[0]}}  {r[1]:>{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]:<{widths[3]}}  {r[4]}".rstrip()
             for r in rows]
    bugs = sorted(b.value for b in trace.impl_bugs) + sorted(b.value for b in trace.bugs)
    head = f"scope {trace.scope}, seed {trace.seed}" + (f", bugs {', '.join(bugs)}" if bugs else ", no seeded bugs")
    found = replayed.disagreement
    if found is None:
        lines.append(f"{head}: {len(replayed.record)} steps, implementation and model agree")
        lines.append(f"replayed clean: the recorded violation {trace.signature} did not reproduce")
        return "\n".join(lines)
    step = (replayed.failed_at or 0) + 1
    if replayed.signature == trace.signature:
        lines.append(f"{head}: step {step} reproduces {trace.signature}")
    else:
        lines.append(f"{head}: step {step} gives {replayed.signature}, not the recorded {trace.signature}")
    lines.append(found.summary)
    lines += ["  " + detail for detail in found.details]
    return "\n".join(lines)


def _what_happened(action: Action, taken: tuple[Action, ...]) -> str:
    if taken == (action,):
        return "-"
    if not taken:
        return "refused (no change)"
    return "took " + ", ".join(type(t).__name__ for t in taken)


# ---- shrinking -------------------------------------------------------------------------------


@dataclass
class ShrinkResult:
    steps: list[SimStep]
    signature: str
    reproduced: bool  # the shrunk steps, replayed from a fresh cluster, raise the signature
    minimal: bool  # ddmin reached 1-minimality (removing any one step loses the signature) within the budget
    tries: int  # candidates replayed
    original_steps: int = 0
    seconds: float = 0.0
    summary: str | None = None  # the shrunk trace's disagreement, first line (no exception: results are pickled)
    handover: Handover | None = None  # a stall's: where its quiet continuation starts in ``steps``


def _snapshot(diff: Differential, monitor: ProgressMonitor | None = None) -> tuple[Differential,
                                                                               ProgressMonitor | None]:
    """An independent copy of ``diff`` (and the monitor following it) to go on from. The model's states and the
    actions are frozen records: shared, not copied (a third of the cost of a copy otherwise)."""
    memo: dict[int, object] = {id(action): action for action in diff.steps}
    for state in (diff.model, getattr(diff, "_metrics_of", None)):
        if state is not None:
            memo[id(state)] = state
    return copy.deepcopy((diff, monitor), memo)


class _Shrinker:
    """Candidates of the current trace, each replayed from the last checkpoint before the steps it removes.

    With a ``handover`` the trace is a stall's fault window: a candidate is kept when its quiet continuation
    stalls with the signature (a disagreement anywhere loses it)."""

    def __init__(self, scope: Scope, seed: int, bugs: frozenset[ImplBug], variant: Variant, signature: str,
                 deadline: float, handover: Handover | None = None, runbook: str = "finalize") -> None:
        self.scope, self.seed, self.runbook, self.handover = scope, seed, runbook, handover
        self.signature, self.deadline, self.tries = signature, deadline, 0
        monitor = None if handover is None else ProgressMonitor()
        self.checkpoints: dict[int, tuple[Differential, ProgressMonitor | None]] = {
            0: (_fresh(scope, seed, bugs, variant), monitor)}
        self.current: list[SimStep] = []

    def out_of_time(self) -> bool:
        return time.perf_counter() >= self.deadline

    def keeps_signature(self, steps: list[SimStep], unchanged: int) -> list[SimStep] | None:
        """``steps`` (whose first ``unchanged`` steps are the current trace's), cut after the step that raised the
        signature (a stall's: all of them); None when it raised nothing or something else."""
        self.tries += 1
        start = max(k for k in self.checkpoints if k <= unchanged)
        diff, monitor = _snapshot(*self.checkpoints[start])
        index = start
        try:
            for index in range(start, len(steps)):
                _perform(diff, steps[index])
                if monitor is not None:
                    monitor.observe(diff.model, steps[index].now)
                done = index + 1
                if done <= unchanged and done % CHECKPOINT_EVERY == 0 and done not in self.checkpoints:
                    self.checkpoints[done] = _snapshot(diff, monitor)
        except Disagreement as found:
            if self.handover is not None:
                return None
            return steps[:index + 1] if signature_of(found) == self.signature else None
        if self.handover is None or monitor is None:
            return None
        try:
            quiet = quiet_continuation(self.scope, self.seed, diff, self.runbook, replace(self.handover, at=len(steps)),
                                       monitor)
            run_quietly(quiet, diff, self.handover.events, monitor)
        except Disagreement as found:
            return steps if signature_of(found) == self.signature else None
        return None

    def accept(self, steps: list[SimStep], unchanged: int) -> None:
        self.current = steps
        for k in [k for k in self.checkpoints if k > unchanged]:
            del self.checkpoints[k]

    def ddmin(self) -> bool:
        """Remove chunks of the current trace, from the end backwards, halving the chunk size when none can go;
        True when no single step can be removed (1-minimal)."""
        chunk = max(1, len(self.current) // 2)
        while len(self.current) > (1 if self.handover is None else 0):
            removed = False
            start = (len(self.current) - 1) // chunk * chunk
            while start >= 0:
                end = min(start + chunk, len(self.current))
                if end == len(self.current) and self.handover is None:
                    start -= chunk  # the rest would be a prefix of the trace, which never disagrees
                    continue
                if self.out_of_time():
                    return False
                candidate = self.keeps_signature(self.current[:start] + self.current[end:], start)
                if candidate is not None:
                    self.accept(candidate, start)
                    removed = True
                start -= chunk
            if not removed:
                if chunk == 1:
                    return True
                chunk = max(1, chunk // 2)
            else:
                chunk = max(1, min(chunk, len(self.current) // 2))
        return True


def shrink_violation(plan: Plan, seed: int, record: list[SimStep], signature: str, seconds: float,
                     handover: Handover | None = None) -> ShrinkResult:
    """Delta debugging over ``record`` (a run of ``plan``'s scope and mutant with ``seed``) down to the fewest steps
    that still raise a Disagreement with ``signature``, within ``seconds``. A stall (with the run's ``handover``)
    shrinks its fault window, each candidate followed by its quiet continuation; the result ends with the shrunk
    window's continuation, and ``handover`` says where it starts."""
    began = time.perf_counter()
    scope = _scope(plan.scope_of(seed))
    bugs, variant = plan.seeded_bugs
    runbook = plan.runbook_of(seed)
    if goal_of(signature) is None:
        handover = None
    window = list(record if handover is None else record[:handover.at])
    shrinker = _Shrinker(scope, seed, bugs, variant, signature, began + seconds, handover, runbook)
    first = shrinker.keeps_signature(window, len(window))  # the record, cut after the event that disagreed
    if first is None:
        found = replay_record(scope, seed, bugs, variant, record, handover, runbook)
        return ShrinkResult(list(record), signature, False, False, shrinker.tries, len(record),
                            time.perf_counter() - began, _first_line(found.disagreement), handover)
    shrinker.accept(first, len(first))
    minimal = shrinker.ddmin()
    shrunk = None if handover is None else replace(handover, at=len(shrinker.current))
    final = replay_record(scope, seed, bugs, variant, shrinker.current, shrunk, runbook)
    reproduced = final.signature == signature and final.failed_at == len(final.record) - 1
    return ShrinkResult(final.record, signature, reproduced, minimal and reproduced, shrinker.tries, len(record),
                        time.perf_counter() - began, _first_line(final.disagreement), shrunk)


def _first_line(disagreement: Disagreement | None) -> str | None:
    return None if disagreement is None else disagreement.summary.splitlines()[0]


def trace_for(plan: Plan, seed: int, steps: list[SimStep], signature: str,
              disagreement: Disagreement | str | None = None, original_steps: int | None = None,
              handover: Handover | None = None, aims: tuple[str, ...] = ()) -> DifferentialTrace:
    """The trace file of a shrunk (or any) violating run of ``plan`` (a stall's with its ``handover``)."""
    bugs, variant = plan.seeded_bugs
    summary = disagreement.summary if isinstance(disagreement, Disagreement) else disagreement
    return DifferentialTrace(
        scope=_scope(plan.scope_of(seed)).name, steps=tuple(steps), seed=seed, signature=signature, impl_bugs=bugs,
        bugs=variant.bugs, profile=variant.profile, violation=invariant_of(signature),
        summary=None if summary is None else summary.splitlines()[0], faults=plan.faults,
        runbook=plan.runbook_of(seed), original_steps=original_steps,
        handover=handover if goal_of(signature) is not None else None, aims=tuple(aims),
    )

