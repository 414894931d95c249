"""Counterexamples of the implementation (properties/shrink.py): signatures, replay without the simulator, shrinking.

Issue 6 §3 "Counterexamples": a violation the simulator finds is grouped by a signature that does
not depend on the run, and shrunk by delta debugging to a trace from which no single step can be
removed, which still shows the same violation when replayed from a fresh cluster.
"""

import pickle

import pytest

from impl.bugs import ImplBug
from model.bugs import CORRECT, Bug, Variant
from properties.differential import Disagreement
from properties.plan import Plan
from properties.runs import run_seed
from properties.shrink import (
    invariant_of,
    replay_steps,
    resolve_mutant,
    shrink_violation,
    signature_of,
    slug,
)

SCOPE = "sim-migration"


def plan_for(mutant: str | None, steps: int = 2000, configs: str = "drawn") -> Plan:
    return Plan(scope=SCOPE, faults="all", mutant=mutant, steps=steps, runbook="finalize", configs=configs)


@pytest.fixture(scope="module")
def stale_version_shrunk():
    """KIP-866 claim: a driver that keeps the /migration version it had before its claim (seed 0 fails at event ~90)."""
    plan = plan_for("impl_stale_migration_version_after_claim")
    run = run_seed(plan, 0)
    found = run.disagreement
    assert found is not None, "the simulator no longer catches the seeded bug at seed 0"
    signature = signature_of(found)
    return plan, run.record, signature, shrink_violation(plan, 0, run.record, signature, seconds=60)


def test_shrink_of_a_simulator_found_impl_bug_is_much_shorter_and_reproduces(stale_version_shrunk):
    """The shrunk trace is a fraction of the run and, replayed from a fresh cluster, breaks with the same signature
    at its last step."""
    plan, record, signature, result = stale_version_shrunk
    assert result.reproduced and result.minimal and result.signature == signature
    assert result.original_steps == len(record)
    assert len(result.steps) * 3 <= len(record), f"{len(record)} -> {len(result.steps)} steps"
    bugs, variant = resolve_mutant(plan.mutant)
    replayed = replay_steps(plan.scope_of(0), 0, bugs, variant, result.steps)
    assert replayed is not None and signature_of(replayed) == signature
    assert len(replayed.steps) == len(result.steps)  # it broke at the last step, not before


def test_shrink_result_is_1_minimal_removing_any_step_loses_the_signature(stale_version_shrunk):
    """1-minimality, checked from fresh clusters (not the shrinker's copies): every single step is needed."""
    plan, _, signature, result = stale_version_shrunk
    bugs, variant = resolve_mutant(plan.mutant)
    for i in range(len(result.steps)):
        fewer = result.steps[:i] + result.steps[i + 1:]
        found = replay_steps(plan.scope_of(0), 0, bugs, variant, fewer)  # the configuration seed 0 drew
        assert found is None or signature_of(found) != signature, f"step {i + 1} could go: {result.steps[i]}"


def test_shrink_keeps_the_simulated_times_and_partitions_in_order(stale_version_shrunk):
    """A shrunk trace is a subsequence of the record: each step as the simulator recorded it."""
    _, record, _, result = stale_version_shrunk
    positions = [record.index(s) for s in result.steps]
    assert positions == sorted(positions) and len(set(positions)) == len(positions)


def test_shrink_without_the_bug_the_shrunk_trace_replays_clean(stale_version_shrunk):
    """The correct implementation agrees with the model on the shrunk steps: the trace shows the bug, not noise."""
    plan, _, _, result = stale_version_shrunk
    assert replay_steps(plan.scope_of(0), 0, frozenset(), CORRECT, result.steps) is None


def test_shrink_out_of_time_still_cuts_the_record_and_says_not_minimal():
    """A budget of 0 s: no ddmin, but the record is cut after the event that disagreed and still reproduces."""
    plan = plan_for("impl_broker_epoch_from_session_id")
    run = run_seed(plan, 0)
    found = run.disagreement
    longer = run.record + run.record[:3]  # steps after the violation, as a record a caller cut late would have
    result = shrink_violation(plan, 0, longer, signature_of(found), seconds=0)
    assert result.reproduced and not result.minimal
    assert result.steps == run.record


def test_shrink_of_a_signature_the_record_does_not_raise_is_not_reproduced():
    """Shrinking towards a signature the run does not show gives the record back, reproduced False."""
    plan = plan_for("impl_broker_epoch_from_session_id")
    run = run_seed(plan, 0)
    result = shrink_violation(plan, 0, run.record, "OnlyCurrentControllerWritesApply", seconds=5)
    assert not result.reproduced and not result.minimal and result.steps == run.record


def test_shrink_result_survives_pickling_for_spark_tasks(stale_version_shrunk):
    """A campaign ships the result from a Spark task to the driver: no exception objects inside."""
    result = stale_version_shrunk[3]
    assert pickle.loads(pickle.dumps(result)) == result


def test_replay_steps_reproduces_the_simulators_disagreement_exactly():
    """The replay recipe (fresh Differential, the run's seed, each step's time and cuts) is the simulator's run."""
    plan = plan_for("impl_claim_without_epoch_cas")
    run = run_seed(plan, 0)
    found = run.disagreement
    bugs, variant = resolve_mutant(plan.mutant)
    replayed = replay_steps(plan.scope_of(0), 0, bugs, variant, run.record)
    assert replayed is not None and str(replayed) == str(found)
    assert replay_steps(plan.scope_of(0), 0, bugs, variant, run.record[:-1]) is None


# ---- signatures -----------------------------------------------------------------------------------


def test_signature_is_the_same_for_two_seeds_hitting_the_same_bug():
    """Seeds 0 and 1 of the claim bug and of the session-id epoch bug (a different broker in each run), on the same
    cluster (the scenario as named), group together: the signature leaves out the run (nodes, numbers), not which
    invariants broke, and on another cluster a bug may break others (the claim bug on a quorum of one controller
    drawn for seed 1 breaks ControllerEpochNeverDecreases too): a different group, rightly."""
    for mutant in ("impl_claim_without_epoch_cas", "impl_broker_epoch_from_session_id"):
        plan = plan_for(mutant, steps=400, configs="fixed")
        first, second = run_seed(plan, 0).disagreement, run_seed(plan, 1).disagreement
        assert first is not None and second is not None
        assert signature_of(first) == signature_of(second), mutant
    epoch_0 = run_seed(plan_for("impl_broker_epoch_from_session_id", configs="fixed"), 0).disagreement
    epoch_1 = run_seed(plan_for("impl_broker_epoch_from_session_id", configs="fixed"), 1).disagreement
    assert epoch_0.details != epoch_1.details  # the runs differ (broker, zxids), their signature does not


def disagreement(summary: str, details: list[str], broken: list[str] = (), steps: list = ()) -> Disagreement:
    return Disagreement(summary, list(steps), details, list(broken))


def test_signature_leaves_out_which_node_and_every_number():
    """Indices and numbers inside brackets become *, values are dropped: zxids, epochs and times never split groups."""
    from model.actions import BecomeZkController

    one = disagreement("after X: the implementation's state is not the model's",
                       ["brokers[2].epoch: impl 1, model 8", "zk[/brokers/ids/2]: impl Znode(czxid=40), model None",
                        "... and 3 more"], steps=[BecomeZkController(3000)])
    other = disagreement("after Y: the implementation's state is not the model's",
                         ["zk[/brokers/ids/0]: impl None, model Znode(czxid=9)", "brokers[0].epoch: impl 3, model 9"],
                         steps=[BecomeZkController(3002)])
    assert signature_of(one) == signature_of(other) == (
        "Disagreement:state@BecomeZkController:brokers[*].epoch,zk[/brokers/ids/*]")


def test_signature_names_the_kind_of_disagreement():
    """State, metrics, a step the model does not allow, a refusal: each its own kind, with the step's action kind."""
    from model.actions import ElectController

    metrics = disagreement("after E: the implementation's metrics are not the model's: ZkWriteBehindLag",
                           ["ZkWriteBehindLag: impl 3, model 2"], steps=[ElectController(1)])
    assert signature_of(metrics) == "Disagreement:metrics@ElectController:ZkWriteBehindLag"
    took = disagreement("the implementation took ResignController(broker=1), which the model does not allow here",
                        [], steps=[ElectController(1)])
    assert signature_of(took) == "Disagreement:not-allowed@ResignController:"
    # the action named is the one the implementation took or refused, not the step the simulator chose
    refused = disagreement("the implementation refused Deliver(message=...), which the model takes", [],
                           steps=[ElectController(1)])
    assert signature_of(refused) == "Disagreement:refused@Deliver:"


def test_signature_of_broken_invariants_is_their_sorted_names():
    found = disagreement("after X: the implementation broke B", ["zk[/a]: impl 1, model 2"],
                         ["ZkEqualsImageAtMigrationOffset", "MultiIsAllOrNothing"])
    assert signature_of(found) == "MultiIsAllOrNothing,ZkEqualsImageAtMigrationOffset"
    assert invariant_of(signature_of(found)) == "MultiIsAllOrNothing"
    assert invariant_of("Disagreement:state@X:a") == "Disagreement"
    assert slug("Disagreement:state@X:brokers[*].epoch") == "Disagreement-state-X-brokers-epoch"


def test_resolve_mutant_finds_both_layers_and_refuses_unknown_names():
    assert resolve_mutant(None) == (frozenset(), CORRECT)
    assert resolve_mutant("impl_vote_ignores_log") == (frozenset({ImplBug.VOTE_IGNORES_LOG}), CORRECT)
    assert resolve_mutant("vote_ignores_log") == (frozenset(), Variant(frozenset({Bug.VOTE_IGNORES_LOG})))
    with pytest.raises(ValueError, match="unknown seeded bug 'nope'"):
        resolve_mutant("nope")
