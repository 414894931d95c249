"""A reassignment that drops a ZK broker's replica during the migration (scope ``reassignment-move``).

KIP-866 §ZK Broker RPCs: "following reassignments and topic deletions, we will need to send StopReplicas to ZK brokers
for them to stop managing certain replicas". Kafka 3.9's MigrationPropagator.sendRPCsToBrokersFromMetadataDelta sends,
for each changed partition, StopReplica with deletePartition to the replicas the delta's base image assigned it and the
new image does not (addStopReplicaRequestForBrokers, through the channel manager: the migrating, unfenced ZK brokers);
from an image (SendRPCsToBrokers after a failover) it sends none. Here the admin moves partition 0 from broker 0 to
broker 1 on the KRaft controller: the first record adds broker 1 and keeps broker 0 (removing), the leader's
AlterPartition completes it, and that completion's dual write must delete broker 0's replica. The end-to-end property
ZkBrokersDropReassignedReplicas sees a broker that kept hosting it: the shared seeded bug (no StopReplica for a
reassignment's removed replica, as for a deleted topic's only).
"""

from __future__ import annotations

import pytest

from impl.bugs import SHARED_SEEDED_BUGS, ImplBug
from model.actions import AlterPartition, AlterPartitionReassignments, Deliver, Drop, DualWrite, SendRPCsToBrokers
from model.bugs import Bug, Profile, Variant
from model.end_to_end_invariants import zk_brokers_at_quiescence
from model.invariants import BY_NAME, violations
from model.kraft import ControllerId, MetadataImage, PartitionImage
from model.kraft_migration import replicas_removed
from model.observations import observe
from model.scopes import SCOPES, initial_state
from model.state import TOPIC, LeaderAndIsr, StopReplica, UpdateMetadata, znode_data
from model.step import step
from model.types import BrokerId, LeaderEpoch, PartitionId
from properties.differential import Differential, Disagreement
from tests.conftest import agreed, messages, path_to_dual_write

B0, B1, C0, P0 = BrokerId(0), BrokerId(1), ControllerId(3000), PartitionId(0)
SCOPE = "reassignment-move"
MOVE = AlterPartitionReassignments(C0, P0, (B1,))
JOIN = AlterPartition(B0, C0, P0, B1)
BUG = Variant(frozenset({Bug.REASSIGNMENT_SENDS_NO_STOP_REPLICA}))


def start():
    return initial_state(SCOPES[SCOPE])


def go(state, actions, variant=Variant(), broken=None):
    """``actions`` in order, then every message in flight delivered; the properties ``broken`` added to ``broken``."""
    pending = list(actions)
    while pending or state.network:
        taken = pending.pop(0) if pending else Deliver(messages(state)[0])
        nxt = step(state, taken, variant)
        assert nxt is not None, f"not enabled: {taken}"
        if broken is not None:
            broken += violations(state, taken, nxt)
        state = nxt
    return state


def moved(variant=Variant(), broken=None):
    """In dual write, the move started and told: broker 0 leads at the new leader epoch, broker 1 is adding."""
    return go(start(), (*path_to_dual_write(C0), MOVE, DualWrite(C0)), variant, broken)


def test_the_start_removes_nobody_and_the_completion_deletes_the_old_replica():
    """The first record's dual write sends no StopReplica (its replicas keep broker 0); the completion's sends broker 0
    StopReplica with deletePartition and broker 1 the LeaderAndIsr that makes it the leader. Broker 0 then hosts
    nothing, and nothing is broken, in both profiles."""
    for profile in Profile:
        variant, broken = Variant(profile=profile), []
        state = moved(variant, broken)
        assert znode_data(state, TOPIC) == ((B1, B0),) and state.brokers[0].replicas[0] is not None
        joined = step(step(state, JOIN, variant), DualWrite(C0), variant)
        (stop,) = messages(joined, StopReplica)
        assert (stop.dest, stop.partition, stop.delete_partition, stop.kraft) == (B0, P0, True, True)
        assert {m.dest for m in messages(joined, LeaderAndIsr)} == {B1} and znode_data(joined, TOPIC) == ((B1,),)
        told = go(joined, (), variant, broken)
        assert told.brokers[0].replicas == (None,) and told.brokers[1].replicas[0].replicas == (B1,)
        findings = SCOPES[SCOPE].expected_findings(profile)  # no transaction at 3.4
        assert zk_brokers_at_quiescence(told) is not None and set(broken) <= findings


def test_the_removed_replica_is_taken_from_the_assignment_for_a_copied_partition():
    """A partition copied from ZooKeeper has no replicas in the model's image: its old replicas are the assignment the
    dual write read. A new partition, or one whose new replicas the image leaves implicit, removes nobody."""
    copied = MetadataImage(partitions=(PartitionImage(B0, (B0,), LeaderEpoch(0)),))
    done = MetadataImage(partitions=(PartitionImage(B1, (B1,), LeaderEpoch(2), (B1,)),))
    assert replicas_removed(copied, done, 0, ((B0,),)) == (B0,)
    assert replicas_removed(copied, done, 0, None) == ()
    assert replicas_removed(MetadataImage(), done, 0, ((B0,),)) == ()
    assert replicas_removed(done, copied, 0, ((B0,),)) == ()


def test_the_shared_seeded_bug_leaves_the_old_replica_hosted():
    """No StopReplica for the removed replica: broker 0 keeps hosting the partition at quiescence, and only the new
    end-to-end property sees it (ZkBrokersConvergeToCommittedImage leaves a partition outside the replicas to it)."""
    broken = []
    state = go(moved(BUG, broken), (JOIN, DualWrite(C0)), BUG, broken)
    assert state.brokers[0].replicas[0] is not None and zk_brokers_at_quiescence(state) is not None
    assert set(broken) == {"ZkBrokersDropReassignedReplicas"}
    pair = next(b for b in SHARED_SEEDED_BUGS if b.model_bug is Bug.REASSIGNMENT_SENDS_NO_STOP_REPLICA)
    assert pair.bug is ImplBug.REASSIGNMENT_SENDS_NO_STOP_REPLICA and pair.scope == SCOPE
    assert pair.invariant == "ZkBrokersDropReassignedReplicas" and BY_NAME[pair.invariant].independent


def test_a_lost_stop_replica_waives_the_check_for_its_partition():
    """A StopReplica lost on the way leaves the replica hosted with no rule broken (nothing resends it):
    ``ghost.observed.strays`` keeps the check off that broker's partition."""
    state = step(step(moved(), JOIN), DualWrite(C0))
    state = state.replace(budget=state.budget.replace(drops=1))
    state = step(state, Drop(messages(state, StopReplica)[0]))
    assert (B0, P0) in state.ghost.observed.strays
    broken = []
    state = go(state, (), broken=broken)
    assert state.brokers[0].replicas[0] is not None and zk_brokers_at_quiescence(state) is not None and broken == []


def test_new_replicas_told_without_a_stop_replica_that_could_come_make_a_stray():
    """Observed strays: broker 0 hosts the partition and a KRaft LeaderAndIsr tells replicas without it. From an image
    (SendRPCsToBrokers: no StopReplica to send), with nothing sent to broker 0 (the controller does not reach it), or
    delivered to broker 0 itself, none can come; a dual write that reached broker 0 and sent it no StopReplica is the
    mistake, not a stray."""
    hosting = moved()
    completed = step(step(hosting, JOIN), DualWrite(C0))
    (told,) = messages(completed, LeaderAndIsr)
    (update,) = messages(completed, UpdateMetadata, dest=B0)
    assert told.replicas == (B1,) and hosting.brokers[0].replicas[0] is not None

    def strays(action, *sent):
        after = hosting.replace(ghost=hosting.ghost.replace(sent=sent))
        return observe(hosting, (action,), after).strays

    assert (B0, P0) in strays(SendRPCsToBrokers(C0), told, update)
    assert (B0, P0) in strays(DualWrite(C0), told)
    assert (B0, P0) not in strays(DualWrite(C0), told, update)
    assert (B0, P0) not in strays(DualWrite(C0), told.replace(replicas=(B1, B0)))
    # SendRPCsToBrokers sends every target every partition: broker 0, outside the replicas, takes it (Kafka's broker
    # ignores a LeaderAndIsr that does not name it), and hosts it with no StopReplica to come.
    full = told.replace(dest=B0, broker_epoch=update.broker_epoch)
    assert (B0, P0) in observe(hosting, (Deliver(full),), hosting).strays
    assert (B0, P0) not in observe(hosting, (Deliver(full.replace(replicas=(B1, B0))),), hosting).strays


# ---- the implementation -------------------------------------------------------------------------------------


def test_impl_agrees_through_the_move_and_its_stop_replica():
    """The scripted path, applied to both: the migration, the move, its dual write, the ISR join, the completion's
    dual write (the implementation reads the assignment it rewrites, as the model does) and the StopReplica."""
    diff = Differential(SCOPES[SCOPE])
    agreed(diff, *path_to_dual_write(C0))
    agreed(diff, MOVE, DualWrite(C0))
    agreed(diff, JOIN)
    assert diff.apply(DualWrite(C0)) == [DualWrite(C0)]
    assert [m.dest for m in messages(diff.model, StopReplica)] == [B0]
    agreed(diff)
    assert diff.model.brokers[0].replicas == (None,)


def test_the_impl_bug_alone_disagrees_at_the_completing_dual_write():
    diff = Differential(SCOPES[SCOPE], bugs=frozenset({ImplBug.REASSIGNMENT_SENDS_NO_STOP_REPLICA}))
    agreed(diff, *path_to_dual_write(C0))
    agreed(diff, MOVE, DualWrite(C0))
    agreed(diff, JOIN)
    with pytest.raises(Disagreement, match="only in model: StopReplica"):
        diff.apply(DualWrite(C0))


def test_the_shared_pair_agrees_and_breaks_the_property_on_the_impl():
    """Made alike by both layers, the missing StopReplica is no disagreement; the property, evaluated on the
    implementation's own state, catches it once the cluster quiesces."""
    diff = Differential(SCOPES[SCOPE], bugs=frozenset({ImplBug.REASSIGNMENT_SENDS_NO_STOP_REPLICA}), variant=BUG)
    agreed(diff, *path_to_dual_write(C0))
    agreed(diff, MOVE, DualWrite(C0))
    agreed(diff, JOIN)
    assert diff.apply(DualWrite(C0)) == [DualWrite(C0)]
    with pytest.raises(Disagreement) as found:
        agreed(diff)
    assert found.value.broken == ["ZkBrokersDropReassignedReplicas"]


def test_differential_walks_of_the_scope_agree_and_deliver_the_stop_replica():
    """Seeded differential walks (plain and swarm) agree with the model at every step, and one within the first 40
    seeds takes a ZK broker's StopReplica for its dropped replica."""
    from properties.differential import walk

    for seed in range(40):
        walked = walk(SCOPES[SCOPE], seed, 80, swarm=seed % 2 == 1)
        if any(isinstance(a, Deliver) and isinstance(a.message, StopReplica) for a in walked.steps):
            return
    pytest.fail("no walk delivered a StopReplica")
