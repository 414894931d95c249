"""What a campaign's tasks run: one partition's seeds, and one signature group's shrink.

Rules:
- ``run_partition`` is a pure function of (plan, partition): the same rows on any machine and
  in any mode, apart from the timing columns. Rows travel back to the driver, which alone writes
  files, so a retried task can never add rows twice.
- ``shrink_group`` runs a group's lowest seed again and shrinks its record (``properties.shrink``).
- A steered campaign's task plan holds the fault grid's cells struck so far (``Plan.struck``), from
  which each seed's aims follow (``properties.steering.aims_for``).
"""

from __future__ import annotations

import os
import signal

from properties.campaign.options import partition_seeds
from properties.campaign.spark import KILL_WORKER_ENV
from properties.campaign.tables import TABLES
from properties.plan import Plan
from properties.runs import coverage_signature, run_seed
from properties.shrink import invariant_of, shrink_violation, signature_of, trace_for
from properties.steering import aims_for


def run_partition(plan: Plan, partition: int) -> dict:
    """The rows of one partition: ``{"runs": [...], "violations": [...], "coverage": [...]}``."""
    if plan.engine == "hypothesis":
        from properties.campaign.hypothesis import run_fuzz_partition

        return run_fuzz_partition(plan, partition)
    started = plan.started_at
    rows: dict[str, list[dict]] = {name: [] for name in TABLES}
    for index, seed in enumerate(partition_seeds(plan, partition)):
        run = run_seed(plan, seed, aims=aims_for(plan, seed))
        d = run.disagreement
        signature = None if d is None else signature_of(d)
        rows["runs"].append({
            "partition": partition, "seed": seed, "scope": plan.scope, "config": run.config, "faults": run.faults,
            "mutant": plan.mutant,
            "runbook": run.runbook, "engine": plan.engine, "steps": len(run.record), "duration_s": run.seconds,
            "finished_s": None if started is None else run.ended_at - started,
            "outcome": "clean" if d is None else "violation",
            "invariant": None if d is None else invariant_of(signature), "progress": run.progress,
            "rolled_back": run.rolled_back, "findings": list(run.findings),
            "coverage_signature": coverage_signature(run.coverage), "new_coverage": None,
            "aims": list(run.aims), "fault_steps": None if run.handover is None else run.handover.at,
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


def shrink_group(plan: Plan, seed: int, aims: tuple[str, ...], signature: str) -> dict:
    """A signature group's counterexample: its seed run again (with its aims) for the record, shrunk, as a trace."""
    run = run_seed(plan, seed, coverage=False, aims=aims)
    d = run.disagreement
    if d is None or signature_of(d) != signature:
        return {"signature": signature, "error": f"seed {seed} did not show {signature} again"}
    result = shrink_violation(plan, seed, run.record, signature, plan.shrink_seconds, run.handover)
    trace = trace_for(plan, seed, result.steps, signature, result.summary or d, original_steps=len(run.record),
                      handover=result.handover, aims=aims)
    return {"signature": signature, "trace": trace, "shrunk_steps": len(result.steps), "minimal": result.minimal,
            "reproduced": result.reproduced, "tries": result.tries, "seconds": result.seconds}
