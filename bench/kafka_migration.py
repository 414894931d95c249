"""Benchmark of a real Kafka migration: wall time and memory of a whole run, and the check's share of it.

    python -m bench.kafka_migration                 # 3 runs: ZooKeeper, 3 brokers, 1 controller, to finalization
    python -m bench.kafka_migration --repeats 1 --controllers 3 --faults process

It prints, for each run and as medians (these machines are shared and noisy):
- the run's wall time, from an empty folder to the cluster stopped (target: at most 180 s on
  2 cores), and its ratio to the target;
- the peak memory of all the run's processes together, sampled every 0.5 s from their RSS
  (target: at most 4 GB), and its ratio to the target;
- the time to check the run's timeline offline, and its ratio to the run's time (target: at most
  a tenth).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

from properties.kafka import cluster, install
from properties.kafka.run import RealRunPlan, Run, check_folder

TARGET_SECONDS = 180.0
TARGET_BYTES = 4 * 1024**3
TARGET_CHECK_SHARE = 0.1


def rss(pid: int) -> int:
    """A process's resident memory in bytes, 0 once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class PeakMemory(threading.Thread):
    """Samples the summed RSS of every process the run has started, keeping the largest sum."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak = 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.5):
            self.peak = max(self.peak, sum(rss(pid) for pid in list(cluster._LIVE)))


def one_run(plan: RealRunPlan, kafka: install.Installation) -> dict:
    with tempfile.TemporaryDirectory(prefix="kraftcheck-bench-") as scratch:
        folder = Path(scratch) / "run"
        sampler = PeakMemory()
        sampler.start()
        began = time.monotonic()
        outcome = Run(plan, kafka, folder, say=lambda line: None).execute()
        seconds = time.monotonic() - began
        sampler.done.set()
        sampler.join()
        began = time.monotonic()
        _, violations = check_folder(folder)
        check = time.monotonic() - began
    return {"outcome": outcome, "seconds": seconds, "peak": sampler.peak, "check": check, "violations": len(violations)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--version", default=install.DEFAULT_VERSION)
    parser.add_argument("--controllers", type=int, choices=(1, 3), default=1)
    parser.add_argument("--faults", default="none")
    args = parser.parse_args(argv)
    kafka = install.install(args.version)
    rows = []
    for seed in range(args.repeats):
        plan = RealRunPlan(seed=seed, runbook="finalize", faults=args.faults, controllers=args.controllers)
        row = one_run(plan, kafka)
        rows.append(row)
        print(
            f"run {seed}: {row['outcome']}, {row['seconds']:.1f} s, peak {row['peak'] / 1024**3:.2f} GB, "
            f"check {row['check']:.3f} s, {row['violations']} violations",
            flush=True,
        )
    seconds = statistics.median(r["seconds"] for r in rows)
    peak = statistics.median(r["peak"] for r in rows)
    share = statistics.median(r["check"] / r["seconds"] for r in rows)
    print(
        f"Kafka {kafka.version}, 3 brokers, {args.controllers} controller(s), faults {args.faults}, "
        f"medians of {len(rows)}:"
    )
    print(
        f"  migration to finalization {seconds:.1f} s   ratio to the {TARGET_SECONDS:.0f} s target "
        f"{seconds / TARGET_SECONDS:.2f}"
    )
    print(f"  peak memory, all processes {peak / 1024**3:.2f} GB   ratio to the 4 GB target {peak / TARGET_BYTES:.2f}")
    print(f"  check / run {share:.4f}   ratio to the {TARGET_CHECK_SHARE} target {share / TARGET_CHECK_SHARE:.3f}")
    return 0 if all(r["outcome"] == "completed" and r["violations"] == 0 for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
