"""A failing real run made short: its plan reduced while a real cluster still breaks the same check.

Rules:
- The input is a run's folder: its ``run.json`` is the plan (seed, runbook, cluster, and the faults
  it ran, each with its step, delay, target and duration), its ``violations.json`` the checks it
  broke. The target is one of those checks (the first, unless one is named).
- Reduction, in this order: the faults by delta debugging (Zeller's ddmin: none at all first, then
  halves and their complements, down to one at a time), then the workload, one reduction at a time,
  each kept when it still fails: a shorter runbook that still holds every fault's step, the
  client's writes off, each step the runbook allows dropping (``OPTIONAL_STEPS``), one broker fewer,
  one controller instead of three. The loop over the workload repeats until nothing more goes.
- Real runs are not deterministic. A candidate is run up to ``tries`` times and kept as soon as one
  run breaks the target check; a candidate that never did in ``tries`` runs is dropped, which may
  be bad luck, and the output says how many runs each candidate took. A candidate already judged
  is never run again.
- A wall-time budget bounds the whole: no run starts once it is spent (a run under way finishes).
  The best plan so far is written into the run's folder after every kept candidate
  (``shrunk-plan.json``, replayed exactly by ``kraftcheck kafka run --plan FILE``; ``shrink.json``
  says what was tried), so an interrupted shrink keeps what it found.
- This module decides; running a candidate is the ``Runner`` it is given (``real_runner``: a real
  cluster under ``RUN_DIR/shrink/``, of which only the latest reproduction is kept), so the
  reduction is tested with a fake runner and no cluster.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from properties.files import write_text
from properties.kafka.install import Installation
from properties.kafka.run import OPTIONAL_STEPS, Execute, RealRunPlan, execute_run, plan_from_json, plan_json

# Shorter runbooks to try in place of each, shortest first: a candidate is only tried when it still
# has every step a fault strikes during (a rollback may lose its rollback: the check decides).
SHORTER_RUNBOOKS = {
    "finalize": ("dual-write", "kraft-brokers"),
    "kraft-brokers": ("dual-write",),
    "rollback-kraft-brokers": ("dual-write", "rollback-dual-write", "kraft-brokers"),
    "rollback-dual-write": ("rollback-before-brokers", "dual-write"),
    "rollback-before-brokers": (),
    "dual-write": (),
    "kraft": (),
}
SHRUNK_PLAN = "shrunk-plan.json"
SHRINK_LOG = "shrink.json"


class ShrinkError(Exception):
    """A folder that cannot be shrunk (not a run, a run that broke nothing, an unknown check): one line."""


@dataclass(frozen=True)
class Outcome:
    """What one run of a candidate showed: the checks it broke, or that it could not be carried out."""

    invariants: frozenset[str]
    carried_out: bool = True
    folder: Path | None = None


Runner = Callable[[RealRunPlan, str], Outcome]  # (plan, a label for its folder) -> outcome
Steps = Callable[[RealRunPlan], list[str]]  # the steps a plan's runbook has (with its skips)


@dataclass
class Attempt:
    change: str  # what the candidate changed, in words
    plan: RealRunPlan
    runs: int  # runs it took
    reproduced: bool
    seconds: float


@dataclass
class Shrink:
    """A shrink's state: the best plan so far and every candidate judged."""

    invariant: str
    original: RealRunPlan
    best: RealRunPlan
    tries: int
    attempts: list[Attempt] = field(default_factory=list)
    finished: bool = False  # every reduction was tried (else the budget ran out)
    seconds: float = 0.0

    @property
    def runs(self) -> int:
        return sum(a.runs for a in self.attempts)


def size(plan: RealRunPlan, steps: Steps) -> dict[str, int]:
    """What a shrink makes smaller: faults, runbook steps, brokers, controllers, whether a client writes."""
    return {
        "faults": len(plan.schedule or ()),
        "steps": len(steps(plan)),
        "brokers": plan.brokers,
        "controllers": plan.controllers,
        "client": int(plan.client),
    }


def describe_plan(plan: RealRunPlan, steps: Steps) -> str:
    faults = ", ".join(f"{f.kind}@{f.step}" for f in plan.schedule or ()) or "no faults"
    extra = ("" if plan.client else ", no client") + (f", skips {', '.join(plan.skip)}" if plan.skip else "")
    return (
        f"{plan.runbook} ({len(steps(plan))} steps), {plan.brokers} brokers, {plan.controllers} controller"
        f"{'s' if plan.controllers > 1 else ''}{extra}; {faults}"
    )


def _fits(plan: RealRunPlan, steps: Steps) -> bool:
    """Every fault strikes during a step the plan has, on a victim its cluster has."""
    names = steps(plan)
    for f in plan.schedule or ():
        if f.step not in names:
            return False
        if f.kind.endswith("broker") and f.target >= plan.brokers:
            return False
        if f.kind.endswith("controller") and f.target >= plan.controllers:
            return False
    return True


def workload_candidates(plan: RealRunPlan, steps: Steps) -> list[tuple[str, RealRunPlan]]:
    """The workload reductions of ``plan`` that keep its faults runnable, most of the run first."""
    found: list[tuple[str, RealRunPlan]] = []
    for runbook in SHORTER_RUNBOOKS.get(plan.runbook, ()):
        found.append((f"runbook {plan.runbook} -> {runbook}", replace(plan, runbook=runbook)))
    if plan.client:
        found.append(("no client writes", replace(plan, client=False)))
    for step in OPTIONAL_STEPS:
        if step in steps(plan):
            found.append((f"skip {step}", replace(plan, skip=tuple(sorted({*plan.skip, step})))))
    if plan.brokers > 1:
        found.append((f"brokers {plan.brokers} -> {plan.brokers - 1}", replace(plan, brokers=plan.brokers - 1)))
    if plan.controllers > 1:
        found.append((f"controllers {plan.controllers} -> 1", replace(plan, controllers=1)))
    # a skip the shorter runbook no longer has is dropped with it
    return [
        (change, replace(p, skip=tuple(s for s in p.skip if s in _unskipped(p, steps))))
        for change, p in found
        if _fits(p, steps)
    ]


def _unskipped(plan: RealRunPlan, steps: Steps) -> list[str]:
    return steps(replace(plan, skip=()))


def _chunks(items: Sequence, n: int) -> list[tuple]:
    size_, extra = divmod(len(items), n)
    out, at = [], 0
    for i in range(n):
        width = size_ + (1 if i < extra else 0)
        out.append(tuple(items[at : at + width]))
        at += width
    return [c for c in out if c]


def ddmin(items: tuple, fails: Callable[[tuple], bool | None]) -> tuple:
    """Zeller's ddmin over ``items``, trying none of them first; ``fails`` says whether a subset still
    fails (None: the budget is spent, stop with what holds so far). 1-minimal when it finishes."""
    if items and fails(()) is True:
        return ()
    n = 2
    while len(items) >= 2:
        chunks = _chunks(items, n)
        reduced = False
        for candidate in [*chunks, *([tuple(x for x in items if x not in c) for c in chunks] if n > 2 else [])]:
            verdict = fails(candidate)
            if verdict is None:
                return items
            if verdict:
                items, n, reduced = candidate, 2 if candidate in chunks else max(n - 1, 2), True
                break
        if not reduced:
            if n >= len(items):
                break
            n = min(2 * n, len(items))
    return items


def shrink(
    original: RealRunPlan,
    invariant: str,
    run: Runner,
    steps: Steps,
    *,
    tries: int = 2,
    budget_s: float = 1800.0,
    clock: Callable[[], float] = time.monotonic,
    say: Callable[[str], None] = lambda line: None,
    keep: Callable[[Shrink], None] = lambda state: None,
) -> Shrink:
    """Reduces ``original`` (its faults fixed in ``schedule``) while its runs still break ``invariant``.

    ``keep`` is called with the state after every kept candidate and at the end (to write it down)."""
    began = clock()
    state = Shrink(invariant, original, original, tries)
    judged: dict[RealRunPlan, bool] = {}

    def reproduces(plan: RealRunPlan, change: str) -> bool | None:
        """True if a run of ``plan`` breaks the invariant within ``tries`` runs; None once the budget is spent."""
        if plan in judged:
            return judged[plan]
        started, runs = clock(), 0
        for attempt in range(1, tries + 1):
            if clock() - began >= budget_s:
                return None
            runs += 1
            outcome = run(plan, f"{len(state.attempts) + 1:02d}-try-{attempt}")
            if invariant in outcome.invariants:
                break
        else:
            attempt = 0
        verdict = attempt > 0
        judged[plan] = verdict
        state.attempts.append(Attempt(change, plan, runs, verdict, round(clock() - started, 1)))
        say(
            f"  candidate {len(state.attempts)}: {change}: "
            + (f"breaks {invariant} on run {runs} of {tries}: kept" if verdict else f"not in {runs} runs: dropped")
        )
        if verdict:
            state.best = plan
            keep(state)
        return verdict

    def fails_with(faults: tuple) -> bool | None:
        candidate = replace(state.best, schedule=tuple(faults))
        gone = [f for f in state.best.schedule or () if f not in faults]
        change = "no faults" if not faults else "drop " + ", ".join(f"{f.kind}@{f.step}" for f in gone)
        return reproduces(candidate, change)

    kept = ddmin(tuple(original.schedule or ()), fails_with)
    state.best = replace(state.best, schedule=kept)
    spent = clock() - began >= budget_s
    while not spent:
        progressed = False
        for change, candidate in workload_candidates(state.best, steps):
            verdict = reproduces(candidate, change)
            if verdict is None:
                spent = True
                break
            if verdict:
                progressed = True
                break  # the reductions of the new best are tried from the top
        if not progressed:
            break
    state.finished = not spent
    state.seconds = round(clock() - began, 1)
    keep(state)
    return state


# ---- a run's folder ---------------------------------------------------------------------------------


def target(folder: Path, invariant: str | None) -> tuple[RealRunPlan, str, str]:
    """The failing run's plan (its faults fixed), the check to keep breaking, and the Kafka release it ran."""
    meta_file, verdict_file = folder / "run.json", folder / "violations.json"
    if not meta_file.is_file():
        raise ShrinkError(f"{folder} is not a real-Kafka run's folder (no run.json)")
    try:
        meta = json.loads(meta_file.read_text())
        plan = plan_from_json(meta)
    except (ValueError, OSError) as e:
        raise ShrinkError(f"{meta_file}: {e}") from None
    if not verdict_file.is_file():
        raise ShrinkError(f"{folder} was not checked (no violations.json): run kraftcheck kafka check {folder} first")
    broken = [v["invariant"] for v in json.loads(verdict_file.read_text())]
    if not broken:
        raise ShrinkError(f"{folder}: the run broke no check, nothing to shrink")
    if invariant is not None and invariant not in broken:
        raise ShrinkError(f"{folder}: the run did not break {invariant} (it broke {', '.join(sorted(set(broken)))})")
    return plan, invariant or broken[0], meta["kafka"]


def installation(folder: Path) -> Installation:
    """The Kafka the run ran: its jars' folder as recorded, if it is still there, else the release from the cache."""
    from properties.kafka import install

    meta = json.loads((folder / "run.json").read_text())
    lib = Path(meta.get("lib", ""))
    if meta.get("lib") and lib.is_dir():
        return Installation(meta["kafka"], lib)
    found = install.cached(meta["kafka"])
    if found is None:
        raise ShrinkError(f"Kafka {meta['kafka']} is not installed: kraftcheck kafka install --version {meta['kafka']}")
    return found


def step_names(kafka: Installation) -> Steps:
    """A plan's step names, as its run would have them (no process starts)."""
    from properties.kafka.run import Run

    def names(plan: RealRunPlan) -> list[str]:
        return [name for name, _ in Run(plan, kafka, Path("/nonexistent")).steps()]

    return names


def real_runner(
    folder: Path, kafka: Installation, say: Callable[[str], None], execute: Execute = execute_run
) -> Runner:
    """Each candidate a real run in ``folder/shrink/LABEL``, checked; only the latest reproduction's folder is kept."""
    from properties.kafka.run import check_folder

    root = folder / "shrink"
    kept: list[Path] = []

    def run(plan: RealRunPlan, label: str) -> Outcome:
        where = root / label
        shutil.rmtree(where, ignore_errors=True)
        outcome = execute(plan, kafka, where)
        if outcome.startswith("failed"):
            say(f"    {label}: not carried out ({outcome})")
            shutil.rmtree(where, ignore_errors=True)
            return Outcome(frozenset(), carried_out=False)
        _, violations = check_folder(where)
        broken = frozenset(v.invariant for v in violations)
        say(f"    {label}: {outcome.split(':')[0]}, broke {', '.join(sorted(broken)) or 'nothing'}")
        if broken:
            for old in kept:
                shutil.rmtree(old, ignore_errors=True)
            kept[:] = [where]
        else:
            shutil.rmtree(where, ignore_errors=True)
        return Outcome(broken, folder=where)

    return run


def record(folder: Path, state: Shrink, kafka: str, steps: Steps) -> None:
    """``shrunk-plan.json`` (the best plan, replayable) and ``shrink.json`` (what was tried), each whole."""
    write_text(folder / SHRUNK_PLAN, json.dumps(plan_json(state.best, kafka), indent=1) + "\n")
    log = {
        "invariant": state.invariant,
        "kafka": kafka,
        "tries": state.tries,
        "finished": state.finished,
        "seconds": state.seconds,
        "runs": state.runs,
        "original": {
            "plan": plan_json(state.original, kafka),
            "size": size(state.original, steps),
            "text": describe_plan(state.original, steps),
        },
        "shrunk": {
            "plan": plan_json(state.best, kafka),
            "size": size(state.best, steps),
            "text": describe_plan(state.best, steps),
        },
        "attempts": [
            {"change": a.change, "runs": a.runs, "reproduced": a.reproduced, "seconds": a.seconds}
            for a in state.attempts
        ],
    }
    write_text(folder / SHRINK_LOG, json.dumps(log, indent=1) + "\n")


def shrink_folder(
    folder: Path,
    invariant: str | None = None,
    *,
    tries: int = 2,
    budget_s: float = 1800.0,
    say: Callable[[str], None] = lambda line: None,
    runner: Runner | None = None,
    kafka: Installation | None = None,
) -> Shrink:
    """Shrinks the failing run in ``folder`` for ``invariant`` (or its first), writing the plans into it."""
    plan, invariant, version = target(folder, invariant)
    kafka = kafka or installation(folder)
    steps = step_names(kafka)
    say(f"shrinking {folder} for {invariant}: {describe_plan(plan, steps)}")
    state = shrink(
        plan,
        invariant,
        runner or real_runner(folder, kafka, say),
        steps,
        tries=tries,
        budget_s=budget_s,
        say=say,
        keep=lambda s: record(folder, s, version, steps),
    )
    return state


def summary(state: Shrink | None, steps: Steps | None = None, log: dict | None = None) -> str:
    """One line: before and after, and what it took (from a shrink's state, or its ``shrink.json``)."""
    if log is None:
        assert state is not None and steps is not None
        before, after = size(state.original, steps), size(state.best, steps)
        finished, runs, seconds, tried = state.finished, state.runs, state.seconds, len(state.attempts)
        kept, tries = sum(a.reproduced for a in state.attempts), state.tries
    else:
        before, after = log["original"]["size"], log["shrunk"]["size"]
        finished, runs, seconds, tried = log["finished"], log["runs"], log["seconds"], len(log["attempts"])
        kept, tries = sum(a["reproduced"] for a in log["attempts"]), log["tries"]
    change = ", ".join(f"{k} {before[k]} -> {after[k]}" for k in before if before[k] != after[k]) or "nothing dropped"
    how = "every reduction tried" if finished else "the budget ran out"
    return (
        f"{change} ({tried} candidates, {kept} kept, {runs} real runs of up to {tries} a candidate, "
        f"{seconds:.0f} s; {how})"
    )
