"""Benchmark: the default campaign's throughput, this checkout against an earlier commit, in one sitting.

    python -m bench.campaign_against [--against a4cd00d] [--seeds 32] [--repeats 3] [--master serial] [--json]

Issue 17 asks that campaign throughput stay within 20% of what it was when the issue was filed
(``a4cd00d``, the last commit before its work), although every run now does more: messages in
flight, queued events, lagging ZooKeeper servers, swarm configurations, aimed faults and progress
checks. This runs ``kraftcheck campaign --seeds N --master M`` with every other option at its
default, as a user would, in each revision: the earlier one exported (``git archive``, as
``bench.explore_speed`` does) into a temporary folder and run from there with the same
interpreter, each campaign in a fresh process, the revisions taking turns so that a change of
load touches all alike. A campaign's time is its own ``wall_seconds`` (``summary.json``: the runs
and the tables, no report, no shrinking of a clean campaign). Throughput is steps (simulated events,
each checked against the model) per second; runs per second are printed too, since a run now
lasts longer. The figures are medians; the ratio is this checkout's over the earlier one's, and
the target is at least 0.8.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.explore_speed import ROOT, export

BASELINE = "a4cd00d"  # main when issue 17 was filed: the commit before its first change (a224ae5)
TARGET_RATIO = 0.8


def one_campaign(tree: Path, seeds: int, master: str, out: Path) -> dict:
    """A default campaign of ``seeds`` seeds run from ``tree``; its summary's figures."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    done = subprocess.run([sys.executable, "-m", "properties.cli", "campaign", "--seeds", str(seeds),
                           "--master", master, "--out", str(out)], cwd=tree, env=env, capture_output=True, text=True)
    summary_path = out / "summary.json"
    if not summary_path.exists():
        sys.exit(f"bench.campaign_against: the campaign in {tree} wrote no summary (exit {done.returncode}): "
                 f"{done.stderr.strip().splitlines()[-1:] or done.stdout.strip().splitlines()[-1:]}")
    summary = json.loads(summary_path.read_text())
    return {"exit": done.returncode, "runs": summary["runs"], "steps": summary["steps"],
            "seconds": summary["wall_seconds"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.campaign_against", description=__doc__.splitlines()[0])
    ap.add_argument("--against", default=BASELINE, help=f"the earlier commit (default {BASELINE})")
    ap.add_argument("--seeds", type=int, default=32, help="seeds a campaign runs (default 32)")
    ap.add_argument("--repeats", type=int, default=3, help="campaigns per revision, taking turns (medians)")
    ap.add_argument("--master", default="serial", help="where the runs go (default serial: one core's throughput)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if min(args.seeds, args.repeats) < 1:
        print("bench.campaign_against: error: --seeds and --repeats must be positive", file=sys.stderr)
        return 2
    check = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", f"{args.against}^{{commit}}"],
                           capture_output=True, text=True)
    if check.returncode != 0:
        print(f"bench.campaign_against: error: --against {args.against}: no such commit in {ROOT}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="campaign-against-") as tmp:
        work = Path(tmp)
        trees = {args.against: export(args.against, work), "this checkout": ROOT}
        measured: dict[str, list[dict]] = {name: [] for name in trees}
        for repeat in range(args.repeats):
            for name, tree in trees.items():
                m = one_campaign(tree, args.seeds, args.master, work / f"out-{len(measured[name])}-{repeat}-"
                                 f"{'this' if tree == ROOT else args.against}")
                measured[name].append(m)
                print(f"bench.campaign_against: {name}: {m['runs']} runs, {m['steps']:,} steps in "
                      f"{m['seconds']:.1f} s (exit {m['exit']})", file=sys.stderr, flush=True)
    rows = {}
    for name, ms in measured.items():
        rows[name] = {"runs": ms[0]["runs"], "steps": ms[0]["steps"],
                      "seconds": statistics.median(m["seconds"] for m in ms),
                      "steps_per_second": statistics.median(m["steps"] / m["seconds"] for m in ms),
                      "runs_per_second": statistics.median(m["runs"] / m["seconds"] for m in ms),
                      "exits": [m["exit"] for m in ms]}
    base, this = rows[args.against], rows["this checkout"]
    ratio = this["steps_per_second"] / base["steps_per_second"]
    report = {"against": args.against, "seeds": args.seeds, "master": args.master, "repeats": args.repeats,
              "load": os.getloadavg()[0], "revisions": rows,
              "steps_per_second_ratio": {"value": round(ratio, 3), "target": f">= {TARGET_RATIO}",
                                         "met": ratio >= TARGET_RATIO},
              "runs_per_second_ratio": round(this["runs_per_second"] / base["runs_per_second"], 3)}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"the default campaign, {args.seeds} seeds on {args.master}, medians of {args.repeats} "
              f"(load {report['load']:.1f}):")
        for name, row in rows.items():
            print(f"  {name:>14}: {row['runs']} runs, {row['steps']:,} steps in {row['seconds']:.1f} s: "
                  f"{row['steps_per_second']:,.0f} steps/s, {row['runs_per_second']:.2f} runs/s (exits {row['exits']})")
        print(f"steps/s ratio {ratio:.2f} (target >= {TARGET_RATIO}: {'met' if ratio >= TARGET_RATIO else 'NOT met'});"
              f" runs/s ratio {report['runs_per_second_ratio']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
