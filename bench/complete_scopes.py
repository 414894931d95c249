"""Benchmark: the migration's scopes explored to completion, each within a time budget, and liveness on
the complete graphs.

    python -m bench.complete_scopes [--scope NAME ...] [--profile P ...] [--minutes M] [--workers N]
                                    [--write] [--json]

For each scope and profile, in its own process: ``properties.explore`` with no depth limit (the
parallel engine on ``--workers`` processes, 2 by default: the machine's two cores; 1: the serial
engine), stopped when the budget (``--minutes``, 10 by default, the issue's bar) runs out. A scope
that completes gets its ``eventually`` properties checked on its complete graph
(``properties.liveness``, serial, within what is left of the budget). A scope that does not is
reported with the depth it reached, its distinct states and the last level's size, which is the
stated reason: the levels were still growing when the budget ran out.

``--write`` pins the figures in ``properties/completion.json`` (docs/manifest.md shows them); the
slow test in tests/test_model_clean.py explores every complete entry again and compares. The
figures are seconds on a shared 2-core machine: compare the counts, and read the seconds with
the load average printed beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMPLETION = ROOT / "properties" / "completion.json"
# The scopes issue 19 asks to be explored to completion.
SCOPES = ("handover", "migration", "dual-write", "rollback", "pre-migration", "broker-migration", "finalize",
          "finalize-failover", "lifecycle")
PROFILES = ("kip", "kafka-3.9")


def one_run(scope: str, profile: str, workers: int, liveness_seconds: float) -> None:
    """In this process: explore, printing one JSON line a level; then liveness if the search completed."""
    from model import Variant
    from model.migration import Profile
    from properties.explore import explore

    variant = Variant(profile=Profile(profile))
    started = time.perf_counter()

    def level(result) -> None:
        print(json.dumps({"level": result.depth, "distinct_states": result.distinct_states,
                          "generated": result.generated, "frontier": result.frontier,
                          "seconds": round(time.perf_counter() - started, 1)}), flush=True)

    result = explore(scope, variant, progress=level, workers=workers)
    print(json.dumps({"done": True, "distinct_states": result.distinct_states, "generated": result.generated,
                      "depth": result.depth, "complete": result.complete, "seconds": round(result.seconds, 1),
                      "violations": sorted(result.violations)}), flush=True)
    if not result.complete or liveness_seconds <= 0:
        return
    from properties.liveness import check_liveness

    checked = time.perf_counter()
    live = check_liveness(scope, variant)
    seconds = round(time.perf_counter() - checked, 1)
    print(json.dumps({"liveness": {v.name: v.result for v in live.verdicts}, "liveness_states": live.distinct_states,
                      "liveness_seconds": seconds}), flush=True)


def measure(scope: str, profile: str, minutes: float, workers: int) -> dict:
    """One scope under one profile in a child process, killed when the budget runs out."""
    budget = minutes * 60
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    command = [sys.executable, "-m", "bench.complete_scopes", "--one-run", scope, "--profile", profile,
               "--workers", str(workers), "--minutes", str(minutes)]
    child = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True, start_new_session=True)
    lines: list[dict] = []

    def stop() -> None:
        if child.poll() is None:
            os.killpg(child.pid, 9)  # the workers too: they share the child's process group

    timer = threading.Timer(budget, stop)  # a level can take long: the budget is kept mid-level too
    timer.start()
    try:
        assert child.stdout is not None
        for line in child.stdout:
            lines.append(json.loads(line))
    finally:
        timer.cancel()
        stop()
        child.wait()
    levels = [line for line in lines if "level" in line]
    done = next((line for line in lines if line.get("done")), None)
    live = next((line for line in lines if "liveness" in line), None)
    row: dict = {"scope": scope, "profile": profile, "workers": workers, "budget_minutes": minutes}
    if done is not None and done["complete"]:
        row.update(complete=True, distinct_states=done["distinct_states"], generated=done["generated"],
                   depth=done["depth"], seconds=done["seconds"], violations=done["violations"])
        row["liveness"] = live["liveness"] if live else None
        row["liveness_states"] = live["liveness_states"] if live else None
    else:
        last = levels[-1] if levels else {"level": 0, "distinct_states": 1, "generated": 0, "frontier": 1, "seconds": 0}
        growth = [b["distinct_states"] - a["distinct_states"] for a, b in zip(levels, levels[1:])]
        row.update(complete=False, depth_reached=last["level"], distinct_states=last["distinct_states"],
                   generated=last["generated"], last_level=last["frontier"], seconds=last["seconds"],
                   levels_growing=len(growth) >= 2 and growth[-1] >= growth[-2])
    row["load_average"] = round(os.getloadavg()[0], 1)
    return row


def describe(row: dict) -> str:
    name = f"{row['scope']}@{row['profile']}"
    if row["complete"]:
        live = row.get("liveness")
        verdicts = "liveness not checked (no time left)" if not live else "liveness " + ", ".join(
            f"{prop} {verdict}" for prop, verdict in sorted(live.items()))
        return (f"{name:32s} complete: {row['distinct_states']:,} states, {row['generated']:,} steps, depth "
                f"{row['depth']}, {row['seconds']:.0f} s; {verdicts}")
    growing = "still growing" if row["levels_growing"] else "shrinking"
    return (f"{name:32s} NOT complete in {row['budget_minutes']:g} min: depth {row['depth_reached']}, "
            f"{row['distinct_states']:,} states, last level {row['last_level']:,} ({growing}), {row['seconds']:.0f} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.complete_scopes", description=__doc__.splitlines()[0])
    parser.add_argument("--scope", action="append", choices=SCOPES, help="repeatable (default: all nine)")
    parser.add_argument("--profile", action="append", choices=PROFILES, help="repeatable (default: both)")
    parser.add_argument("--minutes", type=float, default=10.0, help="budget per scope and profile (default 10)")
    parser.add_argument("--workers", type=int, default=2, help="processes of the search (1: the serial engine)")
    parser.add_argument("--write", action="store_true", help=f"pin the figures in {COMPLETION.relative_to(ROOT)}")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--one-run", metavar="SCOPE", help=argparse.SUPPRESS)  # what each child runs
    args = parser.parse_args(argv)
    if args.minutes <= 0 or args.workers < 1:
        parser.error("--minutes and --workers must be positive")
    if args.one_run:
        one_run(args.one_run, (args.profile or ["kip"])[0], args.workers, args.minutes * 60)
        return 0
    rows = []
    for scope in args.scope or SCOPES:
        for profile in args.profile or PROFILES:
            row = measure(scope, profile, args.minutes, args.workers)
            rows.append(row)
            if not args.json:
                print(describe(row), flush=True)
    if args.json:
        print(json.dumps(rows, indent=2))
    if args.write:
        pinned = json.loads(COMPLETION.read_text()) if COMPLETION.exists() else {}
        pinned.update({f"{row['scope']}@{row['profile']}": row for row in rows})
        tmp = COMPLETION.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(pinned, indent=2, sort_keys=True) + "\n")
        tmp.replace(COMPLETION)
        print(f"wrote {COMPLETION}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
