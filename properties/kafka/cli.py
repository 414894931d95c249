"""``kraftcheck kafka ...``: install a Kafka release, run it through the migration under faults, check a
run, shrink a failing one.

Exit codes, as in the rest of kraftcheck: 0 when the run was checked clean, 1 when a check found a
violation (progress included; ``shrink``: the violation stands, shrunk or not), 2 for bad usage (an
option, a version that does not exist or has no migration, Java or Maven missing, a plan file that
cannot be run, a folder that is not a run or a run that broke nothing to ``shrink``), 3 when the run
could not be carried out (a process that would not start for a reason of this machine's, such as a
port taken): nothing was checked.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from properties.kafka.install import DEFAULT_VERSION, InstallError
from properties.kafka.observe import describe

CLEAN, VIOLATION, USAGE, NOT_RUN = 0, 1, 2, 3


def _fail(message: str, code: int = USAGE) -> int:
    print(f"kraftcheck kafka: error: {message}", file=sys.stderr)
    return code


def _installation(args: argparse.Namespace, runbook: bool = False):
    """The Kafka to run; with ``runbook``, the runbook is chosen and checked against it before anything downloads."""
    from properties.kafka import install

    if args.kafka_dir:
        found = install.local(args.kafka_dir)
    else:
        args.version = args.version or DEFAULT_VERSION
        install.check_supported(args.version)
        found = install.Installation(args.version, Path())
    if runbook:
        problem = _runbook_problem(args, found)
        if problem:
            raise InstallError(problem)
    if args.kafka_dir:
        return found
    return install.install(args.version, progress=lambda line: print(line, file=sys.stderr))


def cmd_install(args: argparse.Namespace) -> int:
    try:
        found = _installation(args)
    except InstallError as e:
        return _fail(str(e))
    mode = "ZooKeeper mode and the migration" if found.has_zookeeper_mode else "KRaft only"
    print(f"Kafka {found.version} ({mode}) in {found.lib}")
    return CLEAN


def _runbook_problem(args: argparse.Namespace, found) -> str | None:
    """Chooses the default runbook for the release (finalize on 3.x, kraft on 4.x); says why a chosen one cannot run."""
    if args.runbook is None:
        args.runbook = "finalize" if found.has_zookeeper_mode else "kraft"
    if args.runbook != "kraft" and not found.has_zookeeper_mode:
        return (
            f"Kafka {found.version} has no ZooKeeper mode: --runbook {args.runbook} needs 3.4.0 to 3.9.x "
            f"(4.x runs --runbook kraft)"
        )
    return None


def _plan(args: argparse.Namespace):
    from properties.kafka.run import RealRunPlan

    if getattr(args, "plan_given", None) is not None:
        return args.plan_given
    return RealRunPlan(
        seed=args.seed,
        runbook=args.runbook,
        faults=args.faults,
        brokers=args.brokers,
        controllers=args.controllers,
        fault_count=args.fault_count,
        aimed=args.aimed,
    )


RUN_DEFAULTS = {"seed": 0, "faults": "process", "fault_count": 1, "brokers": 3, "controllers": 1, "aimed": False}
AIMED_HELP = (
    "each drawn fault waits for a moment its runbook step makes Kafka log (a broker's registration or unfencing, the "
    "migration driver's next state, a Raft leader) and strikes within 0.5 s of it, instead of at a delay into the "
    "step; a campaign's later seeds aim at the fault kinds and moments its earlier runs did not strike"
)


def _read_plan(args: argparse.Namespace) -> str | None:
    """With ``--plan FILE``: the plan (and its Kafka release, unless another is named) from the file; else
    the defaults of the options left out. The one-line reason when the file cannot be run."""
    from properties.kafka.run import PlanError, plan_from_json

    if args.plan is None:
        for key, value in RUN_DEFAULTS.items():
            if getattr(args, key) is None:
                setattr(args, key, value)
        return None
    given = [f"--{k.replace('_', '-')}" for k in ("runbook", *RUN_DEFAULTS) if getattr(args, k) is not None]
    if given:
        return f"--plan fixes the run's plan: leave out {', '.join(given)}"
    try:
        data = json.loads(Path(args.plan).read_text())
    except OSError as e:
        return f"--plan {args.plan}: cannot read it ({e.strerror or e})"
    except (ValueError, UnicodeDecodeError):
        return f"--plan {args.plan}: not JSON"
    try:
        plan = plan_from_json(data)
    except PlanError as e:
        return f"--plan {args.plan}: {e}"
    args.plan_given = plan
    args.seed, args.runbook = plan.seed, plan.runbook
    args.faults, args.fault_count = plan.faults, plan.fault_count
    if args.version is None and not args.kafka_dir and isinstance(data.get("kafka"), str):
        args.version = data["kafka"]
    return None


def cmd_run(args: argparse.Namespace) -> int:
    from properties.kafka.cluster import install_signal_handlers
    from properties.kafka.run import Run, plan_problem

    problem = _read_plan(args)
    if problem:
        return _fail(problem)
    try:
        found = _installation(args, runbook=True)
    except InstallError as e:
        return _fail(str(e))
    plan = _plan(args)
    problem = plan_problem(plan, [name for name, _ in Run(plan, found, Path("/nonexistent")).steps()])
    if problem:
        return _fail(f"--plan {args.plan}: {problem}")
    out = Path(args.out or f"kafka-out/seed-{args.seed}")
    if out.exists() and any(out.iterdir()):
        return _fail(f"--out {out} is not empty: a run's folder holds one run (remove it or name another)")
    problem = _make_folder(out)
    if problem:
        return _fail(problem)
    install_signal_handlers()
    run = Run(plan, found, out.resolve(), say=lambda line: print(line, file=sys.stderr))
    print(
        f"kafka {found.version}, seed {args.seed}: {len(run.steps())} runbook steps, faults {args.faults} -> {out}",
        file=sys.stderr,
    )
    outcome = run.execute()
    if outcome.startswith("failed"):
        return _fail(f"the run could not be carried out ({outcome}); its folder is {out}", NOT_RUN)
    return _report(out, args.json, outcome)


def _make_folder(out: Path) -> str | None:
    """Creates ``out`` (and checks it can be written); the one-line reason when it cannot be."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".kraftcheck-write-probe"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        return f"--out {out}: {e.strerror or e}"
    return None


def cmd_campaign(args: argparse.Namespace) -> int:
    from properties.kafka.campaign import campaign
    from properties.kafka.cluster import install_signal_handlers

    try:
        found = _installation(args, runbook=True)
    except InstallError as e:
        return _fail(str(e))
    out = Path(args.out)
    previous = out / "campaign.json"
    plan = _plan(argparse.Namespace(**{**vars(args), "seed": 0}))
    if previous.is_file():
        from properties.kafka.run import PlanError, plan_from_json

        before = json.loads(previous.read_text())
        try:
            same = plan_from_json({"plan": before.get("plan")}) == plan
        except PlanError:
            same = False
        if not same or before.get("kafka") != found.version:
            return _fail(
                f"--out {out} holds a campaign with other options: continue it with the same ones, or name "
                f"another --out"
            )
    elif out.exists() and any(out.iterdir()):
        return _fail(f"--out {out} is not empty and holds no campaign")
    problem = _make_folder(out)
    if problem:
        return _fail(problem)
    install_signal_handlers()
    seeds = args.seeds if args.seeds or args.minutes else 3
    runs, violations = campaign(
        plan,
        found,
        out,
        seeds,
        args.minutes,
        args.master,
        say=lambda line: print(line, file=sys.stderr),
        shrink_minutes=None if args.no_shrink else args.shrink_minutes,
        tries=args.tries,
    )
    if args.json:
        print(json.dumps({"out": str(out), "runs": runs, "violations": violations}, indent=2))
    else:
        print(f"{len(runs)} real runs, {len(violations)} violations; report: {out / 'report.html'}")
        for v in violations:
            print(f"VIOLATION {v['invariant']} (seed {v['seed']}): {v['message']}")
            if v.get("shrunk"):
                plan_file = out / v["folder"] / "shrunk-plan.json"
                print(f"    shrunk: {v['shrunk']}; replay: kraftcheck kafka run --plan {plan_file}")
    return VIOLATION if violations else CLEAN


def cmd_shrink(args: argparse.Namespace) -> int:
    from properties.kafka.cluster import install_signal_handlers
    from properties.kafka.shrink import ShrinkError, describe_plan, installation, shrink_folder, step_names, summary
    from properties.kafka.shrink import target as shrink_target

    folder = Path(args.folder)
    try:
        shrink_target(folder, args.invariant)
        found = installation(folder)
    except ShrinkError as e:
        return _fail(str(e))
    install_signal_handlers()
    state = shrink_folder(
        folder,
        args.invariant,
        tries=args.tries,
        budget_s=args.shrink_minutes * 60,
        say=lambda line: print(line, file=sys.stderr),
        kafka=found,
    )
    steps = step_names(found)
    if args.json:
        print((folder / "shrink.json").read_text().strip())
    else:
        print(f"{folder}: {state.invariant} shrunk: {summary(state, steps)}")
        print(f"  original: {describe_plan(state.original, steps)}")
        print(f"  shrunk:   {describe_plan(state.best, steps)}")
        print(f"  replay:   kraftcheck kafka run --plan {folder / 'shrunk-plan.json'}")
    return VIOLATION  # the run's violation stands, shrunk or not


def _minutes(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 7 * 24 * 60:
        raise argparse.ArgumentTypeError(f"expected minutes between 0 and a week, got {text!r}")
    return value


def cmd_check(args: argparse.Namespace) -> int:
    folder = Path(args.folder)
    if not (folder / "run.json").is_file():
        return _fail(f"{folder} is not a real-Kafka run's folder (no run.json)")
    return _report(folder, args.json, None)


def _report(folder: Path, as_json: bool, outcome: str | None) -> int:
    from properties.kafka.run import check_folder

    began = time.monotonic()
    obs, violations = check_folder(folder)
    seconds = time.monotonic() - began
    validation = json.loads((folder / "validation.json").read_text())
    ended = next((e for e in reversed(obs.operator) if e["kind"] == "end"), {})
    outcome = outcome or ended.get("outcome", "unknown")
    if as_json:
        print(
            json.dumps(
                {
                    "folder": str(folder),
                    "outcome": outcome,
                    "run_seconds": ended.get("seconds"),
                    "check_seconds": round(seconds, 3),
                    "violations": [{"invariant": v.invariant, "message": v.message} for v in violations],
                    "trace_validation": {k: validation[k] for k in ("outcome", "explained", "total")},
                },
                indent=2,
            )
        )
    else:
        events = (
            sum(len(v) for v in obs.zk.values())
            + sum(len(v) for v in obs.metadata.values())
            + sum(len(v) for v in obs.logs.values())
        )
        print(
            f"{folder}: {outcome}; {events} observations checked in {seconds:.2f} s "
            "(Kafka's timing varies between runs of one seed: the folder keeps this run's)"
        )
        for v in violations:
            print(f"VIOLATION {v.invariant}: {v.message}")
            for e in v.evidence:
                print(f"    {describe(e)}")
        print("\n".join(validation["report"]) if validation["outcome"] == "unexplained" else validation["report"][0])
        if not violations:
            print("no violation")
    return VIOLATION if violations else CLEAN


def add_commands(sub, parser_class) -> None:
    from properties.kafka.run import FAULT_MIXES, RUNBOOKS

    kafka = sub.add_parser("kafka", help="real Kafka: install a release, run the migration under faults, check runs")
    commands = kafka.add_subparsers(dest="kafka_command", required=True, parser_class=parser_class)

    def source(p) -> None:
        p.add_argument("--version", help=f"a Kafka release on Maven Central (default {DEFAULT_VERSION})")
        p.add_argument("--kafka-dir", help="a folder of jars (your own build) instead of a release")

    p = commands.add_parser("install", help="resolve a Kafka release's jars with Maven into the cache")
    source(p)
    p.set_defaults(run=cmd_install)

    p = commands.add_parser("run", help="one real cluster through KIP-866's runbook with seeded faults, then checked")
    source(p)
    p.add_argument("--seed", type=_count(0), help="default 0")
    p.add_argument(
        "--runbook",
        choices=RUNBOOKS,
        help="the migration to dual-write, kraft-brokers or finalize (the default on 3.x), a rollback-* from one of "
        "those points, or kraft: a KRaft-born cluster with feature updates (the default, and the only one, on 4.x)",
    )
    p.add_argument("--faults", choices=FAULT_MIXES, help="default process")
    p.add_argument("--fault-count", type=_count(0), help="faults drawn for the run (default 1)")
    p.add_argument("--brokers", type=_count(1, 5), help="default 3")
    p.add_argument("--controllers", type=int, choices=(1, 3), help="default 1")
    p.add_argument("--aimed", action="store_true", default=None, help=AIMED_HELP)
    p.add_argument(
        "--plan",
        metavar="FILE",
        help="run exactly this plan (a run's run.json or a shrunk-plan.json: its faults, not the seed's draw; its "
        "Kafka release unless --version or --kafka-dir), instead of the options above",
    )
    p.add_argument("--out", help="the run's folder (default kafka-out/seed-N); must be empty")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_run)

    p = commands.add_parser("campaign", help="one real run per seed, resumable: Parquet tables and report.html")
    source(p)
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--seeds", type=_count(1, 100_000), help="runs: seeds 0..N-1 (default 3)")
    budget.add_argument("--minutes", type=_minutes, help="new runs start until this much wall time has passed")
    p.add_argument("--runbook", choices=RUNBOOKS, default=None)
    p.add_argument("--faults", choices=FAULT_MIXES, default="process")
    p.add_argument("--fault-count", type=_count(0), default=1)
    p.add_argument("--brokers", type=_count(1, 5), default=3)
    p.add_argument("--controllers", type=int, choices=(1, 3), default=1)
    p.add_argument("--aimed", action="store_true", help=AIMED_HELP)
    p.add_argument("--master", help="a Spark master: each run is a task that runs its cluster on its executor's host")
    shrinking(p, "the campaign's shrinking, over all its violations (default 20)", 20.0)
    p.add_argument("--no-shrink", action="store_true", help="report the failing runs as they ran, unshrunk")
    p.add_argument(
        "--out",
        default="kafka-out/campaign",
        help="the campaign's folder (default kafka-out/campaign); running again with the same options continues it",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_campaign)

    p = commands.add_parser("check", help="check a run's folder again, offline")
    p.add_argument("folder")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_check)

    p = commands.add_parser(
        "shrink",
        help="re-run a failing run's plan, reduced, on real clusters: the smallest that still breaks its check",
    )
    p.add_argument("folder", help="a failing run's folder (kafka run --out, or a campaign's runs/seed-N)")
    p.add_argument("--invariant", help="the check to keep breaking (default: the run's first violation)")
    shrinking(p, "this shrink (default 30)", 30.0)
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_shrink)


def shrinking(p, budget: str, default: float) -> None:
    p.add_argument("--shrink-minutes", type=_minutes, default=default, help=f"wall time for {budget}")
    p.add_argument(
        "--tries",
        type=_count(1, 10),
        default=2,
        help="runs of a candidate plan before it is judged not to fail (real runs vary; default 2)",
    )


def _count(minimum: int, maximum: int | None = None):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum or (maximum is not None and value > maximum):
            bound = f">= {minimum}" if maximum is None else f"from {minimum} to {maximum}"
            raise argparse.ArgumentTypeError(f"expected an integer {bound}, got {text!r}")
        return value

    return parse
