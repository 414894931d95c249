"""Benchmark of campaigns: throughput on Spark and without it, and how long a campaign takes to catch each seeded bug.

    python -m bench.campaign                   # about 5 minutes of one core's work per configuration
    python -m bench.campaign --minutes 0.3 --json
    python -m bench.campaign --masters serial,local[2] --skip-mutants

It prints, as figures and ratios measured in the same run (these machines are noisy):
- runs per second and steps (simulated events, each checked against the model) per second of
  the same campaign run serially, with a multiprocessing pool of two (``processes[2]``) and on
  Spark ``local[1]`` and ``local[2]``, each through ``properties.campaign.driver.run_campaign``; the
  ratios local[2]/serial (target: at least 1.7) and Spark local[2] against processes[2]
  (target: Spark at most 15% behind); Spark's start-up (the session, until it takes jobs),
  reported apart and left out of the throughput;
- for each seeded bug of the implementation (``impl.bugs.IMPL_SEEDED_BUGS``) and each mistake of the design put
  into the model and the implementation alike (``impl.bugs.SHARED_SEEDED_BUGS``): a serial campaign
  with ``--mutant NAME`` run seed by seed (``properties.campaign.tasks.run_partition``, one seed a
  partition) until the first violation or the cap, and the seconds and seeds it took (two bugs
  are hunted at once, each in its own process: ``--mutant-workers``). ``--mutant-scope campaign
  --skip-throughput`` measures issue 17's bar: each bug hunted by the default campaign; ``--mutant NAME``
  (repeatable) hunts only the bugs named.

How: every configuration runs the same plan, the same seeds, so the same work (and must give
the same rows: the runs' deterministic columns are compared). The seed count is calibrated by
a short serial run so that one core does about ``--minutes`` of work: serial and local[1] take
about that long, the two-way configurations about half. A configuration's time is the
campaign's own wall time (``summary.json``: partitions run and tables consolidated; no shrinking,
a clean campaign has nothing to shrink). With ``--repeats`` the configurations take turns and
the medians are reported.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import pyarrow.parquet as pq

from impl.bugs import IMPL_SEEDED_BUGS, SHARED_SEEDED_BUGS
from properties.campaign import spark as spark_session
from properties.campaign.driver import run_campaign
from properties.campaign.options import CampaignError, make_plan
from properties.campaign.runners import check_master, is_spark_master
from properties.campaign.tasks import run_partition
from properties.plan import DEFAULT_FAULTS, DEFAULT_SCOPE, DEFAULT_STEPS, Plan
from properties.runs import run_seed

MASTERS = ("serial", "processes[2]", "local[1]", "local[2]")
TARGET_LOCAL2_OVER_SERIAL = 1.7
TARGET_SPARK_BEHIND_PROCESSES = 0.15
CALIBRATION_SEEDS = 4  # one cycle of the mixed runbook: three finalize, one rolls back
# The runs' columns that are a pure function of the plan (``run_partition``): equal in every configuration.
DETERMINISTIC = ("seed", "steps", "outcome", "invariant", "progress", "findings", "coverage_signature")


def log(text: str) -> None:
    print(f"bench.campaign: {text}", file=sys.stderr, flush=True)


# ---- throughput ------------------------------------------------------------------------------

@dataclass
class Measurement:
    master: str
    runs: int
    steps: int
    seconds: float  # the campaign's wall time (summary.json), Spark's start-up left out
    startup_seconds: float | None  # the Spark session's start, for Spark masters
    launched_jvm: bool  # the first Spark session of the process also starts the JVM; later ones reuse it
    rows_digest: str  # of the runs' deterministic columns

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds

    @property
    def runs_per_second(self) -> float:
        return self.runs / self.seconds


def calibrate(plan: Plan, minutes: float) -> tuple[int, float]:
    """Seconds per seed of the plan, serially, over the first seeds; the seed count for ``minutes`` of one core."""
    budget = min(20.0, max(4.0, minutes * 60 * 0.05))
    start = time.perf_counter()
    seeds = 0
    while seeds < CALIBRATION_SEEDS or time.perf_counter() - start < budget:
        run_seed(plan, seeds)
        seeds += 1
    per_seed = (time.perf_counter() - start) / seeds
    return max(2 * CALIBRATION_SEEDS, round(minutes * 60 / per_seed)), per_seed


def rows_digest(out: Path) -> str:
    runs = pq.read_table(out / "runs.parquet", columns=list(DETERMINISTIC)).to_pylist()
    text = json.dumps(sorted(runs, key=lambda r: r["seed"]), sort_keys=True)
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def measure(master: str, plan: Plan, first_spark: bool) -> Measurement:
    """One campaign of the plan on ``master``; a Spark master gets its own session, timed apart."""
    spark, startup = None, None
    if is_spark_master(master):
        start = time.perf_counter()
        spark = spark_session.session(master, app_name="kraftcheck bench")
        startup = time.perf_counter() - start
    try:
        summary = run_campaign(plan, master, spark=spark)
    finally:
        if spark is not None:
            spark.stop()
    return Measurement(master, summary["runs"], summary["steps"], summary["wall_seconds"], startup,
                       first_spark and spark is not None, rows_digest(Path(plan.out)))


def throughput(masters: list[str], plan_options: dict, seeds: int, repeats: int, work: Path) -> dict:
    measured: dict[str, list[Measurement]] = {m: [] for m in masters}
    failed: dict[str, str] = {}
    for repeat in range(repeats):
        for master in masters:  # in turns, so that a busier spell of the machine is shared out
            if master in failed:
                continue
            plan = make_plan(seeds=seeds, **plan_options, out=work / f"{master}-{repeat}")
            try:
                m = measure(master, plan, first_spark=not any(x.startup_seconds is not None
                                                               for ms in measured.values() for x in ms))
            except spark_session.SparkStartError as e:
                failed[master] = str(e)
                log(f"{master}: {e}")
                continue
            measured[master].append(m)
            started = "" if m.startup_seconds is None else \
                f" (+{m.startup_seconds:.1f} s Spark start-up{', JVM included' if m.launched_jvm else ''})"
            log(f"{master}: {m.runs} runs, {m.steps:,} steps in {m.seconds:.1f} s{started}")
    rows = {}
    for master, ms in measured.items():
        if not ms:
            continue
        startups = [m.startup_seconds for m in ms if m.startup_seconds is not None]
        rows[master] = {
            "runs": ms[0].runs,
            "steps": ms[0].steps,
            "seconds": round(statistics.median(m.seconds for m in ms), 2),
            "runs_per_second": round(statistics.median(m.runs_per_second for m in ms), 3),
            "steps_per_second": round(statistics.median(m.steps_per_second for m in ms)),
            "spark_startup_seconds": round(statistics.median(startups), 1) if startups else None,
            "spark_startup_launched_jvm": any(m.launched_jvm for m in ms),
            "repeats": [asdict(m) for m in ms],
        }
    digests = {m.rows_digest for ms in measured.values() for m in ms}
    starts = [m for ms in measured.values() for m in ms if m.startup_seconds is not None]
    later = [m.startup_seconds for m in starts if not m.launched_jvm]
    spark_startup = {
        "first_session_seconds": next((round(m.startup_seconds, 1) for m in starts if m.launched_jvm), None),
        "later_sessions_median_seconds": round(statistics.median(later), 1) if later else None,
    }
    return {"configurations": rows, "failed": failed, "same_rows_everywhere": len(digests) <= 1,
            "spark_startup": spark_startup, "ratios": ratios(rows)}


def ratios(rows: dict) -> dict:
    def rate(master: str) -> float | None:
        return rows[master]["steps_per_second"] if master in rows else None

    out: dict = {}
    serial, local1, local2, processes2 = rate("serial"), rate("local[1]"), rate("local[2]"), rate("processes[2]")
    if serial and local2:
        value = local2 / serial
        out["local2_over_serial"] = {"value": round(value, 2), "target": f">= {TARGET_LOCAL2_OVER_SERIAL}",
                                     "met": value >= TARGET_LOCAL2_OVER_SERIAL}
    if local2 and processes2:
        behind = 1 - local2 / processes2
        out["spark_local2_behind_processes2"] = {"value": round(behind, 3),
                                                 "target": f"<= {TARGET_SPARK_BEHIND_PROCESSES}",
                                                 "met": behind <= TARGET_SPARK_BEHIND_PROCESSES}
    if serial and processes2:
        out["processes2_over_serial"] = {"value": round(processes2 / serial, 2)}
    if serial and local1:
        out["local1_over_serial"] = {"value": round(local1 / serial, 2)}
    return out


# ---- seeded bugs -----------------------------------------------------------------------------

def time_to_catch(name: str, plan_options: dict, cap_seeds: int, cap_seconds: float, work: Path) -> dict:
    """Seeds 0, 1, ... of a campaign with the seeded bug on, serially, until a violation or the cap."""
    plan = make_plan(seeds=cap_seeds, **{**plan_options, "partition_size": 1}, mutant=name, out=work / name)
    start = time.perf_counter()
    for seed in range(cap_seeds):
        rows = run_partition(plan, seed)  # a partition of one seed: this seed
        elapsed = time.perf_counter() - start
        if rows["violations"]:
            v = rows["violations"][0]
            return {"name": name, "caught": True, "seconds": round(elapsed, 2), "seeds": seed + 1, "seed": seed,
                    "step": v["step"], "invariant": v["invariant"], "signature": v["signature"]}
        if elapsed >= cap_seconds:
            break
    return {"name": name, "caught": False, "seconds": round(time.perf_counter() - start, 2), "seeds": seed + 1}


def hunted(only: tuple[str, ...] = ()) -> tuple:
    """The seeded bugs a hunt runs: those named in ``only`` (``--mutant``), or every one."""
    return tuple(bug for bug in (*IMPL_SEEDED_BUGS, *SHARED_SEEDED_BUGS) if not only or bug.name in only)


def seeded_bugs(plan_options: dict, cap_seeds: int, cap_seconds: float, work: Path, workers: int,
                in_campaign_scope: bool = False, only: tuple[str, ...] = ()) -> list[dict]:
    """Each bug's hunt is serial; ``workers`` hunts run at once, each in its own process (one core each).

    A hunt runs in the scope the bug is registered for (``ImplSeededBug.scope``: where the situation it
    breaks can arise, e.g. a ZooKeeper-only cluster for a ZooKeeper controller's bug), with the
    campaign's faults and steps; ``in_campaign_scope`` (``--mutant-scope campaign``) hunts every bug in
    the campaign's scope."""
    bugs = hunted(only)
    hunts = [(bug.name, plan_options if in_campaign_scope else {**plan_options, "scope": bug.scope},
              cap_seeds, cap_seconds, work) for bug in bugs]
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(time_to_catch, *hunt) for hunt in hunts]
        rows = []
        for bug, hunt, future in zip(bugs, hunts, futures):
            row = {**future.result(), "targets": bug.invariant, "scope": hunt[1]["scope"]}
            rows.append(row)
            log(f"{bug.name}: " + (f"caught in {row['seconds']} s, {row['seeds']} seeds" if row["caught"]
                                   else f"not caught within the cap ({row['seeds']} seeds, {row['seconds']} s)"))
    return rows


# ---- the command -----------------------------------------------------------------------------

def describe_throughput(report: dict) -> list[str]:
    t = report["throughput"]
    opts = report["plan"]
    lines = [
        f"campaign: {report['seeds']} seeds of {opts['scope']} (faults {opts['faults']}, up to {opts['steps']} "
        f"steps a run, runbook {opts['runbook']}), partitions of {report['partition_size']}; calibration "
        f"{report['calibration_seconds_per_seed']:.2f} s a seed serially",
        "",
        f"{'configuration':14s} {'runs':>6s} {'steps':>10s} {'seconds':>8s} {'runs/s':>7s} {'steps/s':>8s} "
        f"{'vs serial':>9s} {'Spark start-up':>15s}",
    ]
    serial = t["configurations"].get("serial", {}).get("steps_per_second")
    for master, row in t["configurations"].items():
        versus = f"{row['steps_per_second'] / serial:.2f}" if serial else "-"
        startup = "-" if row["spark_startup_seconds"] is None else \
            f"{row['spark_startup_seconds']:.1f} s" + (" (JVM)" if row["spark_startup_launched_jvm"] else "")
        lines.append(f"{master:14s} {row['runs']:6d} {row['steps']:10,d} {row['seconds']:8.1f} "
                     f"{row['runs_per_second']:7.2f} {row['steps_per_second']:8,d} {versus:>9s} {startup:>15s}")
    for master, reason in t["failed"].items():
        lines.append(f"{master:14s} did not run: {reason}")
    r = t["ratios"]
    lines.append("")
    if "local2_over_serial" in r:
        x = r["local2_over_serial"]
        lines.append(f"local[2]/serial: {x['value']:.2f} (target {x['target']}: {'met' if x['met'] else 'NOT met'})")
    if "spark_local2_behind_processes2" in r:
        x = r["spark_local2_behind_processes2"]
        where = "behind" if x["value"] >= 0 else "ahead of"
        lines.append(f"Spark local[2] vs processes[2]: {abs(x['value']):.0%} {where} (target: at most "
                     f"{TARGET_SPARK_BEHIND_PROCESSES:.0%} behind: {'met' if x['met'] else 'NOT met'})")
    for key, label in (("processes2_over_serial", "processes[2]/serial"), ("local1_over_serial", "local[1]/serial")):
        if key in r:
            lines.append(f"{label}: {r[key]['value']:.2f}")
    lines.append("same rows in every configuration: " + ("yes" if t["same_rows_everywhere"] else "NO"))
    first, later = t["spark_startup"]["first_session_seconds"], t["spark_startup"]["later_sessions_median_seconds"]
    if first is not None:
        lines.append(f"Spark start-up (not in the times above): first session {first:.1f} s, the JVM's launch included"
                     + ("" if later is None else f"; later sessions, reusing the JVM, {later:.1f} s"))
    return lines


def describe(report: dict) -> str:
    lines = [] if report["throughput"] is None else describe_throughput(report)
    if report.get("seeded_bugs") is not None:
        cap = report["mutant_cap"]
        where = "in the campaign's scope" if report.get("mutant_scope") == "campaign" else "each in its scope"
        lines += ["", "seeded bugs (the implementation's, then shared_: the design's, in the model as well), time "
                      f"to the first violation ({where}, serially, "
                      f"one seed at a time, cap {cap['seeds']} seeds or {cap['seconds']:.0f} s; "
                      f"{cap['workers']} bugs at once):"]
        for row in report["seeded_bugs"]:
            if row["caught"]:
                what = f"caught in {row['seconds']:6.1f} s, {row['seeds']:3d} seeds (seed {row['seed']}, event " \
                       f"{row['step']}): {row['signature']}"
            else:
                what = f"not caught within cap ({row['seeds']} seeds, {row['seconds']:.0f} s)"
            lines.append(f"  {row['name']:44s} {row['scope']:19s} {what}")
        caught = sum(r["caught"] for r in report["seeded_bugs"])
        lines.append(f"  {caught}/{len(report['seeded_bugs'])} caught within the cap")
    return "\n".join(lines)


def _masters(text: str) -> list[str]:
    masters = [m.strip() for m in text.split(",") if m.strip()]
    try:
        return [check_master(m) for m in masters]
    except CampaignError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.campaign", description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=5.0,
                    help="the work: what one core does in about M minutes (calibrated; default 5)")
    ap.add_argument("--repeats", type=int, default=1, help="run each configuration this many times (medians)")
    ap.add_argument("--masters", type=_masters, default=list(MASTERS),
                    help=f"the configurations, comma-separated (default {','.join(MASTERS)})")
    ap.add_argument("--scope", default=DEFAULT_SCOPE)
    ap.add_argument("--faults", default=DEFAULT_FAULTS)
    ap.add_argument("--steps", type=int, default=DEFAULT_STEPS, help="events per run, at most")
    ap.add_argument("--partition-size", type=int, default=None, help="seeds per partition (default: the campaign's)")
    ap.add_argument("--mutant-seeds", type=int, default=200, help="cap on the seeds run per seeded bug")
    ap.add_argument("--mutant-minutes", type=float, default=2.0, help="cap on the time per seeded bug")
    ap.add_argument("--mutant-workers", type=int, default=2,
                    help="seeded bugs hunted at once, each serially in its own process (default 2)")
    ap.add_argument("--mutant-scope", choices=("own", "campaign"), default="own",
                    help="hunt each seeded bug in the scope it is registered for (default) or in --scope")
    ap.add_argument("--mutant", action="append", default=[], metavar="NAME",
                    help="hunt only this seeded bug (repeatable; default: every one)")
    ap.add_argument("--skip-mutants", action="store_true", help="measure throughput only")
    ap.add_argument("--skip-throughput", action="store_true", help="measure the seeded bugs only")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if not args.minutes > 0 or min(args.repeats, args.mutant_seeds, args.mutant_workers) < 1 \
            or not args.mutant_minutes > 0:
        print("bench.campaign: error: --minutes, --repeats and the --mutant-* options must be positive",
              file=sys.stderr)
        return 2
    unknown = sorted(set(args.mutant) - {b.name for b in (*IMPL_SEEDED_BUGS, *SHARED_SEEDED_BUGS)})
    if unknown:
        print(f"bench.campaign: error: --mutant {unknown[0]}: no such seeded bug (impl.bugs names them)",
              file=sys.stderr)
        return 2
    if args.skip_mutants and args.skip_throughput:
        print("bench.campaign: error: --skip-mutants and --skip-throughput leave nothing to measure", file=sys.stderr)
        return 2
    plan_options = {"scope": args.scope, "faults": args.faults, "steps": args.steps, "runbook": "mixed",
                    "partition_size": args.partition_size, "shrink_seconds": 0.0}
    with tempfile.TemporaryDirectory(prefix="kraftcheck-bench-") as temp:
        work = Path(temp)
        try:
            probe = make_plan(seeds=1, **plan_options, out=work / "calibration")
        except CampaignError as e:
            print(f"bench.campaign: error: {e}", file=sys.stderr)
            return 2
        report: dict = {"plan": {k: getattr(probe, k) for k in ("scope", "faults", "steps", "runbook")},
                        "minutes": args.minutes, "throughput": None, "seeded_bugs": None}
        if not args.skip_throughput:
            seeds, per_seed = calibrate(probe, args.minutes)
            log(f"calibration: {per_seed:.2f} s a seed serially: {seeds} seeds for {args.minutes:g} minutes of one "
                "core")
            plan = make_plan(seeds=seeds, **plan_options, out=work / "plan")
            report |= {"seeds": seeds, "partition_size": plan.partition_size,
                       "calibration_seconds_per_seed": round(per_seed, 3),
                       "throughput": throughput(args.masters, plan_options, seeds, args.repeats, work)}
        if not args.skip_mutants:
            report["mutant_cap"] = {"seeds": args.mutant_seeds, "seconds": args.mutant_minutes * 60,
                                    "workers": args.mutant_workers}
            report["mutant_scope"] = args.mutant_scope
            report["seeded_bugs"] = seeded_bugs(plan_options, args.mutant_seeds, args.mutant_minutes * 60, work,
                                                args.mutant_workers, args.mutant_scope == "campaign",
                                                tuple(args.mutant))
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(describe(report))
    return 0 if report["throughput"] is None or report["throughput"]["same_rows_everywhere"] else 1


if __name__ == "__main__":
    sys.exit(main())
