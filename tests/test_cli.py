"""The kraftcheck command line: JSON shapes, exit codes, and one-line errors for bad input."""

import json

import pytest

from model import PROPERTIES
from properties.cli import main


def run(capsys, *argv):
    try:
        code = main(list(argv))
    except SystemExit as exit_:
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out, err


def test_invariants_json_lists_the_registry(capsys):
    code, out, _ = run(capsys, "invariants", "--json")
    rows = json.loads(out)
    assert code == 0
    assert [r["name"] for r in rows] == [p.name for p in PROPERTIES]
    assert all({"name", "kind", "meaning", "source"} <= set(r) for r in rows)
    assert {r["kind"] for r in rows} == {"always", "transition", "sometimes", "eventually"}


def test_explore_clean_scope_exits_zero_with_json(capsys):
    code, out, _ = run(capsys, "explore", "--scope", "bounce", "--depth", "3", "--json")
    result = json.loads(out)
    assert code == 0
    assert result["scope"] == "bounce" and result["violations"] == [] and result["depth"] == 3
    assert result["distinct_states"] > 1 and result["seconds"] >= 0


def test_explore_with_a_seeded_bug_exits_one_with_the_counterexample(capsys):
    code, out, _ = run(
        capsys, "explore", "--scope", "bounce", "--depth", "6", "--bug", "broker_change_ignores_czxid", "--json"
    )
    result = json.loads(out)
    assert code == 1
    (violation,) = [v for v in result["violations"] if v["invariant"] == "ControllerSeesEveryBounce"]
    assert violation["actions"][-1] == "ProcessBrokerChange(controller=0)"
    assert len(violation["actions"]) == 5


def test_explore_prints_a_readable_counterexample(capsys):
    code, out, _ = run(capsys, "explore", "--scope", "bounce", "--depth", "6", "--bug", "broker_change_ignores_czxid")
    assert code == 1
    assert "VIOLATION ControllerSeesEveryBounce" in out
    assert "  1. StopBroker(broker=1)" in out


def test_simulate_replays_by_seed(capsys):
    runs = []
    for _ in range(2):
        code, out, _ = run(capsys, "simulate", "--scope", "cluster", "--seed", "3", "--steps", "50", "--json")
        assert code == 0
        result = json.loads(out)
        del result["seconds"]
        runs.append(result)
    assert runs[0] == runs[1] and runs[0]["steps"] > 10


def test_simulate_with_a_seeded_bug_reports_the_violation(capsys):
    for seed in range(50):  # some walk takes the buggy UpdateFeatures; which one depends on the model
        code, out, _ = run(capsys, "simulate", "--scope", "features", "--seed", str(seed), "--steps", "200",
                           "--bug", "finalize_level_zero", "--json")
        result = json.loads(out)
        if code == 1:
            break
    assert code == 1 and result["violation"] == "FinalizedFeaturesWellFormed"
    assert result["actions"][-1].startswith("UpdateFeatures(")


def test_mutants_json_reports_each_bug(capsys):
    code, out, _ = run(capsys, "mutants", "--json", "--bug", "finalize_level_zero", "--bug", "write_without_zxid")
    rows = json.loads(out)
    assert code == 0
    assert {r["name"] for r in rows} == {"finalize_level_zero", "write_without_zxid"}
    for r in rows:
        assert r["layer"] == "model" and r["caught_by"].startswith("explore:") and r["seconds"] >= 0
        assert {"name", "layer", "invariant", "caught_by", "seconds"} <= set(r)


@pytest.mark.parametrize(
    "argv, complaint",
    [
        (["explore", "--scope", "nope"], "unknown scope 'nope'"),
        (["explore", "--scope", "bounce", "--depth", "0"], "expected a positive integer"),
        (["explore", "--scope", "bounce", "--bug", "no_such_bug"], "unknown seeded bug 'no_such_bug'"),
        (["simulate", "--scope", "cluster", "--seed", "x", "--steps", "5"], "expected an integer >= 0"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_usage_is_one_line_and_exit_two(capsys, argv, complaint):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert complaint in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow  # every obligation again (25 s of a loaded worker): tests/test_proofs*.py prove them in every run
def test_prove_json_lists_obligations_that_all_hold(capsys):
    code, out, _ = run(capsys, "prove", "--depth", "4", "--json")
    rows = json.loads(out)
    assert code == 0
    assert all({"name", "result", "seconds"} <= set(r) for r in rows)
    assert {r["result"] for r in rows} <= {"holds", "proved"}
    assert any(r["name"] == "ElectController/AtMostOneControllerPerEpoch" for r in rows)


def test_prove_with_a_fencing_bug_exits_one_with_a_replayed_counterexample(capsys):
    code, out, _ = run(capsys, "prove", "--depth", "5", "--bug", "election_reuses_epoch", "--json")
    rows = json.loads(out)
    assert code == 1
    violated = [r for r in rows if r["result"] == "violated"]
    assert violated and all(r["counterexample"]["actions"] for r in violated)


def test_prove_one_property_checks_only_its_obligations_and_finds_its_seeded_bug(capsys):
    """``--property``: the property's BMC rows and induction obligations only, in the one core that encodes it (the
    fencing core, the faster); with its seeded bug on, its ElectController obligation fails (exit 1)."""
    name = "AtMostOneControllerPerEpoch"
    code, out, _ = run(capsys, "prove", "--depth", "3", "--property", name, "--json")
    rows = json.loads(out)
    assert code == 0 and rows and all(r["name"].endswith(f"/{name}") for r in rows)
    assert {r["result"] for r in rows} == {"holds", "proved"} and any(r["name"].startswith("BMC/") for r in rows)
    code, out, _ = run(capsys, "prove", "--depth", "3", "--property", name, "--bug", "election_without_epoch_cas",
                       "--json")
    failed = {r["name"] for r in json.loads(out) if r["result"] not in ("holds", "proved")}
    assert code == 1 and f"ElectController/{name}" in failed, failed


def test_prove_refuses_a_property_no_encoding_has(capsys):
    code, out, err = run(capsys, "prove", "--property", "NoSuchProperty")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "no z3 encoding has the property 'NoSuchProperty'" in err


def test_prove_refuses_a_bug_outside_the_encoding(capsys):
    code, out, err = run(capsys, "prove", "--bug", "accept_stale_broker_epoch")
    assert code == 2 and out == "" and "does not switch accept_stale_broker_epoch" in err


def test_replay_reports_the_violation_of_a_saved_trace(capsys, tmp_path):
    from model import SEEDED_BUGS_BY_NAME
    from properties import traces
    from properties.mutants import run_mutant

    bug = SEEDED_BUGS_BY_NAME["broker_change_ignores_czxid"]
    found = run_mutant(bug)
    path = tmp_path / "trace.json"
    trace = traces.Trace(bug.scope, tuple(found.counterexample), frozenset({bug.bug}), bug.invariant)
    traces.save_trace(path, trace)
    code, out, _ = run(capsys, "replay", str(path), "--json")
    result = json.loads(out)
    assert code == 1 and result["reproduced"] and result["violation_step"] == len(found.counterexample)


def test_replay_of_a_malformed_file_is_one_line_and_exit_two(capsys, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("{not json")
    code, out, err = run(capsys, "replay", str(path))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1


def test_liveness_kafka_3_9_strands_a_migration_and_exits_one_with_a_lasso(capsys):
    """`kraftcheck liveness`: a violated eventually-property comes back as a lasso and exit code 1
    (docs/model.md, "A migration can be stranded"); the same scope holds under the kip profile."""
    code, out, _ = run(
        capsys, "liveness", "--scope", "handover", "--profile", "kafka-3.9",
        "--property", "ActiveDriverNeverStaysInactive", "--json",
    )
    result = json.loads(out)
    assert code == 1 and result["profile"] == "kafka-3.9" and result["complete"]
    (verdict,) = result["properties"]
    assert verdict["result"] == "violated" and verdict["lasso"]["prefix"]
    code, out, _ = run(capsys, "liveness", "--scope", "handover", "--property", "ActiveDriverNeverStaysInactive",
                       "--json")
    assert code == 0 and json.loads(out)["properties"][0]["result"] == "holds"


def test_explore_documented_finding_of_the_kip_rollback_is_a_finding_and_exits_zero(capsys):
    """The seed's rollback deletes /controller_epoch: the kip profile reports it as a documented finding, as
    campaigns do (counted, exit 0, not a VIOLATION); kafka-3.9 does not show it."""
    code, out, _ = run(capsys, "explore", "--scope", "rollback", "--depth", "5", "--json")
    result = json.loads(out)
    assert code == 0 and result["violations"] == []
    assert "ZkControllerEpochsIncreaseAcrossHandOver" in {v["invariant"] for v in result["findings"]}
    code, out, _ = run(capsys, "explore", "--scope", "rollback", "--depth", "6")
    assert code == 0 and "VIOLATION" not in out
    assert "documented finding ZkControllerEpochsIncreaseAcrossHandOver" in out and "no violation" in out
    code, out, _ = run(capsys, "explore", "--scope", "rollback", "--depth", "5", "--profile", "kafka-3.9", "--json")
    assert code == 0 and json.loads(out)["profile"] == "kafka-3.9" and json.loads(out)["findings"] == []


def test_simulate_walks_on_past_a_documented_finding(capsys):
    """A seeded walk of the rollback scope that shows the kip rollback's finding says so and exits 0."""
    for seed in range(40):
        code, out, _ = run(capsys, "simulate", "--scope", "rollback", "--seed", str(seed), "--steps", "60", "--json")
        result = json.loads(out)
        assert code == 0 and result["violation"] is None
        if result["findings"]:
            break
    assert "ZkControllerEpochsIncreaseAcrossHandOver" in result["findings"]


@pytest.mark.parametrize("argv, expected", [
    (["explore", "--scope", "rollback", "--profile", "kafka-4.0"], "unknown profile 'kafka-4.0'"),
    (["liveness", "--scope", "handover", "--property", "LeaderIsInIsr"], "unknown eventually property"),
])
def test_profile_and_property_errors_are_one_line(capsys, argv, expected):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and expected in err and err.count("\n") == 1


@pytest.mark.parametrize("check, bug, caught_by", [
    ("z3", "election_reuses_epoch", "z3-bmc:election"),
    ("hypothesis", "claim_reuses_zk_epoch", "hypothesis:migration"),
])
def test_mutants_scores_one_check_alone(capsys, check, bug, caught_by):
    """`--check` runs only the named checks: z3's BMC and the Hypothesis machine catch seeded bugs too."""
    code, out, _ = run(capsys, "mutants", "--check", check, "--bug", bug, "--json")
    (row,) = json.loads(out)
    assert code == 0 and row["caught_by"] == caught_by and row["counterexample_length"] >= 1


def test_mutants_z3_does_not_claim_bugs_it_cannot_encode(capsys):
    """A bug outside the z3 encoding escapes the z3 check (exit 1), rather than being credited to it."""
    code, out, _ = run(capsys, "mutants", "--check", "z3", "--bug", "vote_twice_in_epoch", "--json")
    assert code == 1 and json.loads(out)[0]["caught_by"] is None


@pytest.mark.parametrize(
    ("scope", "bug", "depth", "symmetry", "invariant"),
    [("bounce", "broker_change_ignores_czxid", "6", [], "ControllerSeesEveryBounce"),
     # With --symmetry the search explores the first state it reaches of each class, by real steps from the
     # initial state, so its counterexample is a trace file like any other (and still a shortest one).
     ("kraft-quorum", "vote_twice_in_epoch", "8", ["--symmetry"], "AtMostOneKRaftLeaderPerEpoch")],
)
def test_explore_writes_each_counterexample_as_a_trace_replay_takes(scope, bug, depth, symmetry, invariant,
                                                                    tmp_path, capsys):
    """explore --traces DIR: the shortest counterexample as a model trace file, which replays to the same
    violation (exit 1) and which pin could take (issue 19: explore's counterexamples as trace files)."""
    code = main(["explore", "--scope", scope, "--bug", bug, "--depth", depth, *symmetry, "--traces", str(tmp_path)])
    assert code == 1
    path = tmp_path / f"{scope}--{invariant}.json"
    assert f"trace file: {path}" in capsys.readouterr().out
    assert main(["replay", str(path)]) == 1
    assert invariant in capsys.readouterr().out
