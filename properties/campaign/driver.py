"""The campaign's driver: partitions submitted and written, the tables consolidated, violations shrunk, the summary.

Rules:
- The driver submits each partition as its own task, writes each finished partition's rows
  (``properties.campaign.tables``), and at the end consolidates the tables, shrinks one
  violation per (invariant, signature) group (one task per group), and writes ``summary.json``
  and ``report.html`` (``properties.campaign.report``).
- A steered campaign (``properties.steering``) runs in waves: a partition of a later wave is
  submitted once every partition of the earlier ones has finished, its task plan holding the
  fault grid's cells those struck (so the same options give the same campaign, resumed too).
- A DIR that holds another campaign, or that cannot be created or written, is a ``CampaignError``
  before anything is written; ``--resume`` (same options) continues where a killed campaign
  stopped and ends with the same results.
- The JVM's output goes to ``DIR/spark.log`` (``KRAFTCHECK_SPARK_LOG``: another file, or "-" for
  the terminal); the campaign says it is starting Spark before it does.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, replace
from pathlib import Path

from impl.sim.scenarios import scenario
from impl.sim.simulator import PROGRESS
from properties.campaign.options import (
    DEFAULT_MASTER,
    CampaignError,
    check_writable,
    partition_count,
    plan_differences,
)
from properties.campaign.runners import Runner, is_spark_master, make_runner
from properties.campaign.tables import (
    COUNTEREXAMPLES,
    PARTS,
    PLAN_FILE,
    SUMMARY_FILE,
    TABLES,
    consolidate,
    finished_partitions,
    part_path,
    read_rows,
    write_json,
    write_partition,
    write_table,
)
from properties.campaign.tasks import run_partition, shrink_group
from properties.plan import (
    Plan,
)
from properties.progress import goal_of
from properties.runs import GRID_FAULTS, GRID_STATES
from properties.shrink import slug
from properties.steering import aimable, steered, wave_of_partition

SPARK_LOG = "spark.log"
SPARK_LOG_ENV = "KRAFTCHECK_SPARK_LOG"  # another file for the JVM's output, or "-" for the terminal


class _Display:
    """The progress line on stderr (off with --json or off a terminal): what it is doing, the time so far and the
    time left (from this invocation's pace for ``--seeds``, the deadline for ``--minutes``), a bar, seeds done,
    violations, steps/s; the times come first, so that an 80-column terminal cuts the rate, not them."""

    def __init__(self, enabled: bool, total: int | None, label: str, done: int = 0,
                 deadline: float | None = None) -> None:
        self.progress = None
        self.total, self.done, self.deadline, self.started = total, done, deadline, time.monotonic()
        if not enabled:
            return
        from rich.console import Console
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn

        self.progress = Progress(
            SpinnerColumn(), TextColumn("{task.description}"), TextColumn("{task.fields[clock]}"),
            BarColumn(bar_width=12), TextColumn("{task.completed:.0f}/{task.fields[of]} seeds"),
            TextColumn("{task.fields[violations]} violations"), TextColumn("{task.fields[rate]} steps/s"),
            console=Console(stderr=True), transient=True,
        )
        self.progress.start()
        self.task = self.progress.add_task(label, total=total, completed=done, of="?" if total is None else total,
                                           violations=0, rate="-", clock=self._clock(0.0, done))

    @staticmethod
    def _duration(seconds: float) -> str:
        minutes, secs = divmod(int(seconds), 60)
        hours, minutes = divmod(minutes, 60)
        return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"

    def _clock(self, seconds: float, seeds: int) -> str:
        """``elapsed eta left``: the campaign's time so far (earlier invocations included) and an estimate of the
        time left ("-" before the first partition of this invocation ends)."""
        now = time.monotonic()
        if self.deadline is not None:
            left = max(0.0, self.deadline - now)
        elif self.total is not None and seeds > self.done:
            left = (self.total - seeds) * (now - self.started) / (seeds - self.done)
        else:
            left = None
        return f"{self._duration(seconds)} eta {'-' if left is None else self._duration(left)}"

    def update(self, seeds: int, violations: int, steps: int, seconds: float, description: str | None = None):
        if self.progress is None:
            return
        fields = {"completed": seeds, "violations": violations, "rate": f"{steps / seconds:,.0f}" if seconds else "-",
                  "clock": self._clock(seconds, seeds)}
        if description is not None:
            fields["description"] = description
        self.progress.update(self.task, **fields)

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()


# ---- the driver: the campaign ----------------------------------------------------------------

@dataclass
class Tally:
    seeds: int = 0
    violations: int = 0
    steps: int = 0


def check_out_dir(plan: Plan, resume: bool) -> bool:
    """Whether DIR holds this plan's campaign to resume; ``CampaignError`` when DIR holds another
    campaign (or one at all, without ``--resume``)."""
    out = Path(plan.out)
    recorded_path = out / PLAN_FILE
    if out.exists() and not out.is_dir():
        raise CampaignError(f"{out} is not a directory")
    check_writable(out)
    if not recorded_path.is_file():
        return False
    if not resume:
        raise CampaignError(f"{out} already holds a campaign: --resume continues it, or choose another --out")
    try:
        recorded = Plan.from_json(json.loads(recorded_path.read_text(encoding="utf-8")))
    except ValueError as e:  # not JSON, or not a plan
        raise CampaignError(f"{recorded_path}: not a campaign plan ({e})") from None
    differing = plan_differences(recorded, plan)
    if differing:
        raise CampaignError(f"--resume: {out} holds a campaign with other options ({', '.join(differing)}); "
                            "another --out starts a new one")
    return True


def _clean_temporaries(out: Path) -> None:
    """A killed driver's half-written files (never read: they start with ".")."""
    for table in TABLES:
        directory = out / PARTS / table
        if directory.is_dir():
            for name in os.listdir(directory):
                if name.startswith(".") and name.endswith(".tmp"):
                    (directory / name).unlink(missing_ok=True)


def _partitions_to_run(plan: Plan, done: set[int]) -> Iterator[int]:
    count = partition_count(plan)
    p = 0
    while count is None or p < count:
        if p not in done:
            yield p
        p += 1


def run_campaign(plan: Plan, master: str = DEFAULT_MASTER, *, resume: bool = False, spark=None,
                 show_progress: bool = False) -> dict:
    """Run (or ``resume``) the plan's campaign; write its tables, counterexamples, summary and report.

    ``spark``: a session to run on (the caller owns it); without one, a Spark ``master`` gets a
    session of its own (stopped at the end), and ``serial`` / ``processes[N]`` need none.
    Returns the summary (also in ``DIR/summary.json``).
    """
    from properties.campaign import spark as spark_session

    resuming = check_out_dir(plan, resume)
    own_spark = None
    if spark is None and is_spark_master(master):
        log = os.environ.get(SPARK_LOG_ENV) or str(Path(plan.out) / SPARK_LOG)
        if log != "-":
            Path(plan.out).mkdir(parents=True, exist_ok=True)
        print(f"kraftcheck campaign: starting Spark on {spark_session.spark_master(master)}"
              + ("" if log == "-" else f"; the JVM's log goes to {log}"), file=sys.stderr, flush=True)
        spark = own_spark = spark_session.session(master, log=None if log == "-" else Path(log))
    try:
        runner = make_runner(master, spark)
        try:
            return _run(plan, runner, resuming, show_progress)
        finally:
            runner.close()
    finally:
        if own_spark is not None:
            own_spark.stop()


def _run(plan: Plan, runner: Runner, resuming: bool, show_progress: bool) -> dict:
    out = Path(plan.out)
    started = time.time()
    for table in TABLES:
        (out / PARTS / table).mkdir(parents=True, exist_ok=True)
    write_json(out / PLAN_FILE, plan.to_json())
    _clean_temporaries(out)
    done = set(finished_partitions(out))
    tally, offset = Tally(), 0.0
    for p in sorted(done):  # the earlier runs' figures; their time axis goes on from where they stopped
        runs = read_rows(part_path(out, "runs", p))
        tally.seeds += len(runs)
        tally.steps += sum(r["steps"] for r in runs)
        tally.violations += sum(r["outcome"] == "violation" for r in runs)
        offset = max([offset, *(r["finished_s"] or 0.0 for r in runs)])
    total = plan.seeds
    deadline = None if plan.minutes is None else time.monotonic() + plan.minutes * 60
    display = _Display(show_progress, total, "running", tally.seeds, deadline)
    task_plan = plan.started(started - offset)
    waves = _Waves(plan, out, done)
    todo = _partitions_to_run(plan, done)
    pending: dict[Future, int] = {}
    held: int | None = None  # the next partition, when its wave must wait for the one before
    try:
        while True:
            while len(pending) < runner.slots and (deadline is None or time.monotonic() < deadline):
                p = next(todo, None) if held is None else held
                if p is None:
                    break
                held = None
                if not waves.may_start(p, pending.values()):
                    held = p
                    break
                pending[runner.submit(run_partition, waves.plan_for(task_plan, p), p)] = p
            if not pending:
                break
            finished, _ = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            for future in finished:
                p = pending.pop(future)
                rows = future.result()
                write_partition(out, p, rows, task_plan.started_at)
                waves.finished(p, rows["coverage"])
                done.add(p)
                tally.seeds += len(rows["runs"])
                tally.steps += sum(r["steps"] for r in rows["runs"])
                tally.violations += sum(r["outcome"] == "violation" for r in rows["runs"])
            display.update(tally.seeds, tally.violations, tally.steps, offset + time.time() - started)
        display.update(tally.seeds, tally.violations, tally.steps, offset + time.time() - started, "shrinking")
        tables = consolidate(out, sorted(done))
        counterexamples = shrink_groups(plan, runner, tables["violations"], tables["runs"])
        for name in TABLES:
            write_table(out / f"{name}.parquet", name, tables[name])
        summary = summarize(plan, runner.label, tables, counterexamples, offset + time.time() - started, resuming)
        write_json(out / SUMMARY_FILE, summary)
    finally:
        display.stop()
    from properties.campaign.report import write_report

    write_report(out)
    return summary




class _Waves:
    """A steered campaign's waves: which partitions may start, and the plan each wave's tasks get (the fault
    grid's cells struck by the waves before it)."""

    def __init__(self, plan: Plan, out: Path, done: set[int]) -> None:
        self.on = steered(plan)
        self.plan = plan
        self.struck: dict[int, set[str]] = {}  # a finished partition -> the fault_at keys its runs reached
        if self.on:
            for p in done:
                self.finished(p, read_rows(part_path(out, "coverage", p)))

    def finished(self, partition: int, coverage: list[dict]) -> None:
        if self.on:
            self.struck[partition] = {r["key"] for r in coverage if r["kind"] == "fault_at"}

    def may_start(self, partition: int, pending) -> bool:
        """Every partition of the earlier waves has finished (partitions are submitted in order)."""
        wave = wave_of_partition(self.plan, partition)
        return not self.on or all(wave_of_partition(self.plan, q) >= wave for q in pending)

    def plan_for(self, task_plan: Plan, partition: int) -> Plan:
        if not self.on:
            return task_plan
        wave = wave_of_partition(self.plan, partition)
        cells = set().union(*(keys for p, keys in self.struck.items() if wave_of_partition(self.plan, p) < wave))
        return replace(task_plan, struck=tuple(sorted(cells)))


def shrink_groups(plan: Plan, runner: Runner, violations: list[dict], runs: list[dict] = ()) -> list[dict]:
    """One shrink task per (invariant, signature) group, on its lowest seed (with the aims it ran with); fills in
    the group's rows' ``trace_file`` and ``shrunk_steps``. Returns one entry per group."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for row in violations:  # in seed order: a group's first row is its lowest seed
        groups.setdefault((row["invariant"], row["signature"]), []).append(row)
    if not groups:
        return []
    if plan.engine == "hypothesis":
        return _finish_fuzz(plan, violations, groups)
    from properties.traces import save_trace

    directory = Path(plan.out) / COUNTEREXAMPLES
    directory.mkdir(exist_ok=True)
    aims = {r["seed"]: tuple(r.get("aims") or ()) for r in runs}
    futures = {key: runner.submit(shrink_group, plan, rows[0]["seed"], aims.get(rows[0]["seed"], ()), key[1])
               for key, rows in sorted(groups.items())}
    used: set[str] = set()
    entries = []
    for (invariant, signature), future in futures.items():
        result = future.result()
        entry = {"invariant": invariant, "signature": signature, "seed": groups[invariant, signature][0]["seed"],
                 "seeds": len(groups[invariant, signature]), "trace_file": None}
        if "trace" in result:
            name = slug(signature)
            if name in used:  # two signatures that read the same as a file name
                name += "-" + hashlib.blake2b(signature.encode(), digest_size=4).hexdigest()
            used.add(name)
            relative = f"{COUNTEREXAMPLES}/{name}.json"
            save_trace(Path(plan.out) / relative, result["trace"])
            entry.update(trace_file=relative, shrunk_steps=result["shrunk_steps"], minimal=result["minimal"],
                         reproduced=result["reproduced"], tries=result["tries"],
                         shrink_seconds=round(result["seconds"], 2))
            for row in groups[invariant, signature]:
                row["trace_file"], row["shrunk_steps"] = relative, result["shrunk_steps"]
        else:
            entry["error"] = result.get("error")
        entries.append(entry)
    return entries


def _finish_fuzz(plan: Plan, violations: list[dict], groups: dict) -> list[dict]:
    """The Hypothesis engine's counterpart of shrinking: Hypothesis replays and shrinks the failures
    from its example database (``properties.campaign.hypothesis.finish_fuzz``)."""
    from properties.campaign.hypothesis import finish_fuzz

    violations[:] = finish_fuzz(plan, plan.out, violations)
    entries = []
    for (invariant, signature), rows in sorted(groups.items()):
        row = next(v for v in violations if v["signature"] == signature and v["invariant"] == invariant)
        entries.append({"invariant": invariant, "signature": signature, "seed": rows[0]["seed"], "seeds": len(rows),
                        "trace_file": row["trace_file"], "shrunk_steps": row["shrunk_steps"]})
    return entries


ROLLED_BACK = "rolled-back"  # a level after PROGRESS's: the rollback runbook finished


def run_level(run: dict) -> str:
    """How far a run got: its ``progress``, or ``rolled-back`` when its rollback finished."""
    return ROLLED_BACK if run.get("rolled_back") else run["progress"]


def _by_progress(counts: Counter) -> dict[str, int]:
    """Runs per level of ``Simulation.PROGRESS`` (then ``rolled-back``), in the migration's order."""
    order = {level: i for i, level in enumerate((*PROGRESS, ROLLED_BACK))}
    return dict(sorted(counts.items(), key=lambda item: (order.get(item[0], len(order)), item[0])))


def summarize(plan: Plan, master: str, tables: dict, counterexamples: list[dict], seconds: float,
              resumed: bool) -> dict:
    runs, violations, coverage = tables["runs"], tables["violations"], tables["coverage"]
    steps = sum(r["steps"] for r in runs)
    findings: Counter = Counter(f for r in runs for f in set(r["findings"] or ()))
    return {
        "options": plan.to_json(),
        "master": master,
        "resumed": resumed,
        "seeds_done": len({r["seed"] for r in runs}),
        "runs": len(runs),
        "steps": steps,
        "wall_seconds": round(seconds, 2),
        "steps_per_second": round(steps / seconds, 1) if seconds > 0 else None,
        "runs_per_second": round(len(runs) / seconds, 3) if seconds > 0 else None,
        "violations": len(violations),
        "violations_by_invariant": dict(sorted(Counter(v["invariant"] for v in violations).items())),
        "distinct_signatures": len({v["signature"] for v in violations}),
        "findings": dict(sorted(findings.items())),
        "coverage": {kind: len({r["key"] for r in coverage if r["kind"] == kind})
                     for kind in ("action", "driver_transition", "state", "decision", "fault_at", "progress")},
        "stalls": dict(sorted(Counter(goal_of(v["signature"]) for v in violations
                                      if goal_of(v["signature"])).items())),
        "steering": None if not steered(plan) else {
            "runs_aimed": sum(bool(r.get("aims")) for r in runs),
            "aims": sum(len(r.get("aims") or ()) for r in runs),
            "aimable_cells": len(aimable(plan)),
        },
        "progress": _by_progress(Counter(run_level(r) for r in runs)),
        "progress_by_runbook": {
            runbook: _by_progress(Counter(run_level(r) for r in runs if r["runbook"] == runbook))
            for runbook in sorted({r["runbook"] for r in runs})
        },
        "counterexamples": counterexamples,
        "no_progress": progress_problem(plan, runs),
        "report": "report.html",
    }



def progress_problem(plan: Plan, runs: list[dict]) -> str | None:
    """Why the campaign made no progress at all, or None (KIP-866 §Migration Overview: a runbook on a
    cluster with KRaft controllers starts the migration). Every run short of it exercised only the
    ZooKeeper era, so the campaign's verdict on the migration would be vacuous."""
    if plan.engine != "sim" or plan.runbook == "none" or not runs or not scenario(plan.scope).controllers:
        return None
    best = max(PROGRESS.index(r["progress"]) for r in runs)
    if best >= PROGRESS.index("migration"):
        return None
    return (f"no run's migration started in {len(runs)} runs (the furthest got to {PROGRESS[best]}): "
            "a liveness bug, or too few --steps")


def describe(summary: dict) -> str:
    out = Path(summary["options"]["out"])
    lines = [
        f"{summary['seeds_done']} seeds, {summary['steps']:,} steps in {summary['wall_seconds']:.1f} s "
        f"({summary['steps_per_second'] or 0:,.0f} steps/s) on {summary['master']}",
        "coverage: " + ", ".join(f"{n} {kind} keys" for kind, n in summary["coverage"].items()),
        f"fault grid: {summary['coverage']['fault_at']} of {len(GRID_STATES) * len(GRID_FAULTS)} cells struck"
        + ("" if not summary.get("steering") else
           f" ({summary['steering']['aims']} faults aimed in {summary['steering']['runs_aimed']} runs)"),
        "progress: " + ", ".join(f"{level} {n}" for level, n in summary["progress"].items()),
    ]
    if summary["findings"]:
        lines.append("documented findings: " + ", ".join(f"{k} ({n} runs)" for k, n in summary["findings"].items()))
    if summary["violations"]:
        lines.append(f"VIOLATIONS: {summary['violations']} in {summary['distinct_signatures']} signature groups")
        for entry in summary["counterexamples"]:
            seeds = f"seed {entry['seed']}, {entry['seeds']} seeds"
            if entry.get("trace_file"):
                lines.append(f"  {entry['signature']} ({seeds}): {out / entry['trace_file']}")
            else:
                lines.append(f"  {entry['signature']} ({seeds}): no trace ({entry.get('error') or 'not shrunk'})")
    else:
        lines.append("no violation")
    if summary.get("no_progress"):
        lines.append(f"NO PROGRESS: {summary['no_progress']}")
    lines.append(f"report: {out / summary['report']}")
    return "\n".join(lines)
