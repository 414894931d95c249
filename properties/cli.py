"""The ``kraftcheck`` command line.

Exit codes, for every command (``EXIT_CODES``, listed in the README):
0 when the check is clean (a documented finding about the seeds, ``Scope.findings``, is reported
and counted, not a violation), 1 when it found a violation (or a seeded bug escaped), 2 for bad
usage (an unknown scope, bug or option, a file that is not a trace, a directory it cannot write,
a Spark master it cannot reach), 4 for an internal error (a bug in kraftcheck, never a finding),
130 when interrupted. Every error is one line on stderr; ``KRAFTCHECK_DEBUG=1`` adds the
traceback of an internal error. Exit 3: this machine could not carry it out, nothing was checked
(``kraftcheck kafka run``: a real process would not start; scripts/setup.sh: a prerequisite it
cannot install).
Results go to stdout (``--json`` for machines); progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from model import PROPERTIES, SCOPES, SEEDED_BUGS_BY_NAME, Kind, Variant
from model.invariants import BY_NAME
from model.migration import Profile

CLEAN, VIOLATION, USAGE, INTERNAL, INTERRUPTED = 0, 1, 2, 4, 130
EXIT_CODES = {
    CLEAN: "clean (documented findings about the seeds included)",
    VIOLATION: "a violation found, or a seeded bug escaped",
    USAGE: "bad usage: an option, a file or a directory that cannot be used; nothing written",
    3: "not carried out on this machine, nothing checked (kafka run; scripts/setup.sh: a missing prerequisite)",
    INTERNAL: "an internal error: a bug in kraftcheck, not a finding",
    INTERRUPTED: "interrupted (Ctrl-C); a campaign continues with --resume",
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not the usage block
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(USAGE)


def _scope(name: str) -> str:
    if name not in SCOPES:
        raise argparse.ArgumentTypeError(f"unknown scope {name!r} (known: {', '.join(SCOPES)})")
    return name


def _bug(name: str) -> str:
    if name not in SEEDED_BUGS_BY_NAME:
        raise argparse.ArgumentTypeError(f"unknown seeded bug {name!r} (see `kraftcheck mutants --list`)")
    return name


def _any_bug(name: str) -> str:
    """A seeded bug of the model, of the implementation, or of both (``kraftcheck mutants``)."""
    from impl.bugs import IMPL_SEEDED_BUGS, SHARED_SEEDED_BUGS

    if name not in SEEDED_BUGS_BY_NAME and name not in {b.name for b in (*IMPL_SEEDED_BUGS, *SHARED_SEEDED_BUGS)}:
        raise argparse.ArgumentTypeError(f"unknown seeded bug {name!r} (see `kraftcheck mutants --list`)")
    return name


def _integer(minimum: int, wanted: str):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected {wanted}, got {text!r}")
        return value

    return parse


_positive = _integer(1, "a positive integer")
_non_negative = _integer(0, "an integer >= 0")
_workers = _integer(0, "a number of processes >= 0 (0: one per core, 1: the serial engine)")


def _explore_master(text: str) -> str:
    from properties.campaign.spark import check_spark_master

    try:
        return check_spark_master(text, others="")
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _writable_folder(text: str) -> str:
    """A folder that exists and can be written, or one that can be made (checked before any search)."""
    from properties.campaign.options import CampaignError, check_writable

    try:
        check_writable(Path(text), "--traces")
    except CampaignError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix(f"--traces {text}: ")) from None
    return text


def _profile(name: str) -> Profile:
    try:
        return Profile(name)
    except ValueError:
        known = ", ".join(p.value for p in Profile)
        raise argparse.ArgumentTypeError(f"unknown profile {name!r} (known: {known})") from None


def _eventually(name: str) -> str:
    if name not in BY_NAME or BY_NAME[name].kind is not Kind.EVENTUALLY:
        raise argparse.ArgumentTypeError(f"unknown eventually property {name!r} (see `kraftcheck invariants`)")
    return name


def _variant(bugs: list[str] | None, profile: Profile = Profile.KIP) -> Variant:
    return Variant(frozenset(SEEDED_BUGS_BY_NAME[b].bug for b in bugs or ()), profile)


def _print_json(data) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False))


def _print_trace(actions: list, indent: str = "  ") -> None:
    for i, action in enumerate(actions, 1):
        print(f"{indent}{i:3d}. {action!r}")


# ---- commands ---------------------------------------------------------------------------------

def cmd_invariants(args: argparse.Namespace) -> int:
    rows = [
        {"name": p.name, "kind": p.kind.value, "meaning": p.meaning, "source": p.source, "section": p.section}
        for p in PROPERTIES
    ]
    if args.json:
        _print_json(rows)
    else:
        for r in rows:
            print(f"{r['name']} [{r['kind']}]\n    {r['meaning']}\n    source: {r['source']}")
    return CLEAN


def cmd_scopes(args: argparse.Namespace) -> int:
    rows = [
        {"name": s.name, "brokers": s.brokers, "max_depth": s.max_depth, "summary": s.summary}
        for s in SCOPES.values()
    ]
    if args.json:
        _print_json(rows)
    else:
        for r in rows:
            print(f"{r['name']:20s} {r['summary']}")
    return CLEAN


def cmd_explore(args: argparse.Namespace) -> int:
    from properties.explore import explore

    if args.checkpoint and not args.master:
        print("kraftcheck explore: error: --checkpoint keeps the levels of a search on Spark: it needs --master",
              file=sys.stderr)
        return USAGE
    if args.master and args.workers != 1:
        print("kraftcheck explore: error: --master and --workers are two ways to spread the search: give one",
              file=sys.stderr)
        return USAGE
    variant = _variant(args.bug, args.profile)
    if args.master:
        result = _explore_on_spark(args)
        if isinstance(result, int):
            return result
    else:
        with _progress(args, f"exploring {args.scope}") as report:
            result = explore(
                args.scope, variant, max_depth=args.depth, max_states=args.max_states, progress=report,
                symmetry=args.symmetry, workers=args.workers,
            )
    sometimes = [p.name for p in PROPERTIES if p.kind is Kind.SOMETIMES]
    documented = SCOPES[args.scope].expected_findings(args.profile)
    written = _write_explore_traces(args, result.violations) if args.traces else {}
    findings = {name: t for name, t in result.violations.items() if name in documented}
    violated = {name: t for name, t in result.violations.items() if name not in documented}
    out = {
        "scope": result.scope,
        "profile": args.profile.value,
        "symmetry": args.symmetry,
        "workers": result.workers,
        "master": args.master,
        "bugs": sorted(args.bug or []),
        "distinct_states": result.distinct_states,
        "generated": result.generated,
        "depth": result.depth,
        "complete": result.complete,
        "seconds": round(result.seconds, 3),
        "collision_chance": result.collision_chance,
        "violations": [
            {"invariant": name, "meaning": BY_NAME[name].meaning, "actions": [repr(a) for a in t.actions],
             "trace_file": written.get(name)}
            for name, t in violated.items()
        ],
        "findings": [
            {"invariant": name, "meaning": BY_NAME[name].meaning, "actions": [repr(a) for a in t.actions],
             "trace_file": written.get(name)}
            for name, t in findings.items()
        ],
        "witnesses": sorted(result.witnesses),
        "witnesses_missing": sorted(set(sometimes) - set(result.witnesses)),
    }
    if args.json:
        _print_json(out)
    else:
        extent = "complete" if result.complete else f"to depth {result.depth}"
        print(
            f"scope {result.scope}: {result.distinct_states} distinct states, {result.generated} steps "
            f"checked, {extent}, {result.seconds:.1f}s"
        )
        if result.collision_chance is not None:
            print(f"fingerprints of 64 bits in the seen-sets: a {result.collision_chance:.1e} chance that two states "
                  "shared one")
        for name, trace in violated.items():
            print(f"VIOLATION {name}: {BY_NAME[name].meaning}\n  shortest counterexample ({len(trace)} steps):")
            _print_trace(trace.actions, "    ")
            if name in written:
                print(f"  trace file: {written[name]} (kraftcheck replay / pin take it)")
        for name, trace in findings.items():
            print(f"{_FINDING} {name}: {BY_NAME[name].meaning}\n"
                  f"  {_FINDING_MEANS}; shortest trace ({len(trace)} steps):")
            _print_trace(trace.actions, "    ")
        if not violated:
            print("no violation")
        if out["witnesses_missing"]:
            print(f"witnesses this scope does not reach (others may): {', '.join(out['witnesses_missing'])}")
    return VIOLATION if violated else CLEAN


def _explore_on_spark(args: argparse.Namespace):
    """``explore --master``: the search on Spark (``properties.spark_explore``), its levels in --checkpoint
    (resumed from there) or in a temporary directory; an ExploreResult, or an exit code after one line."""
    import shutil
    import tempfile

    from properties.campaign import spark as spark_session
    from properties.spark_explore import LOG, CheckpointError, SpecRef, open_run, spark_search

    error = "kraftcheck explore: error:"
    ref = SpecRef(args.scope, args.profile.value, tuple(sorted(set(args.bug or ()))), args.symmetry)
    run = Path(args.checkpoint) if args.checkpoint else Path(tempfile.mkdtemp(prefix="kraftcheck-explore-"))
    try:
        try:
            master = spark_session.spark_master(args.master)
            spark_session.check_reachable(master)
            open_run(run, ref, 1, create=False)
        except ValueError as e:  # CheckpointError included
            print(f"{error} {e}", file=sys.stderr)
            return USAGE
        from pyspark import SparkContext

        ours = SparkContext._active_spark_context is None  # a session the caller made stays running
        try:
            run.mkdir(parents=True, exist_ok=True)
            spark = spark_session.session(master, app_name=f"kraftcheck explore {args.scope}", log=run / LOG)
        except (spark_session.SparkStartError, OSError) as e:
            print(f"{error} {e}", file=sys.stderr)
            return USAGE
        try:
            with _progress(args, f"exploring {args.scope} on {master}") as report:
                return spark_search(spark, ref, run, max_depth=args.depth, max_states=args.max_states,
                                    progress=report)
        except CheckpointError as e:
            print(f"{error} {e}", file=sys.stderr)
            return USAGE
        except KeyboardInterrupt:
            from properties.spark_explore import finished_level

            level = finished_level(run) if args.checkpoint else None
            if level is not None:
                print(f"kraftcheck explore: interrupted; the same command resumes from level {level} in {run}",
                      file=sys.stderr)
            elif args.checkpoint:
                print(f"kraftcheck explore: interrupted before a level was kept; the same command starts again in "
                      f"{run}", file=sys.stderr)
            else:
                print("kraftcheck explore: interrupted (with --checkpoint DIR it could be resumed)", file=sys.stderr)
            return INTERRUPTED
        finally:
            if ours:
                spark.stop()
    finally:
        if not args.checkpoint:
            shutil.rmtree(run, ignore_errors=True)


# What campaigns, explore and simulate call a property the correct model breaks in a scope on purpose
# (``Scope.findings``: the seeds as written differ from shipped Kafka): reported, counted, exit 0.
_FINDING = "documented finding"
_FINDING_MEANS = "a known behaviour of the seeds (docs/model.md), not a violation"


def _write_explore_traces(args: argparse.Namespace, violations: dict) -> dict[str, str]:
    """Each shortest counterexample as a model trace file in ``--traces DIR``, for ``replay`` and ``pin``."""
    from properties import traces

    variant = _variant(args.bug, args.profile)
    written = {}
    for name, found in violations.items():
        if not found.actions:  # the initial state itself: nothing to replay
            continue
        trace = traces.Trace(args.scope, tuple(found.actions), frozenset(variant.bugs), name, None, args.profile)
        path = Path(args.traces) / f"{args.scope}--{name}.json"
        written[name] = str(traces.save_trace(path, trace))
    return written


def cmd_simulate(args: argparse.Namespace) -> int:
    from properties.simulate import walk

    documented = frozenset(SCOPES[args.scope].expected_findings(args.profile))
    result = walk(args.scope, args.seed, args.steps, _variant(args.bug, args.profile), findings=documented)
    out = {
        "scope": result.scope,
        "seed": result.seed,
        "steps": result.steps,
        "deadlocked": result.deadlocked,
        "seconds": round(result.seconds, 3),
        "violation": result.violation,
        "actions": [repr(a) for a in result.trace] if result.violation else None,
        "findings": sorted(result.findings),
        "witnesses": sorted(result.witnesses),
    }
    if args.json:
        _print_json(out)
    else:
        print(f"scope {result.scope}, seed {result.seed}: {result.steps} steps in {result.seconds:.2f}s"
              + (" (deadlocked)" if result.deadlocked else ""))
        for name in sorted(result.findings):
            print(f"{_FINDING} {name}: {BY_NAME[name].meaning}\n  {_FINDING_MEANS}")
        if result.violation:
            print(f"VIOLATION {result.violation}: {BY_NAME[result.violation].meaning}")
            _print_trace(result.trace)
        else:
            print("no violation")
    return VIOLATION if result.violation else CLEAN


def cmd_liveness(args: argparse.Namespace) -> int:
    from properties.liveness import VIOLATED, as_json, check_liveness, render

    result = check_liveness(
        args.scope, _variant(args.bug, args.profile), max_depth=args.depth, props=args.property or None,
        max_states=args.max_states,
    )
    if args.json:
        out = as_json(result)
        out["profile"] = args.profile.value
        _print_json(out)
    else:
        print(render(result))
    return VIOLATION if any(v.result == VIOLATED for v in result.verdicts) else CLEAN


def cmd_mutants(args: argparse.Namespace) -> int:
    from properties.mutants import run_all

    if args.list:
        from properties.mutants import ALL_SEEDED_BUGS, layer_of

        for bug in ALL_SEEDED_BUGS:
            print(f"{layer_of(bug):6s} {bug.name:44s} breaks {bug.invariant} ({bug.mistake})")
        return CLEAN
    from properties.mutants import DEFAULT_CHECKS

    results = run_all(args.bug or None, tuple(args.check or DEFAULT_CHECKS))
    if args.json:
        _print_json([r.as_json() for r in results])
    else:
        for r in results:
            verdict = f"caught by {r.caught_by} in {len(r.counterexample)} steps" if r.caught_by else "ESCAPED"
            print(f"{r.name:40s} {r.invariant:42s} {verdict} ({r.seconds:.1f}s)")
        caught = sum(r.caught_by is not None for r in results)
        print(f"{caught}/{len(results)} seeded bugs caught")
    return CLEAN if all(r.caught_by for r in results) else VIOLATION


def cmd_prove(args: argparse.Namespace) -> int:
    from properties.proofs import cores as z3_cores
    from properties.proofs.engine import all_hold

    # Each core runs when it switches every bug asked for (both for the correct model) and, with --property, when it
    # encodes one of the properties named.
    cores = list(z3_cores())
    goals = args.property
    if goals:
        encoded = {name for core in cores for name in core.property_names}
        missing = [name for name in goals if name not in encoded]
        if missing:
            print(f"kraftcheck prove: error: no z3 encoding has the property {missing[0]!r}; encoded: "
                  f"{', '.join(sorted(encoded))}", file=sys.stderr)
            return USAGE
        cores = [core for core in cores if set(goals) & set(core.property_names)]
    variant = _variant(args.bug)
    unsupported = sorted(b.value for b in variant.bugs if not any(b in core.encoded_bugs for core in cores))
    if unsupported:
        print(f"kraftcheck prove: error: the z3 encoding does not switch {', '.join(unsupported)}", file=sys.stderr)
        return USAGE
    checked = [core for core in cores if variant.bugs <= core.encoded_bugs.keys()]
    if not checked:
        names = ", ".join(sorted(b.value for b in variant.bugs))
        print(f"kraftcheck prove: error: no one z3 encoding switches all of {names}", file=sys.stderr)
        return USAGE
    rows = [row for core in checked for row in core.report(variant, depth=args.depth, goals=goals)]
    if args.json:
        _print_json(rows)
    else:
        for r in rows:
            print(f"{r['result']:27s} {r['seconds']:8.3f}s  {r['name']}  [{r['brokers']}]")
            if "why" in r:  # a finding of the design: why it is one
                print(f"      {r['why']}")
            if "counterexample" in r:  # a BMC trace, replayed through the model
                _print_trace(r["counterexample"]["actions"], "      ")
        failed = sum(r["result"] not in ("holds", "proved", "finding") for r in rows)
        known = sum(r["result"] == "finding" for r in rows)
        findings = f"; {known} fail as known findings of the design" if known else ""
        print(f"{len(rows) - failed - known}/{len(rows)} obligations hold{findings}")
    return CLEAN if all_hold(rows) else VIOLATION


def _load_trace(path: str):
    """A trace file with at least one step, each naming only nodes its scope has; a one-line TraceError otherwise."""
    from impl.sim.scenarios import scenario
    from properties import traces

    trace = traces.load_trace(path)
    if not trace.actions:
        raise traces.TraceError(f"{path}: the trace has no steps: nothing to replay")
    differential = isinstance(trace, traces.DifferentialTrace)
    where = "steps[{}].action" if differential else "actions[{}]"
    try:
        traces.check_fits(scenario(trace.scope), trace.actions, where, trace.steps if differential else ())
    except traces.TraceError as err:
        raise traces.TraceError(f"{path}: {err}") from None
    return trace


def cmd_scenario(args: argparse.Namespace) -> int:
    """Exit 0 when every block of every file gives its expected output (or ``--rewrite`` wrote them),
    1 when one differs (a diff per block), 2 when a file is missing or malformed (one line)."""
    from properties.scenario import ScenarioError, rewrite, run_file

    if args.rewrite and args.impl:
        print("kraftcheck scenario: error: --rewrite writes the model's outputs; run --impl after it", file=sys.stderr)
        return USAGE
    if args.kafka or args.version or any(_is_cluster_file(Path(name)) for name in args.files):
        from properties.kafka.scenario import cmd_scenario as cluster_scenario

        return cluster_scenario(args)
    results = []
    for name in args.files:
        try:
            results.append(run_file(Path(name), against_impl=args.impl))
        except (ScenarioError, OSError) as err:
            print(f"kraftcheck scenario: error: {err}", file=sys.stderr)
            return USAGE
    failed = 0
    for result in results:
        if args.rewrite:
            rewrite(result)
            print(f"{result.path}: {len(result.blocks)} blocks written")
        elif result.passed:
            impl = ""
            if args.impl and not result.impl_skipped:
                impl = ", the implementation agreeing"
            elif args.impl:
                ran = "agreeing where it ran, " if result.impl_ran else ""
                impl = f" (implementation: {ran}not run {result.impl_skipped})"
            failed += report_file(result.path, len(result.blocks), result.diffs, impl)
        else:
            failed += report_file(result.path, len(result.blocks), result.diffs)
    return VIOLATION if failed else CLEAN


def report_file(path: Path, blocks: int, diffs: list[str], said: str = "") -> bool:
    """A scenario file's verdict line, then a diff per block that differs; True when one did."""
    if not diffs:
        print(f"{path}: {blocks} blocks as expected{said}")
        return False
    print(f"{path}: {len(diffs)} of {blocks} blocks differ{said}")
    for diff in diffs:
        print(diff)
    return True


def _is_cluster_file(path: Path) -> bool:
    """A file of an operator's steps (``properties.kafka.scenario``), run by its own runner."""
    from properties.kafka.scenario import is_cluster_file
    from properties.scenario import ScenarioError, parse

    try:
        return is_cluster_file(parse(path.read_text(encoding="utf-8"), str(path)))
    except (ScenarioError, OSError, UnicodeDecodeError):
        return False  # the model's runner says what is wrong with it


def cmd_replay(args: argparse.Namespace) -> int:
    """Exit 1 when the replay breaks an invariant or disagrees, the recorded violation or another (the
    verdict line says which: a trace relabelled to another profile may break something else); 0 when it
    replays clean; 2 when the file is not a trace of this model. Table and diagram stop at that step."""
    from dataclasses import replace

    from properties import mermaid, traces

    try:
        trace = _load_trace(args.file)
    except traces.TraceError as err:
        print(f"kraftcheck replay: error: {err}", file=sys.stderr)
        return USAGE
    if isinstance(trace, traces.DifferentialTrace):
        return _replay_differential(args, trace)
    result = traces.replay(trace)
    broke = ", ".join(result.violations) if result.violation_step else None
    shown = replace(trace, actions=trace.actions[:len(result.steps)])  # up to the violation or refused step
    diagram = mermaid.sequence_diagram(shown, broke, result.violation_step or 0)
    if args.json:
        out = {
            "file": args.file,
            "kind": "model",
            "scope": trace.scope,
            "bugs": sorted(b.value for b in trace.bugs),
            "recorded_violation": trace.violation,
            "violation_step": result.violation_step,
            "violations": list(result.violations),
            "reproduced": result.reproduced,
            "not_enabled_index": result.not_enabled_index,
            "steps": len(result.steps),
            "mermaid": diagram,
        }
        _print_json(out)
    elif args.mermaid:
        print(diagram, end="")
    else:
        print(traces.render(result))
        if trace.violation and result.violation_step is None and result.not_enabled_index is None:
            print(f"replayed clean: the recorded violation {trace.violation} did not reproduce")
        print(f"\n{diagram}", end="")
    if result.not_enabled_index is not None:
        return USAGE  # the trace does not fit this model
    return VIOLATION if result.violation_step is not None else CLEAN


def _replay_differential(args: argparse.Namespace, trace) -> int:
    """A differential trace: the implementation and the model, replayed step by step (properties.shrink)."""
    from dataclasses import replace

    from properties import mermaid, shrink

    replayed = shrink.replay_trace(trace)
    found = replayed.disagreement
    refused = frozenset(i for i, taken in enumerate(replayed.taken, 1) if not taken)
    step = None if replayed.failed_at is None else replayed.failed_at + 1
    # the steps the replay performed (a stall's continuation generated again), up to the violation
    shown = replace(trace, steps=tuple(replayed.record if step is None else replayed.record[:step]))
    diagram = mermaid.sequence_diagram(shown, replayed.signature, step or 0, refused)
    if args.json:
        _print_json({
            "file": args.file,
            "kind": "differential",
            "scope": trace.scope,
            "seed": trace.seed,
            "bugs": sorted(b.value for b in trace.bugs),
            "impl_bugs": sorted(b.value for b in trace.impl_bugs),
            "recorded_signature": trace.signature,
            "signature": replayed.signature,
            "reproduced": replayed.signature == trace.signature,
            "violation_step": step,
            "steps": len(trace.steps),
            "summary": None if found is None else found.summary,
            "details": [] if found is None else list(found.details),
            "mermaid": diagram,
        })
    elif args.mermaid:
        print(diagram, end="")
    else:
        print(shrink.render_replay(trace, replayed))
        print(f"\n{diagram}", end="")
    return CLEAN if found is None else VIOLATION


def cmd_pin(args: argparse.Namespace) -> int:
    """A trace file, or a failing seed (run with every event checked, then shrunk), as tests/regressions/NAME.json."""
    from properties import shrink, traces

    def refuse(message: str) -> int:
        print(f"kraftcheck pin: error: {message}", file=sys.stderr)
        return USAGE

    seed_options = ("scope", "faults", "mutant", "steps", "runbook", "quiet_steps", "aims", "configs")
    if (args.file is None) == (args.seed is None):
        return refuse("give a trace FILE or --seed N (not both)")
    if args.file is not None and any(getattr(args, o) is not None for o in seed_options):
        return refuse("--scope, --faults, --mutant, --steps, --runbook, --quiet-steps, --aims and --configs go with "
                      "--seed, not with a FILE")
    if args.file is not None:
        try:
            trace = _load_trace(args.file)
        except traces.TraceError as err:
            return refuse(str(err))
        default_name = Path(args.file).stem
    else:
        from properties.plan import Plan

        chosen = {"scope": args.scope, "faults": args.faults, "mutant": args.mutant, "steps": args.steps,
                  "runbook": args.runbook, "quiet_steps": args.quiet_steps, "configs": args.configs}
        plan = Plan(**{option: value for option, value in chosen.items() if value is not None})
        aims = tuple(a.strip() for a in (args.aims or "").split(",") if a.strip())
        try:
            from impl.sim.faults import parse
            from impl.sim.scenarios import CONFIGS, scenario
            from properties.steering import parse_aims

            if plan.configs not in CONFIGS:
                raise ValueError(f"unknown --configs {plan.configs!r}; expected one of {', '.join(CONFIGS)}")
            scenario(plan.scope)
            parse(plan.faults)
            parse_aims(aims)
            if plan.quiet_steps > plan.steps:
                raise ValueError(f"--quiet-steps: expected an integer from 0 to --steps ({plan.steps}), "
                                 f"got {plan.quiet_steps}")
        except ValueError as err:
            return refuse(str(err))
        default_name = f"{args.mutant or 'no-bug'}-{plan.scope}-seed{args.seed}"
    name = (default_name if args.name is None else args.name).removesuffix(".json")
    if not name or not all(c.isalnum() or c in "_.-" for c in name) or name.startswith("."):
        return refuse(f"--name {name!r}: use letters, digits, '_', '-' and '.' only")
    try:
        directory = _target(args.dir, "tests/regressions", "tests/test_pinned_regressions.py", "pin", "--dir DIR")
    except _Refused as err:
        print(err, file=sys.stderr)
        return USAGE
    target = directory / f"{name}.json"
    if target.exists():
        return refuse(f"{target} exists: choose another --name (a pinned regression is never overwritten)")
    from properties.campaign.options import CampaignError, check_writable

    try:
        check_writable(directory, "--dir")  # before a seed is run and shrunk, which takes minutes
    except CampaignError as err:
        return refuse(str(err))
    if args.file is None:
        from properties.runs import run_seed

        run = run_seed(plan, args.seed, coverage=False, aims=aims)
        found = run.disagreement
        if found is None:
            return refuse(f"seed {args.seed} does not fail: {len(run.record)} events of {plan.scope} with faults "
                          f"{plan.faults}, mutant {plan.mutant or 'none'}, ran clean")
        signature = shrink.signature_of(found)
        print(f"seed {args.seed} fails at event {len(run.record)}: {signature}; shrinking (up to "
              f"{args.shrink_seconds:g} s)", file=sys.stderr)
        result = shrink.shrink_violation(plan, args.seed, run.record, signature, args.shrink_seconds, run.handover)
        if not result.reproduced:
            return refuse(f"seed {args.seed}: the run's record does not replay to {signature} without the simulator")
        trace = shrink.trace_for(plan, args.seed, result.steps, signature, result.summary, result.original_steps,
                                 result.handover, aims)
        how = (f"from {result.original_steps} events, {'1-minimal' if result.minimal else 'not minimal: out of time'}, "
               f"{result.seconds:.1f} s, {result.tries} replays")
    else:
        seeded = bool(trace.bugs) or bool(getattr(trace, "impl_bugs", ()))
        reproduced, found = _reproduces(trace)
        if seeded and reproduced is None:
            return refuse(f"{args.file}: the recorded violation {_recorded(trace)} does not reproduce with its "
                          f"seeded bugs: {found} (`kraftcheck replay {args.file}` shows the replay)")
        if reproduced is not None:
            trace = reproduced  # cut at the violation: what comes after it is not part of the regression
        how = f"from {args.file}" + ("" if seeded or reproduced is None else
                                     "; it reproduces now: the test fails until the bug is fixed")
    try:
        traces.save_trace(target, trace)
    except (traces.TraceError, OSError) as err:
        return refuse(f"cannot write {target}: {getattr(err, 'strerror', None) or err}")
    what = getattr(trace, "signature", None) or trace.violation
    print(f"pinned {target}: {what}, {len(trace.actions)} steps ({how})")
    return CLEAN


def _recorded(trace) -> str:
    return getattr(trace, "signature", None) or trace.violation or "(none recorded)"


def _reproduces(trace):
    """(the trace cut at the step that reproduces its recorded violation, or None; what the replay did)."""
    from dataclasses import replace

    from properties import shrink, traces

    if isinstance(trace, traces.DifferentialTrace):
        replayed = shrink.replay_trace(trace)
        if replayed.signature is None:
            return None, "it replays clean"
        step = len(trace.steps) if replayed.failed_at is None else replayed.failed_at + 1
        if replayed.signature != trace.signature:
            return None, f"step {step} gives {replayed.signature} instead"
        # (a stall's quiet continuation as the replay generated it again: the same as recorded, unless the code changed)
        return replace(trace, steps=tuple(replayed.record[:step])), f"step {step} reproduces it"
    result = traces.replay(trace)
    if result.not_enabled_index is not None:
        return None, f"step {result.not_enabled_index + 1} is not enabled"
    if result.violation_step is None:
        return None, "it replays clean"
    if not result.reproduced:
        return None, f"step {result.violation_step} breaks {', '.join(result.violations)} instead"
    return replace(trace, actions=trace.actions[:result.violation_step]), f"step {result.violation_step} reproduces it"


def _target(given: str | None, default: str, marker: str, command: str, option: str) -> Path:
    """Where a command that rewrites project files writes: the path the user gave, else ``default`` in the
    working directory when it is a kraftcheck checkout (it holds ``marker``); never the installed tree."""
    if given is not None:
        if not given.strip():
            raise _Refused(f"kraftcheck {command}: error: {option.split()[0]}: expected a path, got an empty one")
        return Path(given)
    if not Path(marker).is_file():
        raise _Refused(f"kraftcheck {command}: error: {Path.cwd()} is not a kraftcheck checkout (no {marker}): "
                       f"run it in the checkout to change, or give {option}")
    return Path(default)


class _Refused(Exception):
    """A command's one-line refusal (exit 2)."""


def cmd_manifest(args: argparse.Namespace) -> int:
    from properties import manifest

    try:
        target = _target(args.file, "properties/manifest.json", "properties/manifest.json", "manifest", "--file FILE") \
            if args.write else Path(manifest.MANIFEST if args.file is None else args.file)
    except _Refused as err:
        print(err, file=sys.stderr)
        return USAGE
    if args.write and not target.parent.is_dir():
        print(f"kraftcheck manifest: error: --file {target}: {target.parent} is not a directory", file=sys.stderr)
        return USAGE
    if not args.write and not target.is_file():
        print(f"kraftcheck manifest: error: --file {target}: no such file", file=sys.stderr)
        return USAGE
    started = time.monotonic()

    def progress(index: int, count: int, key: str) -> None:
        print(f"manifest: exploring {key} ({index + 1}/{count}, {time.monotonic() - started:.0f} s so far)",
              file=sys.stderr, flush=True)

    measured = manifest.measure_all(progress)
    if args.write:
        try:
            manifest.write(measured, target)
        except OSError as err:
            print(f"kraftcheck manifest: error: cannot write {target}: {err.strerror or err}", file=sys.stderr)
            return USAGE
        print(f"wrote {target}")
        return CLEAN
    try:
        pinned = manifest.load(target)
    except ValueError as err:
        print(f"kraftcheck manifest: error: {target}: not a manifest ({err})", file=sys.stderr)
        return USAGE
    moved = sorted(name for name in measured if pinned.get(name) != measured[name])
    for name in moved:
        print(f"{name}: pinned {pinned.get(name)}, measured {measured[name]}")
    if moved:
        print("reachability moved: if on purpose, run `kraftcheck manifest --write`", file=sys.stderr)
        return VIOLATION
    print(f"{len(measured)} scopes match {target}")
    return CLEAN


def cmd_docs(args: argparse.Namespace) -> int:
    from properties import citations, site

    seeds = None
    if args.seeds is not None:
        table = citations.SECTIONS_FILE if args.check else Path("properties/kip_sections.json")
        if not args.check and not Path("mkdocs.yml").is_file():
            print(f"kraftcheck docs: error: {Path.cwd()} is not a kraftcheck checkout (no mkdocs.yml): --seeds "
                  "rewrites its properties/kip_sections.json, run it there", file=sys.stderr)
            return USAGE
        try:
            seeds = citations.read_seed_sections(Path(args.seeds))
        except OSError as err:
            print(f"kraftcheck docs: error: --seeds: cannot read {err.filename or args.seeds}: {err.strerror or err}",
                  file=sys.stderr)
            return USAGE
    if args.check:
        directory = Path(args.dir) if args.dir else Path("docs") if Path("mkdocs.yml").is_file() else site.DOCS
        stale = site.stale_pages(directory)
        for path in stale:
            print(f"{path} is stale: run `kraftcheck docs`", file=sys.stderr)
        if seeds is not None and seeds != citations.seed_sections():
            print(f"{table} is not what the seeds say: run `kraftcheck docs --seeds {args.seeds}`", file=sys.stderr)
            stale.append(table)
        if stale:
            return VIOLATION
        print(f"{len(site.PAGES)} generated pages in {directory} are up to date")
        return CLEAN
    try:
        directory = _target(args.dir, "docs", "mkdocs.yml", "docs", "--dir DIR")
    except _Refused as err:
        print(err, file=sys.stderr)
        return USAGE
    if directory.exists() and not directory.is_dir():
        print(f"kraftcheck docs: error: --dir {directory} is not a directory", file=sys.stderr)
        return USAGE
    try:
        if seeds is not None:
            print(f"wrote {citations.write_seed_sections(seeds, table)}")
        written = site.write_all(directory)
    except OSError as err:
        print(f"kraftcheck docs: error: cannot write {err.filename or directory}: {err.strerror or err}",
              file=sys.stderr)
        return USAGE
    for path in written:
        print(f"wrote {path}")
    return CLEAN


def cmd_report(args: argparse.Namespace) -> int:
    from properties.campaign.report import ReportError, write_report

    try:
        path = write_report(args.dir)
    except ReportError as err:
        print(f"kraftcheck report: error: {err}", file=sys.stderr)
        return USAGE
    except OSError as err:  # the tables read, the page cannot be written there
        print(f"kraftcheck report: error: cannot write {Path(args.dir) / 'report.html'}: {err.strerror or err}",
              file=sys.stderr)
        return USAGE
    print(f"wrote {path}")
    return CLEAN


def _add_campaign_arguments(p: argparse.ArgumentParser, positive) -> None:
    """The ``campaign`` subcommand's options, each checked as ``properties.campaign`` checks it."""
    from properties.campaign.options import (
        CAMPAIGN_RUNBOOKS,
        DEFAULT_MASTER,
        DEFAULT_SEEDS,
        ENGINES,
        MACHINES,
        CampaignError,
        check_faults,
        check_mutant,
        check_scope,
    )
    from properties.campaign.runners import check_master
    from properties.plan import (
        DEFAULT_CONFIGS,
        DEFAULT_ENGINE,
        DEFAULT_FAULTS,
        DEFAULT_OUT,
        DEFAULT_RUNBOOK,
        DEFAULT_SCOPE,
        DEFAULT_SHRINK_SECONDS,
        DEFAULT_STEPS,
        WAVE_PARTITIONS,
    )

    def number(minimum_exclusive: float | None, wanted: str):
        def parse(text: str) -> float:
            try:
                value = float(text)
            except ValueError:
                value = float("nan")
            if not (value >= 0 if minimum_exclusive is None else value > minimum_exclusive) or math.isinf(value):
                raise _argument_error(f"expected {wanted}, got {text!r}")
            return value

        return parse

    def checked(check):
        def parse(text: str) -> str:
            try:
                return check(text)
            except CampaignError as e:
                raise _argument_error(str(e)) from None

        return parse

    size = p.add_mutually_exclusive_group()
    size.add_argument("--seeds", type=positive, help=f"run seeds 0..N-1 (default {DEFAULT_SEEDS})")
    size.add_argument("--minutes", type=number(0, "a positive number"),
                      help="run partitions of seeds, in order, until M minutes have passed")
    p.add_argument("--scope", type=checked(check_scope), default=DEFAULT_SCOPE,
                   help=f"the simulator scenario or any model scope (default {DEFAULT_SCOPE})")
    p.add_argument("--faults", type=checked(check_faults), default=DEFAULT_FAULTS,
                   help="fault mix: none, network, process, zookeeper, all, responses, lagging, zk-lagging, "
                        "queue, reassign, delete-topics, write-failure, reply-loss, purgatory, heartbeat-commit, held, "
                        "stalled-deletion, "
                        "a+b, key=weight; "
                        f"swarm, or swarm+a: each run draws its own mix (default {DEFAULT_FAULTS})")
    p.add_argument("--mutant", type=checked(check_mutant),
                   help="switch a seeded bug on, of the implementation, of the model, or of both "
                        "(shared_<bug>; `kraftcheck mutants --list`)")
    p.add_argument("--steps", type=positive, default=DEFAULT_STEPS,
                   help=f"events per run, at most (default {DEFAULT_STEPS})")
    p.add_argument("--runbook", choices=CAMPAIGN_RUNBOOKS, default=DEFAULT_RUNBOOK,
                   help="the operator's KIP-866 runbook; mixed: every fourth seed rolls back (default mixed)")
    p.add_argument("--partition-size", type=positive,
                   help="seeds per partition, one Spark task each (default: some seconds of work)")
    p.add_argument("--master", type=checked(check_master),
                   help="where to run: a Spark master (local[N], local[*], spark://HOST:PORT; a local master "
                        "without a failure count becomes local[N,4], so a failed task is retried), or, without "
                        "Spark or Java, serial (one process) or processes[N] (a multiprocessing pool) "
                        f"(default {DEFAULT_MASTER}, or spark-submit's --master)")
    p.add_argument("--out", default=DEFAULT_OUT, help=f"the campaign directory (default {DEFAULT_OUT})")
    p.add_argument("--resume", action="store_true",
                   help="continue the campaign in --out (same options): finished partitions are skipped")
    p.add_argument("--engine", choices=ENGINES, default=DEFAULT_ENGINE,
                   help="sim: seeded simulations (default); hypothesis: Hypothesis fuzzing of --machine")
    p.add_argument("--machine", choices=MACHINES,
                   help="with --engine hypothesis: the model machine or the differential one (default differential)")
    p.add_argument("--shrink-seconds", type=number(None, "a number >= 0"), default=DEFAULT_SHRINK_SECONDS,
                   help=f"time to shrink each violation group (default {DEFAULT_SHRINK_SECONDS:.0f})")
    p.add_argument("--quiet-steps", type=_non_negative,
                   help="events at the end of each run with no fault, in which each progress goal must be met within "
                        "its bound (default: a quarter of --steps; 0: no progress check)")
    p.add_argument("--no-steer", dest="steer", action="store_false",
                   help="do not aim later seeds' faults at the driver states no run struck yet")
    p.add_argument("--wave", type=positive, default=WAVE_PARTITIONS,
                   help=f"partitions per wave of a steered campaign (default {WAVE_PARTITIONS})")
    p.add_argument("--configs", default=DEFAULT_CONFIGS,
                   help="drawn: each seed of sim-migration runs a cluster configuration drawn from it (quorum size, "
                        "metadata.version, IBPs, flags, admin requests); drawn+partitions: and partition creations "
                        "one run in two; fixed: the scope as named (default drawn)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON (and no progress bar)")


def _argument_error(message: str) -> argparse.ArgumentTypeError:
    return argparse.ArgumentTypeError(message)


def cmd_campaign(args: argparse.Namespace) -> int:
    """``kraftcheck campaign``: exit 0 clean, 1 violations found, 2 bad input (nothing written)."""
    from properties.campaign import spark as spark_session
    from properties.campaign.driver import check_out_dir, describe, run_campaign
    from properties.campaign.options import DEFAULT_MASTER, CampaignError, make_plan
    from properties.campaign.runners import check_master, is_spark_master

    error = "kraftcheck campaign: error:"
    try:
        plan = make_plan(seeds=args.seeds, minutes=args.minutes, scope=args.scope, faults=args.faults,
                         mutant=args.mutant, steps=args.steps, runbook=args.runbook,
                         partition_size=args.partition_size, engine=args.engine, machine=args.machine,
                         shrink_seconds=args.shrink_seconds, out=args.out, quiet_steps=args.quiet_steps,
                         steer=args.steer, wave=args.wave, configs=args.configs)
        master = args.master or spark_session.submitted_master() or DEFAULT_MASTER
        check_out_dir(plan, args.resume)
        if is_spark_master(master):
            master = spark_session.spark_master(check_master(master))
            try:
                spark_session.check_reachable(master)
            except ValueError as e:
                raise CampaignError(str(e)) from None
    except CampaignError as e:
        print(f"{error} {e}", file=sys.stderr)
        return USAGE
    show = not args.json and sys.stderr.isatty()
    try:
        summary = run_campaign(plan, master, resume=args.resume, show_progress=show)
    except spark_session.SparkStartError as e:
        print(f"{error} {e}", file=sys.stderr)
        return USAGE
    except KeyboardInterrupt:
        print(f"kraftcheck campaign: interrupted; the same command with --resume continues it in {plan.out}",
              file=sys.stderr)
        return 130
    if args.json:
        print(json.dumps(summary, indent=2, ensure_ascii=False))
    else:
        print(describe(summary))
    return VIOLATION if summary["violations"] or summary.get("no_progress") else CLEAN


class _progress:
    """A rich progress line on stderr while a search runs (silent with --json or off a terminal)."""

    def __init__(self, args: argparse.Namespace, label: str) -> None:
        self.enabled = not getattr(args, "json", False) and sys.stderr.isatty()
        self.label = label
        self.progress = None

    def __enter__(self):
        if not self.enabled:
            return None
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), transient=True)
        self.progress.start()
        task = self.progress.add_task(self.label)

        started = time.monotonic()

        def report(result) -> None:
            rate = result.distinct_states / max(time.monotonic() - started, 1e-9)
            self.progress.update(
                task, description=f"{self.label}: depth {result.depth}, {result.distinct_states:,} states "
                f"({rate:,.0f}/s), {getattr(result, 'frontier', 0):,} in the frontier",
            )

        return report

    def __exit__(self, *exc) -> None:
        if self.progress is not None:
            self.progress.stop()


_PROFILE_HELP = "whose rules where the seeds and shipped Kafka differ: kip (default) or kafka-3.9"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="kraftcheck", description="Check the design of Kafka's metadata control plane.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("invariants", help="list the invariant registry")
    p.add_argument("--json", action="store_true", help="print a JSON list of {name, kind, meaning, source}")
    p.set_defaults(run=cmd_invariants)

    p = sub.add_parser("scopes", help="list the named scopes")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_scopes)

    p = sub.add_parser("explore", help="explore a scope breadth-first, checking every step")
    p.add_argument("--scope", type=_scope, required=True)
    p.add_argument("--depth", type=_positive, default=None, help="stop after this many levels (default: all)")
    p.add_argument("--max-states", type=_positive, default=None, help="stop after this many distinct states")
    p.add_argument("--bug", type=_bug, action="append", help="switch a seeded bug on (repeatable)")
    p.add_argument("--profile", type=_profile, default=Profile.KIP, help=_PROFILE_HELP)
    p.add_argument(
        "--symmetry", action="store_true", help="count states that differ only by interchangeable controllers' ids once"
    )
    p.add_argument("--traces", metavar="DIR", type=_writable_folder,
                   help="write each shortest counterexample as a trace file in DIR, for `replay` and `pin`")
    p.add_argument(
        "--workers", type=_workers, default=1, metavar="N",
        help="search on N processes, the seen-set split between them (0: one per core; default 1: the serial "
             "engine); same counts and counterexamples",
    )
    p.add_argument("--master", type=_explore_master,
                   help="search on Spark (local[N], local[*], spark://HOST:PORT), the states partitioned by "
                        "fingerprint; same counts and counterexamples (not with --workers)")
    p.add_argument("--checkpoint", metavar="DIR",
                   help="with --master: keep every finished level in DIR (a path every executor sees); the same "
                        "command on a DIR holding finished levels resumes from the last")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_explore)

    p = sub.add_parser("simulate", help="a long seeded random walk through a scope")
    p.add_argument("--scope", type=_scope, required=True)
    p.add_argument("--seed", type=_non_negative, required=True)
    p.add_argument("--steps", type=_positive, required=True)
    p.add_argument("--bug", type=_bug, action="append", help="switch a seeded bug on (repeatable)")
    p.add_argument("--profile", type=_profile, default=Profile.KIP, help=_PROFILE_HELP)
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_simulate)

    p = sub.add_parser("liveness", help="eventually-properties under weak fairness of the healing actions (lassos)")
    p.add_argument("--scope", type=_scope, required=True)
    p.add_argument("--depth", type=_positive, default=None, help="stop after this many levels (then: inconclusive)")
    p.add_argument("--max-states", type=_positive, default=None, help="stop after this many distinct states")
    p.add_argument("--property", type=_eventually, action="append", help="check only this property (repeatable)")
    p.add_argument("--bug", type=_bug, action="append", help="switch a seeded bug on (repeatable)")
    p.add_argument("--profile", type=_profile, default=Profile.KIP, help=_PROFILE_HELP)
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_liveness)

    p = sub.add_parser("mutants", help="run every seeded bug through the checks (the seeded-bug score)")
    p.add_argument("--bug", type=_any_bug, action="append", help="run only this seeded bug (repeatable)")
    p.add_argument("--list", action="store_true", help="list the seeded bugs and exit")
    p.add_argument(
        "--check", choices=("explore", "liveness", "hypothesis", "z3", "differential", "shared"), action="append",
        help="run these checks, in this order (repeatable; default: explore, liveness, differential, shared)",
    )
    p.add_argument(
        "--json", action="store_true", help="print a JSON list of {name, layer, invariant, caught_by, seconds}"
    )
    p.set_defaults(run=cmd_mutants)

    p = sub.add_parser(
        "prove", help="z3: BMC, induction per (action, invariant), any number of brokers and of KRaft controllers"
    )
    p.add_argument("--depth", type=_positive, default=20, help="BMC depth (default 20)")
    p.add_argument(
        "--bug", type=_bug, action="append", help="switch a seeded bug on (repeatable; bugs a z3 encoding switches)"
    )
    p.add_argument(
        "--property", action="append", metavar="NAME",
        help="only this property's BMC and induction obligations (repeatable): every invariant and lemma is assumed "
             "as in the whole run, which proves the lemmas too",
    )
    p.add_argument("--json", action="store_true", help="print a JSON list of {name, brokers, result, seconds}")
    p.set_defaults(run=cmd_prove)

    p = sub.add_parser("replay", help="replay a trace file (model or differential), checking every step")
    p.add_argument("file")
    p.add_argument("--json", action="store_true", help="print a JSON object, the Mermaid diagram included")
    p.add_argument("--mermaid", action="store_true", help="print only the Mermaid sequence diagram")
    p.set_defaults(run=cmd_replay)

    p = sub.add_parser("scenario", help="run scenario files (commands and expected output) against the model")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--rewrite", action="store_true", help="write the model's outputs into the files as expected")
    p.add_argument("--impl", action="store_true",
                   help="also perform every step by the implementation, checked against the model after each")
    p.add_argument("--kafka", action="store_true",
                   help="also run each file, a file of an operator's steps, on a real Kafka cluster on 127.0.0.1")
    p.add_argument("--version", help="with --kafka: the Kafka release (default 3.9.2; 3.4.0 to 3.9.x)")
    p.set_defaults(run=cmd_scenario)

    p = sub.add_parser("pin", help="turn a trace file or a failing seed (run, shrunk) into tests/regressions/NAME.json")
    p.add_argument("file", nargs="?", help="a trace file (model or differential)")
    p.add_argument("--seed", type=_non_negative, help="a simulator seed that fails: run, shrink and pin it")
    p.add_argument("--scope", help="with --seed: a simulator scenario or model scope (default sim-migration)")
    p.add_argument("--faults", help="with --seed: the fault mix (default all)")
    p.add_argument("--mutant", type=_any_bug,
                   help="with --seed: a seeded bug of either layer or of both (default none)")
    p.add_argument("--steps", type=_positive, help="with --seed: events to run (default 2000)")
    p.add_argument("--runbook", choices=("finalize", "rollback", "none", "mixed"),
                   help="with --seed: the operator's runbook (default mixed: every 4th seed rolls back)")
    p.add_argument("--quiet-steps", type=_non_negative,
                   help="with --seed: events of quiet continuation at the end of the run "
                        "(default a quarter of --steps)")
    p.add_argument("--aims", help="with --seed: the faults the run aimed, as a campaign's runs table lists them "
                                  "(STATE|fault, comma-separated)")
    p.add_argument("--configs", help="with --seed: drawn (a cluster configuration drawn from the seed, as a campaign "
                                     "draws it) or fixed (the scope as named) (default drawn)")
    p.add_argument("--name", help="the file name in --dir (default: the trace file's, or MUTANT-SCOPE-seedN)")
    p.add_argument("--dir", help="where pinned traces live (default: tests/regressions of the kraftcheck checkout in "
                                 "the working directory)")
    p.add_argument("--shrink-seconds", type=_positive, default=120, help="time budget of the shrinking (default 120)")
    p.set_defaults(run=cmd_pin)

    p = sub.add_parser(
        "campaign", help="a fuzzing campaign on Spark: seeded simulations checked against the model, a report"
    )
    _add_campaign_arguments(p, _positive)
    p.set_defaults(run=cmd_campaign)

    p = sub.add_parser("manifest", help="check (or --write) the pinned state counts of every scope")
    p.add_argument("--write", action="store_true", help="pin the counts measured now")
    p.add_argument("--file", help="the manifest to check or write (default: the installed one to check; "
                                  "properties/manifest.json of the kraftcheck checkout in the working directory to "
                                  "write)")
    p.set_defaults(run=cmd_manifest)

    p = sub.add_parser("docs", help="regenerate the site's generated pages (docs/invariants.md, ...) from the model")
    p.add_argument("--check", action="store_true", help="only check that the committed pages are up to date")
    p.add_argument("--dir", help="where the pages go (default: docs/ of the kraftcheck checkout in the working "
                                 "directory; --check without it: that, or the installed pages)")
    p.add_argument("--seeds", metavar="DIR",
                   help="first read the seeds' section headings again, from the seed texts in DIR, into "
                        "properties/kip_sections.json of the checkout in the working directory (with --check: compare)")
    p.set_defaults(run=cmd_docs)

    from properties.kafka.cli import add_commands as add_kafka_commands

    add_kafka_commands(sub, _Parser)

    p = sub.add_parser("report", help="regenerate a campaign's report.html from the tables in its directory")
    p.add_argument("dir", help="the campaign's --out directory")
    p.set_defaults(run=cmd_report)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except BrokenPipeError:  # `kraftcheck ... | head` closed stdout early: not an error
        sys.stderr.close()
        return CLEAN
    except KeyboardInterrupt:
        print(f"kraftcheck {args.command}: interrupted", file=sys.stderr)
        return INTERRUPTED
    except Exception as err:  # noqa: BLE001 - a crash must not exit 1, which reads as a finding
        return _internal_error(args.command, err)


def _internal_error(command: str, err: BaseException) -> int:
    """One line naming the error (the traceback too with KRAFTCHECK_DEBUG=1); exit ``INTERNAL``."""
    if os.environ.get("KRAFTCHECK_DEBUG"):
        import traceback

        traceback.print_exception(err, file=sys.stderr)
    reason = (str(err).strip().splitlines() or [""])[0]
    print(f"kraftcheck {command}: internal error: {type(err).__name__}{': ' + reason if reason else ''} "
          "(a bug in kraftcheck, not a finding; KRAFTCHECK_DEBUG=1 shows the traceback)", file=sys.stderr)
    return INTERNAL


if __name__ == "__main__":
    raise SystemExit(main())
