"""Benchmark: Hypothesis examples per second through the model's state machine, 50 steps each.

    python -m bench.hypothesis_machine [--json] [--repeats N] [--examples N] [--scope NAME ...]

One run drives ``properties.machines`` for the correct model in each scope (by default the
five that tests/test_machines.py runs) for ``--examples`` examples of 50 steps, as the tests
do but with only the generate phase, a fresh machine class (so a cold options cache) and no
example database. A run's figure is the examples Hypothesis asked for divided by the wall
time, so any example it aborted counts as cost, not as output. The median over ``--repeats``
runs is reported, overall and per scope, with its ratio to the target (50 examples per
second). The same figure over the process's CPU time is printed beside it: on a shared machine
it is the steadier one (wall time also counts the time other processes held the cores). Steps
after a cluster has gone quiet (budgets spent, network empty) are ``wait`` steps: they count,
as Hypothesis runs them; model steps per second are printed alongside.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from hypothesis import Phase

from properties.machines import machine_class, run_machine

TARGET_EXAMPLES_PER_SECOND = 50
STEPS_PER_EXAMPLE = 50
DEFAULT_SCOPES = ("fencing", "bounce", "leader-bounce", "features", "cluster")


def time_scope(scope: str, examples: int) -> dict:
    """One generate-only Hypothesis run of ``examples`` examples in ``scope``."""
    machine = machine_class(scope)
    start, cpu_start = time.perf_counter(), time.process_time()
    run_machine(
        machine,
        max_examples=examples,
        stateful_step_count=STEPS_PER_EXAMPLE,
        derandomize=True,  # every repeat runs the same examples
        deadline=None,
        database=None,
        phases=(Phase.generate,),
    )
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    coverage = machine.coverage
    return {
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "examples": min(examples, coverage.examples),
        "examples_started": coverage.examples,
        "model_steps": coverage.steps,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--examples", type=int, default=200, help="examples per scope per run")
    parser.add_argument("--scope", action="append", help="a scope to run (repeatable; default: the tests' five)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    scopes = args.scope or list(DEFAULT_SCOPES)

    runs = [{scope: time_scope(scope, args.examples) for scope in scopes} for _ in range(args.repeats)]
    overall, overall_cpu = (
        statistics.median(
            sum(r["examples"] for r in run.values()) / sum(r[clock] for r in run.values()) for run in runs
        )
        for clock in ("seconds", "cpu_seconds")
    )
    per_scope = {
        scope: {
            "examples_per_second": statistics.median(run[scope]["examples"] / run[scope]["seconds"] for run in runs),
            "examples_per_cpu_second": statistics.median(
                run[scope]["examples"] / run[scope]["cpu_seconds"] for run in runs
            ),
            "model_steps_per_second": statistics.median(
                run[scope]["model_steps"] / run[scope]["seconds"] for run in runs
            ),
            "model_steps_per_example": runs[0][scope]["model_steps"] / runs[0][scope]["examples_started"],
        }
        for scope in scopes
    }
    ratio = overall / TARGET_EXAMPLES_PER_SECOND
    result = {
        "steps_per_example": STEPS_PER_EXAMPLE,
        "examples_per_scope": args.examples,
        "repeats": args.repeats,
        "examples_per_second_median": round(overall, 1),
        "examples_per_cpu_second_median": round(overall_cpu, 1),
        "target_examples_per_second": TARGET_EXAMPLES_PER_SECOND,
        "ratio_to_target": round(ratio, 2),
        "per_scope": {
            scope: {k: round(v, 1) for k, v in figures.items()} for scope, figures in per_scope.items()
        },
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(
        f"Hypothesis state machine, {STEPS_PER_EXAMPLE} steps per example, {args.examples} examples per scope, "
        f"{args.repeats} repeats, medians"
    )
    print(
        f"examples/s: {overall:,.1f}  (target {TARGET_EXAMPLES_PER_SECOND}: ratio {ratio:.2f}); "
        f"per CPU second: {overall_cpu:,.1f}"
    )
    for scope, figures in per_scope.items():
        print(
            f"  {scope:14s} {figures['examples_per_second']:7.1f} examples/s  "
            f"({figures['examples_per_cpu_second']:7.1f} per CPU s)  "
            f"{figures['model_steps_per_second']:8,.0f} model steps/s  "
            f"({figures['model_steps_per_example']:.1f} model steps per example, the rest wait)"
        )


if __name__ == "__main__":
    main()
