"""Every kind of bad input the command line meets, fed to it the way a user would: each is one line on
stderr naming what is wrong, exit 2, nothing on stdout, and nothing written (the working directory,
the pinned regressions and the docs are as they were). A crash is exit 4, never 1 (a finding).

The cases are cheap: each is refused before any search, simulation or Spark start, so the whole
table runs in seconds. ``{tmp}`` in an argument is the test's working directory; ``{FILE}`` names a
file a case's setup writes there (``FILES``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from properties.campaign.options import make_plan
from properties.campaign.tables import PLAN_FILE, write_table
from properties.cli import INTERNAL, USAGE, main

ROOT = Path(__file__).resolve().parent.parent
REGRESSION = ROOT / "tests" / "regressions" / "impl_vote_ignores_log-sim-migration-seed0.json"

# A model trace that reproduces its recorded violation in 5 steps (ControllerSeesEveryBounce with the bug).
MODEL_TRACE = {
    "schema": "kraftcheck-trace", "version": 1, "scope": "bounce", "profile": "kip",
    "bugs": ["broker_change_ignores_czxid"], "violation": "ControllerSeesEveryBounce", "seed": None,
    "actions": [{"kind": "StopBroker", "broker": 1}, {"kind": "RestartBroker", "broker": 1},
                {"kind": "OpenSession", "broker": 1}, {"kind": "RegisterBroker", "broker": 1},
                {"kind": "ProcessBrokerChange", "controller": 0}],
}


def _trace(**changes) -> str:
    return json.dumps({**MODEL_TRACE, **changes})


def _differential(**changes) -> str:
    return json.dumps({**json.loads(REGRESSION.read_text()), **changes})


def _campaign_plan(tmp: Path) -> None:
    plan = make_plan(seeds=1, steps=20, out=tmp / "done")
    (tmp / "done").mkdir()
    (tmp / "done" / PLAN_FILE).write_text(json.dumps(plan.to_json()))


def _campaign_plan_damaged(tmp: Path) -> None:
    """A campaign.json whose steps are text and that holds an option no plan has."""
    (tmp / "damaged").mkdir()
    plan = make_plan(seeds=1, steps=20, out=tmp / "damaged").to_json()
    (tmp / "damaged" / PLAN_FILE).write_text(json.dumps({**plan, "steps": "twenty", "colour": "red"}))


def _report_dir_with_bad_table(tmp: Path) -> None:
    (tmp / "half").mkdir()
    for name in ("runs", "violations", "coverage"):
        (tmp / "half" / f"{name}.parquet").write_bytes(b"not parquet")


def _report_dir_unwritable(tmp: Path) -> None:
    """Readable tables, and report.html a directory: the page cannot be put in place."""
    out = tmp / "ro"
    out.mkdir()
    for name in ("runs", "violations", "coverage"):
        write_table(out / f"{name}.parquet", name, [])
    (out / "report.html").mkdir()


def _explore_run_of_another_search(tmp: Path) -> None:
    from properties.spark_explore import SpecRef, open_run

    open_run(tmp / "other_run", SpecRef("kraft-born"), 2)


FILES = {
    "not_json": lambda tmp: (tmp / "not_json").write_text("{not json"),
    "empty_file": lambda tmp: (tmp / "empty_file").write_text(""),
    "binary": lambda tmp: (tmp / "binary").write_bytes(b"\xff\xfe\x00garbage"),
    "a_list": lambda tmp: (tmp / "a_list").write_text("[]"),
    "wrong_schema": lambda tmp: (tmp / "wrong_schema").write_text(_trace(schema="other")),
    "version_9": lambda tmp: (tmp / "version_9").write_text(_trace(version=9)),
    "unknown_scope": lambda tmp: (tmp / "unknown_scope").write_text(_trace(scope="galaxy")),
    "unknown_action": lambda tmp: (tmp / "unknown_action").write_text(_trace(actions=[{"kind": "Teleport"}])),
    "unknown_bug": lambda tmp: (tmp / "unknown_bug").write_text(_trace(bugs=["no_such_bug"])),
    "no_steps": lambda tmp: (tmp / "no_steps").write_text(_trace(actions=[])),
    "negative_seed": lambda tmp: (tmp / "negative_seed").write_text(_trace(seed=-5)),
    "broker_7": lambda tmp: (tmp / "broker_7").write_text(
        _trace(actions=[{"kind": "StopBroker", "broker": 7}, *MODEL_TRACE["actions"][1:]])),
    "witness_violation": lambda tmp: (tmp / "witness_violation").write_text(_trace(violation="ControllerFailover")),
    "other_violation": lambda tmp: (tmp / "other_violation").write_text(_trace(violation="LeaderIsInIsr")),
    "diff_model_scope": lambda tmp: (tmp / "diff_model_scope").write_text(_differential(scope="bounce")),
    "diff_cut_99": lambda tmp: (tmp / "diff_cut_99").write_text(_differential(steps=[
        {**step, "cuts": [[0, 99]]} for step in json.loads(REGRESSION.read_text())["steps"]])),
    "diff_no_steps": lambda tmp: (tmp / "diff_no_steps").write_text(_differential(steps=[])),
    "diff_negative_seed": lambda tmp: (tmp / "diff_negative_seed").write_text(_differential(seed=-1)),
    "diff_unknown_impl_bug": lambda tmp: (tmp / "diff_unknown_impl_bug").write_text(_differential(impl_bugs=["x"])),
    "diff_handover_past": lambda tmp: (tmp / "diff_handover_past").write_text(_differential(handover={
        "at": 9999, "events": 10, "held": [], "rolling_back": False, "rolled_back": False, "progress": "none"})),
    "diff_handover_keys": lambda tmp: (tmp / "diff_handover_keys").write_text(_differential(handover={"when": 1})),
    "a_dir": lambda tmp: (tmp / "a_dir").mkdir(),
    "a_file": lambda tmp: (tmp / "a_file").write_text("x"),
    "other_run": _explore_run_of_another_search,
    "good_trace": lambda tmp: (tmp / "good_trace").write_text(_trace()),
    "pins": lambda tmp: (tmp / "pins").mkdir() or (tmp / "pins" / "taken.json").write_text("{}"),
    "done": _campaign_plan,
    "damaged": _campaign_plan_damaged,
    "half": _report_dir_with_bad_table,
    "parts_only": lambda tmp: (tmp / "parts_only" / "_parts").mkdir(parents=True),
    "ro": _report_dir_unwritable,
}

CASES = [
    # (argv, what the one line must contain)
    ([], "the following arguments are required: command"),
    (["frobnicate"], "invalid choice"),
    (["invariants", "--bogus"], "unrecognized arguments"),
    # kafka (each refused before any process starts or anything downloads)
    (["kafka"], "required: kafka_command"),
    (["kafka", "install", "--version", "2.8.0"], "has no ZooKeeper-to-KRaft migration"),
    (["kafka", "run", "--version", "three"], "is not of the form MAJOR.MINOR.PATCH"),
    (["kafka", "run", "--version", "4.1.1", "--runbook", "finalize"], "has no ZooKeeper mode"),
    (["kafka", "run", "--kafka-dir", "{tmp}/no-such-folder"], "not a folder"),
    (["kafka", "run", "--seed", "-1"], "expected an integer >= 0"),
    (["kafka", "run", "--controllers", "2"], "invalid choice"),
    (["kafka", "run", "--brokers", "9"], "expected an integer from 1 to 5"),
    (["kafka", "run", "--runbook", "sideways"], "invalid choice"),
    (["kafka", "run", "--faults", "some"], "invalid choice"),
    (["kafka", "check", "{tmp}/no-such-run"], "is not a real-Kafka run's folder"),
    (["kafka", "campaign", "--minutes", "inf"], "expected minutes between 0 and a week"),
    (["kafka", "campaign", "--seeds", "0"], "expected an integer from 1 to 100000"),
    (["kafka", "campaign", "--seeds", "2", "--minutes", "1"], "not allowed with argument"),
    # explore
    (["explore"], "required: --scope"),
    (["explore", "--scope", "bounce", "--traces", "/proc/kraftcheck-traces"], "--traces"),
    (["explore", "--scope", "nope"], "unknown scope 'nope'"),
    (["explore", "--scope", "bounce", "--depth", "0"], "expected a positive integer"),
    (["explore", "--scope", "bounce", "--depth", "-3"], "expected a positive integer"),
    (["explore", "--scope", "bounce", "--depth", "deep"], "expected a positive integer"),
    (["explore", "--scope", "bounce", "--max-states", "0"], "expected a positive integer"),
    (["explore", "--scope", "bounce", "--workers", "-1"], "expected a number of processes >= 0"),
    (["explore", "--scope", "bounce", "--workers", "all"], "expected a number of processes >= 0"),
    (["explore", "--scope", "bounce", "--bug", "no_such_bug"], "unknown seeded bug 'no_such_bug'"),
    (["explore", "--scope", "bounce", "--bug", "impl_vote_ignores_log"], "unknown seeded bug"),
    (["explore", "--scope", "rollback", "--profile", "kafka-4.0"], "unknown profile 'kafka-4.0'"),
    (["explore", "--scope", "bounce", "extra"], "unrecognized arguments"),
    (["explore", "--scope", "bounce", "--master", "local[0]"], "bad master"),
    (["explore", "--scope", "bounce", "--master", "mainframe"], "bad master"),
    (["explore", "--scope", "bounce", "--master", "local[2]", "--workers", "2"], "--master and --workers"),
    (["explore", "--scope", "bounce", "--checkpoint", "{tmp}/run"], "it needs --master"),
    (["explore", "--scope", "bounce", "--master", "spark://127.0.0.1:1"], "cannot reach the Spark master"),
    (["explore", "--scope", "bounce", "--master", "local[1]", "--checkpoint", "{other_run}"],
     "holds another search (scope kraft-born"),
    (["explore", "--scope", "bounce", "--master", "local[1]", "--checkpoint", "{a_file}"],
     "is a file, not a directory"),
    # simulate
    (["simulate", "--scope", "cluster", "--seed", "x", "--steps", "5"], "expected an integer >= 0"),
    (["simulate", "--scope", "cluster", "--seed", "-1", "--steps", "5"], "expected an integer >= 0"),
    (["simulate", "--scope", "cluster", "--seed", "1", "--steps", "0"], "expected a positive integer"),
    (["simulate", "--scope", "cluster", "--seed", "1"], "required: --steps"),
    (["simulate", "--scope", "galaxy", "--seed", "1", "--steps", "5"], "unknown scope"),
    (["simulate", "--scope", "cluster", "--seed", "1", "--steps", "5", "--bug", "nope"], "unknown seeded bug"),
    # liveness
    (["liveness", "--scope", "handover", "--property", "LeaderIsInIsr"], "unknown eventually property"),
    (["liveness", "--scope", "handover", "--property", "NoSuchThing"], "unknown eventually property"),
    (["liveness", "--scope", "handover", "--depth", "0"], "expected a positive integer"),
    (["liveness", "--scope", "nope"], "unknown scope"),
    # mutants, prove
    (["mutants", "--bug", "nope"], "unknown seeded bug"),
    (["mutants", "--check", "fuzz"], "invalid choice"),
    (["prove", "--depth", "0"], "expected a positive integer"),
    (["prove", "--bug", "accept_stale_broker_epoch"], "does not switch accept_stale_broker_epoch"),
    (["prove", "--bug", "nope"], "unknown seeded bug"),
    # replay
    (["replay"], "required: file"),
    (["replay", "{tmp}/missing.json"], "cannot read"),
    (["replay", "{a_dir}"], "cannot read"),
    (["replay", "{not_json}"], "not JSON"),
    (["replay", "{empty_file}"], "not JSON"),
    (["replay", "{binary}"], "not UTF-8"),
    (["replay", "{a_list}"], "expected a JSON object"),
    (["replay", "{wrong_schema}"], "schema is"),
    (["replay", "{version_9}"], "version is 9"),
    (["replay", "{unknown_scope}"], "unknown scope"),
    (["replay", "{unknown_action}"], "unknown action kind 'Teleport'"),
    (["replay", "{unknown_bug}"], "unknown seeded bug"),
    (["replay", "{no_steps}"], "the trace has no steps"),
    (["replay", "{negative_seed}"], "seed: expected an integer >= 0"),
    (["replay", "{broker_7}"], "broker 7 is not in scope bounce"),
    (["replay", "{witness_violation}"], "is not an ALWAYS or TRANSITION property"),
    (["replay", "{diff_model_scope}"], "KRaft controller 3000 is not in scope bounce"),
    (["replay", "{diff_no_steps}"], "the trace has no steps"),
    (["replay", "{diff_cut_99}"], "steps[0].cuts[0]: node 99 is not in scope sim-migration"),
    (["replay", "{diff_negative_seed}"], "seed: expected an integer >= 0"),
    (["replay", "{diff_unknown_impl_bug}"], "impl_bugs: unknown seeded bug"),
    (["replay", "{diff_handover_past}"], "handover.at: 9999 is past the trace's"),
    (["replay", "{diff_handover_keys}"], "unknown key 'when'"),
    (["replay", "{not_json}", "--json"], "not JSON"),
    (["replay", "{broker_7}", "--mermaid"], "broker 7 is not in scope bounce"),
    # pin
    (["pin"], "give a trace FILE or --seed N"),
    (["pin", "{good_trace}", "--seed", "1"], "give a trace FILE or --seed N (not both)"),
    (["pin", "{good_trace}", "--scope", "bounce"], "go with --seed"),
    (["pin", "{good_trace}", "--name", "../escape"], "--name"),
    (["pin", "{good_trace}", "--name", ".hidden"], "--name"),
    (["pin", "{good_trace}", "--dir", "{pins}", "--name", "taken"], "exists: choose another --name"),
    (["pin", "{no_steps}", "--dir", "{tmp}/pins"], "the trace has no steps"),
    (["pin", "{broker_7}", "--dir", "{tmp}/pins"], "broker 7 is not in scope bounce"),
    (["pin", "{diff_model_scope}", "--dir", "{tmp}/pins"], "not in scope bounce"),
    (["pin", "{other_violation}", "--dir", "{tmp}/pins"], "does not reproduce with its seeded bugs"),
    (["pin", "{not_json}", "--dir", "{tmp}/pins"], "not JSON"),
    (["pin", "{good_trace}", "--dir", "{a_file}/pins"], "--dir"),
    (["pin", "--seed", "0", "--dir", "/proc/kraftcheck-pins"], "--dir /proc/kraftcheck-pins: cannot create or write"),
    (["pin", "--seed", "-1"], "expected an integer >= 0"),
    (["pin", "{good_trace}"], "is not a kraftcheck checkout"),
    (["pin", "{good_trace}", "--name", "", "--dir", "{tmp}/pins"], "--name ''"),
    (["pin", "{good_trace}", "--dir", ""], "--dir: expected a path"),
    (["pin", "--seed", "1", "--scope", "galaxy", "--dir", "{tmp}/pins"], "unknown scope"),
    (["pin", "--seed", "1", "--faults", "lightning", "--dir", "{tmp}/pins"], "unknown fault mix"),
    (["pin", "--seed", "1", "--faults", "swarm+swarm", "--dir", "{tmp}/pins"], "names 'swarm' twice"),
    (["pin", "--seed", "1", "--mutant", "nope"], "unknown seeded bug"),
    (["pin", "--seed", "1", "--steps", "0"], "expected a positive integer"),
    (["pin", "--seed", "1", "--runbook", "panic"], "invalid choice"),
    (["pin", "--seed", "1", "--shrink-seconds", "0"], "expected a positive integer"),
    (["pin", "--seed", "1", "--aims", "NOWHERE|drop", "--dir", "{tmp}/pins"], "bad aim 'NOWHERE|drop'"),
    (["pin", "--seed", "1", "--steps", "10", "--quiet-steps", "20", "--dir", "{tmp}/pins"], "--quiet-steps"),
    (["pin", "{good_trace}", "--aims", "DUAL_WRITE|drop"], "go with --seed"),
    # campaign: options
    (["campaign", "--seeds", "0"], "positive integer"),
    (["campaign", "--seeds", "many"], "positive integer"),
    (["campaign", "--seeds", "1" + "0" * 30], "at most 2,147,483,647"),
    (["campaign", "--minutes", "0"], "positive number"),
    (["campaign", "--minutes", "-1"], "positive number"),
    (["campaign", "--minutes", "inf"], "positive number"),
    (["campaign", "--minutes", "nan"], "positive number"),
    (["campaign", "--seeds", "2", "--minutes", "1"], "not allowed with"),
    (["campaign", "--steps", "100", "--quiet-steps", "101"], "--quiet-steps: expected an integer from 0 to --steps"),
    (["campaign", "--quiet-steps", "-1"], "expected an integer >= 0"),
    (["campaign", "--wave", "0"], "positive integer"),
    (["campaign", "--scope", "no-such-scope"], "unknown scope"),
    (["campaign", "--configs", "random"], "unknown --configs 'random'"),
    (["campaign", "--scope", "sim-migration@controllers=2,mv=3.4-IV0,ibps=3.4-IV0/3.4-IV0/3.4-IV0"],
     "bad configuration"),
    (["campaign", "--scope", "sim-migration@mv=3.4-IV0,colour=blue"], "bad configuration part 'colour=blue'"),
    (["pin", "--seed", "1", "--configs", "random"], "unknown --configs 'random'"),
    (["campaign", "--faults", "network+lightning"], "unknown fault mix"),
    (["campaign", "--faults", "swarm+swarm"], "names 'swarm' twice"),
    (["campaign", "--faults", "network+network"], "names 'network' twice"),
    (["campaign", "--faults", ""], "empty fault mix"),
    (["campaign", "--faults", "+"], "names '', an empty name"),
    (["campaign", "--faults", "network+"], "names '', an empty name"),
    (["campaign", "--out", "", "--master", "serial"], "--out: expected a directory"),
    (["campaign", "--faults", "drop=much"], "not a number"),
    (["campaign", "--faults", "drop=-1"], "not negative"),
    (["campaign", "--faults", "drop=inf"], "not a number"),
    (["campaign", "--faults", "thunder=1"], "bad fault setting"),
    (["campaign", "--mutant", "impl_no_such_bug"], "unknown seeded bug"),
    (["campaign", "--steps", "0"], "positive integer"),
    (["campaign", "--runbook", "panic"], "invalid choice"),
    (["campaign", "--partition-size", "0"], "positive integer"),
    (["campaign", "--engine", "quantum"], "invalid choice"),
    (["campaign", "--machine", "model"], "needs --engine hypothesis"),
    (["campaign", "--engine", "hypothesis", "--machine", "toaster"], "invalid choice"),
    (["campaign", "--shrink-seconds", "-1"], "number >= 0"),
    (["campaign", "--shrink-seconds", "inf"], "number >= 0"),
    # campaign: where it runs
    (["campaign", "--master", "local[0]"], "bad master"),
    (["campaign", "--master", "local[2,0]"], "F >= 2"),
    (["campaign", "--master", "local[2,1]"], "F >= 2"),
    (["campaign", "--master", "mainframe"], "bad master"),
    (["campaign", "--master", "processes[0]"], "bad master"),
    (["campaign", "--master", "spark://127.0.0.1:1", "--out", "{tmp}/out"], "cannot reach the Spark master"),
    (["campaign", "--master", "spark://no-such-host.invalid:7077", "--out", "{tmp}/out"],
     "cannot reach the Spark master"),
    # campaign: where it writes
    (["campaign", "--out", "{a_file}", "--master", "serial"], "is not a directory"),
    (["campaign", "--out", "{a_file}/under", "--master", "serial"], "is a file, not a directory"),
    (["campaign", "--out", "{a_file}/under/deeper", "--master", "local[1]"], "is a file, not a directory"),
    (["campaign", "--out", "/proc/kraftcheck-campaign", "--master", "serial"], "cannot create or write"),
    (["campaign", "--out", "{done}", "--master", "serial", "--seeds", "1", "--steps", "20"],
     "already holds a campaign"),
    (["campaign", "--out", "{done}", "--master", "serial", "--seeds", "1", "--steps", "30", "--resume"],
     "holds a campaign with other options ("),
    (["campaign", "--out", "{damaged}", "--master", "serial", "--seeds", "1", "--steps", "20", "--resume"],
     "campaign.json: not a campaign plan (unknown option 'colour')"),
    # report
    (["report"], "required: dir"),
    (["report", "{tmp}/nowhere"], "no such campaign directory"),
    (["report", "{a_dir}"], "no campaign tables"),
    (["report", "{parts_only}"], "the campaign did not finish"),
    (["report", "{half}"], "not a readable Parquet table"),
    (["report", "{ro}"], "cannot write"),
    # docs, manifest: never into the installed tree from elsewhere
    (["docs"], "is not a kraftcheck checkout"),
    (["docs", "--dir", "{a_file}"], "is not a directory"),
    (["docs", "--dir", ""], "--dir: expected a path"),
    (["docs", "--seeds", "{tmp}"], "is not a kraftcheck checkout"),
    (["docs", "--check", "--seeds", "{tmp}/nowhere"], "--seeds: cannot read"),
    (["manifest", "--write"], "is not a kraftcheck checkout"),
    (["manifest", "--file", "{tmp}/missing.json"], "no such file"),
    (["manifest", "--file", ""], "no such file"),
    (["manifest", "--write", "--file", ""], "--file: expected a path"),
    (["manifest", "--write", "--file", "{a_file}/manifest.json"], "is not a directory"),
]


def _snapshot(*roots: Path) -> dict[str, tuple[int, int] | None]:
    """Every path under the roots, with each file's size and time (a directory's own time moves when a probe file
    comes and goes in it: that is not a write)."""
    return {str(p): None if p.is_dir() else (p.stat().st_size, p.stat().st_mtime_ns) for root in roots
            if root.exists() for p in [root, *root.rglob("*")]}


def _argv(argv: list[str], tmp: Path) -> list[str]:
    names = {name: str(tmp / name) for name in FILES}
    return [a.format(tmp=tmp, **names) for a in argv]


@pytest.mark.parametrize("argv, complaint", CASES, ids=[" ".join(a) or "(none)" for a, _ in CASES])
def test_cli_bad_input_is_one_line_exit_two_and_nothing_written(argv, complaint, tmp_path, monkeypatch, capsys):
    """A user's mistake gets one line that names it, exit 2, and leaves every file as it was."""
    for name in FILES:
        if any("{" + name + "}" in a for a in argv):
            FILES[name](tmp_path)
    monkeypatch.chdir(tmp_path)  # not a kraftcheck checkout
    watched = (tmp_path, ROOT / "tests" / "regressions", ROOT / "docs", ROOT / "properties" / "manifest.json")
    before = _snapshot(*watched)
    try:
        code = main(_argv(argv, tmp_path))
    except SystemExit as exit_:
        code = exit_.code
    out, err = capsys.readouterr()
    assert code == USAGE and out == "", (code, out, err)
    assert err.count("\n") == 1 and err.startswith("kraftcheck") and complaint in err, err
    assert "Traceback" not in err
    assert _snapshot(*watched) == before


def test_cli_internal_error_is_one_line_and_exit_four_not_one(monkeypatch, capsys):
    """A crash inside a command is a bug in kraftcheck, not a finding: one line naming it and exit 4 (not 1, which
    a CI script reads as a violation found)."""
    from properties import explore

    def crash(*args, **kwargs):
        raise IndexError("tuple index out of range")

    monkeypatch.setattr(explore, "explore", crash)
    code = main(["explore", "--scope", "bounce"])
    out, err = capsys.readouterr()
    assert code == INTERNAL == 4 and out == ""
    assert err == ("kraftcheck explore: internal error: IndexError: tuple index out of range (a bug in kraftcheck, "
                   "not a finding; KRAFTCHECK_DEBUG=1 shows the traceback)\n")
    monkeypatch.setenv("KRAFTCHECK_DEBUG", "1")
    assert main(["explore", "--scope", "bounce"]) == INTERNAL
    assert "Traceback" in capsys.readouterr().err


def test_cli_replay_and_pin_cut_a_trace_at_its_violation(tmp_path, capsys):
    """A trace that goes on past its violation: replay's diagram and the pinned regression stop at that step."""
    long = {**MODEL_TRACE, "actions": MODEL_TRACE["actions"] * 40}
    path = tmp_path / "long.json"
    path.write_text(json.dumps(long))
    assert main(["replay", str(path), "--mermaid"]) == 1
    diagram = capsys.readouterr().out
    assert "5. " in diagram and "6. " not in diagram and "VIOLATION: breaks ControllerSeesEveryBounce" in diagram
    assert main(["pin", str(path), "--dir", str(tmp_path / "pins")]) == 0
    assert "5 steps" in capsys.readouterr().out
    assert len(json.loads((tmp_path / "pins" / "long.json").read_text())["actions"]) == 5


def test_cli_replay_of_a_trace_that_breaks_something_else_exits_one_and_says_so(tmp_path, capsys):
    """Exit 1 means the replay broke an invariant; the verdict says when it is not the recorded one, and pin
    refuses such a seeded trace naming what the replay did instead."""
    path = tmp_path / "other.json"
    path.write_text(_trace(violation="LeaderIsInIsr"))
    assert main(["replay", str(path)]) == 1
    assert "breaks ControllerSeesEveryBounce (not the recorded LeaderIsInIsr)" in capsys.readouterr().out
    assert main(["pin", str(path), "--dir", str(tmp_path / "pins")]) == USAGE
    assert "step 5 breaks ControllerSeesEveryBounce instead" in capsys.readouterr().err


def test_exit_codes_are_listed_in_the_readme():
    """The README's exit codes are the command's."""
    from properties.cli import EXIT_CODES

    readme = (ROOT / "README.md").read_text()
    for code in EXIT_CODES:
        assert f"{code} " in readme.split("Exit codes:")[1].split("\n\n")[0], code
