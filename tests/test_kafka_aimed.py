"""Faults aimed at a moment: a fault that waits for a line Kafka logs (a broker's unfencing, the migration driver's
next state) and strikes a given delay after it, instead of at a delay into its runbook step.

No cluster starts here: the logs are written by the test. tests/test_kafka_real.py runs real clusters.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from properties.cli import main
from properties.kafka import campaign as campaign_module
from properties.kafka.install import Installation
from properties.kafka.run import (
    RUNBOOKS,
    FaultPlan,
    PlanError,
    RealRunPlan,
    Run,
    aimable_cells,
    eligible_steps,
    moment_logged,
    parse_moment,
    plan_from_json,
    plan_json,
    schedule_faults,
    step_moments,
)

KAFKA = Installation("3.9.2", Path("/nonexistent"))
UNFENCED = "kraft-broker-running broker=2"
RUNNING_LINE = ("[BrokerLifecycleManager id=2 isZkBroker=true] The broker has been unfenced. Transitioning from "
                "RECOVERY to RUNNING. (kafka.server.BrokerLifecycleManager)")
OTHER_RUNNING_LINE = RUNNING_LINE.replace("id=2", "id=1")
# the fault that replays the aborted unfencing of 3.9.2 (docs/guide/real-kafka.md, Findings): the controller killed
# as the last ZooKeeper-mode broker is unfenced, while the migration's metadata transaction may still be open
KILL_AT_UNFENCING = FaultPlan("roll-broker-2-migrating", 0.0, "kill-controller", 0, 1.0, after=UNFENCED)


def _steps(plan: RealRunPlan) -> list[str]:
    return [name for name, _ in Run(plan, KAFKA, Path("/nonexistent")).steps()]


def _log(process, *lines: str, end: str = "\n") -> None:
    process.log.parent.mkdir(parents=True, exist_ok=True)
    with open(process.log, "a") as f:
        f.write("".join(f"[2026-11-29 13:58:{10 + i:02d},000] INFO {line}" + end for i, line in enumerate(lines)))


def test_a_moment_names_a_logged_decision_and_its_fields():
    assert parse_moment(UNFENCED) == ("kraft-broker-running", {"broker": "2"})
    assert parse_moment("migration-completed") == ("migration-completed", {})
    event = {"kind": "driver-transition", "node": "3000", "old": "BECOME_CONTROLLER", "new": "ZK_MIGRATION"}
    assert moment_logged("driver-transition new=ZK_MIGRATION", event)
    assert moment_logged("driver-transition", event)
    assert not moment_logged("driver-transition new=DUAL_WRITE", event)
    assert not moment_logged("raft-leader", event)


@pytest.mark.parametrize(
    "moment, complaint",
    [
        ("broker-unfenced broker=2", "unknown kind 'broker-unfenced'"),
        ("kraft-broker-running id=2", "kraft-broker-running has no field 'id' (its fields: broker)"),
        ("kraft-broker-running broker", "'broker' is not FIELD=VALUE"),
        ("kraft-broker-running broker=", "'broker=' is not FIELD=VALUE"),
    ],
)
def test_a_moment_that_cannot_be_logged_is_refused(moment, complaint):
    with pytest.raises(PlanError, match=complaint.replace("(", r"\(").replace(")", r"\)")):
        parse_moment(moment)


def test_an_aimed_plan_round_trips_and_a_plan_without_moments_reads_as_before():
    plan = RealRunPlan(seed=6, runbook="dual-write", schedule=(KILL_AT_UNFENCING,), aimed=True)
    assert plan_from_json(json.loads(json.dumps(plan_json(plan, "3.9.2")))) == plan
    old = {"plan": {"seed": 6}, "faults": [{k: v for k, v in KILL_AT_UNFENCING.__dict__.items() if k != "after"}]}
    (fault,) = plan_from_json(old).schedule
    assert fault.after == "" and not plan_from_json(old).aimed


def test_kafka_run_refuses_a_plan_with_an_unknown_moment_in_one_line(tmp_path, capsys, monkeypatch):
    from properties.kafka import install

    monkeypatch.setattr(install, "install", lambda version, progress=None: KAFKA)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"plan": {"seed": 1, "runbook": "dual-write"},
                                "faults": [{**KILL_AT_UNFENCING.__dict__, "after": "broker-unfenced broker=2"}]}))
    out = tmp_path / "out"
    assert main(["kafka", "run", "--plan", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown kind 'broker-unfenced'" in err[0]
    assert main(["kafka", "run", "--plan", str(path), "--aimed", "--out", str(out)]) == 2
    assert "leave out --aimed" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("runbook", RUNBOOKS)
def test_an_aimed_draw_moves_the_same_faults_to_their_steps_moments(runbook):
    """``--aimed`` draws the faults the seed draws unaimed (kind, step, target, duration) and moves each to a moment
    of its step, struck within half a second of it; a step that logs no moment of its own keeps its delay."""
    aimed_any = 0
    for seed in range(30):
        plan = RealRunPlan(seed=seed, runbook=runbook, faults="all", fault_count=3)
        steps = _steps(plan)
        unaimed = schedule_faults(plan, steps)
        aimed = schedule_faults(replace(plan, aimed=True), steps)
        assert [replace(f, after="", delay_s=0) for f in aimed] == [replace(f, delay_s=0) for f in unaimed]
        assert aimed == schedule_faults(replace(plan, aimed=True), steps)  # the seed fixes the moments too
        for before, f in zip(unaimed, aimed):
            if f.after:
                aimed_any += 1
                assert f.after in step_moments(f.step, plan) and 0.0 <= f.delay_s <= 0.5
            else:
                assert not step_moments(f.step, plan) and f.delay_s == before.delay_s
    assert aimed_any > 30


@pytest.mark.parametrize("runbook", RUNBOOKS)
def test_every_steps_moments_are_moments_kafka_logs(runbook):
    """Each moment a step offers parses (its kind is a decision line the checks read), and the last broker's roll
    into migration mode offers the migration driver's states from BECOME_CONTROLLER on."""
    plan = RealRunPlan(seed=0, runbook=runbook, brokers=3)
    for step in _steps(plan):
        for moment in step_moments(step, plan):
            parse_moment(moment)
    if "roll-broker-2-migrating" in _steps(plan):
        last = step_moments("roll-broker-2-migrating", plan)
        assert UNFENCED in last and "driver-transition new=ZK_MIGRATION" in last
        assert "driver-transition new=ZK_MIGRATION" not in step_moments("roll-broker-1-migrating", plan)


def _run(tmp_path, *faults: FaultPlan) -> Run:
    run = Run(RealRunPlan(seed=6, runbook="dual-write", schedule=faults), KAFKA, tmp_path)
    run._operator = open(tmp_path / "operator.jsonl", "a")
    run.faults = list(faults)
    for b in range(3):
        run.cluster.node(f"broker-{b}", {"zookeeper.connect": "127.0.0.1:1"}, 64)
    return run


def _notes(tmp_path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "operator.jsonl").read_text().splitlines()]


def test_an_aimed_fault_falls_due_when_its_moment_is_logged_after_its_step_began(tmp_path):
    fault = replace(KILL_AT_UNFENCING, delay_s=60.0)  # due a minute on: the test sees it pending, not struck
    run = _run(tmp_path, fault)
    broker_2, broker_1 = run.cluster.processes["broker-2"], run.cluster.processes["broker-1"]
    _log(broker_2, RUNNING_LINE)  # an earlier incarnation's unfencing, before the step: not the moment
    run.arm("roll-broker-2-migrating")
    assert run.awaiting and not run.pending and run.poll_s < 0.1  # the waits look often meanwhile
    run.tick()
    assert not run.pending
    _log(broker_1, OTHER_RUNNING_LINE)  # another broker's unfencing: not the moment
    _log(broker_2, RUNNING_LINE, end="")  # half a line, still being written
    run.tick()
    assert not run.pending
    _log(broker_2, "")  # the line's end
    run.tick()
    assert [(what, f) for _, what, f in run.pending] == [("fault", fault)]
    assert not run.awaiting and run.poll_s == 0.2
    run._operator.close()
    (moment,) = [e for e in _notes(tmp_path) if e["kind"] == "moment"]
    assert moment["process"] == "broker-2" and moment["after"] == UNFENCED and moment["fault"] == "kill-controller"


def test_an_aimed_fault_whose_moment_never_comes_is_skipped_and_said_so(tmp_path):
    run = _run(tmp_path, KILL_AT_UNFENCING)
    run.arm("roll-broker-2-migrating")
    run.arm("reach-dual-write")  # not its step: armed once
    assert len(run.awaiting) == 1
    run.forget_moments()
    assert not run.awaiting and not run.pending
    run._operator.close()
    (skipped,) = [e for e in _notes(tmp_path) if e["kind"] == "fault-skipped"]
    assert skipped["why"] == "its moment was never logged" and skipped["after"] == UNFENCED


def test_the_report_shows_which_moments_came_and_which_never_did(tmp_path):
    folder = tmp_path / "seed-0"
    folder.mkdir()
    plan = RealRunPlan(seed=0, runbook="dual-write", aimed=True,
                       schedule=(KILL_AT_UNFENCING, replace(KILL_AT_UNFENCING, step="reach-dual-write",
                                                            after="migration-completed")))
    (folder / "run.json").write_text(json.dumps(plan_json(plan, "3.9.2")))
    (folder / "violations.json").write_text("[]")
    notes = [{"kind": "step-begins", "step": "roll-broker-2-migrating"},
             {"kind": "moment", "fault": "kill-controller", "after": UNFENCED},
             {"kind": "fault-skipped", "fault": "kill-controller", "step": "reach-dual-write",
              "after": "migration-completed"},
             {"kind": "end", "outcome": "completed", "seconds": 1.0}]
    (folder / "operator.jsonl").write_text("".join(json.dumps(n) + "\n" for n in notes))
    row = campaign_module.row(folder)
    assert row["aimed"] == f"kill-controller@{UNFENCED}, kill-controller@migration-completed"
    assert row["moments"] == f"kill-controller@{UNFENCED}"
    # the fault whose moment never came did not strike: the step table counts only the other
    assert row["struck"] == "kill-controller@roll-broker-2-migrating"
    steps = campaign_module.fault_coverage([row])
    assert "<tr><td>roll-broker-2-migrating</td><td class=''>1</td></tr>" in steps
    assert "reach-dual-write" not in steps
    table = campaign_module.moment_coverage([row, row])
    assert f"<tr><td>{UNFENCED}</td><td class=''>2/2</td></tr>" in table
    assert "<tr><td>migration-completed</td><td class='empty'>0/2</td></tr>" in table
    assert "No fault was aimed" in campaign_module.moment_coverage([{**row, "aimed": "", "moments": ""}])


@pytest.mark.parametrize("runbook", ["dual-write", "rollback-kraft-brokers"])
def test_a_steered_draw_aims_at_cells_no_earlier_run_struck(runbook):
    """An aimed campaign's later seeds (issue #17 §2): given the cells ("kind@moment") earlier runs struck, each fault
    aims at one they did not where its kind has one left on a step no other fault takes, moving to another step if
    its own has none; with nothing covered the draw is the seed's alone."""
    steered_away = 0
    for seed in range(30):
        plan = RealRunPlan(seed=seed, runbook=runbook, faults="all", fault_count=2, aimed=True)
        steps = _steps(plan)
        seeds_own = schedule_faults(plan, steps)
        covered = tuple(f"{f.kind}@{f.after}" for f in seeds_own if f.after)
        steered = schedule_faults(replace(plan, covered=covered), steps)
        assert [(f.kind, f.target, f.duration_s) for f in sorted(steered, key=lambda f: f.kind)] == [
            (f.kind, f.target, f.duration_s) for f in sorted(seeds_own, key=lambda f: f.kind)]
        assert steered == schedule_faults(replace(plan, covered=covered), steps)  # still the seed's
        for f in steered:
            if f.after and f"{f.kind}@{f.after}" not in covered:
                steered_away += 1
                continue
            # a cell struck before only where its kind has none fresh left on a step free of the other faults
            free = {s for s in steps} - {g.step for g in steered if g is not f}
            assert not any(f"{f.kind}@{m}" not in covered for s in free for m in step_moments(s, plan)
                           if s in eligible_steps(f.kind, steps))
    assert steered_away > 40


def test_aimable_cells_are_the_moments_of_the_steps_each_kind_may_strike():
    """The report's moment table lists every cell an aimed draw may strike, whether or not a run aimed at it."""
    plan = RealRunPlan(seed=0, runbook="dual-write", faults="all", aimed=True)
    steps = _steps(plan)
    cells = aimable_cells(plan, steps)
    assert ("kill-controller", "driver-transition new=DUAL_WRITE") in cells
    assert ("pause-zookeeper", "zk-broker-registered") in cells
    # the ZooKeeper brokers' start, before any controller runs, is the only step that logs this moment bare
    assert ("kill-controller", "zk-broker-registered") not in cells
    assert all(any(m == moment for s in eligible_steps(kind, steps) for m in step_moments(s, plan))
               for kind, moment in cells)
    assert len(cells) == len(set(cells))
