"""Partitions created during the migration (issue #17 §2, scope ``create-partitions``).

An admin's CreatePartitions reaches ZooKeeper mode as a write of the grown assignment to /brokers/topics/t
(``AddPartitions``: AdminZkClient.addPartitions) that the ZK controller then starts (``ProcessPartitionModifications``:
onNewPartitionCreation creates the state znode, sends LeaderAndIsr and UpdateMetadata); on an active KRaft
controller it is a PartitionRecord (``CreatePartitions``, refused in pre-migration), which the dual write must
create in ZooKeeper (KIP-866 §Dual Metadata Writes: the state znode, with Create, and the grown assignment). A
partition added in ZooKeeper mode whose state znode no controller created before the claim is copied by the
migration as Kafka's ZkTopicMigrationClient does (its replicas as ISR, leader epoch 0) and created by the sync.
Both were latent: before this input the migration read such a znode with ``get_existing`` and the writer set
every partition's state with SetData, which fails with NoNode on a znode that does not exist.
"""

from __future__ import annotations

import pytest

from impl.bugs import IMPL_SEEDED_BUGS, ImplBug
from model import zookeeper as zkm
from model.actions import (
    AddPartitions,
    BecomeZkController,
    CreatePartitions,
    Deliver,
    DualWrite,
    ProcessPartitionModifications,
    SyncKRaftToZk,
    WaitForZkBrokers,
)
from model.bugs import Bug, Variant
from model.invariants import violations
from model.kraft import ControllerId, PartitionRecord
from model.scopes import SCOPES, initial_state
from model.state import TOPIC, LeaderAndIsr, PartitionState, UpdateMetadata, partition_state_path, znode_data
from model.step import outcome, step
from model.types import Errors, LeaderEpoch, PartitionId, ZkCode
from model.zookeeper import Create
from properties.differential import Differential, Disagreement, walk
from tests.conftest import appended, messages, path_to_dual_write, run, walked_kinds

B0, C0 = 0, ControllerId(3000)
SCOPE = "create-partitions"
NEW = partition_state_path(PartitionId(1))
# The claim and the initial migration, up to /migration's first write (the driver then syncs).
DUAL_WRITE = path_to_dual_write(C0)  # the driver in DUAL_WRITE
MIGRATE = DUAL_WRITE[:6]  # ... up to the migration committed


def start():
    return initial_state(SCOPES[SCOPE])


def deliver_all(state):
    while state.network:
        state = run(state, Deliver(messages(state)[0]))
    return state


def test_zk_admin_grows_the_assignment_and_the_controller_starts_the_partition():
    """AdminZkClient.addPartitions writes the assignment only; onNewPartitionCreation creates the state znode
    (leader the first live replica, leader epoch 0) in a fenced write and tells the replica and every live broker."""
    added = run(start(), AddPartitions(B0, (B0,)))
    assert znode_data(added, TOPIC) == ((B0,), (B0,)) and znode_data(added, NEW) is None
    assert added.budget.partition_creations == 0
    started = run(added, ProcessPartitionModifications(B0))
    assert znode_data(started, NEW) == PartitionState(B0, LeaderEpoch(0), (B0,), started.brokers[0].controller.epoch)
    assert [type(m) for m in messages(started)] == [LeaderAndIsr, UpdateMetadata]
    assert step(started, ProcessPartitionModifications(B0)) is None  # nothing new to start
    told = deliver_all(started)
    assert len(told.brokers[0].replicas) == 2 and told.brokers[0].replicas[1].leader_epoch == 0


def test_kraft_create_partitions_is_refused_in_pre_migration_and_appended_in_dual_write():
    """QuorumController's pre-migration gate answers NOT_CONTROLLER; once migrated, a PartitionRecord for the next
    partition with the admin's assignment, its active replicas the ISR."""
    taken = outcome(start(), CreatePartitions(C0, (B0,)))
    assert taken.error is Errors.NOT_CONTROLLER and "pre-migration" in taken.reason
    migrated = run(start(), *DUAL_WRITE)
    created = run(migrated, CreatePartitions(C0, (B0,)))
    assert appended(migrated, created, C0) == [PartitionRecord(1, B0, (B0,), LeaderEpoch(0), (B0,))]


def test_dual_write_creates_the_new_partition_and_grows_the_assignment():
    """KRaftMigrationZkWriter's handleTopicsDelta: updateTopic (the assignment), createTopicPartitions (Create, not
    SetData), then LeaderAndIsr to the new partition's replica."""
    migrated = run(start(), *DUAL_WRITE)
    created = run(migrated, CreatePartitions(C0, (B0,)))
    written = run(created, DualWrite(C0))
    assert znode_data(written, TOPIC) == ((B0,), (B0,))
    assert znode_data(written, NEW).leader_epoch == 0
    assert written.ghost.last_multi == (ZkCode.OK,) * 4  # the fence, the assignment, the Create, /migration
    assert any(isinstance(m, LeaderAndIsr) and m.partition == 1 and m.kraft for m in messages(written))


def test_migration_copies_a_partition_no_controller_started_and_the_sync_creates_it():
    """ZkTopicMigrationClient: no state znode reads as ISR = replicas, the first leading, leader epoch 0; the sync
    (handleTopicsSnapshot) creates it, so ZooKeeper holds what KRaft does."""
    added = run(start(), AddPartitions(B0, (B0,)))
    migrated = run(added, *MIGRATE)
    c = migrated.controllers[0]
    assert PartitionRecord(1, B0, (B0,), LeaderEpoch(0)) in [e.record for e in c.log]
    synced = run(migrated, SyncKRaftToZk(C0))
    node = zkm.get(synced.zk, NEW)
    assert node is not None and (node.data.leader, node.data.isr, node.data.leader_epoch) == (B0, (B0,), 0)


def test_scopes_without_the_budget_offer_no_creation():
    # (dual-write-failure and dual-write-resend add a partition in dual write too: the change their write loses)
    assert all(s.budget.partition_creations == 0 for name, s in SCOPES.items() if name not in (SCOPE,
                                                                                              "dual-write-failure",
                                                                                              "dual-write-resend"))
    spent = start().replace(budget=start().budget.replace(partition_creations=0))
    assert step(spent, AddPartitions(B0, (B0,))) is None
    migrated = run(start(), *DUAL_WRITE)
    assert step(migrated.replace(budget=spent.budget), CreatePartitions(C0, (B0,))) is None


def test_zk_admin_request_is_forwarded_once_kraft_has_claimed():
    """After the claim a migrating ZK broker forwards CreatePartitions to the KRaft controller: no ZooKeeper write."""
    claimed = run(start(), WaitForZkBrokers(C0), BecomeZkController(C0), BecomeZkController(C0))
    assert step(claimed, AddPartitions(B0, (B0,))) is None


@pytest.mark.parametrize("bug, target, situation", [
    (Bug.DUAL_WRITE_SETS_NEW_PARTITION, "KRaftZkWritesFailOnlyOnStaleReads",
     (*DUAL_WRITE, CreatePartitions(C0, (B0,)), DualWrite(C0))),
    (Bug.DUAL_WRITE_KEEPS_ASSIGNMENT, "ZkEqualsImageAtMigrationOffset",
     (*DUAL_WRITE, CreatePartitions(C0, (B0,)), DualWrite(C0))),
    (Bug.MIGRATION_SKIPS_UNSTARTED_PARTITION, "InitialMigrationAllOrNothing", (AddPartitions(B0, (B0,)), *MIGRATE)),
])
def test_model_seeded_bug_of_a_created_partition_breaks_its_property(bug, target, situation):
    variant, state, broken = Variant(frozenset({bug})), start(), []
    for action in situation:
        nxt = step(state, action, variant)
        assert nxt is not None, action
        broken += violations(state, action, nxt)
        state = nxt
    assert target in broken
    if bug is Bug.DUAL_WRITE_SETS_NEW_PARTITION:  # the latent failure: NoNode, retried forever
        assert ZkCode.NO_NODE in state.ghost.last_multi and zkm.get(state.zk, NEW) is None


def test_dual_write_of_a_new_partition_is_a_create_op():
    migrated = run(start(), *DUAL_WRITE)
    created = run(migrated, CreatePartitions(C0, (B0,)))
    from model.kraft_migration import zk_reconcile_ops
    from model.kraft_quorum import committed_image

    ops = zk_reconcile_ops(created, committed_image(created.controllers[0]), created.controllers[0], Variant())
    assert any(isinstance(op, Create) and op.path == NEW for op in ops)


# ---- the implementation -------------------------------------------------------------------------------------


def test_impl_agrees_through_both_creation_paths():
    """The scripted paths, applied to both: the ZK admin and controller, the migration's copy and sync, a KRaft
    creation and its dual write."""
    diff = Differential(SCOPES[SCOPE])
    for action in (AddPartitions(B0, (B0,)), ProcessPartitionModifications(B0)):
        assert diff.apply(action) == [action]
    diff = Differential(SCOPES[SCOPE])
    for action in (*DUAL_WRITE, CreatePartitions(C0, (B0,)), DualWrite(C0)):
        assert diff.apply(action) == [action]
    assert len(znode_data(diff.model, TOPIC)) == 2


def test_differential_walks_with_created_partitions_agree():
    assert {AddPartitions, ProcessPartitionModifications, CreatePartitions} <= walked_kinds(SCOPE, 16, 60)


CREATION_BUGS = [b for b in IMPL_SEEDED_BUGS if b.scope == SCOPE]


def test_walks_catch_the_impl_bugs_of_a_created_partition():
    for entry in CREATION_BUGS:
        with pytest.raises(Disagreement):
            for seed in range(20):
                walk(SCOPES[SCOPE], seed, 60, bugs=frozenset({entry.bug}), swarm=seed % 2 == 1)
    assert {b.bug for b in CREATION_BUGS} == {ImplBug.DUAL_WRITE_SETS_NEW_PARTITION,
                                              ImplBug.MIGRATION_SKIPS_UNSTARTED_PARTITION}


def test_impl_correct_campaign_runs_of_the_scope_agree_and_create():
    """Seeded simulator runs of the scope (its admin sends each creation once per node): no disagreement."""
    from properties.plan import Plan
    from properties.runs import run_seed

    plan = Plan(scope=SCOPE, faults="all")
    for seed in range(4):
        result = run_seed(plan, seed, coverage=False)
        assert result.disagreement is None, str(result.disagreement)


def test_drawn_partitions_mix_draws_creations_and_leaves_the_drawn_configurations_as_they_were():
    """``--configs drawn+partitions`` adds an admin's partition creation to one drawn run in two, drawn after every
    other dimension, so each seed's configuration is otherwise the one ``drawn`` gives it (the world ``partitions``
    is another way a drawn run creates one: ``impl.sim.scenarios.WORLDS``)."""
    from dataclasses import replace

    from impl.sim.scenarios import draw

    drawn = [draw(seed) for seed in range(16)]
    creating = [draw(seed, partitions=True) for seed in range(16)]
    assert all("partitions" not in c.admin for c in drawn)
    assert 0 < sum("partitions" in c.admin for c in creating) < 16
    assert [replace(c, admin=tuple(a for a in c.admin if a != "partitions")) for c in creating] == drawn


def test_campaign_with_drawn_partitions_agrees_and_catches_the_dual_write_bug():
    """Seeded campaign runs of sim-migration under ``drawn+partitions``: the correct implementation agrees with the
    model; the writer that sets a new partition's state znode disagrees (seed 36, the first of the first 36 seeds
    to catch it under the default faults: a KRaft creation in dual write)."""
    from properties.plan import Plan
    from properties.runs import run_seed

    for seed in (1, 3):
        run = run_seed(Plan(scope="sim-migration", configs="drawn+partitions"), seed, coverage=False)
        assert run.disagreement is None, str(run.disagreement)
    plan = Plan(scope="sim-migration", configs="drawn+partitions", mutant=ImplBug.DUAL_WRITE_SETS_NEW_PARTITION.value)
    assert run_seed(plan, 36, coverage=False).disagreement is not None


def test_default_campaign_zk_admin_grows_the_topic_between_the_hand_back_and_the_first_zk_election():
    """KIP-866 §Rollback to ZK: the default plan's seed 35 (a partitions world, rolled back) has a ZK broker's admin
    grow the topic after the quorum's znodes are deleted and before the first ZK controller is elected; the correct
    implementation breaks nothing (RollbackLosesNothingCommitted, which compared ZooKeeper at that election with
    KRaft's committed image for equality, took the admin's partition for a lost commit)."""
    from model.actions import AddPartitions, DeleteControllerZNodes, ElectController
    from properties.campaign.options import make_plan
    from properties.runs import run_seed

    plan = make_plan(seeds=36, out="unused")
    assert "world=partitions" in plan.scope_of(35) and plan.runbook_of(35) == "rollback"
    run = run_seed(plan, 35, coverage=False)
    assert run.disagreement is None, str(run.disagreement)
    kinds = [type(s.action) for s in run.record]
    hand_back = kinds.index(DeleteControllerZNodes)
    assert AddPartitions in kinds[hand_back:kinds.index(ElectController, hand_back)]


def test_default_campaign_catches_a_migration_that_skips_an_admins_unstarted_partition():
    """KIP-866 §Initial Data Migration: the default plan's seed 128 (a partitions world) has a ZK broker's admin grow
    the topic before the migration reads it, the new partition not yet started; the migration with
    impl_migration_skips_unstarted_partition leaves it out. (Seed 106 did until it drew the held world too, whose
    heartbeats held in the network draw from the run's stream.) A ZK broker's AddPartitions comes at ONCE in a drawn
    configuration; weighed SPONTANEOUS, as it was, the run sends none before the claim."""
    from properties.plan import Plan
    from properties.runs import run_seed

    run = run_seed(Plan(mutant=ImplBug.MIGRATION_SKIPS_UNSTARTED_PARTITION.value), 128, coverage=False)
    assert run.disagreement is not None and "MigrateMetadata" in str(run.disagreement)
    assert run_seed(Plan(), 128, coverage=False).disagreement is None
