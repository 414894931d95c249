"""The ZooKeeper-to-KRaft migration, scenario by scenario (KIP-866; KIP-500 §Bridge Release).

Each test drives the model with an explicit action sequence from a part-2 scope's warm start
and checks the driver state, the committed migration state, the controllers' logs, the znodes
and the messages in flight. The correct model (profile ``kip``) runs through ``run``, which
checks every invariant on every step; the shipped-Kafka profile (``kafka-3.9``) runs through
``drive``, which does the same checks itself. Where the seeds and Kafka 3.9 differ, the test is
parametrized over both profiles and says what each one expects.
"""

from __future__ import annotations

import pytest

from model.actions import (
    AddPartitions,
    AlterConfigs,
    BecomeLeader,
    BecomeZkController,
    BrokerHeartbeat,
    CompleteMigration,
    DeleteControllerZNodes,
    Deliver,
    DualWrite,
    ElectController,
    Fetch,
    FetchMetadata,
    KRaftLeaderChange,
    MigrateBrokerToKRaft,
    MigrateMetadata,
    MigrationCommitted,
    ObserveControllerEpoch,
    OpenSession,
    ReconfigureController,
    RecoverMigrationState,
    RegisterBroker,
    RegisterWithKRaft,
    RequestVote,
    ResignController,
    RestartBroker,
    RestartController,
    RollbackBrokerToZk,
    SendRPCsToBrokers,
    SessionTimeout,
    ShutdownController,
    StartElection,
    StopBroker,
    SyncKRaftToZk,
    UpdateMetadataVersion,
    WaitForControllerQuorum,
    WaitForZkBrokers,
    ZkOutage,
    ZkRecover,
)
from model.bugs import CORRECT, Variant
from model.invariants import violations, witnessed
from model.kraft import (
    AbortTransactionRecord,
    BeginTransactionRecord,
    BrokerRegistrationChangeRecord,
    BrokerState,
    ConfigRecord,
    ControllerId,
    EndTransactionRecord,
    FeatureLevelRecord,
    Incarnation,
    KRaftEpoch,
    LeaderChangeMessage,
    LogEntry,
    MetadataImage,
    PartitionChangeRecord,
    PartitionImage,
    PartitionRecord,
    QuorumRole,
    RegisterBrokerRecord,
    UpgradeType,
    ZkMigrationState,
    ZkMigrationStateRecord,
    image_of,
)
from model.kraft_quorum import ctrl, decide_metadata_version, decide_write, own_image, writes_blocked
from model.metrics import DUAL, KRAFT, ZOOKEEPER, metrics
from model.migration import (
    CONFIG,
    MIGRATION,
    KRaftControllerZNode,
    MigrationDriverState,
    MigrationZNode,
    Profile,
    pending_deletion_path,
    topic_path,
)
from model.outcome import error_of
from model.scopes import SCOPES, at_metadata_version, initial_state, profile_findings
from model.state import CONTROLLER, CONTROLLER_EPOCH, TOPIC, LeaderAndIsr, UpdateMetadata, partition_state_path
from model.step import outcome, step
from model.types import (
    NO_SESSION,
    BrokerEpoch,
    BrokerId,
    ControllerEpoch,
    Errors,
    Ibp,
    LeaderEpoch,
    PartitionId,
    metadata_changed_between,
)
from model.zookeeper import get
from tests.conftest import appended, run, tree, with_budget

D = MigrationDriverState
M = ZkMigrationState
C0, C1 = ControllerId(3000), ControllerId(3001)
B0, B1 = BrokerId(0), BrokerId(1)
KAFKA_3_9 = Variant(profile=Profile.KAFKA_3_9)
PROFILES = pytest.mark.parametrize("variant", [CORRECT, KAFKA_3_9], ids=["kip", "kafka-3.9"])
PARTITION = partition_state_path(PartitionId(0))


def drive(state, *actions, variant: Variant = CORRECT):
    """``run`` for the correct model; under another profile the same checks, done here."""
    if variant == CORRECT:
        return run(state, *actions)
    for action in actions:
        after = step(state, action, variant)
        assert after is not None, f"not enabled: {action}"
        broken = violations(state, action, after)
        assert broken == [], f"{action} broke {broken}"
        state = after
    return state


def driver_state(state, cid):
    d = ctrl(state, cid).driver
    return None if d is None else d.state


def committed(state):
    """The committed image: what ``history.committed`` replays to."""
    return image_of(state.history.committed)


def data(state, path):
    node = get(state.zk, path)
    return None if node is None else node.data


# ---- 1. the whole migration, one ZK broker and one controller ------------------------------------

@PROFILES
def test_migration_full_path_from_zookeeper_to_post_migration(variant):
    """A ZK cluster migrates to KRaft end to end: claim, copy, dual writes, broker roll, finalize.

    KIP-866 §Migration Overview, §Controller Migration, §Controller Leadership, §Initial Data
    Migration, §Dual Metadata Writes, §Broker Migration, §Finalizing the Migration, §Meta.Properties;
    KIP-500 §Bridge Release. With a single controller both profiles finalize (kip asks every voter
    to have dropped the flag; Kafka 3.9 finalizes at once). The profiles differ in the controller
    epoch written into partition state: the claimed ZK epoch (kip) or the Raft epoch (kafka-3.9). At metadata.version
    3.6-IV1, from which Kafka migrates in a metadata transaction (below it, see
    test_kafka_3_9_migrates_without_a_transaction_below_3_6_iv1).
    """
    state = initial_state(at_metadata_version(with_budget("handover", restarts=2, migrations=4), Ibp.IBP_3_6_IV1))
    assert committed(state).migration is M.PRE_MIGRATION
    assert driver_state(state, C0) is D.WAIT_FOR_CONTROLLER_QUORUM

    # ZK broker 0 registers with the KRaft quorum and is unfenced.
    state = drive(state, RegisterWithKRaft(B0, C0), BrokerHeartbeat(B0, C0), variant=variant)
    reg = committed(state).registration(B0)
    assert (reg.epoch, reg.is_migrating_zk_broker, reg.fenced) == (3, True, False)

    state = drive(state, WaitForControllerQuorum(C0), variant=variant)
    assert driver_state(state, C0) is D.WAIT_FOR_BROKERS
    state = drive(state, WaitForZkBrokers(C0), variant=variant)
    assert driver_state(state, C0) is D.BECOME_CONTROLLER

    # The claim: /controller_epoch + 1 by compare-and-set, a persistent /controller with the Raft epoch.
    assert (data(state, CONTROLLER_EPOCH), data(state, CONTROLLER)) == (1, 0)
    state = drive(state, BecomeZkController(C0), variant=variant)
    assert get(state.zk, CONTROLLER_EPOCH).data == 2
    controller = get(state.zk, CONTROLLER)
    assert (controller.data, controller.ephemeral_owner) == (KRaftControllerZNode(C0, KRaftEpoch(1)), NO_SESSION)
    assert (driver_state(state, C0), ctrl(state, C0).driver.zk_epoch) == (D.BECOME_CONTROLLER, 2)
    state = drive(state, BecomeZkController(C0), variant=variant)  # then /migration, to learn its version
    assert data(state, MIGRATION) == MigrationZNode(C0, KRaftEpoch(1), -1)
    assert driver_state(state, C0) is D.ZK_MIGRATION

    # The initial migration: one metadata transaction.
    before = state
    state = drive(state, MigrateMetadata(C0), variant=variant)
    assert appended(before, state, C0) == [
        BeginTransactionRecord("ZK Migration"),
        PartitionRecord(0, B0, (0,), LeaderEpoch(0)),
        ConfigRecord(1),
    ]
    assert (committed(state).partitions, committed(state).config) == ((), None)  # the transaction is open
    before = state
    state = drive(state, CompleteMigration(C0), variant=variant)
    assert appended(before, state, C0) == [ZkMigrationStateRecord(M.MIGRATION), EndTransactionRecord()]
    image = committed(state)
    assert (image.migration, image.partitions, image.config) == (
        M.MIGRATION, (PartitionImage(B0, (0,), LeaderEpoch(0)),), 1,
    )
    state = drive(state, MigrationCommitted(C0), variant=variant)
    assert data(state, MIGRATION) == MigrationZNode(C0, KRaftEpoch(1), 10)
    assert driver_state(state, C0) is D.SYNC_KRAFT_TO_ZK
    state = drive(state, SyncKRaftToZk(C0), variant=variant)
    assert driver_state(state, C0) is D.KRAFT_CONTROLLER_TO_BROKER_COMM

    # A full UpdateMetadata, then LeaderAndIsr, both marked IsKRaftController, to the ZK broker.
    state = drive(state, SendRPCsToBrokers(C0), variant=variant)
    update = UpdateMetadata(BrokerId(C0), ControllerEpoch(2), BrokerEpoch(3), B0, ((B0, LeaderEpoch(0)),),
                            kraft=True, live=(B0,))
    leader_and_isr = LeaderAndIsr(BrokerId(C0), ControllerEpoch(2), BrokerEpoch(3), B0, PartitionId(0), B0,
                                  LeaderEpoch(0), (B0,), kraft=True)
    assert state.ghost.sent == (update, leader_and_isr)
    assert state.network == frozenset({update, leader_and_isr})
    assert driver_state(state, C0) is D.DUAL_WRITE
    state = drive(state, Deliver(update), Deliver(leader_and_isr), variant=variant)
    assert (state.brokers[0].controller_epoch, state.brokers[0].metadata_live) == (2, (B0,))

    # The broker rolls into KRaft mode: stop, its ZK incarnation's session times out, restart on KRaft.
    before = state
    state = drive(state, StopBroker(B0), SessionTimeout(B0, C0), variant=variant)
    fence, move = appended(before, state, C0)
    assert fence == BrokerRegistrationChangeRecord(B0, BrokerEpoch(3), True)
    assert (type(move), move.leader, move.leader_epoch) == (PartitionChangeRecord, -1, 1)
    state = drive(state, DualWrite(C0), variant=variant)
    written = data(state, PARTITION)
    assert (written.leader, written.leader_epoch) == (-1, 1)
    assert written.controller_epoch == (2 if variant == CORRECT else 1)  # Differs: claimed ZK epoch vs Raft epoch
    assert data(state, MIGRATION).kraft_metadata_offset == len(state.history.committed) == 12

    state = drive(state, MigrateBrokerToKRaft(B0), RestartBroker(B0), variant=variant)
    broker = state.brokers[0]
    assert (broker.config.kraft_mode, broker.incarnation, broker.lifecycle, broker.meta_properties) == (
        True, 1, BrokerState.FENCED, 0,
    )
    before = state
    state = drive(state, RegisterWithKRaft(B0, C0), FetchMetadata(B0, C0), variant=variant)
    assert appended(before, state, C0) == [
        RegisterBrokerRecord(B0, Incarnation(1), BrokerEpoch(12), False, Ibp.IBP_3_6_IV1)
    ]
    assert (state.brokers[0].image.migration, state.brokers[0].meta_properties) == (M.MIGRATION, 0)
    before = state
    state = drive(state, BrokerHeartbeat(B0, C0), variant=variant)
    assert appended(before, state, C0)[0] == BrokerRegistrationChangeRecord(B0, BrokerEpoch(12), False)
    assert state.brokers[0].lifecycle is BrokerState.ONLINE

    # Finalize: ZooKeeper caught up, the controller restarted without the flag.
    state = drive(state, DualWrite(C0), variant=variant)
    assert data(state, MIGRATION).kraft_metadata_offset == len(state.history.committed)
    state = drive(state, ShutdownController(C0), ReconfigureController(C0, False), RestartController(C0),
                  StartElection(C0), variant=variant)
    assert ctrl(state, C0).driver is None
    before = state
    state = drive(state, BecomeLeader(C0), variant=variant)
    assert ctrl(state, C0).log[-2:] == (
        LogEntry(KRaftEpoch(2), LeaderChangeMessage(C0)),
        LogEntry(KRaftEpoch(2), ZkMigrationStateRecord(M.POST_MIGRATION)),
    )
    assert committed(state).migration is M.POST_MIGRATION
    assert "MigrationFinalized" in witnessed(before, BecomeLeader(C0), state)

    # After it: no ZooKeeper write, meta.properties v1, no way back to ZK mode.
    znodes = tree(state)
    assert step(state, DualWrite(C0), variant) is None
    state = drive(state, FetchMetadata(B0, C0), variant=variant)
    assert (state.brokers[0].image.migration, state.brokers[0].meta_properties) == (M.POST_MIGRATION, 1)
    state = drive(state, StopBroker(B0), variant=variant)
    assert tree(state) == znodes
    assert state.budget.migrations == 1  # budget is not what refuses it
    assert step(state, RollbackBrokerToZk(B0), variant) is None


def test_new_quorum_driver_waits_for_the_bootstrap_records_to_commit():
    """A fresh two-voter quorum: the leader activates once its LeaderChange commits, and only then appends
    its bootstrap records. Its driver, told it leads, must not read that committed LeaderChange alone (an
    empty image, implicitly NONE) as a KRaft-born cluster: it waits for a non-empty image.

    KIP-866 §Migration Trigger (the quorum's PRE_MIGRATION); Kafka's KRaftMigrationDriver skips an empty
    first image (KAFKA-15389). The simulator found the run where the driver went INACTIVE for good.
    """
    scope = SCOPES["pre-migration"].replace(name="pre-migration-cold", stage=None)
    state = run(initial_state(scope), StartElection(C0), RequestVote(C0, C1), BecomeLeader(C0),
                RecoverMigrationState(C0), Fetch(C1, C0), KRaftLeaderChange(C0))
    assert committed(state).migration is None and ctrl(state, C0).active
    assert [e.record for e in ctrl(state, C0).log[1:]] == [
        FeatureLevelRecord("metadata.version", Ibp.IBP_3_4_IV0), ZkMigrationStateRecord(M.PRE_MIGRATION),
    ]
    assert driver_state(state, C0) is D.WAIT_FOR_CONTROLLER_QUORUM
    assert step(state, WaitForControllerQuorum(C0)) is None  # the committed image is empty
    state = run(state, Fetch(C1, C0), WaitForControllerQuorum(C0))
    assert driver_state(state, C0) is D.WAIT_FOR_BROKERS


# ---- 2. a failover in the middle of the initial migration ----------------------------------------

def test_migration_failover_mid_transaction_aborts_and_migrates_again():
    """The leader dies for the quorum halfway through copying ZooKeeper: the next leader aborts and starts over.

    KIP-866 §Initial Data Migration ("If the controller fails before this transaction is
    finalized, the next active controller will abort the transaction and restart the migration
    process"), §Controller Crashes, §Topic Deletions. InitialMigrationAllOrNothing is checked on
    every step by ``run``.
    """
    state = initial_state(SCOPES["migration"])
    assert committed(state).migration is M.PRE_MIGRATION
    state = run(state, WaitForZkBrokers(C0), BecomeZkController(C0), BecomeZkController(C0), MigrateMetadata(C0))
    assert ctrl(state, C0).log[7:] == (
        LogEntry(KRaftEpoch(1), BeginTransactionRecord("ZK Migration")),
        LogEntry(KRaftEpoch(1), PartitionRecord(0, B0, (0, 1), LeaderEpoch(0))),
        LogEntry(KRaftEpoch(1), ConfigRecord(1)),
    )
    state = run(state, Fetch(C1, C0))  # the first part commits; the transaction is still open
    image = committed(state)
    assert image.open_transaction == (PartitionRecord(0, B0, (0, 1), LeaderEpoch(0)), ConfigRecord(1))
    assert (image.migration, image.partitions, image.config) == (M.PRE_MIGRATION, (), None)

    # 3001 times out and wins epoch 2. It activates once its LeaderChange commits (the Fetch that
    # also tells 3000 of epoch 2), and its activation aborts the open transaction.
    before = run(state, StartElection(C1), RequestVote(C1, C0), BecomeLeader(C1))
    assert not ctrl(before, C1).active
    assert ctrl(before, C1).log[10:] == (LogEntry(KRaftEpoch(2), LeaderChangeMessage(C1)),)
    state = run(before, Fetch(C0, C1))
    assert "FailoverAbortsMigration" in witnessed(before, Fetch(C0, C1), state)
    assert ctrl(state, C1).log[10:] == (
        LogEntry(KRaftEpoch(2), LeaderChangeMessage(C1)),
        LogEntry(KRaftEpoch(2), AbortTransactionRecord()),
    )
    # The deposed leader's driver still believes it migrates, but it can no longer append.
    assert driver_state(state, C0) is D.ZK_MIGRATION
    assert step(state, CompleteMigration(C0)) is None
    assert step(state, MigrationCommitted(C0)) is None
    state = run(state, KRaftLeaderChange(C0), Fetch(C0, C1))
    assert driver_state(state, C0) is D.INACTIVE
    image = committed(state)
    assert (image.open_transaction, image.partitions, image.config) == (None, (), None)

    # The new leader's driver starts the migration again.
    state = run(state, KRaftLeaderChange(C1), WaitForControllerQuorum(C1), WaitForZkBrokers(C1), BecomeZkController(C1))
    assert (data(state, CONTROLLER_EPOCH), data(state, CONTROLLER)) == (3, KRaftControllerZNode(C1, KRaftEpoch(2)))
    state = run(state, BecomeZkController(C1))
    assert driver_state(state, C1) is D.ZK_MIGRATION
    state = run(state, MigrateMetadata(C1), Fetch(C0, C1), CompleteMigration(C1), Fetch(C0, C1), MigrationCommitted(C1))
    assert data(state, MIGRATION) == MigrationZNode(C1, KRaftEpoch(2), 17)
    assert get(state.zk, pending_deletion_path("d")) is not None
    state = run(state, SyncKRaftToZk(C1), SendRPCsToBrokers(C1))
    assert driver_state(state, C1) is D.DUAL_WRITE
    assert get(state.zk, topic_path("d")) is None and get(state.zk, pending_deletion_path("d")) is None

    assert [e.record for e in state.history.committed[7:]] == [
        BeginTransactionRecord("ZK Migration"),
        PartitionRecord(0, B0, (0, 1), LeaderEpoch(0)),
        ConfigRecord(1),
        LeaderChangeMessage(C1),
        AbortTransactionRecord(),
        BeginTransactionRecord("ZK Migration"),
        PartitionRecord(0, B0, (0, 1), LeaderEpoch(0)),
        ConfigRecord(1),
        ZkMigrationStateRecord(M.MIGRATION),
        EndTransactionRecord(),
    ]
    image = committed(state)
    assert (image.migration, image.partitions, image.config) == (
        M.MIGRATION, (PartitionImage(B0, (0, 1), LeaderEpoch(0)),), 1,
    )


def _first_batch_committed(variant: Variant = CORRECT):
    """``batched-migration`` (batches of 1 record) with its first batch appended and committed."""
    state = initial_state(SCOPES["batched-migration"])
    state = drive(state, WaitForZkBrokers(C0), BecomeZkController(C0), BecomeZkController(C0), variant=variant)
    before = state
    state = drive(state, MigrateMetadata(C0), variant=variant)
    assert appended(before, state, C0) == [BeginTransactionRecord("ZK Migration"),
                                           PartitionRecord(0, B0, (0, 1), LeaderEpoch(0))]
    assert step(state, MigrateMetadata(C0), variant) is None  # the first batch has not committed
    state = drive(state, Fetch(C1, C0), variant=variant)
    image = committed(state)
    assert image.open_transaction == (PartitionRecord(0, B0, (0, 1), LeaderEpoch(0)),)
    assert (image.migration, image.partitions, image.config) == (M.PRE_MIGRATION, (), None)
    return state


@PROFILES
def test_batched_migration_keeps_its_transaction_open_while_the_cluster_steps(variant):
    """zookeeper.metadata.migration.min.batch.size 1: the partition, then the config, each batch waiting for the one
    before to commit; a ZooKeeper outage comes between them. KIP-866 §Controller Migration ("a single metadata
    transaction"), §Initial Data Migration: nothing of it shows until the MIGRATION record ends it."""
    state = _first_batch_committed(variant)
    assert step(state, CompleteMigration(C0), variant) is None  # the config is not copied yet
    state = drive(state, ZkOutage(), variant=variant)
    assert step(state, MigrateMetadata(C0), variant) is None  # the next batch is read from ZooKeeper
    state = drive(state, ZkRecover(), variant=variant)
    before = state
    state = drive(state, MigrateMetadata(C0), variant=variant)
    assert appended(before, state, C0) == [ConfigRecord(1)]
    assert step(state, MigrateMetadata(C0), variant) is None  # every batch is in
    state = drive(state, Fetch(C1, C0), CompleteMigration(C0), variant=variant)
    assert committed(state).partitions == ()  # the end is not committed yet
    state = drive(state, Fetch(C1, C0), MigrationCommitted(C0), variant=variant)
    image = committed(state)
    assert (image.migration, image.partitions, image.config, image.open_transaction) == (
        M.MIGRATION, (PartitionImage(B0, (0, 1), LeaderEpoch(0)),), 1, None,
    )


def test_batched_migration_failover_between_batches_aborts_and_copies_again():
    """The leader loses the quorum after its first batch committed: the next leader aborts the open transaction at
    activation and copies ZooKeeper again, batch by batch (KIP-866 §Initial Data Migration, "the next active
    controller will abort the transaction and restart the migration process")."""
    state = _first_batch_committed()
    before = run(state, StartElection(C1), RequestVote(C1, C0), BecomeLeader(C1))
    state = run(before, Fetch(C0, C1))
    seen = set(witnessed(before, Fetch(C0, C1), state))
    assert {"FailoverAbortsMigration", "FailoverBetweenMigrationBatches"} <= seen
    assert [e.record for e in ctrl(state, C1).log[-2:]] == [LeaderChangeMessage(C1), AbortTransactionRecord()]
    state = run(state, KRaftLeaderChange(C0), KRaftLeaderChange(C1), WaitForControllerQuorum(C1),
                WaitForZkBrokers(C1), BecomeZkController(C1), BecomeZkController(C1))
    mark = state
    state = run(state, MigrateMetadata(C1), Fetch(C0, C1), MigrateMetadata(C1), Fetch(C0, C1), CompleteMigration(C1),
                Fetch(C0, C1))
    assert appended(mark, state, C1) == [
        BeginTransactionRecord("ZK Migration"), PartitionRecord(0, B0, (0, 1), LeaderEpoch(0)), ConfigRecord(1),
        ZkMigrationStateRecord(M.MIGRATION), EndTransactionRecord(),
    ]
    image = committed(state)
    assert (image.migration, image.partitions, image.config) == (
        M.MIGRATION, (PartitionImage(B0, (0, 1), LeaderEpoch(0)),), 1,
    )


def test_kafka_3_9_migrates_without_a_transaction_below_3_6_iv1():
    """A finding under kafka-3.9 (docs/model.md): at metadata.version 3.4-IV0 (a quorum Kafka 3.4 or 3.5 formatted)
    Kafka migrates with no metadata transaction, so the copy shows in the committed image while the state is still
    PRE_MIGRATION: InitialMigrationAllOrNothing and OnlyAllowedWritesInPreMigration break, as ``migration``'s
    findings list. From 3.6-IV1 (``batched-migration``) it begins one."""
    state = initial_state(SCOPES["migration"])
    state = drive(state, WaitForZkBrokers(C0), BecomeZkController(C0), BecomeZkController(C0), variant=KAFKA_3_9)
    after = step(state, MigrateMetadata(C0), KAFKA_3_9)
    assert appended(state, after, C0) == [PartitionRecord(0, B0, (0, 1), LeaderEpoch(0)), ConfigRecord(1)]
    committing = step(after, Fetch(C1, C0), KAFKA_3_9)
    broken = set(violations(after, Fetch(C1, C0), committing))
    assert broken == {"InitialMigrationAllOrNothing", "OnlyAllowedWritesInPreMigration"}
    assert broken == SCOPES["migration"].expected_findings(Profile.KAFKA_3_9) - profile_findings(Profile.KAFKA_3_9)
    assert _first_batch_committed(KAFKA_3_9) is not None  # at 3.6-IV1: begun in a transaction, as under kip


# ---- 3. ZooKeeper unavailable during dual writes -------------------------------------------------

def test_dual_write_zookeeper_outage_refuses_writes_at_the_lag_bound_then_catches_up():
    """ZooKeeper loses quorum during dual writes: admin writes go on until the lag bound, then are refused.

    KIP-866 §Unavailable ZooKeeper ("stop making updates to the metadata log to avoid unbounded
    lag"), §Dual Metadata Writes (one multi with the conditional /migration update), §Metrics
    (ZkWriteBehindLag). The scope's bound is 2 records.
    """
    state = initial_state(SCOPES["dual-write"])
    assert state.budget.max_lag == 2
    assert data(state, MIGRATION) == MigrationZNode(C0, KRaftEpoch(1), 12)
    state = run(state, ZkOutage(), AlterConfigs(C0), Fetch(C1, C0), AlterConfigs(C0), Fetch(C1, C0))
    assert [e.record for e in ctrl(state, C0).log[12:]] == [ConfigRecord(2), ConfigRecord(3)]
    assert committed(state).config == 3
    assert data(state, CONFIG) == 1  # ZooKeeper still has the migrated value
    assert step(state, DualWrite(C0)) is None  # nothing can be written to ZooKeeper
    assert metrics(state)["ZkWriteBehindLag"] == 2

    # A third write would take the lag past the bound: not enabled (no record, no budget spent).
    assert writes_blocked(state, ctrl(state, C0), CORRECT)
    assert state.budget.operator == 1
    assert step(state, AlterConfigs(C0)) is None

    state = run(state, ZkRecover(), DualWrite(C0))
    assert data(state, MIGRATION) == MigrationZNode(C0, KRaftEpoch(1), len(state.history.committed))
    assert len(state.history.committed) == 14
    assert data(state, CONFIG) == committed(state).config == 3
    assert metrics(state)["ZkWriteBehindLag"] == 0
    assert not writes_blocked(state, ctrl(state, C0), CORRECT)
    state = run(state, AlterConfigs(C0))  # writes are taken again
    assert ctrl(state, C0).log[-1].record == ConfigRecord(4)




def test_dual_write_zookeeper_outage_kafka_takes_writes_past_the_lag_bound():
    """Kafka 3.9 sets no write-behind bound: with ZooKeeper down, admin writes go on past the kip bound.

    KIP-866 §Unavailable ZooKeeper asks for a bound; Kafka 3.9 only reports the lag (ZkWriteBehindLag), and a
    real 3.9.2 run with a stalled ZooKeeper let the log pass ZooKeeper by 270 records. So ``kafka-3.9`` takes
    the third write that ``kip`` refuses, and breaks WriteBehindLagBounded: a finding, not a bug of the model.
    """
    state = run(initial_state(SCOPES["dual-write"]), ZkOutage(), AlterConfigs(C0), Fetch(C1, C0),
                AlterConfigs(C0), Fetch(C1, C0))
    assert writes_blocked(state, ctrl(state, C0), CORRECT)
    assert not writes_blocked(state, ctrl(state, C0), KAFKA_3_9)
    assert step(state, AlterConfigs(C0)) is None
    after = step(state, AlterConfigs(C0), KAFKA_3_9)
    assert ctrl(after, C0).log[-1].record == ConfigRecord(4)
    committing = step(after, Fetch(C1, C0), KAFKA_3_9)
    assert "WriteBehindLagBounded" in violations(after, Fetch(C1, C0), committing)
    assert "WriteBehindLagBounded" in SCOPES["dual-write"].expected_findings(Profile.KAFKA_3_9)
def test_pre_migration_admin_write_is_refused_with_not_controller():
    """Before the initial migration, an admin write is answered NOT_CONTROLLER and appends nothing.

    KIP-866 §KRaft Controller Pre-Migration State ("Other RPCs (such as CreateTopics) will be
    rejected with a NOT_CONTROLLER error"), §MetadataVersion. Unlike the lag bound, the request is
    handled: the step is enabled, spends the operator's budget and changes nothing else.
    """
    state = initial_state(SCOPES["pre-migration"])
    image = own_image(ctrl(state, C0))
    assert error_of(decide_write(image, CORRECT)) is Errors.NOT_CONTROLLER
    # QuorumController's gate answers before FeatureControlManager (which alone would say the migration is on).
    assert outcome(state, UpdateMetadataVersion(C0, Ibp.IBP_3_6_IV1), CORRECT).error is Errors.NOT_CONTROLLER
    after = run(state, AlterConfigs(C0))
    assert after.controllers == state.controllers
    assert after == state.replace(budget=state.budget.replace(operator=0))
    # During the migration metadata.version is frozen.
    dual = own_image(ctrl(initial_state(SCOPES["dual-write"]), C0))
    frozen = decide_metadata_version(dual, Ibp.IBP_3_6_IV1, UpgradeType.UPGRADE, CORRECT)
    assert error_of(frozen) is Errors.INVALID_UPDATE_VERSION


# ---- 4. rolling back to ZooKeeper ------------------------------------------------------------------

def rolled_back_quorum(variant, zombie_resigns=True, scope=SCOPES["rollback"]):
    """rollback scope: broker 1 back to ZK mode, ZooKeeper caught up, the quorum shut down cleanly.

    The leader's clean shutdown is refused while ZooKeeper lags behind the committed log. Broker
    0, the ZK controller of epoch 1 before the migration, has not yet seen that KRaft took
    /controller; with ``zombie_resigns`` it resigns before broker 1 runs for controller.
    """
    state = drive(
        initial_state(scope),
        StopBroker(B1), MigrateBrokerToKRaft(B1), RollbackBrokerToZk(B1), RestartBroker(B1),
        OpenSession(B1), RegisterBroker(B1),
        SessionTimeout(B1, C0), Fetch(C1, C0), DualWrite(C0),
        RegisterWithKRaft(B1, C0), Fetch(C1, C0), BrokerHeartbeat(B1, C0), Fetch(C1, C0),
        variant=variant,
    )
    broker = state.brokers[1]
    assert (broker.config.kraft_mode, broker.registered, broker.incarnation, broker.kraft_epoch) == (False, True, 1, 14)
    assert data(state, MIGRATION).kraft_metadata_offset == 14 < len(state.history.committed) == 16
    assert step(state, ShutdownController(C0), variant) is None  # ZooKeeper lags: not a clean shutdown yet
    state = drive(state, DualWrite(C0), ShutdownController(C0), ShutdownController(C1), variant=variant)
    assert data(state, MIGRATION).kraft_metadata_offset == 16
    assert not any(c.alive for c in state.controllers)
    state = drive(state, DeleteControllerZNodes(), variant=variant)
    if zombie_resigns:
        state = drive(state, ResignController(B0), variant=variant)
    assert (state.brokers[0].controller is None) == zombie_resigns
    return drive(state, ObserveControllerEpoch(B1), variant=variant)


def test_rollback_kafka_3_9_zk_controller_epoch_continues_above_the_kraft_era():
    """Kafka's documented rollback keeps /controller_epoch, so the new ZK controller's epoch is higher.

    KIP-866 §Rollback to ZK (brokers back in ZK mode, the quorum cleanly shut down, /controller
    removed); Kafka 3.9's procedure leaves /controller_epoch in place.
    """
    state = rolled_back_quorum(KAFKA_3_9)
    assert data(state, CONTROLLER) is None and data(state, CONTROLLER_EPOCH) == 2
    state = drive(state, ElectController(B1), variant=KAFKA_3_9)
    assert (data(state, CONTROLLER), data(state, CONTROLLER_EPOCH)) == (1, 3)
    assert state.brokers[1].controller.epoch == 3
    assert state.history.max_controller_epoch == 3


def test_rollback_kip_deleting_controller_epoch_restarts_zk_epochs_at_one():
    """KIP-866's rollback deletes /controller_epoch too: the next ZK controller takes epoch 1 again.

    KIP-866 §Rollback to ZK ("remove the persistent /controller and /controller_epoch nodes");
    a documented finding (docs/model.md "Findings"): the epoch is lower than the KRaft era's 2,
    which ZK brokers have already accepted. With the old ZK controller still a zombie at epoch
    1, two brokers also believe they control epoch 1.
    """
    state = rolled_back_quorum(CORRECT)
    assert data(state, CONTROLLER) is None and data(state, CONTROLLER_EPOCH) is None
    assert state.history.max_controller_epoch == 2
    after = step(state, ElectController(B1))
    assert (data(after, CONTROLLER), data(after, CONTROLLER_EPOCH)) == (1, 1)
    assert after.brokers[1].controller.epoch == 1
    assert violations(state, ElectController(B1), after) == ["ZkControllerEpochsIncreaseAcrossHandOver"]
    expected = SCOPES["rollback"].expected_findings(Profile.KIP)
    assert "ZkControllerEpochsIncreaseAcrossHandOver" in expected

    # Before the zombie resigns, the scope's second finding shows as well: two controllers of epoch 1.
    # (The third, OneLeaderPerLeaderEpoch, needs the new controller's LeaderAndIsr to arrive.)
    zombie = rolled_back_quorum(CORRECT, zombie_resigns=False)
    assert zombie.brokers[0].controller.epoch == 1
    again = step(zombie, ElectController(B1))
    assert sorted(violations(zombie, ElectController(B1), again)) == [
        "AtMostOneControllerPerEpoch", "ZkControllerEpochsIncreaseAcrossHandOver",
    ]
    assert set(violations(zombie, ElectController(B1), again)) < expected


def test_rollback_zk_admin_adding_a_partition_before_the_first_zk_election_loses_nothing_committed():
    """After the hand-back, a ZK broker's admin grows the topic before any ZK controller is elected.

    KIP-866 §Rollback to ZK (clean shutdown: nothing committed is lost): ZooKeeper as KRaft left it holds
    everything KRaft committed; the partition the ZooKeeper era's admin added since (AdminZkClient.addPartitions)
    is no lost or changed commit, so the first ZK controller's election breaks nothing. (Found by the default
    campaign's seed 35 with a ZK broker's AddPartitions sent once a run.)
    """
    scope = SCOPES["rollback"].replace(created_replicas=(B0,))
    scope = scope.replace(budget=scope.budget.replace(partition_creations=1))
    state = rolled_back_quorum(KAFKA_3_9, scope=scope)
    state = drive(state, AddPartitions(B1, (B0,)), variant=KAFKA_3_9)
    assert len(data(state, TOPIC)) == len(committed(state).partitions) + 1
    drive(state, ElectController(B1), variant=KAFKA_3_9)


# ---- 5. a misconfigured controller ----------------------------------------------------------------

def unflagged_3001_standing():
    """dual-write: 3001 is restarted without the migration flag and stands for election."""
    return run(
        initial_state(with_budget("dual-write", migrations=4)),
        ShutdownController(C1), ReconfigureController(C1, False), RestartController(C1),
        StartElection(C1), RequestVote(C1, C0),
    )


def test_misconfigured_controller_elected_during_migration_resigns_under_kip():
    """A controller without the flag wins while the log says MIGRATION and 3000 still has it: it resigns.

    KIP-866 §Misconfigurations ("this controller should resign"), §Finalizing the Migration
    (only once every member of the quorum signals it is finalizing).
    """
    before = unflagged_3001_standing()
    assert ctrl(before, C0).config.migration_enabled and not ctrl(before, C1).config.migration_enabled
    state = run(before, BecomeLeader(C1))
    assert (ctrl(state, C1).role, ctrl(state, C1).active) == (QuorumRole.LEADER, False)  # until LeaderChange commits
    state = run(state, Fetch(C0, C1))
    c = ctrl(state, C1)
    assert (c.role, c.active, c.epoch) == (QuorumRole.RESIGNED, False, 2)
    assert appended(before, state, C1) == [LeaderChangeMessage(C1)]  # no activation records
    assert committed(state).migration is M.MIGRATION
    assert step(state, Fetch(C0, C1)) is None


def test_misconfigured_controller_elected_during_migration_finalizes_under_kafka_3_9():
    """Kafka 3.9 takes a leader without the flag as the operator's finalization and writes POST_MIGRATION.

    KIP-866 §Finalizing the Migration; Kafka 3.9 ActivationRecordsGenerator (``# Differs:`` in
    model.kraft_quorum._may_finalize): it does not wait for the other voter.
    """
    before = unflagged_3001_standing()
    state = drive(before, BecomeLeader(C1), Fetch(C0, C1), variant=KAFKA_3_9)  # activates once LeaderChange commits
    c = ctrl(state, C1)
    assert (c.role, c.active) == (QuorumRole.LEADER, True)
    assert appended(before, state, C1) == [LeaderChangeMessage(C1), ZkMigrationStateRecord(M.POST_MIGRATION)]
    assert committed(state).migration is M.MIGRATION
    state = drive(state, Fetch(C0, C1), variant=KAFKA_3_9)
    assert committed(state).migration is M.POST_MIGRATION
    assert ctrl(state, C0).config.migration_enabled  # finalized with a voter still in migration mode


def test_finalize_kip_once_every_voter_dropped_the_flag():
    """Both controllers restarted without the flag: the next leader writes POST_MIGRATION.

    KIP-866 §Finalizing the Migration ("only finalize the migration once it detects that all
    members of the quorum have signaled that they are finalizing").
    """
    state = run(
        initial_state(with_budget("dual-write", migrations=4)),
        ShutdownController(C1), ReconfigureController(C1, False), ShutdownController(C0),
        ReconfigureController(C0, False), RestartController(C0), RestartController(C1),
        StartElection(C1), RequestVote(C1, C0),
    )
    assert state.budget.kraft_elections == 1  # no live leader: the election timeout was free
    before = state
    # The first Fetch commits 3001's LeaderChange (it activates: POST_MIGRATION), the second commits that.
    state = run(state, BecomeLeader(C1), Fetch(C0, C1), Fetch(C0, C1))
    assert appended(before, state, C1) == [LeaderChangeMessage(C1), ZkMigrationStateRecord(M.POST_MIGRATION)]
    assert committed(state).migration is M.POST_MIGRATION
    assert all(c.driver is None for c in state.controllers)


def test_finalize_kafka_3_9_deposed_driver_writes_nothing_after_post_migration():
    """After Kafka 3.9 finalizes under 3001, the deposed 3000's driver must not write to ZooKeeper.

    KIP-866 §Finalizing the Migration ("no longer perform writes to ZK"). The first Fetch deposes 3000
    and commits 3001's LeaderChange (3001 activates and appends POST_MIGRATION), the second commits
    POST_MIGRATION; the driver sees no record of the newer leadership before it has handled the
    leadership change (Raft tells listeners of a new leader before its records), so there is
    nothing for it to write.
    """
    state = drive(unflagged_3001_standing(), BecomeLeader(C1), Fetch(C0, C1), Fetch(C0, C1), variant=KAFKA_3_9)
    assert committed(state).migration is M.POST_MIGRATION
    assert ctrl(state, C0).role is QuorumRole.FOLLOWER
    assert driver_state(state, C0) is D.DUAL_WRITE  # it has not handled the KRaftLeaderEvent yet
    after = step(state, DualWrite(C0), KAFKA_3_9)
    assert after is None


# ---- 6. a KRaft-born cluster ------------------------------------------------------------------------

@PROFILES
def test_kraft_born_cluster_restarted_with_the_flag_never_migrates(variant):
    """A quorum formatted without the flag (state NONE) is restarted with it: it must not migrate.

    KIP-866 §Migration Overview (None: "never migrated from ZooKeeper"), §Misconfigurations.
    kip: the controller activates and its driver goes INACTIVE on NONE; kafka-3.9: the
    controller refuses to activate and resigns.
    """
    state = initial_state(SCOPES["kraft-born"])
    assert committed(state).migration is M.NONE
    state = drive(state, ShutdownController(C0), ReconfigureController(C0, True), RestartController(C0),
                  StartElection(C0), variant=variant)
    assert driver_state(state, C0) is D.UNINITIALIZED
    before = state
    state = drive(state, BecomeLeader(C0), variant=variant)
    assert appended(before, state, C0) == [LeaderChangeMessage(C0)]
    if variant == CORRECT:
        assert (ctrl(state, C0).role, ctrl(state, C0).active) == (QuorumRole.LEADER, True)
        state = drive(state, RecoverMigrationState(C0), KRaftLeaderChange(C0), variant=variant)
        assert driver_state(state, C0) is D.WAIT_FOR_CONTROLLER_QUORUM
        state = drive(state, WaitForControllerQuorum(C0), variant=variant)
        assert driver_state(state, C0) is D.INACTIVE
        assert step(state, KRaftLeaderChange(C0), variant) is None  # it stays there
    else:
        assert (ctrl(state, C0).role, ctrl(state, C0).active) == (QuorumRole.RESIGNED, False)
        state = drive(state, RecoverMigrationState(C0), KRaftLeaderChange(C0), variant=variant)
        assert driver_state(state, C0) is D.INACTIVE
        assert step(state, WaitForControllerQuorum(C0), variant) is None
    assert committed(state).migration is M.NONE
    assert data(state, CONTROLLER) == 0 and data(state, CONTROLLER_EPOCH) == 1  # ZooKeeper not claimed


# ---- metrics -------------------------------------------------------------------------------------------

def test_metrics_zk_migration_state_bytes_differ_per_profile_and_dual_write_reports_lag():
    """The KIP-866 metrics: ZkMigrationState's byte per profile, ZkWriteBehindLag, MetadataType.

    KIP-866 §Metrics (PreMigration 1, Migration 2 in the KIP; Kafka >= 3.5 numbers MIGRATION 1 and
    PRE_MIGRATION 2), §Migration Overview.
    """
    pre = initial_state(SCOPES["pre-migration"])
    assert metrics(pre, Profile.KIP)["ZkMigrationState"] == 1
    assert metrics(pre, Profile.KAFKA_3_9)["ZkMigrationState"] == 2
    assert metrics(pre) == {
        "ZkWriteBehindLag": None,
        "ZkMigrationState": 1,
        "MigratingZkBrokerCount": 0,
        "MetadataType": KRAFT,
        "BrokerMetadataType": {0: ZOOKEEPER, 1: ZOOKEEPER},
    }

    dual = initial_state(SCOPES["dual-write"])
    assert metrics(dual, Profile.KIP)["ZkMigrationState"] == 2
    assert metrics(dual, Profile.KAFKA_3_9)["ZkMigrationState"] == 1
    state = run(dual, AlterConfigs(C0))
    assert metrics(state)["ZkWriteBehindLag"] == 0  # not committed yet
    state = run(state, Fetch(C1, C0))
    assert metrics(state) == {
        "ZkWriteBehindLag": 1,
        "ZkMigrationState": 2,
        "MigratingZkBrokerCount": 2,
        "MetadataType": DUAL,
        "BrokerMetadataType": {0: ZOOKEEPER, 1: ZOOKEEPER},
    }
    state = run(state, DualWrite(C0))
    assert metrics(state)["ZkWriteBehindLag"] == 0


def test_metadata_version_update_follows_upgrade_types_and_freezes_during_migration():
    """UpdateFeatures for metadata.version on KRaft (reference §5.1; KIP-866 §MetadataVersion).

    After every broker moved to KRaft the migration is still in progress: metadata.version stays
    put (INVALID_UPDATE_VERSION). Once finalized it may go up with UPGRADE; going down needs a
    downgrade type, and every modelled downgrade changes metadata, so it is refused either way.
    """
    state = initial_state(SCOPES["finalize"])
    image = own_image(ctrl(state, C0))
    assert image.migration is M.MIGRATION and not any(r.is_migrating_zk_broker for r in image.brokers)
    frozen = error_of(decide_metadata_version(image, Ibp.IBP_3_6_IV1, UpgradeType.UPGRADE, CORRECT))
    assert frozen is Errors.INVALID_UPDATE_VERSION
    finalized = image.replace(migration=M.POST_MIGRATION)
    assert error_of(decide_metadata_version(finalized, Ibp.IBP_3_6_IV1, UpgradeType.UPGRADE, CORRECT)) is Errors.NONE
    assert (
        error_of(decide_metadata_version(finalized, Ibp.IBP_3_6_IV1, UpgradeType.SAFE_DOWNGRADE, CORRECT))
        is Errors.INVALID_UPDATE_VERSION
    )
    upgraded = finalized.replace(metadata_version=Ibp.IBP_3_6_IV1)
    for kind in UpgradeType:
        down = decide_metadata_version(upgraded, Ibp.IBP_3_4_IV0, kind, CORRECT)
        assert error_of(down) is Errors.INVALID_UPDATE_VERSION
    # A migrating ZK broker advertises [IBP, IBP]: while one is registered the level cannot move.
    dual = own_image(ctrl(initial_state(SCOPES["dual-write"]), C0))
    finalized_dual = dual.replace(migration=M.POST_MIGRATION)
    refused = decide_metadata_version(finalized_dual, Ibp.IBP_3_6_IV1, UpgradeType.UPGRADE, CORRECT)
    assert error_of(refused) is Errors.INVALID_UPDATE_VERSION


@pytest.mark.parametrize(
    ("current", "target", "changed"),
    [
        (Ibp.IBP_3_9_IV0, Ibp.IBP_3_8_IV0, False),  # 3.9-IV0 changed no metadata
        (Ibp.IBP_3_8_IV0, Ibp.IBP_3_7_IV0, True),  # 3.7-IV2 (level 17) did, on the way down
        (Ibp.IBP_3_7_IV0, Ibp.IBP_3_6_IV1, True),  # controller registrations
        (Ibp.IBP_3_5_IV2, Ibp.IBP_3_4_IV0, True),
        (Ibp.IBP_3_4_IV0, Ibp.IBP_3_3_IV0, True),
    ],
)
def test_a_metadata_version_downgrade_is_done_only_when_it_crosses_no_metadata_change(current, target, changed):
    """FeatureControlManager.updateMetadataVersion (Kafka 3.9): a downgrade that crosses a level that
    changed metadata is refused, safe or unsafe; one that crosses none is done, whichever it asks
    for, as Kafka 3.9.2 did from 3.9 to 3.8 in a real run. The model and the implementation agree."""
    from impl.kraft.image import Image
    from impl.kraft_controller import decide_metadata_version as impl_decide

    assert metadata_changed_between(target, current) is changed
    image = MetadataImage(metadata_version=current, migration=ZkMigrationState.NONE)
    for how in (UpgradeType.SAFE_DOWNGRADE, UpgradeType.UNSAFE_DOWNGRADE):
        expected = Errors.INVALID_UPDATE_VERSION if changed else Errors.NONE
        assert error_of(decide_metadata_version(image, target, how, CORRECT)) is expected
        impl_answer = impl_decide(Image(metadata_version=current, migration=ZkMigrationState.NONE), target, how)
        assert impl_answer.name == expected.name
    upgrade = decide_metadata_version(image, target, UpgradeType.UPGRADE, CORRECT)
    assert error_of(upgrade) is Errors.INVALID_UPDATE_VERSION
