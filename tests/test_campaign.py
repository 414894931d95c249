"""Campaigns: the same rows however they are run, through a killed driver or a killed worker.

A campaign's result is a function of its plan (``properties.campaign``): Spark's local mode, a
pool of processes and one process give the same tables (timing columns aside); a campaign whose
driver and JVM are SIGKILLed and that is started again with ``--resume`` ends with the tables an
undisturbed run writes; a Python worker that dies in the middle of a task is retried by Spark
without a row written twice; bad input is one line, exit 2, and nothing written. Campaigns here
are tiny (a few seeds of a few hundred events); one Spark session serves the module.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from properties.campaign import spark
from properties.campaign.driver import SPARK_LOG, run_campaign
from properties.campaign.options import (
    DEFAULT_SEEDS,
    CampaignError,
    make_plan,
    partition_count,
    partition_seeds,
    plan_differences,
)
from properties.campaign.spark import KILL_WORKER_ENV
from properties.campaign.tables import PARTS, TABLES, finished_partitions
from properties.campaign.tasks import run_partition
from properties.cli import main
from properties.plan import DEFAULT_STEPS, Plan, default_partition_size
from properties.runs import coverage_signature, run_seed
from properties.shrink import replay_trace, signature_of
from properties.traces import load_trace

ROOT = Path(__file__).resolve().parent.parent
TIMING = ("duration_s", "finished_s")
# 8 partitions of one seed, each some tenths of a second: a driver killed after the first one has finished
# leaves several to resume.
CLEAN = dict(seeds=8, steps=800, partition_size=1, faults="all", runbook="mixed")
# breaks BrokerEpochIsRegistrationCzxid within about ten events, on every seed
MUTANT = "impl_broker_epoch_from_session_id"
BUGGY = dict(seeds=6, steps=300, partition_size=2, mutant=MUTANT, shrink_seconds=20)


def _cli_args(options: dict, out: Path) -> list[str]:
    args = []
    for key, value in options.items():
        args += [f"--{key.replace('_', '-')}", str(value)]
    return [*args, "--out", str(out)]


def command(*args: str) -> int:
    """``kraftcheck campaign ARGS``'s exit code (argparse's own errors exit from inside)."""
    try:
        return main(["campaign", *args])
    except SystemExit as e:
        return e.code


def tables(out: Path) -> dict[str, list[dict]]:
    """The consolidated tables, timing columns left out."""
    result = {}
    for name in TABLES:
        rows = pq.read_table(out / f"{name}.parquet").to_pylist()
        result[name] = [{k: v for k, v in row.items() if k not in TIMING} for row in rows]
    return result


@pytest.fixture(scope="module")
def kill_dir(tmp_path_factory):
    """The test-only hook's directory, in the environment before the JVM (and so its workers) starts."""
    directory = tmp_path_factory.mktemp("kill-worker")
    saved = os.environ.get(KILL_WORKER_ENV)
    os.environ[KILL_WORKER_ENV] = str(directory)
    yield directory
    if saved is None:
        os.environ.pop(KILL_WORKER_ENV, None)
    else:
        os.environ[KILL_WORKER_ENV] = saved


@pytest.fixture(scope="module")
def killed_driver(tmp_path_factory):
    """The clean plan in a child process (``kraftcheck campaign --master local[2]``), its process group (the
    driver, its JVM, the Python workers) SIGKILLed as soon as a partition's runs part exists. Started
    before this module's own Spark session, so that the two JVMs start at the same time."""
    out = tmp_path_factory.mktemp("killed") / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop(KILL_WORKER_ENV, None)
    child = subprocess.Popen(
        [sys.executable, "-m", "properties.cli", "campaign", *_cli_args(CLEAN, out), "--master", "local[2]"],
        cwd=out.parent, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
        stderr=(out.parent / "stderr.txt").open("w"),
    )
    outcome: dict = {}

    def kill_after_first_partition() -> None:
        deadline = time.monotonic() + 180
        while not finished_partitions(out):
            if child.poll() is not None or time.monotonic() > deadline:
                outcome["error"] = f"the child ended or stalled first (exit {child.poll()})"
                break
            time.sleep(0.01)
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        outcome["finished"] = finished_partitions(out)

    killer = threading.Thread(target=kill_after_first_partition, daemon=True)
    killer.start()
    yield out, killer, outcome
    if child.poll() is None:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()


@pytest.fixture(scope="module")
def session(kill_dir, killed_driver):
    s = spark.session("local[2]", app_name="kraftcheck tests")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def undisturbed(tmp_path_factory):
    """The clean plan run in one process: what every other way of running it must give."""
    out = tmp_path_factory.mktemp("undisturbed") / "out"
    run_campaign(make_plan(**CLEAN, out=out), "serial")
    return tables(out)


def test_campaign_plan_checks_options_and_sizes_partitions():
    """A plan holds every option that changes results; partitions are consecutive blocks of seeds."""
    plan = make_plan(out="somewhere")
    assert (plan.seeds, plan.steps, plan.scope, plan.faults, plan.runbook) == (
        DEFAULT_SEEDS, DEFAULT_STEPS, "sim-migration", "all", "mixed")
    assert plan.partition_size == default_partition_size(plan.steps) >= 1
    small = make_plan(seeds=10, partition_size=4, out="x")
    assert [partition_seeds(small, p) for p in range(3)] == [range(0, 4), range(4, 8), range(8, 10)]
    assert partition_count(small) == 3
    assert partition_count(make_plan(minutes=1, out="x")) is None
    with pytest.raises(CampaignError, match="unknown seeded bug"):
        make_plan(mutant="no_such_bug")
    assert plan_differences(small, replace(small, steps=5, out="elsewhere")) == ["--steps"]
    assert Plan.from_json(small.to_json()) == small and Plan.from_json({"seeds": 10}).steps == DEFAULT_STEPS
    with pytest.raises(ValueError, match="option 'steps': '5' is not int"):
        Plan.from_json({**small.to_json(), "steps": "5"})


def test_spark_local_master_gets_task_retries():
    """Spark runs a local task once unless the master names the failures it tolerates: local[N] -> local[N,4]."""
    assert spark.spark_master("local[2]") == "local[2,4]"
    assert spark.spark_master("local") == "local[1,4]"
    assert spark.spark_master("local[*]") == f"local[{os.cpu_count()},4]"
    assert spark.spark_master("local[3,2]") == "local[3,2]"
    assert spark.spark_master("spark://127.0.0.1:7077") == "spark://127.0.0.1:7077"


def test_run_partition_is_a_function_of_plan_and_partition():
    """The same partition run twice gives the same rows (timing aside): what makes retries and resumes safe."""
    plan = make_plan(seeds=2, steps=300, partition_size=2, out="unused")

    def rows():
        result = run_partition(plan, 0)
        return {name: [{k: v for k, v in r.items() if k not in TIMING} for r in rows] for name, rows in result.items()}

    first = rows()
    assert first == rows()
    assert [r["seed"] for r in first["runs"]] == [0, 1]
    kinds = {r["kind"] for r in first["coverage"]}
    assert {"action", "driver_transition", "state", "decision"} <= kinds <= {
        "action", "driver_transition", "state", "decision", "fault_at", "progress"
    }
    assert all(r["key"].startswith("zk:") for r in first["coverage"] if r["kind"] == "state")


def test_campaign_spark_local_same_tables_as_serial(session, undisturbed, tmp_path):
    """Spark local mode, each partition its own job, writes what one process writes."""
    workers_storage = session.sparkContext.parallelize([0], 1).map(
        lambda _: os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY")).collect()[0]
    assert workers_storage and Path(workers_storage).is_dir()  # not .hypothesis/ in the working directory
    summary = run_campaign(make_plan(**CLEAN, out=tmp_path), spark=session)
    assert tables(tmp_path) == undisturbed
    assert summary["master"] == "local[2,4]"
    assert summary["runs"] == CLEAN["seeds"] and summary["violations"] == 0
    assert (tmp_path / "report.html").is_file()


def test_campaign_processes_same_tables_as_serial(undisturbed, tmp_path):
    """``--master processes[2]`` (multiprocessing, no Java) writes what one process writes."""
    run_campaign(make_plan(**CLEAN, out=tmp_path), "processes[2]")
    assert tables(tmp_path) == undisturbed


def test_campaign_tables_hold_every_run_once_with_coverage(undisturbed):
    """One runs row per seed; new_coverage counts keys no lower seed reached, so they add up to all keys."""
    runs, coverage = undisturbed["runs"], undisturbed["coverage"]
    assert [r["seed"] for r in runs] == list(range(CLEAN["seeds"]))
    assert [r["partition"] for r in runs] == list(range(CLEAN["seeds"]))
    assert {r["runbook"] for r in runs} == {"finalize", "rollback"}
    assert all(r["outcome"] == "clean" and r["invariant"] is None for r in runs)
    keys = {(r["kind"], r["key"]) for r in coverage}
    assert sum(r["new_coverage"] for r in runs) == len(keys)
    first = {(r["kind"], r["key"]) for r in coverage if r["seed"] == 0}
    assert runs[0]["new_coverage"] == len(first) > 0
    assert runs[0]["coverage_signature"] == coverage_signature(first)


def test_campaign_violations_grouped_and_shrunk_on_spark(session, tmp_path):
    """A seeded bug the simulator catches: every seed's violation is a row, grouped by signature, and
    each group's shrunk trace replays to the same signature."""
    summary = run_campaign(make_plan(**BUGGY, out=tmp_path), spark=session)
    result = tables(tmp_path)
    violations = result["violations"]
    assert [v["seed"] for v in violations] == list(range(BUGGY["seeds"]))
    assert {v["invariant"] for v in violations} == {"BrokerEpochIsRegistrationCzxid"}
    assert all(r["outcome"] == "violation" and r["steps"] == v["step"] for r, v in zip(result["runs"], violations))
    groups = {v["signature"]: v for v in violations}
    assert summary["distinct_signatures"] == len(groups) == len(summary["counterexamples"])
    for signature, row in groups.items():
        assert row["trace_file"] is not None and 0 < row["shrunk_steps"] <= row["original_steps"]
        trace = load_trace(tmp_path / row["trace_file"])
        replayed = replay_trace(trace)
        assert replayed.signature == signature
    assert summary["violations_by_invariant"] == {"BrokerEpochIsRegistrationCzxid": BUGGY["seeds"]}


def test_campaign_command_exit_codes(tmp_path, capsys):
    """Exit 1 with violations (their counterexamples listed), 0 for a clean campaign."""
    assert main(["campaign", *_cli_args({**BUGGY, "seeds": 2}, tmp_path / "buggy"), "--master", "serial"]) == 1
    assert "BrokerEpochIsRegistrationCzxid" in capsys.readouterr().out
    assert main(["campaign", "--seeds", "1", "--steps", "50", "--runbook", "none", "--master", "serial", "--json",
                 "--out", str(tmp_path / "clean")]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["runs"] == 1 and summary["violations"] == 0 and summary["no_progress"] is None


def test_campaign_that_never_starts_the_migration_fails(tmp_path, capsys):
    """A campaign whose runs all stop before the migration starts (here: 20 events each) checked nothing of
    the migration its runbook asks for: it says so and exits 1, not 0 (KIP-866 §Migration Overview)."""
    assert main(["campaign", "--seeds", "2", "--steps", "20", "--master", "serial", "--out", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "no violation" in out and "NO PROGRESS: no run's migration started in 2 runs" in out


@pytest.mark.parametrize("args, message", [
    (["--scope", "no-such-scope"], "unknown scope"),
    (["--faults", "network+lightning"], "unknown fault mix"),
    (["--faults", "drop=much"], "not a number"),
    (["--mutant", "impl_no_such_bug"], "unknown seeded bug"),
    (["--seeds", "0"], "positive integer"),
    (["--steps", "many"], "positive integer"),
    (["--minutes", "-1"], "positive number"),
    (["--seeds", "2", "--minutes", "1"], "not allowed with"),
    (["--master", "local[0]"], "bad master"),
    (["--master", "mainframe"], "bad master"),
    (["--master", "processes[0]"], "bad master"),
    (["--machine", "model"], "needs --engine hypothesis"),
    (["--runbook", "panic"], "invalid choice"),
])
def test_campaign_bad_input_one_line_exit_2_nothing_written(args, message, tmp_path, capsys):
    out = tmp_path / "out"
    assert command(*args, "--out", str(out)) == 2
    err = capsys.readouterr().err
    assert err.startswith("kraftcheck campaign: error:") and message in err
    assert err.count("\n") == 1
    assert not out.exists()


def test_campaign_refuses_to_overwrite_or_resume_another_plan(tmp_path, capsys):
    """A DIR holding a campaign is never overwritten; --resume with other options names the option."""
    out = tmp_path / "out"
    args = ["campaign", "--seeds", "1", "--steps", "20", "--runbook", "none", "--master", "serial", "--out", str(out)]
    assert main(args) == 0
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
    capsys.readouterr()
    assert main(args) == 2
    assert "already holds a campaign" in capsys.readouterr().err
    assert main(["campaign", "--seeds", "1", "--steps", "30", "--runbook", "none", "--master", "serial",
                 "--out", str(out), "--resume"]) == 2
    err = capsys.readouterr().err
    assert "--steps" in err and "--seeds" not in err
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*")} == before
    # the same options resume (nothing left to run: the tables are consolidated again)
    assert main(["campaign", "--seeds", "1", "--steps", "20", "--runbook", "none", "--master", "serial",
                 "--out", str(out), "--resume"]) == 0


def test_campaign_minutes_runs_partitions_in_order(tmp_path):
    """--minutes: partitions started in order until the deadline, each finished."""
    summary = run_campaign(make_plan(minutes=0.01, steps=100, partition_size=1, out=tmp_path), "serial")
    seeds = [r["seed"] for r in tables(tmp_path)["runs"]]
    assert seeds == list(range(len(seeds))) and summary["seeds_done"] == len(seeds) >= 1


def test_campaign_worker_killed_mid_task_is_retried_without_duplicates(session, kill_dir, undisturbed, tmp_path):
    """A Python worker dies (SIGKILL) in the middle of partition 3's task: Spark runs the task again
    (local[2,4]) and the tables are an undisturbed run's, each row once."""
    (kill_dir / "kill-partition-3").touch()
    run_campaign(make_plan(**CLEAN, out=tmp_path), spark=session)
    killed = kill_dir / "killed-partition-3"
    assert killed.is_file(), "the hook did not fire: the test proved nothing"
    pid = int(killed.read_text())
    assert pid != os.getpid()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # that worker is gone
    assert tables(tmp_path) == undisturbed


def test_campaign_killed_driver_resumes_to_the_same_tables(session, killed_driver, undisturbed):
    """The driver and its JVM SIGKILLed mid-campaign (the whole process group); ``--resume`` skips the
    finished partitions, ignores half-written files, and ends with an undisturbed run's tables."""
    out, killer, outcome = killed_driver
    killer.join(timeout=200)
    assert "error" not in outcome, outcome.get("error")
    assert 0 < len(outcome["finished"]) < CLEAN["seeds"], "killed too late: nothing left to resume"
    # the terminal got kraftcheck's own line first and none of the JVM's, which went to DIR/spark.log
    terminal = (out.parent / "stderr.txt").read_text().splitlines()
    assert terminal[0].startswith("kraftcheck campaign: starting Spark on local[2,4]; the JVM's log goes to ")
    assert not [line for line in terminal if "WARN" in line or "log4j" in line], terminal
    assert "Spark" in (out / SPARK_LOG).read_text()
    assert not (out / "runs.parquet").exists() and not (out / "summary.json").exists()
    # what a kill in the middle of a write leaves: a temporary file, never read as a part
    runs_parts = out / PARTS / "runs"
    (runs_parts / f".part-{CLEAN['seeds'] - 1:05d}.parquet.999.tmp").write_bytes(b"PAR1 half a file")
    summary = run_campaign(make_plan(**CLEAN, out=out), spark=session, resume=True)
    assert summary["resumed"] is True
    assert tables(out) == undisturbed
    assert not [p for p in runs_parts.iterdir() if p.name.startswith(".")]


def test_campaign_signature_is_the_shrinkers():
    """The violations table groups by ``properties.shrink.signature_of``, the key shrinking keeps."""
    plan = make_plan(seeds=1, steps=100, mutant=MUTANT, out="unused")
    run = run_seed(plan, 0)
    rows = run_partition(plan, 0)
    assert rows["violations"][0]["signature"] == signature_of(run.disagreement)
    assert rows["violations"][0]["step"] == len(run.record)


def test_a_rollback_seed_reports_the_rollback_findings_in_any_scope(tmp_path):
    """KIP-866 §Rollback to ZK deletes /controller_epoch, so the next ZK election reuses an epoch: a
    documented finding. A rollback seed in a scope that does not list it (migration) counts it as a
    finding once the deletion is taken, not as a violation; a finalize seed takes no deletion and so
    keeps every property strict (sim-migration no longer lists the rollback's findings at all)."""
    plan = make_plan(seeds=4, scope="migration", partition_size=1, out=tmp_path / "c")
    run = run_seed(plan, 3)
    assert run.runbook == "rollback" and run.disagreement is None
    assert "ZkControllerEpochsIncreaseAcrossHandOver" in run.findings
    finalized = run_seed(plan, 0)
    assert finalized.runbook == "finalize" and finalized.findings == () and finalized.disagreement is None


def test_a_swarm_campaign_records_each_runs_own_mix(tmp_path):
    """``--faults swarm``: every run draws its own mix, and the runs table says which, so a
    violation comes with the mix that found it."""
    plan = make_plan(seeds=4, faults="swarm", steps=60, partition_size=4, out=tmp_path / "c")
    mixes = [row["faults"] for row in run_partition(plan, 0)["runs"]]
    assert len(set(mixes)) == 4 and not any("swarm" in mix for mix in mixes)
    assert mixes == [row["faults"] for row in run_partition(plan, 0)["runs"]]
