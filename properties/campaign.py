"""Fuzzing campaigns: many seeded simulations of the implementation, each checked against the model.

    kraftcheck campaign --seeds 64 --master local[2] --out campaign-out
    spark-submit properties/campaign.py --seeds 64 --out campaign-out     # the same options

How it works: a campaign is a *plan* (``DIR/campaign.json``: every option that changes its
results) cut into *partitions* of consecutive seeds. ``run_partition(plan, p)`` runs partition
p's seeds, each a ``Simulation`` of the implementation stepped in the model after every event
(``properties.differential``: the two must agree and the model's invariants must hold), and
returns rows. The driver submits each partition as its own small Spark job (one task) from a
pool of threads as wide as the cluster, writes each finished partition's rows, and at the end
consolidates the tables, shrinks one violation per signature group (``properties.shrink``, one
Spark task per group), and writes ``summary.json`` and ``report.html`` (``properties.report``).

Rules:
- ``run_partition`` is a pure function of (plan, partition): the same rows on any machine and
  in any mode (Spark, ``processes[N]``, ``serial``), apart from the timing columns
  (``duration_s``, ``finished_s``; a row's ``ended_at``, the wall clock when its run ended, is
  what the driver turns into ``finished_s``). Rows travel back to the driver, which alone
  writes files, so a retried task can never add rows twice.
- Partition p holds seeds ``[p*S, (p+1)*S)`` (S: ``--partition-size``; the last one is cut at
  ``--seeds``); with ``--minutes`` partitions are started in order until the deadline and those
  started finish. Every fourth seed of the ``mixed`` runbook rolls back (``bench.sim``).
- Files are written whole or not at all: each to a temporary name starting with "." in its
  directory, then ``os.replace``. Readers only read ``part-NNNNN.parquet``. A partition's
  ``_parts/runs`` file is written after its violations and coverage parts and is its commit
  mark: ``--resume`` skips exactly the partitions that have one.
- Bad input (an option, scope, fault mix, seeded bug, master, or a DIR that holds another
  campaign) is one line on stderr and exit 2, before anything is written.
- Coverage is gathered through ``Simulation.on_event`` from the model's side: the model action
  kinds taken, the migration drivers' transitions ("FROM->TO"), and a readable coarse
  projection of the model state (``state_key``). A run's ``new_coverage`` counts the keys no
  run of a lower seed reached; it is computed when the tables are consolidated, so it is the
  same however the partitions were scheduled.
- A violation is deduplicated by (invariant, signature) (``properties.shrink.signature_of``);
  each group's lowest seed is run again in its own task and shrunk, and the shrunk trace is saved
  under ``DIR/counterexamples/``; every row of the group names it.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":  # spark-submit properties/campaign.py: the project, not properties/, on the path
    sys.path[0] = str(Path(__file__).resolve().parents[1])

import hashlib
import json
import os
import re
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from functools import partial
from typing import Any

from impl.bugs import ImplBug
from impl.sim.faults import parse as parse_faults
from impl.sim.scenarios import scenario
from impl.sim.simulator import PROGRESS, RUNBOOKS
from model.bugs import Variant
from properties.files import replace_atomically, write_text
from properties.plan import (
    DEFAULT_ENGINE,
    DEFAULT_FAULTS,
    DEFAULT_OUT,
    DEFAULT_RUNBOOK,
    DEFAULT_SCOPE,
    DEFAULT_SHRINK_SECONDS,
    DEFAULT_STEPS,
    PLACE_KEYS,
    Plan,
    default_partition_size,
    resolve_mutant,
)
from properties.runs import (  # noqa: F401 - the campaign's run of one seed, and its coverage, by these names too
    CoverageCollector,
    SeedRun,
    action_key,
    coverage_signature,
    run_seed,
    state_key,
)
from properties.shrink import invariant_of, shrink_violation, signature_of, slug, trace_for

# ---- defaults (the README's main job, ``scripts/run.sh``, runs a campaign with these) -----------

DEFAULT_SEEDS = 16
DEFAULT_MASTER = "local[*]"

CAMPAIGN_RUNBOOKS = (*RUNBOOKS, "mixed")
ENGINES = ("sim", "hypothesis")
MACHINES = ("model", "differential")
PLAN_FILE = "campaign.json"
SUMMARY_FILE = "summary.json"
PARTS = "_parts"
COUNTEREXAMPLES = "counterexamples"
TABLES = ("runs", "violations", "coverage")
# Test-only: a directory; a task for partition p kills its own Python worker (after its first seed)
# when ``kill-partition-<p>`` is in it and ``killed-partition-<p>`` is not (which it then creates).
KILL_WORKER_ENV = "KRAFTCHECK_CAMPAIGN_TEST_KILL_DIR"


class CampaignError(ValueError):
    """Bad input for a campaign: one line, nothing written."""


# ---- the plan --------------------------------------------------------------------------------

def seeded_bug(name: str | None) -> tuple[frozenset[ImplBug], Variant]:
    """A seeded bug of either layer by name: (the implementation's bugs, the model's variant)."""
    try:
        return resolve_mutant(name)
    except ValueError as e:
        raise CampaignError(str(e)) from None


def _checked(read: Callable[[str], object], text: str) -> str:
    """``text`` if ``read`` accepts it; its one-line ValueError as a CampaignError otherwise."""
    try:
        read(text)
    except ValueError as e:
        raise CampaignError(str(e)) from None
    return text


def check_scope(name: str) -> str:
    return _checked(scenario, name)


def check_faults(spec: str) -> str:
    return _checked(parse_faults, spec)


def check_mutant(name: str) -> str:
    seeded_bug(name)
    return name


def make_plan(*, seeds: int | None = None, minutes: float | None = None, scope: str = DEFAULT_SCOPE,
              faults: str = DEFAULT_FAULTS, mutant: str | None = None, steps: int = DEFAULT_STEPS,
              runbook: str = DEFAULT_RUNBOOK, partition_size: int | None = None, engine: str = DEFAULT_ENGINE,
              machine: str | None = None, shrink_seconds: float = DEFAULT_SHRINK_SECONDS,
              out: str | os.PathLike = DEFAULT_OUT) -> Plan:
    """The campaign's plan, every option checked (``CampaignError``, one line)."""
    if seeds is not None and minutes is not None:
        raise CampaignError("--seeds and --minutes exclude each other")
    if seeds is None and minutes is None:
        seeds = DEFAULT_SEEDS
    if seeds is not None and seeds < 1:
        raise CampaignError(f"--seeds: expected a positive integer, got {seeds}")
    if minutes is not None and not minutes > 0:
        raise CampaignError(f"--minutes: expected a positive number, got {minutes}")
    if steps < 1:
        raise CampaignError(f"--steps: expected a positive integer, got {steps}")
    if partition_size is not None and partition_size < 1:
        raise CampaignError(f"--partition-size: expected a positive integer, got {partition_size}")
    if not shrink_seconds >= 0:
        raise CampaignError(f"--shrink-seconds: expected a number >= 0, got {shrink_seconds}")
    if runbook not in CAMPAIGN_RUNBOOKS:
        raise CampaignError(f"unknown runbook {runbook!r}; expected one of {', '.join(CAMPAIGN_RUNBOOKS)}")
    if engine not in ENGINES:
        raise CampaignError(f"unknown engine {engine!r}; expected one of {', '.join(ENGINES)}")
    if engine == "sim" and machine is not None:
        raise CampaignError("--machine chooses the Hypothesis machine: it needs --engine hypothesis")
    if engine == "hypothesis":
        machine = machine or "differential"
        if machine not in MACHINES:
            raise CampaignError(f"unknown machine {machine!r}; expected one of {', '.join(MACHINES)}")
    check_scope(scope)
    check_faults(faults)
    seeded_bug(mutant)
    plan = Plan(seeds=seeds, minutes=minutes, scope=scope, faults=faults, mutant=mutant, steps=steps,
                runbook=runbook, partition_size=partition_size or default_partition_size(steps), engine=engine,
                machine=machine, shrink_seconds=float(shrink_seconds), out=str(Path(out).resolve()))
    if engine == "hypothesis":
        from properties.campaign_hypothesis import check_plan

        try:
            check_plan(plan)
        except ValueError as e:
            raise CampaignError(str(e)) from None
    return plan


def plan_differences(recorded: Mapping[str, Any], plan: Mapping[str, Any]) -> list[str]:
    """The options (as on the command line) whose values differ between two plans (either in its JSON form)."""
    recorded, plan = dict(recorded), dict(plan)
    keys = sorted((set(recorded) | set(plan)) - set(PLACE_KEYS))
    return [f"--{k.replace('_', '-')}" for k in keys if recorded.get(k) != plan.get(k)]


def partition_seeds(plan: Plan | dict, partition: int) -> range:
    plan = Plan.of(plan)
    size = plan.partition_size
    end = (partition + 1) * size
    if plan.seeds is not None:
        end = min(end, plan.seeds)
    return range(partition * size, end)


def partition_count(plan: Plan) -> int | None:
    """How many partitions the plan has; None for a timed campaign (``--minutes``)."""
    if plan.seeds is None:
        return None
    return -(-plan.seeds // plan.partition_size)


def run_partition(plan: Plan | dict, partition: int) -> dict:
    """The rows of one partition: ``{"runs": [...], "violations": [...], "coverage": [...]}``."""
    plan = Plan.of(plan)
    if plan.engine == "hypothesis":
        from properties.campaign_hypothesis import run_fuzz_partition

        return run_fuzz_partition(plan, partition)
    started = plan.started_at
    rows: dict[str, list[dict]] = {name: [] for name in TABLES}
    for index, seed in enumerate(partition_seeds(plan, partition)):
        run = run_seed(plan, seed)
        d = run.disagreement
        signature = None if d is None else signature_of(d)
        rows["runs"].append({
            "partition": partition, "seed": seed, "scope": plan.scope, "faults": run.faults,
            "mutant": plan.mutant,
            "runbook": run.runbook, "engine": plan.engine, "steps": len(run.record), "duration_s": run.seconds,
            "finished_s": None if started is None else run.ended_at - started,
            "outcome": "clean" if d is None else "violation",
            "invariant": None if d is None else invariant_of(signature), "progress": run.progress,
            "findings": list(run.findings), "coverage_signature": coverage_signature(run.coverage),
            "new_coverage": None,
        })
        if d is not None:
            rows["violations"].append({
                "partition": partition, "seed": seed, "scope": plan.scope, "mutant": plan.mutant,
                "invariant": invariant_of(signature), "signature": signature, "step": len(run.record),
                "summary": d.summary.splitlines()[0] if d.summary else "", "trace_file": None, "shrunk_steps": None,
                "original_steps": len(run.record),
            })
        rows["coverage"] += [
            {"partition": partition, "seed": seed, "kind": kind, "key": key, "count": count}
            for (kind, key), count in sorted(run.coverage.items())
        ]
        if index == 0:
            _test_kill_worker(partition)
    return rows


def _test_kill_worker(partition: int) -> None:
    """Test-only (``KILL_WORKER_ENV``): the Python worker running this task dies, once, mid-task."""
    directory = os.environ.get(KILL_WORKER_ENV)
    if not directory or not os.path.exists(os.path.join(directory, f"kill-partition-{partition}")):
        return
    killed = os.path.join(directory, f"killed-partition-{partition}")
    try:
        with open(killed, "x") as f:  # the first attempt only: the retry finds the mark
            f.write(str(os.getpid()))
    except FileExistsError:
        return
    os.kill(os.getpid(), signal.SIGKILL)


def shrink_group(plan: Plan, seed: int, signature: str) -> dict:
    """A signature group's counterexample: its seed run again for the record, shrunk, as a trace."""
    run = run_seed(plan, seed, coverage=False)
    d = run.disagreement
    if d is None or signature_of(d) != signature:
        return {"signature": signature, "error": f"seed {seed} did not show {signature} again"}
    result = shrink_violation(plan, seed, run.record, signature, plan.shrink_seconds)
    trace = trace_for(plan, seed, result.steps, signature, result.summary or d, original_steps=len(run.record))
    return {"signature": signature, "trace": trace, "shrunk_steps": len(result.steps), "minimal": result.minimal,
            "reproduced": result.reproduced, "tries": result.tries, "seconds": result.seconds}


# ---- tables ----------------------------------------------------------------------------------

def schemas():
    import pyarrow as pa

    return {
        "runs": pa.schema([
            ("partition", pa.int32()), ("seed", pa.int64()), ("scope", pa.string()), ("faults", pa.string()),
            ("mutant", pa.string()), ("runbook", pa.string()), ("engine", pa.string()), ("steps", pa.int64()),
            ("duration_s", pa.float64()), ("finished_s", pa.float64()), ("outcome", pa.string()),
            ("invariant", pa.string()), ("progress", pa.string()), ("findings", pa.list_(pa.string())),
            ("coverage_signature", pa.string()), ("new_coverage", pa.int32()),
        ]),
        "violations": pa.schema([
            ("partition", pa.int32()), ("seed", pa.int64()), ("scope", pa.string()), ("mutant", pa.string()),
            ("invariant", pa.string()), ("signature", pa.string()), ("step", pa.int64()), ("summary", pa.string()),
            ("trace_file", pa.string()), ("shrunk_steps", pa.int32()), ("original_steps", pa.int64()),
        ]),
        "coverage": pa.schema([
            ("partition", pa.int32()), ("seed", pa.int64()), ("kind", pa.string()), ("key", pa.string()),
            ("count", pa.int64()),
        ]),
    }


def write_table(path: Path, name: str, rows: list[dict]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = schemas()[name]
    table = pa.Table.from_pylist([{f: row.get(f) for f in schema.names} for row in rows], schema=schema)
    replace_atomically(path, lambda temp: pq.write_table(table, temp))


def write_json(path: Path, data: dict) -> None:
    write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def read_rows(path: Path) -> list[dict]:
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pylist()


_PART = re.compile(r"part-(\d{5,})\.parquet")


def part_path(out: Path, table: str, partition: int) -> Path:
    return out / PARTS / table / f"part-{partition:05d}.parquet"


def finished_partitions(out: Path) -> list[int]:
    """The partitions whose runs part (the commit mark) exists; temporary files never count."""
    directory = out / PARTS / "runs"
    if not directory.is_dir():
        return []
    return sorted(int(m.group(1)) for name in os.listdir(directory) if (m := _PART.fullmatch(name)))


# ---- the driver: running partitions ----------------------------------------------------------

class Runner:
    """Where partitions run: ``submit(fn, *args) -> Future``, ``slots`` of them at once.

    This one is ``serial``: one at a time, in one driver thread (so the driver stays responsive)."""

    label = "serial"
    slots = 1

    def __init__(self) -> None:
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="campaign")

    def submit(self, fn, *args) -> Future:
        return self.pool.submit(fn, *args)

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


class ProcessRunner(Runner):
    """``processes[N]``: a pool of N Python processes (multiprocessing), for comparisons and without Java."""

    def __init__(self, workers: int) -> None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        self.label, self.slots = f"processes[{workers}]", workers
        # spawn: the driver has threads (the progress display), which a forked child must not inherit
        self.pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))


class SparkRunner(Runner):
    """Each submission is its own small Spark job of one task, run from a driver thread; as many
    threads as the cluster runs tasks at once (``sc.defaultParallelism``)."""

    def __init__(self, spark) -> None:
        self.sc = spark.sparkContext
        self.label = self.sc.master
        self.slots = max(1, self.sc.defaultParallelism)
        self.pool = ThreadPoolExecutor(self.slots, thread_name_prefix="campaign-spark")

    def submit(self, fn, *args) -> Future:
        return self.pool.submit(self._job, partial(fn, *args[:-1]), args[-1])

    def _job(self, fn, item):
        self.sc.setJobDescription(f"kraftcheck {getattr(fn.func, '__name__', 'task')} {item!r}")
        return self.sc.parallelize([item], 1).map(fn).collect()[0]

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.sc.cancelAllJobs()


_PROCESSES = re.compile(r"processes(?:\[(\d+)\])?")


def is_spark_master(master: str) -> bool:
    return not (master == "serial" or _PROCESSES.fullmatch(master))


def check_master(master: str) -> str:
    from properties.spark import check_spark_master

    m = _PROCESSES.fullmatch(master)
    if m and m.group(1) is not None and int(m.group(1)) < 1:
        raise CampaignError(f"bad master {master!r}: processes[N] needs N >= 1")
    if master == "serial" or m:
        return master
    try:
        return check_spark_master(master)
    except ValueError as e:
        raise CampaignError(str(e)) from None


def make_runner(master: str, spark=None) -> Runner:
    if spark is not None:
        return SparkRunner(spark)
    if master == "serial":
        return Runner()
    m = _PROCESSES.fullmatch(master)
    if m:
        return ProcessRunner(int(m.group(1) or os.cpu_count() or 1))
    raise CampaignError(f"master {master!r} needs a Spark session")


class _Display:
    """The progress bar on stderr: seeds done, violations, steps/s (off with --json or off a terminal)."""

    def __init__(self, enabled: bool, total: int | None, label: str) -> None:
        self.progress = None
        if not enabled:
            return
        from rich.console import Console
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self.progress = Progress(
            SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
            TextColumn("{task.completed:.0f}/{task.fields[of]} seeds"),
            TextColumn("{task.fields[violations]} violations"), TextColumn("{task.fields[rate]} steps/s"),
            TimeElapsedColumn(), console=Console(stderr=True), transient=True,
        )
        self.progress.start()
        self.task = self.progress.add_task(label, total=total, of="?" if total is None else total, violations=0,
                                           rate="-")

    def update(self, seeds: int, violations: int, steps: int, seconds: float, description: str | None = None):
        if self.progress is None:
            return
        fields = {"completed": seeds, "violations": violations, "rate": f"{steps / seconds:,.0f}" if seconds else "-"}
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
    if not recorded_path.is_file():
        return False
    if not resume:
        raise CampaignError(f"{out} already holds a campaign: --resume continues it, or choose another --out")
    try:
        recorded = json.loads(recorded_path.read_text(encoding="utf-8"))
    except ValueError as e:
        raise CampaignError(f"{recorded_path}: not a campaign plan ({e})") from None
    differing = plan_differences(recorded, plan) if isinstance(recorded, dict) else ["(all)"]
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
    from properties import spark as spark_session

    resuming = check_out_dir(plan, resume)
    own_spark = None
    if spark is None and is_spark_master(master):
        spark = own_spark = spark_session.session(master)
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
    display = _Display(show_progress, total, f"campaign on {runner.label}")
    task_plan = plan.started(started - offset)
    deadline = None if plan.minutes is None else time.monotonic() + plan.minutes * 60
    todo = _partitions_to_run(plan, done)
    pending: dict[Future, int] = {}
    try:
        while True:
            while len(pending) < runner.slots and (deadline is None or time.monotonic() < deadline):
                p = next(todo, None)
                if p is None:
                    break
                pending[runner.submit(run_partition, task_plan, p)] = p
            if not pending:
                break
            finished, _ = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            for future in finished:
                p = pending.pop(future)
                rows = future.result()
                _write_partition(out, p, rows, task_plan.started_at)
                done.add(p)
                tally.seeds += len(rows["runs"])
                tally.steps += sum(r["steps"] for r in rows["runs"])
                tally.violations += sum(r["outcome"] == "violation" for r in rows["runs"])
            display.update(tally.seeds, tally.violations, tally.steps, offset + time.time() - started)
        display.update(tally.seeds, tally.violations, tally.steps, offset + time.time() - started,
                       "consolidating and shrinking")
        tables = consolidate(out, sorted(done))
        counterexamples = shrink_groups(plan, runner, tables["violations"])
        for name in TABLES:
            write_table(out / f"{name}.parquet", name, tables[name])
        summary = summarize(plan, runner.label, tables, counterexamples, offset + time.time() - started, resuming)
        write_json(out / SUMMARY_FILE, summary)
    finally:
        display.stop()
    from properties.report import write_report

    write_report(out)
    return summary


def _write_partition(out: Path, partition: int, rows: dict, started: float) -> None:
    now = time.time() - started  # ``started``: the time axis's origin, earlier invocations' time included
    for row in rows["runs"]:
        finished = row.get("finished_s")
        row["finished_s"] = now if finished is None else min(max(finished, 0.0), now)
    # the runs part last: it marks the partition done
    for name in ("violations", "coverage", "runs"):
        write_table(part_path(out, name, partition), name, rows.get(name, []))


def consolidate(out: Path, partitions: list[int]) -> dict[str, list[dict]]:
    """Every finished partition's rows, in seed order, with each run's ``new_coverage``."""
    tables: dict[str, list[dict]] = {}
    for name in TABLES:
        rows = [row for p in partitions for row in read_rows(part_path(out, name, p))]
        if name == "coverage":
            rows.sort(key=lambda r: (r["seed"], r["kind"], r["key"]))
        else:
            rows.sort(key=lambda r: r["seed"])
        tables[name] = rows
    keys_of: dict[int, set] = {}
    for row in tables["coverage"]:
        keys_of.setdefault(row["seed"], set()).add((row["kind"], row["key"]))
    seen: set = set()
    for run in tables["runs"]:
        keys = keys_of.get(run["seed"], set())
        run["new_coverage"] = len(keys - seen)
        seen |= keys
    return tables


def shrink_groups(plan: Plan, runner: Runner, violations: list[dict]) -> list[dict]:
    """One shrink task per (invariant, signature) group, on its lowest seed; fills in the group's
    rows' ``trace_file`` and ``shrunk_steps``. Returns one entry per group."""
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
    futures = {key: runner.submit(shrink_group, plan, rows[0]["seed"], key[1]) for key, rows in sorted(groups.items())}
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
    from its example database (``properties.campaign_hypothesis.finish_fuzz``)."""
    from properties.campaign_hypothesis import finish_fuzz

    violations[:] = finish_fuzz(plan, plan.out, violations)
    entries = []
    for (invariant, signature), rows in sorted(groups.items()):
        row = next(v for v in violations if v["signature"] == signature and v["invariant"] == invariant)
        entries.append({"invariant": invariant, "signature": signature, "seed": rows[0]["seed"], "seeds": len(rows),
                        "trace_file": row["trace_file"], "shrunk_steps": row["shrunk_steps"]})
    return entries


def _by_progress(counts: Counter) -> dict[str, int]:
    """Runs per level of ``Simulation.PROGRESS``, in the migration's order."""
    order = {level: i for i, level in enumerate(PROGRESS)}
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
                     for kind in ("action", "driver_transition", "state")},
        "progress": _by_progress(Counter(r["progress"] for r in runs)),
        "progress_by_runbook": {
            runbook: _by_progress(Counter(r["progress"] for r in runs if r["runbook"] == runbook))
            for runbook in sorted({r["runbook"] for r in runs})
        },
        "counterexamples": counterexamples,
        "report": "report.html",
    }


# ---- the command -----------------------------------------------------------------------------

def add_arguments(p, positive) -> None:
    """The ``campaign`` subcommand's options (``properties.cli``)."""
    def number(minimum_exclusive: float | None, wanted: str):
        def parse(text: str) -> float:
            try:
                value = float(text)
            except ValueError:
                value = float("nan")
            if not (value >= 0 if minimum_exclusive is None else value > minimum_exclusive):
                raise _argument_error(f"expected {wanted}, got {text!r}")
            return value

        return parse

    def checked(check):
        def parse(text: str) -> str:
            try:
                return check(text)
            except CampaignError as e:
                raise _argument_error(str(e)) from None

        return parse

    size = p.add_mutually_exclusive_group()
    size.add_argument("--seeds", type=positive, help=f"run seeds 0..N-1 (default {DEFAULT_SEEDS})")
    size.add_argument("--minutes", type=number(0, "a positive number"),
                      help="run partitions of seeds, in order, until M minutes have passed")
    p.add_argument("--scope", type=checked(check_scope), default=DEFAULT_SCOPE,
                   help=f"the simulator scenario or any model scope (default {DEFAULT_SCOPE})")
    p.add_argument("--faults", type=checked(check_faults), default=DEFAULT_FAULTS,
                   help="fault mix: none, network, process, zookeeper, all, a+b, key=weight; swarm, or swarm+a: "
                        f"each run draws its own mix (default {DEFAULT_FAULTS})")
    p.add_argument("--mutant", type=checked(check_mutant),
                   help="switch a seeded bug on, of the implementation or of the model (`kraftcheck mutants --list`)")
    p.add_argument("--steps", type=positive, default=DEFAULT_STEPS,
                   help=f"events per run, at most (default {DEFAULT_STEPS})")
    p.add_argument("--runbook", choices=CAMPAIGN_RUNBOOKS, default=DEFAULT_RUNBOOK,
                   help="the operator's KIP-866 runbook; mixed: every fourth seed rolls back (default mixed)")
    p.add_argument("--partition-size", type=positive,
                   help="seeds per partition, one Spark task each (default: some seconds of work)")
    p.add_argument("--master", type=checked(check_master),
                   help="where to run: a Spark master (local[N], local[*], spark://HOST:PORT; a local master "
                        "without a failure count becomes local[N,4], so a failed task is retried), or, without "
                        "Spark or Java, serial (one process) or processes[N] (a multiprocessing pool) "
                        f"(default {DEFAULT_MASTER}, or spark-submit's --master)")
    p.add_argument("--out", default=DEFAULT_OUT, help=f"the campaign directory (default {DEFAULT_OUT})")
    p.add_argument("--resume", action="store_true",
                   help="continue the campaign in --out (same options): finished partitions are skipped")
    p.add_argument("--engine", choices=ENGINES, default=DEFAULT_ENGINE,
                   help="sim: seeded simulations (default); hypothesis: Hypothesis fuzzing of --machine")
    p.add_argument("--machine", choices=MACHINES,
                   help="with --engine hypothesis: the model machine or the differential one (default differential)")
    p.add_argument("--shrink-seconds", type=number(None, "a number >= 0"), default=DEFAULT_SHRINK_SECONDS,
                   help=f"time to shrink each violation group (default {DEFAULT_SHRINK_SECONDS:.0f})")
    p.add_argument("--json", action="store_true", help="print the summary as JSON (and no progress bar)")


def _argument_error(message: str):
    import argparse

    return argparse.ArgumentTypeError(message)


def command(args) -> int:
    """``kraftcheck campaign``: exit 0 clean, 1 violations found, 2 bad input (nothing written)."""
    from properties import spark as spark_session

    error = "kraftcheck campaign: error:"
    try:
        plan = make_plan(seeds=args.seeds, minutes=args.minutes, scope=args.scope, faults=args.faults,
                         mutant=args.mutant, steps=args.steps, runbook=args.runbook,
                         partition_size=args.partition_size, engine=args.engine, machine=args.machine,
                         shrink_seconds=args.shrink_seconds, out=args.out)
        master = args.master or spark_session.submitted_master() or DEFAULT_MASTER
        check_out_dir(plan, args.resume)
        if is_spark_master(master):
            master = spark_session.spark_master(master)
    except CampaignError as e:
        print(f"{error} {e}", file=sys.stderr)
        return 2
    show = not args.json and sys.stderr.isatty()
    try:
        summary = run_campaign(plan, master, resume=args.resume, show_progress=show)
    except spark_session.SparkStartError as e:
        print(f"{error} {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"kraftcheck campaign: interrupted; the same command with --resume continues it in {plan.out}",
              file=sys.stderr)
        return 130
    if args.json:
        print(json.dumps(summary, indent=2, ensure_ascii=False))
    else:
        print(describe(summary))
    return 1 if summary["violations"] else 0


def describe(summary: dict) -> str:
    out = Path(summary["options"]["out"])
    lines = [
        f"{summary['seeds_done']} seeds, {summary['steps']:,} steps in {summary['wall_seconds']:.1f} s "
        f"({summary['steps_per_second'] or 0:,.0f} steps/s) on {summary['master']}",
        "coverage: " + ", ".join(f"{n} {kind} keys" for kind, n in summary["coverage"].items()),
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
    lines.append(f"report: {out / summary['report']}")
    return "\n".join(lines)


if __name__ == "__main__":  # spark-submit properties/campaign.py [options]
    from properties.cli import main

    raise SystemExit(main(["campaign", *sys.argv[1:]]))
