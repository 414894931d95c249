"""Benchmark: a scope's states per second, this checkout against earlier commits, in one sitting.

    python -m bench.explore_speed [--scope migration] [--states 200000] [--against c40a8fe 651c9dd]
                                  [--workers 1 2] [--repeats 3] [--json]

Why in one sitting: these machines are shared and their speed moves by up to a half over a day, so a
speed-up is only a ratio of figures taken together. Each commit named by ``--against`` is exported
(``git archive``) into a temporary folder and run from there, with the same interpreter; every run is
its own fresh process, and ``seconds`` is the search alone, measured inside it. Runs go round-robin
(every revision once, then again), so a change of load touches all alike. The figures are medians;
the runs of one revision must agree on their counts, and all revisions must, or the benchmark stops
(a speed-up that changed the answers is no speed-up). The driver's CPU time is reported too: on a
loaded machine it moves less than the wall time (workers' CPU is left out). The serial engine stops at ``--states``; the
parallel one finishes the level it is in, so its states per second are over its own count.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

ONE_RUN = """
import json, resource, sys
from properties.explore import scope_spec, search
def cpu_seconds():  # this process's and its joined children's: the parallel engine's workers are children
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
scope, states, workers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
cpu = cpu_seconds()
if workers == 1:
    r = search(scope_spec(scope), max_states=states)
else:
    from properties.parallel import parallel_search
    r = parallel_search(scope_spec(scope), workers, max_states=states)
print(json.dumps({"distinct_states": r.distinct_states, "generated": r.generated, "depth": r.depth,
                  "violations": sorted(r.violations), "witnesses": sorted(r.witnesses), "seconds": r.seconds,
                  "cpu_seconds": cpu_seconds() - cpu}))
"""


def export(commit: str, into: Path) -> Path:
    """The tree of ``commit``, written under ``into``."""
    folder = into / commit
    folder.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], check=True, capture_output=True).stdout
    tar_path = into / f"{commit}.tar"
    tar_path.write_bytes(archive)
    with tarfile.open(tar_path) as tar:
        tar.extractall(folder, filter="data")
    return folder


def one_run(tree: Path, scope: str, states: int, workers: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run([sys.executable, "-c", ONE_RUN, scope, str(states), str(workers)], cwd=tree, env=env,
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.explore_speed", description=__doc__.split("\n")[0])
    parser.add_argument("--scope", default="migration")
    parser.add_argument("--states", type=int, default=200_000)
    parser.add_argument("--against", nargs="*", default=["c40a8fe", "651c9dd"], help="commits to compare with")
    parser.add_argument("--workers", type=int, nargs="+", default=[1], help="1: the serial engine")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="explore-speed-") as tmp:
        trees = {commit: export(commit, Path(tmp)) for commit in args.against}
        trees["this checkout"] = ROOT
        runs: dict[tuple[str, int], list[dict]] = {(name, w): [] for name in trees for w in args.workers}
        for _ in range(args.repeats):
            for (name, workers), done in runs.items():
                done.append(one_run(trees[name], args.scope, args.states, workers))
    rows = []
    for (name, workers), done in runs.items():
        counts = {(r["distinct_states"], r["generated"], r["depth"], tuple(r["violations"]), tuple(r["witnesses"]))
                  for r in done}
        if len(counts) != 1:
            sys.exit(f"{name} on {workers} worker(s): the runs disagree on their counts: {counts}")
        first = done[0]
        seconds = statistics.median(r["seconds"] for r in done)
        cpu = statistics.median(r["cpu_seconds"] for r in done)
        rows.append({"revision": name, "workers": workers, "distinct_states": first["distinct_states"],
                     "generated": first["generated"], "depth": first["depth"], "seconds": seconds, "cpu_seconds": cpu,
                     "states_per_second": first["distinct_states"] / seconds,
                     "witnesses": first["witnesses"], "violations": first["violations"]})
    serial = [r for r in rows if r["workers"] == 1]
    if len({(r["distinct_states"], r["generated"], tuple(r["witnesses"]), tuple(r["violations"]))
            for r in serial}) > 1:
        sys.exit(f"the revisions disagree on the serial counts: {serial}")
    base = rows[0]["states_per_second"]
    for r in rows:
        r["ratio"] = r["states_per_second"] / base
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{args.scope} to {args.states:,} states, medians of {args.repeats} (load {os.getloadavg()[0]:.1f}):")
    for r in rows:
        print(f"  {r['revision']:>14} workers={r['workers']}: {r['distinct_states']:,} states "
              f"({r['generated']:,} steps, depth {r['depth']}) in {r['seconds']:.1f} s: "
              f"{r['states_per_second']:,.0f}/s, {r['ratio']:.2f}x {rows[0]['revision']} "
              f"(CPU {r['cpu_seconds']:.1f} s: {rows[0]['cpu_seconds'] / r['cpu_seconds']:.2f}x)")


if __name__ == "__main__":
    main()
