"""Shrinking a failing real run: the reduction logic, driven by fake runs (no cluster starts here).

A fake runner stands for a real cluster: it says which checks a plan's run broke, by a rule the
test chooses, and may fail to reproduce on some runs (real runs vary). tests/test_kafka_real.py
shrinks a real run.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from properties.cli import main
from properties.kafka import campaign as campaign_module
from properties.kafka.install import Installation
from properties.kafka.run import FaultPlan, RealRunPlan, plan_from_json, plan_json
from properties.kafka.shrink import (
    SHRINK_LOG,
    SHRUNK_PLAN,
    Outcome,
    ddmin,
    shrink,
    shrink_folder,
    step_names,
    workload_candidates,
)

KAFKA = Installation("3.9.2", Path("/nonexistent"))
STEPS = step_names(KAFKA)
KILL_BROKER = FaultPlan("roll-broker-1-migrating", 1.0, "kill-broker", 1, 3.0)
KILL_CONTROLLER = FaultPlan("start-controllers", 0.5, "kill-controller", 0, 2.0)
PAUSE_BROKER = FaultPlan("roll-broker-0-kraft", 2.0, "pause-broker", 2, 8.0)
OUTAGE = FaultPlan("write-during-dual-write", 0.0, "zk-outage", 0, 4.0)
FAILING = RealRunPlan(
    seed=4,
    runbook="finalize",
    faults="all",
    fault_count=4,
    schedule=(KILL_CONTROLLER, KILL_BROKER, OUTAGE, PAUSE_BROKER),
)


class FakeRuns:
    """Runs that break ``invariant`` when ``breaks(plan)``; each run's number in ``misses`` fails to reproduce."""

    def __init__(self, breaks, invariant="AcknowledgedWritesSurvive", misses=(), seconds=60.0):
        self.breaks, self.invariant, self.misses, self.seconds = breaks, invariant, set(misses), seconds
        self.plans: list[RealRunPlan] = []
        self.now = 0.0

    def __call__(self, plan: RealRunPlan, label: str) -> Outcome:
        self.plans.append(plan)
        self.now += self.seconds
        if len(self.plans) in self.misses or not self.breaks(plan):
            return Outcome(frozenset({"RunbookReachesItsEnd"}) if len(self.plans) % 2 else frozenset())
        return Outcome(frozenset({self.invariant}))

    def clock(self) -> float:
        return self.now


def test_ddmin_finds_the_two_faults_that_together_fail():
    """Delta debugging (Zeller and Hildebrandt 2002) keeps the two of six faults whose pair fails, and nothing
    else: 1-minimal, each dropped alone no longer fails."""
    seen = []

    def fails(subset):
        seen.append(subset)
        return {2, 5} <= set(subset)

    assert ddmin((0, 1, 2, 3, 4, 5), fails) == (2, 5)
    assert seen[0] == ()  # no faults at all is tried first: a finding that needs none is the shortest
    assert ddmin((7,), lambda s: s == (7,)) == (7,)
    assert ddmin((7, 8), lambda s: True) == ()


def test_shrink_drops_the_faults_and_the_workload_the_violation_does_not_need():
    """A lost write that needs only a broker killed while it rolls into migration mode, on a cluster of two
    brokers or more, with the client writing: the other three faults go, the runbook shortens to dual write,
    the optional write during dual write goes and so does one broker; the client stays, since without its
    writes the check has nothing to find."""
    runs = FakeRuns(lambda p: KILL_BROKER in (p.schedule or ()) and p.brokers >= 2 and p.client)
    state = shrink(FAILING, "AcknowledgedWritesSurvive", runs, STEPS, clock=runs.clock, budget_s=10_000)
    best = state.best
    assert best.schedule == (KILL_BROKER,)
    assert (best.runbook, best.brokers, best.client, best.skip) == ("dual-write", 2, True, ("write-during-dual-write",))
    assert state.finished
    assert len(STEPS(best)) < len(STEPS(FAILING))
    # every candidate that did not fail was run twice before it was dropped, every kept one once
    assert all(a.runs == (1 if a.reproduced else 2) for a in state.attempts)
    assert len(runs.plans) == state.runs == len(set(runs.plans)) + sum(not a.reproduced for a in state.attempts)


def test_shrink_keeps_only_candidates_that_break_the_same_check():
    """A candidate whose run breaks another check (here RunbookReachesItsEnd, on odd runs) is not a reproduction."""
    runs = FakeRuns(lambda p: False)
    state = shrink(FAILING, "AcknowledgedWritesSurvive", runs, STEPS, clock=runs.clock, budget_s=10_000)
    assert state.best == FAILING
    assert not any(a.reproduced for a in state.attempts)


def test_shrink_judges_a_flaky_candidate_by_its_second_run():
    """Real runs vary: a candidate that fails on its second run is kept; with one try it would have been dropped."""
    rule = lambda p: KILL_BROKER in (p.schedule or ())  # noqa: E731
    runs = FakeRuns(rule, misses={3})  # runs 1 and 2: no faults (never fails); run 3: the first half, missed
    state = shrink(FAILING, "AcknowledgedWritesSurvive", runs, STEPS, clock=runs.clock, tries=2, budget_s=10_000)
    assert state.best.schedule == (KILL_BROKER,)
    half = state.attempts[1]
    assert half.reproduced and half.runs == 2
    once = FakeRuns(rule, misses={2})  # tries=1: run 1 no faults, run 2 the first half, missed
    state = shrink(FAILING, "AcknowledgedWritesSurvive", once, STEPS, clock=once.clock, tries=1, budget_s=10_000)
    assert not state.attempts[1].reproduced  # the same miss, judged on one run, drops the half


def test_shrink_stops_at_its_budget_with_the_best_plan_so_far():
    """No run starts once the wall-time budget is spent; what was kept by then is the result, and said to be partial."""
    kept = []
    runs = FakeRuns(lambda p: KILL_BROKER in (p.schedule or ()), seconds=60.0)
    state = shrink(
        FAILING,
        "AcknowledgedWritesSurvive",
        runs,
        STEPS,
        clock=runs.clock,
        budget_s=250,
        keep=lambda s: kept.append(s.best),
    )
    assert not state.finished
    assert runs.now <= 250 + 60  # a run under way when the budget ran out finished; none started after
    assert state.best.schedule is not None and KILL_BROKER in state.best.schedule
    assert len(state.best.schedule) < len(FAILING.schedule)
    assert kept[-1] == state.best


def test_workload_candidates_keep_every_fault_runnable():
    """A shorter runbook is offered only if it has every fault's step; a broker fewer only if no fault targets
    the broker that goes."""
    plan = replace(FAILING, schedule=(PAUSE_BROKER,))  # broker 2, while it rolls to KRaft
    changes = [c for c, _ in workload_candidates(plan, STEPS)]
    assert "runbook finalize -> dual-write" not in changes and "runbook finalize -> kraft-brokers" in changes
    assert not any(c.startswith("brokers") for c in changes)
    assert "no client writes" in changes and "skip write-during-dual-write" in changes
    three = replace(plan, controllers=3, schedule=())
    assert "controllers 3 -> 1" in [c for c, _ in workload_candidates(three, STEPS)]


def test_a_plan_file_round_trips_and_fixes_the_faults():
    """The replayable plan names its faults: read back, it runs exactly them, whatever the seed would draw."""
    plan = replace(FAILING, skip=("write-during-dual-write",), client=False)
    again = plan_from_json(json.loads(json.dumps(plan_json(plan, "3.9.2"))))
    assert again == plan
    # a run.json written before plans carried skip and client is a plan too, its faults those it ran
    old = {
        "plan": {
            "seed": 1,
            "runbook": "dual-write",
            "faults": "process",
            "brokers": 3,
            "controllers": 1,
            "fault_count": 1,
        },
        "kafka": "3.9.2",
        "faults": [json.loads(json.dumps(KILL_BROKER.__dict__))],
    }
    assert plan_from_json(old).schedule == (KILL_BROKER,)


def test_the_zookeeper_stall_is_drawn_and_strikes_the_server():
    """--faults all draws a stall of ZooKeeper's server (seed 2: at the dual-write step, where it loses a dual write
    on 3.9.2, docs/guide/real-kafka.md Findings); like an outage it strikes the one server, whatever its target."""
    from properties.kafka.run import Run, plan_problem, schedule_faults

    plan = RealRunPlan(seed=2, runbook="dual-write", faults="all")
    steps = [n for n, _ in Run(plan, KAFKA, Path("/nonexistent")).steps()]
    (stall,) = schedule_faults(plan, steps)
    assert (stall.kind, stall.step) == ("pause-zookeeper", "write-during-dual-write")
    assert stall.duration_s > 6.0  # past the session timeout: every session expires when it resumes
    assert plan_problem(replace(plan, schedule=(replace(stall, target=9),)), steps) is None
    assert "targets 9" in plan_problem(replace(plan, schedule=(replace(stall, kind="pause-broker", target=9),)), steps)
    assert "pause-zookeeper" not in {f.kind for s in range(40) for f in schedule_faults(replace(plan, seed=s,
                                                                                              faults="process"), steps)}


def _failing_folder(folder: Path, plan: RealRunPlan = FAILING, invariant: str = "AcknowledgedWritesSurvive") -> Path:
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({**plan_json(plan, "3.9.2"), "lib": "/nonexistent"}))
    verdict = [{"invariant": invariant, "message": "write 3 lost", "evidence": []}] if invariant else []
    (folder / "violations.json").write_text(json.dumps(verdict))
    return folder


def test_shrink_folder_writes_a_replayable_plan(tmp_path):
    """The shrunk plan lands in the run's folder, next to what was tried, and reads back as a plan."""
    folder = _failing_folder(tmp_path / "run")
    runs = FakeRuns(lambda p: KILL_BROKER in (p.schedule or ()))
    state = shrink_folder(folder, runner=runs, kafka=KAFKA, budget_s=10_000)
    shrunk = plan_from_json(json.loads((folder / SHRUNK_PLAN).read_text()))
    assert shrunk == state.best and shrunk.schedule == (KILL_BROKER,)
    log = json.loads((folder / SHRINK_LOG).read_text())
    assert log["invariant"] == "AcknowledgedWritesSurvive" and log["finished"]
    assert log["original"]["size"]["faults"] == 4 and log["shrunk"]["size"]["faults"] == 1
    assert log["runs"] == len(runs.plans)


@pytest.mark.parametrize(
    ("make", "extra", "complaint"),
    [
        (lambda t: (t / "empty").mkdir() or t / "empty", [], "is not a real-Kafka run's folder"),
        (lambda t: _failing_folder(t / "clean", invariant=""), [], "broke no check, nothing to shrink"),
        (lambda t: _failing_folder(t / "run"), ["--invariant", "ZxidStrictlyIncreases"], "did not break"),
        (lambda t: _failing_folder(t / "run"), ["--shrink-minutes", "0"], "expected minutes"),
        (lambda t: _failing_folder(t / "run"), ["--tries", "0"], "expected an integer from 1 to 10"),
    ],
)
def test_kafka_shrink_bad_input_is_one_line_and_exit_2(make, extra, complaint, tmp_path, capsys):
    """Not a run, a run that passed, a check it did not break, a bad budget: one line, exit 2, nothing run."""
    folder = make(tmp_path)
    with pytest.raises(SystemExit) if "expected" in complaint else _nothing() as raised:
        code = main(["kafka", "shrink", str(folder), *extra])
    code = raised.value.code if raised is not None else code
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and complaint in err[-1]
    assert not (folder / SHRUNK_PLAN).exists()


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


@pytest.mark.parametrize(
    ("content", "extra", "complaint"),
    [
        ("{", [], "not JSON"),
        ('{"plan": 3}', [], 'expected a JSON object with a "plan" object'),
        ('{"plan": {"seed": 1, "colour": "red"}}', [], "unknown key 'colour'"),
        ('{"plan": {"seed": 1, "runbook": "sideways"}}', [], "runbook 'sideways'"),
        ('{"plan": {"seed": 1, "skip": ["start-zookeeper"]}}', [], "cannot be skipped"),
        (
            '{"plan": {"seed": 1}, "faults": [{"step": "x", "delay_s": 0, "kind": "meteor", "target": 0, '
            '"duration_s": 1}]}',
            [],
            "unknown fault kind 'meteor'",
        ),
        (
            '{"plan": {"seed": 1, "runbook": "dual-write"}, "faults": [{"step": "roll-broker-0-kraft", "delay_s": 0, '
            '"kind": "kill-broker", "target": 0, "duration_s": 1}]}',
            [],
            "a step runbook dual-write lacks",
        ),
        (
            '{"plan": {"seed": 1, "brokers": 2}, "faults": [{"step": "start-zk-brokers", "delay_s": 0, '
            '"kind": "kill-broker", "target": 2, "duration_s": 1}]}',
            [],
            "which a cluster of 2 lacks",
        ),
        ('{"plan": {"seed": 1}}', ["--seed", "3"], "--plan fixes the run's plan: leave out --seed"),
    ],
)
def test_kafka_run_plan_bad_input_is_one_line_and_exit_2(content, extra, complaint, tmp_path, capsys, monkeypatch):
    """A plan file that cannot be run is refused in one line before any process starts."""
    from properties.kafka import install

    monkeypatch.setattr(install, "install", lambda version, progress=None: KAFKA)
    path = tmp_path / "plan.json"
    path.write_text(content)
    out = tmp_path / "out"
    assert main(["kafka", "run", "--plan", str(path), "--out", str(out), *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and complaint in err[0]
    assert not out.exists()


def fake_real_run(plan: RealRunPlan, kafka, folder: Path) -> str:
    """A stand-in for a real run: a lost write whenever a broker is killed (the campaign test's way of faking)."""
    from properties.kafka.run import Run, plan_json, schedule_faults

    folder.mkdir(parents=True, exist_ok=True)
    faults = schedule_faults(plan, [n for n, _ in Run(plan, kafka, folder).steps()])
    (folder / "run.json").write_text(json.dumps(plan_json(replace(plan, schedule=tuple(faults)), "3.9.2")))
    lines = [{"channel": "operator", "kind": "end", "outcome": "completed", "seconds": 1.0, "time": 6}]
    if any(f.kind == "kill-broker" for f in faults):
        lines.insert(0, {"channel": "operator", "kind": "stuck", "goal": "dual-write", "time": 5})
    (folder / "operator.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return "completed"


# On Spark (26 s of a test worker, a JVM to start) under the slow marker; on one machine in every run.
@pytest.mark.parametrize("master", [None, pytest.param("local[2]", marks=pytest.mark.slow)])
def test_kafka_campaign_shrinks_its_violations_and_reports_both_plans(master, tmp_path):
    """A campaign whose run broke a check shrinks it on that run and shows the shrunk plan next to the original:
    on one machine, and with runs and shrinks as Spark tasks."""
    plan = RealRunPlan(seed=0, runbook="finalize", faults="process", fault_count=2)
    # seed 1 draws a broker pause while broker 0 rolls to KRaft and a kill of broker 0 while broker 2 does
    said: list[str] = []
    runs, violations = campaign_module.campaign(
        plan, KAFKA, tmp_path, 2, None, master, say=said.append, shrink_minutes=5, tries=2, execute=fake_real_run
    )
    assert [(v["seed"], v["invariant"]) for v in violations] == [(1, "RunbookReachesItsEnd")]
    assert any(line.startswith("seed-1 RunbookReachesItsEnd shrunk: faults 2 -> 1") for line in said), said
    folder = tmp_path / "runs" / "seed-1"
    shrunk = plan_from_json(json.loads((folder / SHRUNK_PLAN).read_text()))
    assert [f.kind for f in shrunk.schedule] == ["kill-broker"]
    assert "faults 2 -> 1" in violations[0]["shrunk"]
    report = (tmp_path / "report.html").read_text()
    assert "original plan" in report and "shrunk plan" in report and "--plan" in report
    # resumed: the check shrunk before is not shrunk again
    before = (folder / SHRINK_LOG).read_text()
    campaign_module.campaign(
        plan, KAFKA, tmp_path, 2, None, master, say=lambda line: None, shrink_minutes=5, execute=fake_real_run
    )
    assert (folder / SHRINK_LOG).read_text() == before


def test_an_interrupted_shrink_keeps_the_best_plan_it_found(tmp_path):
    """Ctrl-C during a candidate's run (the run itself stops its cluster) leaves the best plan kept before it."""
    folder = _failing_folder(tmp_path / "run")
    runs = FakeRuns(lambda p: KILL_BROKER in (p.schedule or ()))

    def interrupted(plan, label):
        if len(runs.plans) == 3:  # no faults twice, then the first half kept; interrupted on the fourth run
            raise KeyboardInterrupt
        return runs(plan, label)

    with pytest.raises(KeyboardInterrupt):
        shrink_folder(folder, runner=interrupted, kafka=KAFKA, budget_s=10_000)
    kept = plan_from_json(json.loads((folder / SHRUNK_PLAN).read_text()))
    assert kept.schedule == (KILL_CONTROLLER, KILL_BROKER)
    assert not json.loads((folder / SHRINK_LOG).read_text())["finished"]
