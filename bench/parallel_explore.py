"""Benchmark: the parallel engine against the serial one, in states a second, on the same searches.

    python -m bench.parallel_explore [--workers N] [--depth D] [--rm N] [--repeats R] [--json]

Two searches, each run by both engines (``properties.explore.search`` and
``properties.parallel.parallel_search``, ``kraftcheck explore --workers``):
- the ``migration`` scope of the Kafka model to a fixed depth (``--depth``, 10 by default): the
  scope issue 19 measured at about 2,400 distinct and 9,400 generated states a second on one core;
- TwoPhase commit on records (``bench.twophase``) with ``--rm`` resource managers, complete.

Every run is its own fresh Python process, and ``seconds`` is the search alone, measured inside
it (forking the workers included, interpreter start and imports left out). The figures are medians
over ``--repeats`` runs; the runs must agree on the counts, and the two engines with each other,
or the benchmark stops. ``speed-up`` is the serial median over the parallel one. ``CPU spent`` is
the parallel engine's CPU time (driver and workers) over the serial engine's: its overhead, the
figure that holds when the machine is shared with other work and the wall times do not (the
parallel one moves most: its workers wait for cores). The load average is printed for that.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def one_run(search: str, workers: int, depth: int, rms: int) -> dict:
    """One search in this process: its counts and seconds."""
    from properties.explore import scope_spec
    from properties.explore import search as serial
    from properties.parallel import parallel_search

    if search == "migration":
        spec, max_depth = scope_spec("migration"), depth
    else:
        from bench.twophase import twophase_spec

        spec, max_depth = twophase_spec(rms), None
    cpu_before = cpu_seconds()
    result = serial(spec, max_depth) if workers == 1 else parallel_search(spec, workers, max_depth)
    return {"distinct_states": result.distinct_states, "generated": result.generated, "depth": result.depth,
            "complete": result.complete, "violations": sorted(result.violations), "seconds": result.seconds,
            "cpu_seconds": cpu_seconds() - cpu_before}


def cpu_seconds() -> float:
    """CPU time of this process and of its children that have ended (the workers, once joined)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def run_in_subprocess(search: str, workers: int, depth: int, rms: int) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    command = [sys.executable, "-m", "bench.parallel_explore", "--one-run", search, "--workers", str(workers),
               "--depth", str(depth), "--rm", str(rms)]
    proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


def measure(search: str, workers: int, depth: int, rms: int, repeats: int) -> dict:
    figures = {}
    for engine, n in (("serial", 1), ("parallel", workers)):
        runs = [run_in_subprocess(search, n, depth, rms) for _ in range(repeats)]
        counts = {(r["distinct_states"], r["generated"], r["depth"], tuple(r["violations"])) for r in runs}
        assert len(counts) == 1, f"{engine} runs disagree on the state graph: {counts}"
        seconds = statistics.median(r["seconds"] for r in runs)
        figures[engine] = {
            "workers": n,
            "seconds": round(seconds, 3),
            "seconds_all": [round(r["seconds"], 3) for r in runs],
            "cpu_seconds": round(statistics.median(r["cpu_seconds"] for r in runs), 3),
            "distinct_per_second": round(runs[0]["distinct_states"] / seconds),
            "generated_per_second": round(runs[0]["generated"] / seconds),
            **{k: runs[0][k] for k in ("distinct_states", "generated", "depth", "complete")},
        }
    serial, parallel = figures["serial"], figures["parallel"]
    same = all(serial[k] == parallel[k] for k in ("distinct_states", "generated", "depth", "complete"))
    assert same, f"the engines disagree: serial {serial}, parallel {parallel}"
    name = f"migration to depth {depth}" if search == "migration" else f"TwoPhase, {rms} RMs, records"
    return {"search": name, "repeats": repeats, "cpus": os.cpu_count(), "load_average": os.getloadavg()[0],
            **figures, "speed_up": round(serial["seconds"] / parallel["seconds"], 2),
            # What the parallel engine spends in CPU for the serial engine's one: its overhead.
            "cpu_ratio": round(parallel["cpu_seconds"] / serial["cpu_seconds"], 2)}


def print_table(r: dict) -> None:
    s, p = r["serial"], r["parallel"]
    extent = "complete" if s["complete"] else f"depth {s['depth']}"
    print(f"{r['search']}: {s['distinct_states']:,} distinct, {s['generated']:,} generated, {extent}; "
          f"medians of {r['repeats']} runs, {r['cpus']} CPUs, load average {r['load_average']:.1f} at the end")
    for engine in (s, p):
        label = "serial" if engine is s else f"parallel, {engine['workers']} workers"
        print(f"  {label:22s} {engine['seconds']:8.2f} s  {engine['distinct_per_second']:>9,} distinct/s  "
              f"{engine['generated_per_second']:>9,} generated/s  CPU {engine['cpu_seconds']:.2f} s  "
              f"runs {engine['seconds_all']}")
    print(f"  speed-up (serial / parallel seconds): {r['speed_up']:.2f}; "
          f"CPU spent (parallel / serial): {r['cpu_ratio']:.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.parallel_explore", description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="processes of the parallel engine")
    parser.add_argument("--depth", type=int, default=10, help="levels of the migration scope")
    parser.add_argument("--rm", type=int, default=6, help="TwoPhase resource managers")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--one-run", choices=("migration", "twophase"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    fewest = 1 if args.one_run else 2
    if args.workers < fewest or args.depth < 1 or args.repeats < 1 or not 1 <= args.rm <= 10:
        parser.exit(2, f"{parser.prog}: error: --workers >= 2, --depth >= 1, --repeats >= 1, --rm from 1 to 10\n")
    if args.one_run:
        print(json.dumps(one_run(args.one_run, args.workers, args.depth, args.rm)))
        return 0
    results = [measure(search, args.workers, args.depth, args.rm, args.repeats) for search in ("migration", "twophase")]
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for r in results:
            print_table(r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
