"""Benchmark: model ``step`` calls per second, over every kind of action the model has.

    python -m bench.model_steps [--json] [--repeats N]

A workload of (state, action) pairs is collected once: every enabled step of a breadth-first
search of each scope to a small depth, plus seeded random walks in the ``cluster`` scope. Then
``step`` is timed over the whole workload ``--repeats`` times; the median is reported, overall
and per action type, with its ratio to the target (50,000 step calls per second on one core).
Also printed, as a ratio measured in the same run: the generated ``replace`` of ``model.record``
against ``dataclasses.replace``, which it exists to beat.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time
from collections import defaultdict

from model import SCOPES, initial_state, step, successors
from properties.simulate import random_path

TARGET_STEPS_PER_SECOND = 50_000


def workload(bfs_depth: int = 4, walks: int = 40, walk_steps: int = 200) -> list[tuple]:
    pairs = []
    for scope in SCOPES.values():
        frontier = [initial_state(scope)]
        seen = set(frontier)
        for _ in range(bfs_depth):
            nxt_frontier = []
            for state in frontier:
                for action, nxt in successors(state, scope):
                    pairs.append((state, action))
                    if nxt not in seen:
                        seen.add(nxt)
                        nxt_frontier.append(nxt)
            frontier = nxt_frontier
    for seed in range(walks):
        for state, choices, chosen in random_path(SCOPES["cluster"], seed, walk_steps):
            if chosen >= 0:
                pairs.append((state, choices[chosen][0]))
    return pairs


def time_steps(pairs: list[tuple]) -> tuple[float, dict[str, float]]:
    by_kind: dict[str, list[tuple]] = defaultdict(list)
    for state, action in pairs:
        by_kind[type(action).__name__].append((state, action))
    start = time.perf_counter()
    for state, action in pairs:
        step(state, action)
    total = time.perf_counter() - start
    per_kind = {}
    for kind, group in by_kind.items():
        t0 = time.perf_counter()
        for state, action in group:
            step(state, action)
        per_kind[kind] = len(group) / (time.perf_counter() - t0)
    return len(pairs) / total, per_kind


def replace_ratio(n: int = 50_000) -> float:
    """How many times faster the generated replace is than dataclasses.replace on a Broker."""
    broker = initial_state(SCOPES["cluster"]).brokers[0]
    t0 = time.perf_counter()
    for _ in range(n):
        dataclasses.replace(broker, alive=False)
    slow = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(n):
        broker.replace(alive=False)
    fast = time.perf_counter() - t0
    return slow / fast


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    pairs = workload()
    runs = [time_steps(pairs) for _ in range(args.repeats)]
    overall = statistics.median(r[0] for r in runs)
    kinds = sorted(runs[0][1])
    per_kind = {k: statistics.median(r[1][k] for r in runs) for k in kinds}
    ratio = statistics.median(replace_ratio() for _ in range(args.repeats))
    result = {
        "workload_steps": len(pairs),
        "repeats": args.repeats,
        "steps_per_second_median": round(overall),
        "target_steps_per_second": TARGET_STEPS_PER_SECOND,
        "ratio_to_target": round(overall / TARGET_STEPS_PER_SECOND, 2),
        "per_action_steps_per_second": {k: round(v) for k, v in per_kind.items()},
        "generated_replace_speedup_over_dataclasses_replace": round(ratio, 2),
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"workload: {len(pairs)} (state, action) pairs, {args.repeats} repeats, medians")
    ratio_to_target = overall / TARGET_STEPS_PER_SECOND
    print(f"model step calls/s: {overall:,.0f}  (target {TARGET_STEPS_PER_SECOND:,}: ratio {ratio_to_target:.2f})")
    for k in kinds:
        print(f"  {k:24s} {per_kind[k]:>10,.0f} /s")
    print(f"record.replace vs dataclasses.replace: {ratio:.2f}x faster")


if __name__ == "__main__":
    main()
