"""Campaigns through Hypothesis (properties/campaign/hypothesis.py): the model machine and the
differential machine fuzzed with ``fuzz_one_input``, one example per seed, failures kept in the
campaign's example database, then replayed and shrunk by an ordinary Hypothesis run.

The situations: a correct model fuzzed finds nothing (and a scope's documented findings are
counted, not reported); a seeded bug of the model and one of the implementation are found, their
failing examples land in the database, and the replay turns each into a shrunk Hypothesis failure
whose trace file replays to the same violation; a partition's rows are the same however often and
wherever it runs (in this process, or in a pool of two through ``kraftcheck campaign``).
Small scopes and a few dozen seeds each, so the file runs in well under a minute.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import Phase, settings
from hypothesis.stateful import get_state_machine_test

from properties import traces
from properties.campaign.hypothesis import (
    BUFFER_BYTES,
    DATABASE_DIR,
    Bridge,
    buffer_of,
    check_plan,
    finish_fuzz,
    hypothesis_storage,
    run_fuzz_partition,
)
from properties.plan import Plan
from properties.shrink import replay_trace

TIMING = ("duration_s", "finished_s")


def plan_for(out: Path, machine: str, scope: str, mutant: str | None, seeds: int, partition_size: int) -> Plan:
    """A campaign plan for the Hypothesis engine."""
    return Plan(seeds=seeds, scope=scope, faults="all", mutant=mutant, steps=2000, runbook="mixed",
                partition_size=partition_size, engine="hypothesis", machine=machine, shrink_seconds=60.0, out=str(out))


def fuzz(plan: Plan) -> dict[str, list[dict]]:
    """Every partition of ``plan``, in this process; the tables' rows, concatenated."""
    partitions = -(-plan.seeds // plan.partition_size)
    rows: dict[str, list[dict]] = {"runs": [], "violations": [], "coverage": []}
    for p in range(partitions):
        for name, part in run_fuzz_partition(plan, p).items():
            rows[name] += part
    return rows


def without_timing(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in row.items() if k not in TIMING} for row in rows]


def database_entries(out: Path) -> list[Path]:
    return [p for p in (out / DATABASE_DIR).rglob("*") if p.is_file()]


def failures_of(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [f for e in error.exceptions for f in failures_of(e)]
    return [error]


# ---- a correct model -------------------------------------------------------------------------------


def test_fuzz_correct_model_machine_finds_nothing_and_leaves_no_hypothesis_files(tmp_path, monkeypatch):
    """The correct model of the KIP-380 bounce scope, fuzzed: every example runs clean, takes steps,
    reaches coverage; nothing lands in the database, and Hypothesis writes nothing in the working
    directory (a Spark worker's is the driver's)."""
    monkeypatch.chdir(tmp_path)
    plan = plan_for(tmp_path / "out", "model", "bounce", None, seeds=40, partition_size=20)
    rows = fuzz(plan)
    runs = rows["runs"]
    assert [r["seed"] for r in runs] == list(range(40))
    assert rows["violations"] == [] and {r["outcome"] for r in runs} == {"clean"}
    assert {r["engine"] for r in runs} == {"hypothesis"} and all(r["invariant"] is None for r in runs)
    assert sum(r["steps"] for r in runs) > 40 * 5, "examples that hardly move test nothing"
    kinds = {c["kind"] for c in rows["coverage"]}
    assert {"action", "state"} <= kinds
    assert {r["progress"] for r in runs} == {"zk-controller"}
    assert database_entries(tmp_path / "out") == []
    assert not (tmp_path / ".hypothesis").exists()


def test_fuzz_documented_findings_are_counted_not_reported(tmp_path):
    """The lifecycle scope's rollback reuses /controller_epoch as the seed's runbook says (a
    documented finding, ``Scope.findings``): fuzzing reaches it and counts it in the runs' findings,
    and reports no violation."""
    plan = plan_for(tmp_path, "model", "lifecycle", None, seeds=40, partition_size=40)
    rows = fuzz(plan)
    assert rows["violations"] == []
    found = {f for r in rows["runs"] for f in r["findings"]}
    assert found and found <= {"ZkControllerEpochsIncreaseAcrossHandOver", "OneLeaderPerLeaderEpoch",
                                "AtMostOneControllerPerEpoch", "EveryElectionBumpsControllerEpoch"}


# ---- a seeded bug of the model -----------------------------------------------------------------------


def test_fuzz_model_bug_is_found_kept_in_the_database_and_shrunk_by_hypothesis(tmp_path):
    """KIP-380's bounce detection with the czxid comparison left out (broker_change_ignores_czxid):
    fuzzing the model machine finds ControllerSeesEveryBounce broken; the failing examples are in
    the campaign's database, from which an ordinary Hypothesis run alone replays the failure; the
    replay shrinks it to a trace file that replays to the same violation, and every row of the group
    names it."""
    plan = plan_for(tmp_path, "model", "bounce", "broker_change_ignores_czxid", seeds=40, partition_size=20)
    rows = fuzz(plan)
    violations = rows["violations"]
    assert violations, "40 examples should catch broker_change_ignores_czxid (the first at seed 12)"
    assert {v["invariant"] for v in violations} == {"ControllerSeesEveryBounce"}
    assert {v["signature"] for v in violations} == {"ControllerSeesEveryBounce"}
    by_seed = {r["seed"]: r for r in rows["runs"]}
    for v in violations:
        run = by_seed[v["seed"]]
        assert run["outcome"] == "violation" and run["invariant"] == v["invariant"] and v["step"] == run["steps"]

    assert database_entries(tmp_path), "fuzz_one_input saves failing examples in the database"
    with hypothesis_storage():  # the database alone (no generation, no re-fuzzing) replays the failure
        bridge = Bridge(plan)
        replay_only = get_state_machine_test(bridge.machine, settings=settings(bridge.settings, phases=[Phase.reuse]))
        with pytest.raises(Exception) as raised:  # noqa: PT011 - whichever shape Hypothesis raises it in
            replay_only()
    assert any(getattr(f, "invariants", ())[:1] == ("ControllerSeesEveryBounce",) for f in failures_of(raised.value))

    filled = finish_fuzz(plan, tmp_path, violations)
    assert [(r["seed"], r["signature"]) for r in filled] == [(v["seed"], v["signature"]) for v in violations]
    assert len({r["trace_file"] for r in filled}) == 1
    row = filled[0]
    assert row["trace_file"].startswith("counterexamples/")
    assert 1 <= row["shrunk_steps"] <= min(v["original_steps"] for v in violations)
    trace = traces.load_trace(tmp_path / row["trace_file"])
    assert trace.scope == "bounce" and trace.violation == "ControllerSeesEveryBounce"
    assert len(trace.actions) == row["shrunk_steps"]
    replayed = traces.replay(trace)
    assert replayed.reproduced and replayed.violation_step == len(trace.actions)
    report = (tmp_path / row["trace_file"]).with_suffix(".hypothesis.txt").read_text()
    assert "state.process_broker_change(" in report and "ControllerSeesEveryBounce" in report


def test_fuzz_partition_rows_are_the_same_every_time(tmp_path):
    """A partition's rows depend on the plan and the partition only: run again (with the database
    now holding the failures of the first run), they are the same, timing aside."""
    plan = plan_for(tmp_path, "model", "bounce", "broker_change_ignores_czxid", seeds=30, partition_size=30)
    first = run_fuzz_partition(plan, 0)
    assert first["violations"] and database_entries(tmp_path)
    again = run_fuzz_partition(plan, 0)
    assert without_timing(again["runs"]) == without_timing(first["runs"])
    assert again["violations"] == first["violations"] and again["coverage"] == first["coverage"]
    assert len({buffer_of(7), buffer_of(7)}) == 1 and len(buffer_of(7)) == BUFFER_BYTES


# ---- a seeded bug of the implementation --------------------------------------------------------------


def test_fuzz_implementation_bug_each_signature_is_shrunk_to_a_differential_trace(tmp_path):
    """A broker that clears its feature cache, epoch included, when /features turns Disabled
    (impl_feature_cache_goes_back, KIP-584): the differential machine finds it in two ways (the
    implementation's state breaks BrokerFeatureCacheNeverGoesBack, or only differs from the
    model's); Hypothesis shrinks each signature group on its own, and each trace file (version 2)
    replays to its own signature with the bug and clean without it."""
    plan = plan_for(tmp_path, "differential", "features-downgrade", "impl_feature_cache_goes_back",
                    seeds=40, partition_size=20)
    rows = fuzz(plan)
    violations = rows["violations"]
    signatures = {v["signature"] for v in violations}
    assert "BrokerFeatureCacheNeverGoesBack" in signatures and len(signatures) == 2, signatures
    filled = finish_fuzz(plan, tmp_path, violations)
    files = {r["signature"]: (r["trace_file"], r["shrunk_steps"]) for r in filled}
    assert len({f for f, _ in files.values()}) == 2, files
    for signature, (trace_file, shrunk_steps) in files.items():
        trace = traces.load_trace(tmp_path / trace_file)
        assert trace.kind == "differential" and trace.signature == signature
        assert len(trace.steps) == shrunk_steps
        assert shrunk_steps <= min(v["original_steps"] for v in violations if v["signature"] == signature)
        with_bug = replay_trace(trace)
        assert with_bug.signature == signature and with_bug.failed_at == len(trace.steps) - 1
        assert replay_trace(trace, with_bugs=False).disagreement is None


# ---- through the pipeline, in a pool of two processes -----------------------------------------------


def test_campaign_engine_hypothesis_in_two_processes_gives_the_in_process_rows(tmp_path):
    """``kraftcheck campaign --engine hypothesis --master processes[2]``: the partitions run in two
    spawned processes, the violation comes back shrunk, and each run's row is the one the same
    partition gives in this process."""
    import pyarrow.parquet as pq

    from properties.cli import main

    out = tmp_path / "campaign"
    code = main(["campaign", "--engine", "hypothesis", "--machine", "model", "--scope", "bounce",
                 "--mutant", "broker_change_ignores_czxid", "--seeds", "24", "--partition-size", "12",
                 "--master", "processes[2]", "--out", str(out), "--json"])
    assert code == 1
    runs = pq.read_table(out / "runs.parquet").to_pylist()
    violations = pq.read_table(out / "violations.parquet").to_pylist()
    assert violations and all(v["trace_file"] and v["shrunk_steps"] for v in violations)
    assert traces.replay(traces.load_trace(out / violations[0]["trace_file"])).reproduced
    plan = plan_for(out, "model", "bounce", "broker_change_ignores_czxid", seeds=24, partition_size=12)
    here = fuzz(plan)["runs"]
    keys = ("seed", "steps", "outcome", "invariant", "progress", "findings", "coverage_signature")
    assert [{k: r[k] for k in keys} for r in runs] == [{k: r[k] for k in keys} for r in here]


# ---- plans the bridge cannot run ---------------------------------------------------------------------


@pytest.mark.parametrize(("machine", "scope", "mutant", "says"), [
    ("model", "sim-migration", None, "the model machine runs the model's scopes"),
    ("model", "bounce", "impl_accept_older_broker_epoch", "needs --machine differential"),
    ("differential", "bounce", "broker_change_ignores_czxid", "use --machine model"),
    ("differential", "no-such-scope", None, "unknown scope"),
])
def test_check_plan_refuses_what_the_machine_cannot_run_in_one_line(tmp_path, machine, scope, mutant, says):
    """A seeded bug of the other layer, or a scope the machine has no model of, is refused before
    anything runs, in one line."""
    with pytest.raises(ValueError, match=says) as raised:
        check_plan(plan_for(tmp_path, machine, scope, mutant, seeds=1, partition_size=1))
    assert "\n" not in str(raised.value)
