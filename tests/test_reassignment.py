"""Partitions reassigned during the migration (issue #17 §2 and §4, scope ``reassignment``, KAFKA-16120).

An admin's AlterPartitionReassignments adds broker 1 to partition 0's replicas. In ZooKeeper mode the ZK controller
carries it out (``ApiPartitionReassignment``: the assignment in /brokers/topics/t, the leader epoch bumped,
LeaderAndIsr to the replicas); on an active KRaft controller it is a PartitionChangeRecord with the new replicas
(``AlterPartitionReassignments``, refused in pre-migration), which the dual write writes to ZooKeeper and sends to
the ZK brokers. A ZK broker takes a LeaderAndIsr only at a newer leader epoch (ReplicaManager.becomeLeaderOrFollower),
so the KRaft controller must bump it: Kafka 3.4 to 3.6.1 did not (PartitionChangeBuilder bumps only when replicas
leave), the ZK broker leading the partition never learned its new replica, and the move never completed. The
end-to-end property ZkBrokersConvergeToCommittedImage sees it: at quiescence a hosted partition carries the image's
replicas.
"""

from __future__ import annotations

import pytest

from impl.bugs import SHARED_SEEDED_BUGS, ImplBug
from model.actions import (
    AlterPartition,
    AlterPartitionReassignments,
    ApiPartitionReassignment,
    Deliver,
    Drop,
    DualWrite,
    SendRPCsToBrokers,
    SyncKRaftToZk,
)
from model.bugs import Bug, Profile, Variant
from model.end_to_end_invariants import zk_brokers_at_quiescence
from model.invariants import violations
from model.kraft import ControllerId, PartitionChangeRecord
from model.kraft_quorum import alter_partition_refused, ctrl, own_image
from model.outcome import Verdict
from model.scopes import SCOPES, initial_state
from model.state import TOPIC, LeaderAndIsr, UpdateMetadata, partition_state_path, znode_data
from model.step import outcome, step
from model.types import BrokerId, Errors, LeaderEpoch, PartitionId
from properties.differential import Differential, Disagreement
from tests.conftest import appended, messages, path_to_dual_write, run, walked_kinds

B0, B1, C0, P0 = BrokerId(0), BrokerId(1), ControllerId(3000), PartitionId(0)
SCOPE = "reassignment"
MOVED = (B0, B1)
STATE = partition_state_path(P0)
DUAL_WRITE = path_to_dual_write(C0)  # the driver in DUAL_WRITE
MIGRATE = DUAL_WRITE[:6]  # ... up to the migration committed


def start():
    return initial_state(SCOPES[SCOPE])


def deliver_all(state, variant=Variant()):
    while state.network:
        state = step(state, Deliver(messages(state)[0]), variant)
    return state


def test_zk_controller_moves_the_partition_with_a_newer_leader_epoch():
    """onPartitionReassignment: the new assignment and the bumped leader epoch in one fenced write, LeaderAndIsr to
    both replicas (the new one starts hosting it), UpdateMetadata to every live broker."""
    before = znode_data(start(), STATE)
    moved = run(start(), ApiPartitionReassignment(B0, P0, MOVED))
    assert znode_data(moved, TOPIC) == (MOVED,) and moved.budget.reassignments == 0
    assert znode_data(moved, STATE).leader_epoch == before.leader_epoch + 1
    assert sorted(m.dest for m in messages(moved) if isinstance(m, LeaderAndIsr)) == [B0, B1]
    told = deliver_all(moved)
    hosted = told.brokers[0].replicas + told.brokers[1].replicas
    assert [r.leader_epoch for r in hosted] == [before.leader_epoch + 1] * 2


def test_a_move_off_the_leader_is_one_step_only_on_the_zk_controller():
    """The ZK controller's move is one step to the target (model.zk_era says why), so it does not take a target
    without the leader; a KRaft controller starts it as Kafka does: the target followed by the replica it drops,
    broker 1 adding and broker 0 removing, the leader kept until the completion."""
    assert step(start(), ApiPartitionReassignment(B0, P0, (B1,))) is None
    migrated = run(start(), *DUAL_WRITE)
    moved = step(migrated, AlterPartitionReassignments(C0, P0, (B1,)))
    epoch = znode_data(migrated, STATE).leader_epoch
    assert appended(migrated, moved, C0) == [
        PartitionChangeRecord(0, B0, (B0,), LeaderEpoch(epoch + 1), (B1, B0), adding=(B1,), removing=(B0,))]


def test_kraft_reassignment_is_refused_in_pre_migration_and_bumps_the_epoch_in_dual_write():
    """QuorumController's pre-migration gate answers NOT_CONTROLLER; once migrated, the reassignment's first
    PartitionChangeRecord: the new replicas, broker 1 adding, leader and ISR kept and the leader epoch bumped (both
    profiles: the Differs comment in model.kraft_quorum says how Kafka 3.9 gets there instead)."""
    taken = outcome(start(), AlterPartitionReassignments(C0, P0, MOVED))
    assert taken.error is Errors.NOT_CONTROLLER and "pre-migration" in taken.reason
    for profile in Profile:
        variant = Variant(profile=profile)
        migrated = start()
        for action in DUAL_WRITE:
            migrated = step(migrated, action, variant)
        epoch = znode_data(migrated, STATE).leader_epoch
        moved = step(migrated, AlterPartitionReassignments(C0, P0, MOVED), variant)
        assert appended(migrated, moved, C0) == [
            PartitionChangeRecord(0, B0, (B0,), LeaderEpoch(epoch + 1), MOVED, adding=(B1,))]
        assert own_image(ctrl(moved, C0)).partitions[0].adding == (B1,)


def _moved_and_told(target=MOVED):
    """The KRaft move in dual write, written to ZooKeeper and told to the ZK brokers."""
    return deliver_all(run(run(start(), *DUAL_WRITE), AlterPartitionReassignments(C0, P0, target), DualWrite(C0)))


def test_the_leaders_alter_partition_completes_the_reassignment():
    """The leader (broker 0, told by LeaderAndIsr at the new leader epoch) asks for broker 1's ISR join: one record
    with broker 1 in the ISR that completes the reassignment (adding cleared; replicas and leader epoch kept, as no
    replica leaves). Only the leader may ask, only for an adding replica, and only once."""
    told = _moved_and_told()
    part = own_image(ctrl(told, C0)).partitions[0]
    assert step(told, AlterPartition(B1, C0, P0, B1)) is None  # broker 1 does not lead it
    assert step(told, AlterPartition(B0, C0, P0, B0)) is None  # broker 0 is no adding replica
    joined = step(told, AlterPartition(B0, C0, P0, B1))
    assert appended(told, joined, C0) == [
        PartitionChangeRecord(0, B0, (B0, B1), part.leader_epoch, adding=())]
    done = own_image(ctrl(joined, C0)).partitions[0]
    assert (done.replicas, done.isr, done.reassigning) == (MOVED, (B0, B1), False)
    assert step(joined, AlterPartition(B0, C0, P0, B1)) is None
    assert not violations(told, AlterPartition(B0, C0, P0, B1), joined)


def test_an_adding_replica_that_is_fenced_or_a_leader_not_told_cannot_join():
    """The guard: the leader leads at the image's leader epoch (before the LeaderAndIsr arrives it does not), and
    the adding replica is registered and unfenced."""
    moved = run(run(start(), *DUAL_WRITE), AlterPartitionReassignments(C0, P0, MOVED))
    assert outcome(moved, AlterPartition(B0, C0, P0, B1)).reason.startswith("the broker does not lead")
    told = _moved_and_told()
    image = own_image(ctrl(told, C0))
    fenced = image.replace(brokers=tuple(r.replace(fenced=r.broker == B1) for r in image.brokers))
    assert alter_partition_refused(told, fenced, B0, P0, B1) is not None
    assert alter_partition_refused(told, image, B0, P0, B1) is None


def test_a_move_off_the_leader_completes_with_a_new_leader():
    """Target (1,): broker 1 joins, the completion drops broker 0 from the replicas and the ISR, and the leader
    moves to broker 1 at a newer leader epoch (tryElection; replicas left)."""
    told = _moved_and_told((B1,))
    part = own_image(ctrl(told, C0)).partitions[0]
    joined = step(told, AlterPartition(B0, C0, P0, B1))
    assert appended(told, joined, C0) == [
        PartitionChangeRecord(0, B1, (B1,), LeaderEpoch(part.leader_epoch + 1), (B1,), adding=(), removing=())]


def test_early_completion_breaks_its_invariant():
    """The seeded bug: the first record completes at once, broker 1 a replica outside the ISR."""
    migrated = run(start(), *DUAL_WRITE)
    variant = Variant(frozenset({Bug.REASSIGNMENT_COMPLETES_EARLY}))
    moved = step(migrated, AlterPartitionReassignments(C0, P0, MOVED), variant)
    assert appended(migrated, moved, C0) == [
        PartitionChangeRecord(0, B0, (B0,), LeaderEpoch(znode_data(migrated, STATE).leader_epoch + 1), MOVED)]
    assert "ReassignmentCompletesWithTargetInIsr" in violations(migrated, AlterPartitionReassignments(C0, P0, MOVED),
                                                                moved)


def test_dual_write_writes_the_assignment_and_both_replicas_learn_it():
    """handleTopicsDelta: updateTopic with the new replicas and the state znode; LeaderAndIsr with the replicas to
    the leader and to the new replica, which both take (newer epoch; a partition the new one did not host)."""
    moved = run(run(start(), *DUAL_WRITE), AlterPartitionReassignments(C0, P0, MOVED))
    written = run(moved, DualWrite(C0))
    assert znode_data(written, TOPIC) == (MOVED,)
    assert {m.dest for m in messages(written) if isinstance(m, LeaderAndIsr) and m.replicas == MOVED} == {B0, B1}
    told = deliver_all(written)
    assert told.brokers[0].replicas[0].replicas == MOVED == told.brokers[1].replicas[0].replicas
    assert zk_brokers_at_quiescence(told) is not None and not violations(written, DualWrite(C0), told)


def test_scopes_without_the_budget_offer_no_reassignment():
    assert all(s.budget.reassignments == 0 and s.reassignment is None for n, s in SCOPES.items()
               if n not in (SCOPE, "reassignment-move", "failed-leader-and-isr"))
    spent = start().budget.replace(reassignments=0)
    assert step(start().replace(budget=spent), ApiPartitionReassignment(B0, P0, MOVED)) is None
    migrated = run(start(), *DUAL_WRITE)
    assert step(migrated.replace(budget=spent), AlterPartitionReassignments(C0, P0, MOVED)) is None


# The explorer's shortest counterexample (11 steps): a reassignment after the migration committed, then the sync
# and the RPCs; the leader ignores the LeaderAndIsr at its own leader epoch.
KAFKA_16120 = (*MIGRATE, AlterPartitionReassignments(C0, P0, MOVED), SyncKRaftToZk(C0), SendRPCsToBrokers(C0))


def _quiesce(variant):
    state, broken = start(), []
    for action in KAFKA_16120:
        nxt = step(state, action, variant)
        broken += violations(state, action, nxt)
        state = nxt
    while state.network:
        ours = [m for m in messages(state) if m.dest == B0]
        action = Deliver(ours[0] if ours else messages(state)[0])
        nxt = step(state, action, variant)
        broken += violations(state, action, nxt)
        state = nxt
    return state, broken


def test_reassignment_without_a_leader_epoch_bump_leaves_the_leader_behind():
    """KAFKA-16120 (Kafka 3.5's PartitionChangeBuilder): no bump, so the leader refuses the LeaderAndIsr with
    STALE_CONTROLLER_EPOCH and keeps the old replicas; only the end-to-end property sees it."""
    state, broken = _quiesce(Variant(frozenset({Bug.REASSIGNMENT_KEEPS_LEADER_EPOCH})))
    assert state.brokers[0].replicas[0].replicas == () and set(broken) == {"ZkBrokersConvergeToCommittedImage"}
    state, broken = _quiesce(Variant())
    assert state.brokers[0].replicas[0].replicas == MOVED and broken == []


def test_a_lost_leader_and_isr_waives_the_check_for_its_partition():
    """A LeaderAndIsr lost on the way leaves the replica behind with no rule broken (a change is resent only with the
    next): ``ghost.observed.lost`` keeps the check off that broker's partition."""
    variant = Variant()
    state = run(start(), *KAFKA_16120)
    state = state.replace(budget=state.budget.replace(drops=1))
    lost = next(m for m in messages(state) if isinstance(m, LeaderAndIsr) and m.dest == B0)
    state = step(state, Drop(lost), variant)
    assert (B0, P0, lost.leader_epoch) in state.ghost.observed.lost
    state = deliver_all(state, variant)
    assert state.brokers[0].replicas[0].replicas == () and zk_brokers_at_quiescence(state) is not None
    assert not violations(state, Deliver(lost), state)


def test_the_model_seeded_bug_is_the_shared_pair_of_the_impl_one():
    pair = next(b for b in SHARED_SEEDED_BUGS if b.model_bug is Bug.REASSIGNMENT_KEEPS_LEADER_EPOCH)
    assert pair.bug is ImplBug.REASSIGNMENT_KEEPS_LEADER_EPOCH and pair.invariant == "ZkBrokersConvergeToCommittedImage"
    assert pair.scope == SCOPE


# ---- the implementation -------------------------------------------------------------------------------------


def test_impl_agrees_through_both_reassignment_paths():
    """The scripted paths, applied to both: the ZK controller's move and its LeaderAndIsr; the migration, the KRaft
    move, its dual write and LeaderAndIsr."""
    diff = Differential(SCOPES[SCOPE])
    assert diff.apply(ApiPartitionReassignment(B0, P0, MOVED)) == [ApiPartitionReassignment(B0, P0, MOVED)]
    diff = Differential(SCOPES[SCOPE])
    for action in (*DUAL_WRITE, AlterPartitionReassignments(C0, P0, MOVED), DualWrite(C0)):
        assert diff.apply(action) == [action]
    assert znode_data(diff.model, TOPIC) == (MOVED,)
    for m in [m for m in messages(diff.model) if isinstance(m, (LeaderAndIsr, UpdateMetadata))]:
        assert diff.apply(Deliver(m)) == [Deliver(m)]
    assert diff.model.brokers[0].replicas[0].replicas == MOVED


def test_a_move_to_the_assignment_zookeeper_holds_changes_nothing_in_both():
    """A partition copied from ZooKeeper holds ZooKeeper's assignment in Kafka's image (the model's and the
    implementation's images leave it out): a move to it is no change (changeRecordIsNoOp), no record in either.
    Found by a campaign seed (a reassignment the ZK controller had completed before the migration, asked again of
    the KRaft controller); the implementation wrote a record of the unchanged replicas."""
    diff = Differential(SCOPES[SCOPE])
    for action in DUAL_WRITE:
        diff.apply(action)
    held = znode_data(diff.model, TOPIC)[0]
    same = AlterPartitionReassignments(C0, P0, held)
    assert outcome(diff.model, same).verdict is Verdict.UNCHANGED
    before = len(diff.cluster.controllers[C0].raft.log)
    assert diff.apply(same) == [same]
    assert len(diff.cluster.controllers[C0].raft.log) == before


def test_differential_walks_with_reassignments_agree():
    assert {ApiPartitionReassignment, AlterPartitionReassignments} <= walked_kinds(SCOPE, 12, 60)


def test_the_impl_bug_alone_disagrees_at_the_kraft_move():
    """Made by the implementation only, the missing bump is a disagreement with the model at the KRaft move (the
    scripted path to dual write: random walks of the scope reach a KRaft move in dual write too rarely to rely on)."""
    diff = Differential(SCOPES[SCOPE], bugs=frozenset({ImplBug.REASSIGNMENT_KEEPS_LEADER_EPOCH}))
    for action in DUAL_WRITE:
        assert diff.apply(action) == [action]
    with pytest.raises(Disagreement, match="leader_epoch: impl 0, model 1"):
        diff.apply(AlterPartitionReassignments(C0, P0, MOVED))


def test_impl_correct_campaign_runs_of_the_scope_agree():
    """Seeded simulator runs of the scope (its admin sends the move once per node): no disagreement."""
    from properties.plan import Plan
    from properties.runs import run_seed

    for seed in range(3):
        result = run_seed(Plan(scope=SCOPE, faults="all"), seed, coverage=False)
        assert result.disagreement is None, str(result.disagreement)


def test_fault_mix_reassign_is_named_and_off_elsewhere():
    """``reassign`` is an opt-in mix: no other mix moves a partition, so their runs stay as they were. Its target on
    sim-migration (partition 0 already on every broker) is its replicas reversed, which keeps every old one."""
    from impl.sim.faults import MIXES, parse
    from impl.sim.scenarios import scope_for
    from impl.sim.simulator import reassignment_target
    from properties.runs import scenario

    assert parse("all+reassign").reassign and not any(m.reassign for name, m in MIXES.items() if name != "reassign")
    sim = scenario(scope_for("sim-migration", 0, "drawn"))
    assert reassignment_target(sim) == (P0, tuple(reversed(sim.partitions[0])))
    assert reassignment_target(SCOPES[SCOPE]) == (P0, MOVED)


def test_campaign_under_all_reassign_agrees_and_catches_the_missing_bump():
    """sim-migration under ``all+reassign``: the correct implementation agrees with the model; with the shared bug
    (both layers skip the bump, so they agree) seed 1 breaks ZkBrokersConvergeToCommittedImage, the first seed that
    does; under ``all`` (nothing reassigned) the same seed breaks nothing."""
    from properties.campaign.options import make_plan
    from properties.runs import run_seed

    mutant = "shared_reassignment_keeps_leader_epoch"
    caught = run_seed(make_plan(seeds=2, faults="all+reassign", mutant=mutant, out="unused"), 1, coverage=False)
    assert caught.disagreement is not None and "ZkBrokersConvergeToCommittedImage" in str(caught.disagreement)
    assert run_seed(make_plan(seeds=2, faults="all", mutant=mutant, out="unused"), 1, coverage=False).disagreement \
        is None
    for seed in (0, 1):
        correct = run_seed(make_plan(seeds=2, faults="all+reassign", out="unused"), seed, coverage=False)
        assert correct.disagreement is None, str(correct.disagreement)


def test_impl_agrees_through_the_isr_join_and_completion():
    """The KRaft move, its dual write and LeaderAndIsr, then the leader's AlterPartition: the implementation's ZK
    broker asks its KRaft controller (an RPC), which writes the completing record, as the model does; a request
    from a broker that does not lead is refused alike."""
    diff = Differential(SCOPES[SCOPE])
    for action in (*DUAL_WRITE, AlterPartitionReassignments(C0, P0, MOVED), DualWrite(C0)):
        assert diff.apply(action) == [action]
    while diff.model.network:
        m = messages(diff.model)[0]
        assert diff.apply(Deliver(m)) == [Deliver(m)]
    assert diff.apply(AlterPartition(B1, C0, P0, B1)) == []
    assert diff.apply(AlterPartition(B0, C0, P0, B1)) == [AlterPartition(B0, C0, P0, B1)]
    assert not own_image(ctrl(diff.model, C0)).partitions[0].reassigning


def test_the_impl_early_completion_disagrees_and_breaks_its_invariant():
    """The implementation's seeded bug (impl.bugs REASSIGNMENT_COMPLETES_EARLY): its first record completes the
    reassignment at once; the model's does not, and the abstracted state breaks ReassignmentCompletesWithTargetInIsr."""
    diff = Differential(SCOPES[SCOPE], bugs=frozenset({ImplBug.REASSIGNMENT_COMPLETES_EARLY}))
    for action in DUAL_WRITE:
        assert diff.apply(action) == [action]
    with pytest.raises(Disagreement) as found:
        diff.apply(AlterPartitionReassignments(C0, P0, MOVED))
    assert "ReassignmentCompletesWithTargetInIsr" in found.value.broken


def test_a_campaign_run_takes_isr_joins_and_agrees():
    """sim-migration under ``all+reassign``, seed 1: the simulator's ZK brokers send AlterPartition for the
    reassignment's adding replicas, the controller writes the records, and the model agrees at every step (random
    walks of the scope reach a completed move in dual write too rarely to rely on)."""
    from properties.campaign.options import make_plan
    from properties.runs import run_seed

    run = run_seed(make_plan(seeds=2, faults="all+reassign", out="unused"), 1, coverage=False)
    assert run.disagreement is None, str(run.disagreement)
    assert any(isinstance(s.action, AlterPartition) for s in run.record)
