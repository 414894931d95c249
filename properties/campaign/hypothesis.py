"""Campaigns through Hypothesis: the model machine or the differential machine fuzzed with ``fuzz_one_input``.

``kraftcheck campaign --engine hypothesis --machine model|differential`` runs here instead of in the
simulator. Each seed is one Hypothesis example of the machine, driven by a buffer of bytes drawn from
``random.Random(seed)``. A failing example is a Hypothesis failure like any other: Hypothesis keeps it
in its example database, and after the runs it replays it, shrinks it and reports it as a normal
falsifying example, which is saved as a trace file.

How it works:
- ``Bridge(plan)`` holds the plan's machine class: ``properties.machines.machine_class(scope,
  variant)`` (the model machine; a model-layer mutant is its variant), or
  ``properties.differential.differential_machine(scope, bugs)`` (the implementation and the model
  driven by the same steps; an implementation-layer mutant is its ``bugs``). It is subclassed only
  to watch the steps it takes (coverage as the sim engine counts it, progress, findings); the
  rules are the machine's own.
- ``hypothesis.stateful.get_state_machine_test`` (the hook Hypothesis keeps apart from
  ``run_state_machine_as_test`` for fuzzers) makes the machine a ``@given(st.data())`` test. Its
  ``.hypothesis.fuzz_one_input(buffer)`` runs one example from the buffer's bytes; when the example
  fails, it saves the example's choices in the database (under the test's ".secondary" key, the
  corpus Hypothesis replays when it has no shrunk failure of its own) and raises the failure.
- ``run_fuzz_partition(plan, partition)`` does that for the partition's seeds and returns the
  pipeline's rows (the shape of ``properties.campaign.tasks.run_partition``, engine "hypothesis").
- ``finish_fuzz(plan, out_dir, violations)``, on the driver after the runs: the same test run the
  ordinary way (not derandomized, the same database, only the explicit, reuse and shrink phases),
  so Hypothesis replays the fuzzed failures, shrinks each distinct one and raises it (several in
  an ExceptionGroup). Each is saved under ``DIR/counterexamples/``: a model trace (version 1,
  ``properties.traces``) that the model machine writes itself on its final run, or a differential
  trace (version 2, ``properties.shrink.trace_for``), with Hypothesis's own report beside it
  (``<name>.hypothesis.txt``). The rows of the violations table get the trace's path and length.

Rules:
- A run is a pure function of (plan, seed): the buffer is ``random.Random(seed).randbytes(BUFFER_BYTES)``
  and the machines draw nothing else at random, so the rows are the same on any machine (durations
  and ``finished_s`` excepted). Nothing carries over between the examples of a partition except the
  machine class's caches, which change how fast a step is found, never which.
- An example takes up to ``steps`` machine steps (Hypothesis's ``stateful_step_count``): the plan's
  ``--steps``, at most ``MAX_STEPS`` (the project's Hypothesis profiles run 50). ``BUFFER_BYTES`` is
  ten times what the longest examples measured read, so no example runs out of bytes.
- Failures are told apart as the sim engine's signatures tell them apart: the model machine raises
  one exception type per property, and the differential machine's Disagreements are raised again
  as one type per signature (``keyed``), since Hypothesis keys a failure by its type and where it
  was raised; so each signature group is shrunk on its own and keeps its signature while it shrinks.
- Documented findings (``Scope.findings``) are not violations: the model machine stops judging an
  example once a step shows one (what follows is its consequence), the differential check leaves
  them out; either way they are counted in the run's ``findings``.
- The example database is ``DIR/hypothesis-db`` (a ``DirectoryBasedExampleDatabase``): tasks write
  it, and the driver writes each group's first failing example again before the replay, so a
  failure reaches the replay even when a task's writes were lost (a cluster without a shared DIR).
- Hypothesis's own files (caches it writes wherever ``HYPOTHESIS_STORAGE_DIRECTORY`` points, by
  default ``.hypothesis/`` in the working directory) go to a temporary directory removed afterwards.
- Shrinking is Hypothesis's, within its own bounds (500 shrinks, 5 minutes per failure);
  ``--shrink-seconds`` is the sim engine's.
- A plan this bridge cannot run is a one-line ValueError from ``check_plan``, before anything runs.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import tempfile
import time
import unittest
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, Phase, settings
from hypothesis.configuration import set_hypothesis_home_dir
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.stateful import get_state_machine_test

from impl.sim.scenarios import scenario
from impl.sim.simulator import PROGRESS, SimStep
from model import SCOPES
from model.bugs import CORRECT
from model.kraft import ZkMigrationState
from model.kraft_quorum import committed_image, is_active
from model.migration import MigrationDriverState
from model.state import ClusterState
from properties import traces
from properties.campaign.options import partition_seeds, seeded_bug
from properties.differential import Disagreement
from properties.files import write_text
from properties.plan import Plan
from properties.runs import CoverageCollector, coverage_signature
from properties.shrink import invariant_of as invariant_of_signature
from properties.shrink import replay_trace, slug, trace_for
from properties.shrink import signature_of as disagreement_signature

ENGINE = "hypothesis"
MACHINES = ("model", "differential")
FAULTS = "scope budget"  # no fault mix: Hypothesis draws the perturbations the scope's budget allows
MAX_STEPS = 50
BUFFER_BYTES = 4096  # ten times what a 50-step example read at most (408 bytes: model machine, scope cluster)
DATABASE_DIR = "hypothesis-db"
COUNTEREXAMPLES_DIR = "counterexamples"
REPLAY_EXAMPLES = 1_000  # database entries the replay may try (Hypothesis reads up to max_examples)


# ---- the plan ---------------------------------------------------------------------------------


def check_plan(plan: Plan) -> None:
    """Raise a one-line ValueError if this bridge cannot run ``plan`` (before anything has run)."""
    machine, scope = plan.machine or "differential", plan.scope
    if machine not in MACHINES:
        raise ValueError(f"unknown machine {machine!r}; expected one of {', '.join(MACHINES)}")
    bugs, variant = seeded_bug(plan.mutant) if plan.mutant else (frozenset(), CORRECT)
    if machine == "model":
        if scope not in SCOPES:
            raise ValueError(f"the model machine runs the model's scopes, not {scope!r} "
                             "(pick one with --scope, or use --machine differential)")
        if bugs:
            raise ValueError(f"{plan.mutant} is a bug of the implementation: it needs --machine differential")
    else:
        scenario(scope)  # a one-line ValueError for an unknown scope
        if variant != CORRECT:
            raise ValueError(f"{plan.mutant} is a bug of the model: the differential machine switches the "
                             "implementation's bugs only (use --machine model)")


def steps_of(plan: Plan) -> int:
    """Machine steps per example: the plan's ``steps``, at most ``MAX_STEPS``."""
    return max(1, min(plan.steps or MAX_STEPS, MAX_STEPS))


def buffer_of(seed: int) -> bytes:
    """The bytes one example is drawn from."""
    return random.Random(seed).randbytes(BUFFER_BYTES)


# ---- what an example did ----------------------------------------------------------------------


@dataclass
class Watched:
    """What one example did, step by step: coverage as the sim engine counts it, progress, findings."""

    start: ClusterState
    steps: int = 0
    findings: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.collector = CoverageCollector(self.start)
        self.progress = progress_of(self.start)

    def step(self, action, taken: list, after: ClusterState) -> None:
        """One machine step: ``action`` asked for, ``taken`` the model actions it came to, ``after`` the model."""
        self.steps += 1
        self.collector(after, taken)
        self.progress = max(self.progress, progress_of(after))


def progress_of(state: ClusterState) -> int:
    """How far the migration got in a model state, on the simulator's scale (``PROGRESS``), read from
    the model as the simulator reads it from the processes."""
    level = 1 if any(b.controller is not None for b in state.brokers) else 0
    leaders = [c for c in state.controllers if is_active(c)]
    if leaders:
        level = max(level, 2)
    committed = [committed_image(c).migration_state for c in leaders]
    if any(m is not ZkMigrationState.NONE for m in committed):
        level = max(level, 3)
    if any(c.driver is not None and c.driver.state is MigrationDriverState.DUAL_WRITE for c in leaders):
        level = max(level, 4)
    if level >= 4 and state.brokers and all(b.alive and b.config.kraft_mode for b in state.brokers):
        level = max(level, 5)
    if ZkMigrationState.POST_MIGRATION in committed:
        level = 6
    return level


# ---- the machines, watched --------------------------------------------------------------------


class Bridge:
    """The plan's machine class, watched, and the settings and example database it runs with."""

    def __init__(self, plan: Plan, trace_dir: str | os.PathLike | None = None) -> None:
        check_plan(plan)
        self.plan = plan
        self.kind = plan.machine or "differential"
        self.bugs, self.variant = seeded_bug(plan.mutant) if plan.mutant else (frozenset(), CORRECT)
        self.database = DirectoryBasedExampleDatabase(Path(plan.out) / DATABASE_DIR)
        self.watched: Watched | None = None  # the example running, or the last one
        self.machine = self._model(trace_dir) if self.kind == "model" else self._differential()
        self.settings = settings(
            database=self.database,
            derandomize=False,
            deadline=None,
            stateful_step_count=steps_of(plan),
            suppress_health_check=list(HealthCheck),
            report_multiple_bugs=True,
            print_blob=False,
            max_examples=REPLAY_EXAMPLES,
            # the replay's (finish_fuzz); fuzz_one_input has no phases
            phases=[Phase.explicit, Phase.reuse, Phase.shrink],
        )

    def _name(self, base: str) -> str:
        # Hypothesis keys its database on the machine's name when it has no source (a class made by
        # type()), so the name says everything that changes the machine's behaviour.
        label = self.plan.mutant or "correct"
        return re.sub(r"\W", "_", f"Campaign{base}_{self.plan.scope}__{label}")

    def _model(self, trace_dir):
        from properties.machines import machine_class

        base = machine_class(self.plan.scope, self.variant, trace_dir=trace_dir)
        bridge = self

        def __init__(machine) -> None:
            base.__init__(machine)
            bridge.watched = Watched(machine.state)

        def take(machine, choices, index) -> None:
            try:
                base.take(machine, choices, index)
            finally:
                taken = choices.taken[index]
                if taken is not None:  # the step was computed, whether or not it broke something
                    action = choices.actions[index]
                    bridge.watched.step(action, [action], taken.after)
                    bridge.watched.findings |= set(taken.verdict[0]) & machine.expected

        return type(self._name("ModelMachine"), (base,), {"__init__": __init__, "take": take, "__module__": __name__})

    def _differential(self):
        from properties.differential import differential_machine

        base = differential_machine(scenario(self.plan.scope), self.bugs)
        bridge = self

        def __init__(machine) -> None:
            bridge.watched = None
            try:
                base.__init__(machine)  # builds the Differential: the scope's warm-up, checked
            except Disagreement as error:  # a trace of no step replays it
                raise keyed(error, ()) from error
            diff = machine.diff
            watched = bridge.watched = Watched(diff.model)
            apply, record = diff.apply, []

            def apply_watched(action):
                record.append(SimStep(diff.cluster.now, (), action))
                taken = []
                try:
                    taken = apply(action)
                    return taken
                except Disagreement as error:
                    raise keyed(error, record) from error
                finally:
                    watched.step(action, taken, diff.model)
                    watched.findings |= diff.findings_seen

            diff.apply = apply_watched

        return type(self._name("DifferentialMachine"), (base,), {"__init__": __init__, "__module__": __name__})

    def test(self):
        """The machine as a Hypothesis test (``@given(st.data())``), made afresh: a fuzz target keeps
        which failures it has saved, and a partition must not depend on what ran before it."""
        return get_state_machine_test(self.machine, settings=self.settings)


@contextmanager
def hypothesis_storage() -> Iterator[Path]:
    """Hypothesis's own files in a temporary directory for the duration (see the module's rules).

    Hypothesis reads HYPOTHESIS_STORAGE_DIRECTORY once per process, so the directory is also set
    directly, and both are restored afterwards (a Spark worker process runs many tasks)."""
    before = os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY")
    with tempfile.TemporaryDirectory(prefix="kraftcheck-hypothesis-") as directory:
        os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = directory
        set_hypothesis_home_dir(directory)
        try:
            yield Path(directory)
        finally:
            set_hypothesis_home_dir(None)
            if before is None:
                os.environ.pop("HYPOTHESIS_STORAGE_DIRECTORY", None)
            else:
                os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = before


# ---- failures ---------------------------------------------------------------------------------


class KeyedDisagreement(Disagreement):
    """A Disagreement of the differential machine, subclassed per signature (see ``keyed``), with the
    machine's steps (``record``: after the warm-up, as ``SimStep``s for a differential trace)."""

    record: tuple[SimStep, ...] = ()


_KEYED_TYPES: dict[str, type[KeyedDisagreement]] = {}


def keyed(error: Disagreement, record) -> KeyedDisagreement:
    """``error`` again as its signature's own exception type. Hypothesis tells failures apart by type
    and by where they were raised, and every disagreement of a kind is raised at one place, so
    without this it would shrink two signature groups as one failure and report only the smaller;
    the model machine does the same with one type per property."""
    signature = disagreement_signature(error)
    if signature not in _KEYED_TYPES:
        _KEYED_TYPES[signature] = type(f"Disagreement[{signature}]", (KeyedDisagreement,), {"__module__": __name__})
    again = _KEYED_TYPES[signature](error.summary, error.steps, error.details, error.broken)
    again.record = tuple(record)
    return again


def invariant_of(error: BaseException) -> str:
    """The violations table's ``invariant``: the first property broken, else the kind of failure."""
    if isinstance(error, Disagreement):
        return invariant_of_signature(disagreement_signature(error))
    broken = getattr(error, "invariants", None)  # properties.machines.InvariantViolation
    return broken[0] if broken else type(error).__name__


def signature_of(error: BaseException) -> str:
    """The dedup key of a failure: the sim engine's for a disagreement (``properties.shrink``); for
    the model machine, the first broken property, which is how Hypothesis tells its failures apart
    (one exception type per property), so that shrinking keeps the key."""
    if isinstance(error, Disagreement):
        return disagreement_signature(error)
    broken = getattr(error, "invariants", None)
    return broken[0] if broken else f"Error:{type(error).__name__}"


def _first_line(error: BaseException) -> str:
    text = (error.summary if isinstance(error, Disagreement) else str(error)).strip().splitlines()
    return text[0] if text else type(error).__name__


# ---- the runs ---------------------------------------------------------------------------------


def run_fuzz_partition(plan: Plan, partition: int) -> dict:
    """Fuzz the partition's seeds, one example each: the rows of ``properties.campaign.tasks.run_partition``."""
    rows: dict[str, list[dict]] = {"runs": [], "violations": [], "coverage": []}
    started = plan.started_at  # the campaign's start, wall clock (finished_s; the driver's when absent)
    with hypothesis_storage():
        bridge = Bridge(plan)
        fuzz = bridge.test().hypothesis.fuzz_one_input
        for seed in partition_seeds(plan, partition):
            bridge.watched = None
            began = time.perf_counter()
            error: Exception | None = None
            try:
                fuzz(buffer_of(seed))
            except Exception as raised:  # noqa: BLE001 - whatever the example raised is its failure
                error = raised
            duration = time.perf_counter() - began
            watched = bridge.watched
            if watched is None:  # the machine did not start (a warm-up that disagreed)
                watched = Watched(_start_state(bridge))
            counts = watched.collector.counts
            invariant = None if error is None else invariant_of(error)
            rows["runs"].append({
                "partition": partition, "seed": seed, "scope": plan.scope, "config": "", "faults": FAULTS,
                "mutant": plan.mutant, "runbook": "none", "engine": ENGINE, "steps": watched.steps,
                "duration_s": duration, "finished_s": None if started is None else time.time() - started,
                "outcome": "clean" if error is None else "violation", "invariant": invariant,
                "progress": PROGRESS[watched.progress], "findings": sorted(watched.findings),
                "coverage_signature": coverage_signature(counts), "new_coverage": None,
            })
            rows["coverage"] += [
                {"partition": partition, "seed": seed, "kind": kind, "key": key, "count": count}
                for (kind, key), count in sorted(counts.items())
            ]
            if error is not None:
                rows["violations"].append({
                    "partition": partition, "seed": seed, "scope": plan.scope, "mutant": plan.mutant,
                    "invariant": invariant, "signature": signature_of(error), "step": watched.steps,
                    "summary": _first_line(error), "trace_file": None, "shrunk_steps": None,
                    "original_steps": watched.steps,
                })
    return rows


def _start_state(bridge: Bridge) -> ClusterState:
    from model.scopes import cold_state

    return cold_state(scenario(bridge.plan.scope))


# ---- after the runs: Hypothesis replays, shrinks and reports ---------------------------------


def finish_fuzz(plan: Plan, out_dir: str | os.PathLike, violations: list[dict]) -> list[dict]:
    """Replay the campaign's failures as an ordinary Hypothesis run, shrunk, and save each as a trace.

    Returns the ``violations`` rows in their order, each row of an (invariant, signature) group that
    Hypothesis reported again as a copy with ``trace_file`` (relative to ``out_dir``) and
    ``shrunk_steps`` filled in; the input rows are left as they are.
    """
    out_dir = Path(out_dir)
    groups: dict[tuple[str, str], list[dict]] = {}
    for row in sorted(violations, key=lambda r: r["seed"]):  # a group's first row is its lowest seed
        groups.setdefault((row["invariant"], row["signature"]), []).append(row)
    if not groups:
        return []
    reported = _replay(plan, out_dir, [rows[0]["seed"] for rows in groups.values()])
    found: dict[tuple[str, str], Reported] = {}
    for invariant, signature in groups:
        # The failure Hypothesis reported for this group: the same key, else the same property (a
        # disagreement's fields may change as it shrinks; Hypothesis tells failures apart by where
        # they were raised).
        match = next((r for r in reported if r.signature == signature), None) or next(
            (r for r in reported if r.invariant == invariant), None)
        if match is not None and match.trace_file is not None:
            found[invariant, signature] = match
    filled = []
    for row in violations:
        match = found.get((row["invariant"], row["signature"]))
        filled.append(row if match is None else {**row, "trace_file": match.trace_file, "shrunk_steps": match.steps})
    return filled


@dataclass
class Reported:
    """One failure as Hypothesis reported it after shrinking, and the trace file saved for it."""

    signature: str
    invariant: str
    steps: int | None
    trace_file: str | None  # relative to the campaign directory; None: not a check's verdict (a crash)
    falsifying_example: str  # Hypothesis's text: the machine's steps as code


def _replay(plan: Plan, out_dir: Path, seeds: list[int]) -> list[Reported]:
    """The ordinary Hypothesis run over the example database: its failures, shrunk, each saved."""
    counterexamples = out_dir / COUNTEREXAMPLES_DIR
    with hypothesis_storage():
        # The model machine saves its final (shrunk) failing run's trace itself, into trace_dir.
        bridge = Bridge(plan, trace_dir=counterexamples)
        fuzz = bridge.test().hypothesis.fuzz_one_input
        for seed in seeds:  # each group's first failing example into the database again
            try:
                fuzz(buffer_of(seed))
            except Exception:  # noqa: BLE001, S110 - expected: failing is what saves it
                pass
        try:
            bridge.test()()
            return []  # the database held no example that still fails
        except unittest.SkipTest:  # Hypothesis ran no example at all: the database held none
            return []
        except Exception as raised:  # noqa: BLE001 - Hypothesis raises the test's own failures
            failures = _failures(raised)
    reported, names = [], set()
    for error in failures:
        signature = signature_of(error)
        name = slug(signature)
        if name in names:  # two signatures that read the same as a file name
            name += "-" + hashlib.blake2b(signature.encode(), digest_size=4).hexdigest()
        names.add(name)
        path, steps = _save_trace(plan, error, counterexamples / f"{name}.json")
        text = _falsifying_example(error)
        stem = path.stem if path is not None else name
        write_text(counterexamples / f"{stem}.hypothesis.txt", f"{text}\n{type(error).__name__}: {error}\n")
        relative = None if path is None else path.relative_to(out_dir).as_posix()
        reported.append(Reported(signature, invariant_of(error), steps, relative, text))
    return reported


def _failures(error: BaseException) -> list[BaseException]:
    """The failures Hypothesis raised: one, or a group of distinct ones."""
    if isinstance(error, BaseExceptionGroup):
        return [f for e in error.exceptions for f in _failures(e)]
    return [error]


def _falsifying_example(error: BaseException) -> str:
    """Hypothesis's report of the shrunk example: the machine's steps, one a line (its notes)."""
    return "\n".join(n for n in getattr(error, "__notes__", ()) if not n.startswith("Failing test case"))


def _save_trace(plan: Plan, error: BaseException, path: Path) -> tuple[Path | None, int | None]:
    """The failure's replayable trace file (saved at ``path`` unless the machine saved it) and its steps;
    (None, None) for a failure that is no property's or disagreement's (Hypothesis's text tells it)."""
    trace = getattr(error, "trace", None)
    if trace is not None:  # the model machine's: a model trace, saved by the machine on its final run
        saved = getattr(error, "trace_path", None) or traces.save_trace(path, trace)
        return Path(saved), len(trace.actions)
    if not isinstance(error, KeyedDisagreement):  # not a check's verdict (a crash): no trace to replay
        return None, None
    # The differential machine's cluster is Differential's default one: seed 0, never partitioned.
    trace = trace_for(plan, 0, list(error.record), signature_of(error), error)
    # A differential trace replays in the simulator's mode, where a step the implementation refuses
    # is not a disagreement by itself (``Differential.strict``); the machine's mode is strict. A
    # trace that would not reproduce its signature is not saved.
    if replay_trace(trace).signature != trace.signature:
        return None, None
    return traces.save_trace(path, trace), len(error.record)
