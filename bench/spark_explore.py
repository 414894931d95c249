"""Benchmark: the search on Spark against the serial engine, in states a second, on the same search.

    python -m bench.spark_explore [--master local[2]] [--scope migration] [--depth 8] [--partitions P] [--json]

One process: the serial engine (``properties.explore.search``) runs the search, then the Spark
engine (``properties.spark_explore.spark_search``, ``kraftcheck explore --master``) runs it on a
session started beforehand (its start-up is printed apart, and left out of the Spark figure), its
levels in a temporary run directory. The two must agree on the counts and the verdicts, or the
benchmark stops. Also printed: the Spark engine's seconds a level (its fixed cost: one job, two
stages and a shuffle each level) and what a fingerprint costs a state in one process
(``properties.fingerprint``), the price of a seen-set that can spread over machines. The load
average is printed because the machine may be shared: a benchmark prints figures, it is not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path


def measure(master: str, scope: str, depth: int | None, partitions: int | None) -> dict:
    from properties.campaign import spark as spark_session
    from properties.explore import scope_spec, search
    from properties.fingerprint import Fingerprinter
    from properties.spark_explore import SpecRef, spark_search

    spec = scope_spec(scope)
    serial = search(spec, depth)
    begun = time.perf_counter()
    spark = spark_session.session(master, app_name="kraftcheck bench spark_explore")
    spark.sparkContext.parallelize([0], 1).count()  # the Python workers started
    start_up = time.perf_counter() - begun
    try:
        with tempfile.TemporaryDirectory(prefix="kraftcheck-bench-") as run:
            on_spark = spark_search(spark, SpecRef(scope), Path(run) / "run", max_depth=depth, partitions=partitions)
        used = partitions or 2 * spark.sparkContext.defaultParallelism
    finally:
        spark.stop()
    for key in ("distinct_states", "generated", "depth", "complete"):
        assert getattr(serial, key) == getattr(on_spark, key), f"the engines disagree on {key}"
    assert sorted(serial.violations) == sorted(on_spark.violations), "the engines disagree on the verdicts"
    states = [spec.initial, *(nxt for _, nxt in spec.successors(spec.initial))]
    for _ in range(3):
        states += [nxt for state in states[-50:] for _, nxt in spec.successors(state)]
    fingerprint = Fingerprinter()
    began = time.perf_counter()
    for state in states:
        fingerprint(state)
    memo = (time.perf_counter() - began) / len(states)
    began = time.perf_counter()
    for state in states:
        Fingerprinter()(state)
    cold = (time.perf_counter() - began) / len(states)
    return {
        "search": f"{scope} to depth {depth}" if depth else f"{scope}, complete",
        "master": master, "partitions": used, "cpus": os.cpu_count(), "load_average": round(os.getloadavg()[0], 2),
        "distinct_states": serial.distinct_states, "generated": serial.generated, "depth": serial.depth,
        "serial_seconds": round(serial.seconds, 3), "spark_seconds": round(on_spark.seconds, 3),
        "spark_start_seconds": round(start_up, 3),
        "serial_distinct_per_second": round(serial.distinct_states / serial.seconds),
        "spark_distinct_per_second": round(on_spark.distinct_states / on_spark.seconds),
        "spark_seconds_per_level": round(on_spark.seconds / max(on_spark.depth, 1), 3),
        "fingerprint_us_per_state": round(memo * 1e6, 1), "fingerprint_us_per_state_no_memo": round(cold * 1e6, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.spark_explore", description=__doc__.split("\n")[0])
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--scope", default="migration")
    parser.add_argument("--depth", type=int, default=8, help="levels (0: the whole scope)")
    parser.add_argument("--partitions", type=int, default=None, help="default: twice the session's parallelism")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    r = measure(args.master, args.scope, args.depth or None, args.partitions)
    if args.json:
        print(json.dumps(r, indent=2))
        return 0
    print(f"{r['search']}: {r['distinct_states']:,} distinct, {r['generated']:,} generated; {r['cpus']} CPUs, "
          f"load average {r['load_average']:.1f} at the end")
    print(f"  serial                 {r['serial_seconds']:8.2f} s  {r['serial_distinct_per_second']:>8,} distinct/s")
    print(f"  Spark {r['master']:10s} P={r['partitions']:<3d} {r['spark_seconds']:6.2f} s  "
          f"{r['spark_distinct_per_second']:>8,} distinct/s  ({r['spark_seconds_per_level']:.2f} s a level; "
          f"session start {r['spark_start_seconds']:.1f} s, not counted)")
    print(f"  fingerprint: {r['fingerprint_us_per_state']:.0f} us a state with the memory of shared parts, "
          f"{r['fingerprint_us_per_state_no_memo']:.0f} us without")
    return 0


if __name__ == "__main__":
    sys.exit(main())
