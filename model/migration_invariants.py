"""Properties of the ZooKeeper-to-KRaft migration (KIP-866), and the witnesses and liveness of the KRaft side.

They register into the one registry (``model.registry``), last (``model.invariants`` imports
``model.zk_invariants``, ``model.kraft_invariants``, then this module), with the same rules:
ALWAYS predicates read only a state's identity (``history`` included, never ``ghost``); what a
step did is read from its ghost by TRANSITION properties; every SOMETIMES witness keeps a safety
property from being vacuous; EVENTUALLY properties are leads-to under weak fairness of the
non-perturbation actions (``properties.liveness``). The witness and liveness sections hold the
KRaft quorum's and brokers' too (``SplitVote``, ``FollowerTruncates``,
``LiveFencedBrokerEventuallyUnfenced``): the catalogue lists them there, after the migration's
safety properties, and its order is the registration order.

``committed_image`` (``model.kraft_invariants``) is what the committed log replays to.
"""

from __future__ import annotations

from model import zookeeper as zkm
from model.actions import (
    Action,
    AlterPartition,
    DualWrite,
    ElectController,
    Fetch,
    RestartController,
    RunMetadataChange,
    SyncKRaftToZk,
    WaitForControllerQuorum,
    WaitForZkBrokers,
)
from model.bugs import CORRECT
from model.kraft import (
    TOPIC_NAME,
    AbortTransactionRecord,
    BeginTransactionRecord,
    BrokerState,
    ControllerId,
    MetadataImage,
    PartitionChangeRecord,
    QuorumRole,
    ZkMigrationState,
    image_of,
    is_metadata,
)
from model.kraft_invariants import committed_image
from model.kraft_migration import MIGRATED_RECORDS, stale_event, zk_brokers_ready, zk_metadata
from model.kraft_quorum import committed_image as controller_committed
from model.kraft_quorum import ctrl, is_active, stable_end, writes_blocked
from model.migration import (
    CONFIG,
    DELETE_TOPICS,
    MIGRATION,
    STATE_ORDER,
    MigrationDriverState,
    is_valid_transition,
)
from model.registry import always, eventually, section, sometimes, transition
from model.state import (
    BROKER_IDS,
    CONTROLLER_EPOCH,
    TOPIC,
    ClusterState,
    KRaftController,
    LeaderAndIsr,
    UpdateMetadata,
    controller_index,
    kraft_claim,
    zk_partitions,
    znode_data,
)
from model.types import UNKNOWN_BROKER_EPOCH, BrokerId, LeaderEpoch, ZkCode
from model.zk_era import partition_states

D = MigrationDriverState


# What dual writes keep equal in ZooKeeper and in the image: (leader, ISR, leader epoch) by partition, the config.
Projection = tuple[tuple[tuple[BrokerId, tuple[BrokerId, ...], LeaderEpoch], ...], int | None]


def _zk_projection(state: ClusterState) -> Projection:
    """What dual writes keep equal in ZooKeeper: partitions, the dynamic config, live topics."""
    parts = tuple((s.leader, s.isr, s.leader_epoch) for s in zk_partitions(state))
    return parts, znode_data(state, CONFIG)


def _image_projection(image: MetadataImage) -> Projection:
    return tuple((p.leader, p.isr, p.leader_epoch) for p in image.partitions), image.config


# ---- the migration ---------------------------------------------------------------------------------

section("Migration (KIP-866)")


@transition(
    "MigrationStateOnlyMovesForward",
    "The committed migration state only moves NONE or PRE_MIGRATION -> MIGRATION -> POST_MIGRATION; NONE and"
    " POST_MIGRATION are final.",
    "KIP-866 §Migration Overview, §Misconfigurations",
    changes=("committed",),
)
def migration_state_only_moves_forward(before: ClusterState, action: Action, after: ClusterState) -> bool:
    if after.history.committed is before.history.committed:
        return True
    old, new = committed_image(before).migration, committed_image(after).migration
    return old == new or new in STATE_ORDER[old]


@transition(
    "DriverTakesOnlyTableTransitions",
    "The migration driver moves only along KRaftMigrationDriver's transition table.",
    "KIP-866 §Migration Overview; reference §1.3 (isValidStateChange)",
    changes=("controllers",),
)
def driver_takes_only_table_transitions(before: ClusterState, action: Action, after: ClusterState) -> bool:
    if after.controllers is before.controllers:
        return True
    for b, a in zip(before.controllers, after.controllers):
        if a.driver is None:
            continue
        old = D.UNINITIALIZED if b.driver is None else b.driver.state
        if not is_valid_transition(old, a.driver.state):
            return False
    return True


@transition(
    "DualWritesOnlyInDualWriteStates",
    "A KRaft controller writes metadata changes to ZooKeeper only in KRAFT_CONTROLLER_TO_BROKER_COMM or DUAL_WRITE.",
    "KIP-866 §Dual Metadata Writes; reference §1.2 (allowDualWrite)",
    changes=("kraft_writes",),
)
def dual_writes_only_in_dual_write_states(before: ClusterState, action: Action, after: ClusterState) -> bool:
    return all(w.driver_state.allows_dual_write for w in after.ghost.kraft_writes if w.kind == "dual-write")


@always(
    "InitialMigrationAllOrNothing",
    "The committed image holds ZooKeeper's metadata exactly when it holds MIGRATION or POST_MIGRATION.",
    "KIP-866 §Controller Migration (one metadata transaction), §Initial Data Migration",
)
def initial_migration_all_or_nothing(state: ClusterState) -> bool:
    image = committed_image(state)
    if image.migration is ZkMigrationState.MIGRATION and kraft_claim(state) is not None:
        # All: while KRaft owns ZooKeeper, every partition ZooKeeper assigns and its config were copied (a
        # migration completed before its last batch lacks some); a topic deleted on KRaft since was copied first.
        copied = TOPIC_NAME in image.removed_topics or len(image.partitions) >= len(zk_partitions(state))
        return copied and (znode_data(state, CONFIG) is None or image.config is not None)
    if image.bootstrapped_migration not in (None, ZkMigrationState.PRE_MIGRATION):
        return True  # finalized, handed back, or a KRaft-born cluster whose metadata never came from ZooKeeper
    return not image.partitions and image.config is None  # nothing


@always(
    "FailoverAbortsMigrationTransaction",
    "An active controller's log holds no migration transaction left open by an earlier leadership.",
    "KIP-866 §Initial Data Migration (the next active controller aborts the transaction)",
)
def failover_aborts_migration_transaction(state: ClusterState) -> bool:
    for c in state.controllers:
        if not is_active(c) or image_of(c.log).open_transaction is None:
            continue
        begins = [e for e in c.log if isinstance(e.record, BeginTransactionRecord)]
        if begins and begins[-1].epoch != c.epoch:
            return False
    return True


@transition(
    "ZkWritesFollowKRaftCommits",
    "Everything a KRaft controller writes to ZooKeeper was committed in KRaft first.",
    "KIP-866 §Dual Metadata Writes (write-behind: ZK only has what KRaft committed)",
    changes=("kraft_writes",),
)
def zk_writes_follow_kraft_commits(before: ClusterState, action: Action, after: ClusterState) -> bool:
    return all(w.writer_offset <= len(after.history.committed) for w in after.ghost.kraft_writes)


@always(
    "ZkEqualsImageAtMigrationOffset",
    "While KRaft owns ZooKeeper, ZooKeeper's metadata equals the committed image at /migration's offset.",
    "KIP-866 §Dual Metadata Writes, §Migration State ZNode",
)
def zk_equals_image_at_migration_offset(state: ClusterState) -> bool:
    if kraft_claim(state) is None:
        return True
    node = znode_data(state, MIGRATION)
    if node is None or node.kraft_metadata_offset <= 0:
        return True
    committed = state.history.committed
    if node.kraft_metadata_offset > len(committed):
        return True  # ZkWritesFollowKRaftCommits reports that
    return _zk_projection(state) == _image_projection(image_of(committed, node.kraft_metadata_offset))


@transition(
    "KRaftZkWritesFailOnlyOnStaleReads",
    "A KRaft controller's sync or dual write fails on a metadata znode (NoNode, NodeExists) only when it read"
    " ZooKeeper from a lagging server: writes made from an up-to-date read apply, new partitions included.",
    "KIP-866 §Dual Metadata Writes, §Controller Migration (the sync of KRaft's metadata to ZooKeeper)",
    actions=(DualWrite, SyncKRaftToZk),
)
def kraft_zk_writes_fail_only_on_stale_reads(before: ClusterState, action: Action, after: ClusterState) -> bool:
    if not isinstance(action, (DualWrite, SyncKRaftToZk)) or zkm.lagging(before.zk, action.controller):
        return True
    # The multi: the /controller_epoch check, the metadata ops, /migration's update. The first failure is the
    # one that failed it (the ops after it answer RUNTIME_INCONSISTENCY).
    results = after.ghost.last_multi
    failed = [r for r in results if r not in (ZkCode.OK, ZkCode.RUNTIME_INCONSISTENCY)]
    return not failed or failed[0] not in (ZkCode.NO_NODE, ZkCode.NODE_EXISTS) or results.index(failed[0]) == 0


@always(
    "TopicDeletionsCompletedByMigration",
    "Once ZooKeeper has been synchronised with KRaft, no topic deletion is left pending in ZooKeeper.",
    "KIP-866 §Topic Deletions",
)
def topic_deletions_completed_by_migration(state: ClusterState) -> bool:
    synced = any(
        c.alive and c.driver is not None and c.driver.state in (D.KRAFT_CONTROLLER_TO_BROKER_COMM, D.DUAL_WRITE)
        for c in state.controllers
    )
    return not synced or not zkm.children(state.zk, DELETE_TOPICS)


@always(
    "WriteBehindLagBounded",
    "While the migration is in progress, the committed metadata records not yet in ZooKeeper never exceed the bound.",
    "KIP-866 §Unavailable ZooKeeper (bounded write-behind)",
)
def write_behind_lag_bounded(state: ClusterState) -> bool:
    node = znode_data(state, MIGRATION)
    if node is None or node.kraft_metadata_offset <= 0 or kraft_claim(state) is None:
        return True
    committed = state.history.committed
    if image_of(committed).migration is not ZkMigrationState.MIGRATION:
        return True
    lag = sum(1 for e in committed[node.kraft_metadata_offset:] if is_metadata(e))
    return lag <= state.budget.max_lag


@transition(
    "OnlyCurrentKRaftLeaderWritesApply",
    "After a KRaft leader has claimed ZooKeeper, no write of a controller with an older Raft epoch applies.",
    "KIP-866 §Controller Leadership, §Dual Metadata Writes (conditional /migration update)",
    changes=("kraft_writes",),
)
def only_current_kraft_leader_writes_apply(before: ClusterState, action: Action, after: ClusterState) -> bool:
    claimed = kraft_claim(before)
    if claimed is None:
        return True
    return all(w.writer_epoch >= claimed.kraft_epoch for w in after.ghost.kraft_writes)


@transition(
    "MigrationOffsetNeverGoesBack",
    "/migration's KRaft offset never decreases: what ZooKeeper has caught up with is never undone.",
    "KIP-866 §Migration State ZNode (which KRaft record offset has been written back to ZK)",
    changes=("zk",),
)
def migration_offset_never_goes_back(before: ClusterState, action: Action, after: ClusterState) -> bool:
    old, new = znode_data(before, MIGRATION), znode_data(after, MIGRATION)
    return old is None or new is None or new.kraft_metadata_offset >= old.kraft_metadata_offset


@transition(
    "UpdateMetadataBeforeLeaderAndIsr",
    "A KRaft controller sends a ZK broker LeaderAndIsr only after an UpdateMetadata in the same leadership:"
    " earlier in the same batch, or in the full one it sent after the failover.",
    "KIP-866 §ZK Broker RPCs; reference §1.4 (full UpdateMetadata, then full LeaderAndIsr)",
)
def update_metadata_before_leader_and_isr(before: ClusterState, action: Action, after: ClusterState) -> bool:
    told: set[tuple[BrokerId, BrokerId]] = set()  # (sender, destination) of a KRaft UpdateMetadata
    for m in after.ghost.sent:
        if isinstance(m, UpdateMetadata) and m.kraft:
            told.add((m.controller_id, m.dest))
        elif isinstance(m, LeaderAndIsr) and m.kraft and (m.controller_id, m.dest) not in told:
            sender = ControllerId(m.controller_id)  # a KRaft controller sends its RPCs with its own id
            c = next((c for c in before.controllers if c.id == sender), None)
            if c is None or c.driver is None or m.dest not in c.driver.umr_sent:
                return False
    return True


@transition(
    "KRaftEpochInZkOnlyIncreases",
    "The Raft epoch a KRaft controller writes into /controller only increases: no claim by an older leadership"
    " replaces a newer one.",
    "KIP-866 §Controller Leadership; reference §2.3 (ControllerMovedException on a same or newer epoch)",
    changes=("zk",),
)
def kraft_epoch_in_zk_only_increases(before: ClusterState, action: Action, after: ClusterState) -> bool:
    old, new = kraft_claim(before), kraft_claim(after)
    return old is None or new is None or new is old or new.kraft_epoch > old.kraft_epoch or new == old


@transition(
    "ZkControllerEpochsIncreaseAcrossHandOver",
    "Every /controller_epoch an election or a KRaft claim writes exceeds every one written before it.",
    "KIP-866 §Controller Leadership (the first KRaft epoch exceeds the last ZK one), §Rollback to ZK",
    changes=("zk",),
)
def zk_controller_epochs_increase(before: ClusterState, action: Action, after: ClusterState) -> bool:
    old, new = zkm.get(before.zk, CONTROLLER_EPOCH), zkm.get(after.zk, CONTROLLER_EPOCH)
    if new is None or (old is not None and (old.version, old.czxid) == (new.version, new.czxid)):
        return True  # not written by this step
    return new.data > before.history.max_controller_epoch


@always(
    "OnlyAllowedWritesInPreMigration",
    "While the committed state is PRE_MIGRATION, nothing but registrations, heartbeats and the migration itself"
    " is committed.",
    "KIP-866 §KRaft Controller Pre-Migration State",
)
def only_allowed_writes_in_pre_migration(state: ClusterState) -> bool:
    image = committed_image(state)
    if image.migration is not ZkMigrationState.PRE_MIGRATION:
        return True
    return image.config is None and not image.partitions or image.open_transaction is not None


@transition(
    "NoZkWriteAfterPostMigration",
    "No KRaft controller writes to ZooKeeper once its log says POST_MIGRATION.",
    "KIP-866 §Finalizing the Migration (no longer perform writes to ZK)",
    changes=("kraft_writes",),
)
def no_zk_write_after_post_migration(before: ClusterState, action: Action, after: ClusterState) -> bool:
    return not any(w.post_migration for w in after.ghost.kraft_writes)


@transition(
    "RollbackLosesNothingCommitted",
    "A rollback whose KRaft quorum stopped cleanly hands ZooKeeper back holding everything KRaft committed: what the"
    " first ZK controller elected after it finds, with only what the ZooKeeper era's own clients have written since.",
    "KIP-866 §Rollback to ZK (clean shutdown: nothing committed is lost)",
)
def rollback_loses_nothing_committed(before: ClusterState, action: Action, after: ClusterState) -> bool:
    # Checked at the hand-back, KRaft's last touch of ZooKeeper (its quorum is down and cannot restart:
    # _restart_controller), not at the first ZK election: a ZK broker's admin may grow or delete the topic in between
    # (AdminZkClient), which is the ZooKeeper era's own write, no lost or changed commit.
    if before.history.handed_back is not None or after.history.handed_back is None:
        return True
    if after.history.crashed_controllers:
        return True  # KIP-866: "a forceful shutdown could let some metadata be lost" (a hazard, not a violation)
    image = image_of(after.history.committed)  # nothing commits once the quorum is down
    if image.migration is not ZkMigrationState.MIGRATION:
        return True
    return _zk_projection(after) == _image_projection(image)


def _driver_entered(
    after: ClusterState, action: Action, kind: type[WaitForZkBrokers] | type[WaitForControllerQuorum],
    target: MigrationDriverState,
) -> KRaftController | None:
    """The controller whose driver ``action``, of type ``kind``, took to ``target``; None for any other step."""
    if not isinstance(action, kind):
        return None
    c = ctrl(after, action.controller)
    return c if c.driver is not None and c.driver.state is target else None


@transition(
    "MigrationStartsOnlyWithEveryKnownZkBroker",
    "The driver goes to claim ZooKeeper only once every live ZK broker and every broker named in an assignment"
    " has registered with KRaft.",
    "KIP-866 §ZK Broker Presence, §Migration Trigger 4",
)
def migration_starts_only_with_every_known_zk_broker(before: ClusterState, action: Action, after: ClusterState) -> bool:
    c = _driver_entered(after, action, WaitForZkBrokers, D.BECOME_CONTROLLER)
    if c is None:
        return True

    known = {BrokerId(int(name)) for name, _ in zkm.children(before.zk, BROKER_IDS)}
    known |= {r for replicas in (znode_data(before, TOPIC) or ()) for r in replicas}
    image = controller_committed(c)
    return all((r := image.registration(b)) is not None and r.is_migrating_zk_broker for b in known)


@transition(
    "MigrationWaitsForEveryVoterRegisteredReady",
    "Once controllers register (kafka-3.9, from metadata.version 3.7-IV0), the driver leaves"
    " WAIT_FOR_CONTROLLER_QUORUM for WAIT_FOR_BROKERS only when every voter's committed registration says"
    " zkMigrationReady.",
    "KIP-866 §Migration Trigger; reference §1.4",
)
def migration_waits_for_every_voter_registered_ready(before: ClusterState, action: Action, after: ClusterState) -> bool:
    # Why only once some controller registered: kip has no registrations (it reads the members), and the
    # properties do not know the profile; a kafka-3.9 quorum always has some by the time its driver may move.
    c = _driver_entered(after, action, WaitForControllerQuorum, D.WAIT_FOR_BROKERS)
    if c is None:
        return True
    image = controller_committed(c)
    if not image.controllers:
        return True
    return all((r := image.controller_registration(o.id)) is not None and r.zk_migration_ready
               for o in after.controllers)


@transition(
    "MetadataVersionFixedDuringMigration",
    "metadata.version does not change while a migration is in progress.",
    "KIP-866 §MetadataVersion; reference §5.1",
    changes=("committed",),
)
def metadata_version_fixed_during_migration(before: ClusterState, action: Action, after: ClusterState) -> bool:
    if after.history.committed is before.history.committed:
        return True
    old, new = committed_image(before), committed_image(after)
    if old.migration_state.in_progress and new.migration_state.in_progress:
        return old.metadata_version == new.metadata_version
    return True


# ---- witnesses ---------------------------------------------------------------------------------

section("Witnesses (KRaft and migration)")


@sometimes(
    "SplitVote",
    "Two candidates stand in the same epoch.",
    "KIP-500 §Controller Quorum",
)
def split_vote(before: ClusterState, action: Action, after: ClusterState) -> bool:
    candidates = [c.epoch for c in after.controllers if c.role is QuorumRole.CANDIDATE]
    return len(candidates) != len(set(candidates))


@sometimes(
    "FollowerTruncates",
    "A follower drops log entries that diverge from the new leader's.",
    "KIP-500 §Controller Quorum (followers truncate on divergence)",
    actions=(Fetch,),
)
def follower_truncates(before: ClusterState, action: Action, after: ClusterState) -> bool:
    if not isinstance(action, Fetch):
        return False

    i = controller_index(action.controller)
    old, new = before.controllers[i].log, after.controllers[i].log
    return len(old) > 0 and new[: len(old)] != old


@sometimes(
    "DeposedKRaftLeaderAttemptsZkWrite",
    "A KRaft controller tries to write to ZooKeeper after a newer Raft epoch has claimed it.",
    "KIP-866 §Controller Leadership",
    changes=("attempted_kraft_write",),
)
def deposed_kraft_leader_attempts_zk_write(before: ClusterState, action: Action, after: ClusterState) -> bool:
    attempt = after.ghost.attempted_kraft_write
    claimed = kraft_claim(before)
    return len(attempt) == 2 and claimed is not None and attempt[1] < claimed.kraft_epoch


@sometimes(
    "StaleReadRefusedAtLeader",
    "A KRaft controller that read ZooKeeper from a lagging server writes, and its write's versions refuse it.",
    "KIP-866 §Controller Leadership (the claim's conditional multi), §Dual Metadata Writes",
    changes=("last_multi",),
)
def stale_read_refused_at_leader(before: ClusterState, action: Action, after: ClusterState) -> bool:
    who = getattr(action, "controller", None)
    results = after.ghost.last_multi
    return (who is not None and zkm.lagging(before.zk, who) and bool(results)
            and any(r is not ZkCode.OK and r is not ZkCode.RUNTIME_INCONSISTENCY for r in results))


@sometimes(
    "PartitionCreatedByDualWrite",
    "A KRaft controller's write to ZooKeeper creates the state znode of a partition created since the migration.",
    "KIP-866 §Dual Metadata Writes",
    actions=(DualWrite, SyncKRaftToZk),
)
def partition_created_by_dual_write(before: ClusterState, action: Action, after: ClusterState) -> bool:
    return (isinstance(action, (DualWrite, SyncKRaftToZk)) and bool(after.ghost.kraft_writes)
            and len(partition_states(after)) > len(partition_states(before)))


@sometimes(
    "StaleMetadataChangeEventDropped",
    "A MetadataChangeEvent queued under another leader and epoch reaches the head of the driver's queue and is"
    " dropped.",
    "KIP-866 §Dual Metadata Writes; KAFKA-16667 (Kafka 3.8: events check the leadership they were raised in)",
    actions=(RunMetadataChange,),
)
def stale_metadata_change_event_dropped(before: ClusterState, action: Action, after: ClusterState) -> bool:
    if not isinstance(action, RunMetadataChange):
        return False
    c = next(c for c in before.controllers if c.id == action.controller)
    return c.driver is not None and bool(c.driver.queue) and stale_event(c, c.driver.queue[0]) \
        and after.zk == before.zk and after.network == before.network


@sometimes(
    "PartitionReassignedByDualWrite",
    "A KRaft controller's write to ZooKeeper gives a partition the new replicas of a reassignment made on KRaft.",
    "KIP-866 §Dual Metadata Writes",
    actions=(DualWrite, SyncKRaftToZk),
)
def partition_reassigned_by_dual_write(before: ClusterState, action: Action, after: ClusterState) -> bool:
    if not isinstance(action, (DualWrite, SyncKRaftToZk)) or not after.ghost.kraft_writes:
        return False
    was, now = znode_data(before, TOPIC) or (), znode_data(after, TOPIC) or ()
    return any(old != new for old, new in zip(was, now))


@sometimes(
    "ReassignmentCompleted",
    "An adding replica's ISR join completes a reassignment made on KRaft: its adding and removing replicas cleared.",
    "KIP-866 §ZK Broker RPCs; Kafka's ReplicationControlManager.alterPartition",
    actions=(AlterPartition,),
)
def reassignment_completed(before: ClusterState, action: Action, after: ClusterState) -> bool:
    if not isinstance(action, AlterPartition):
        return False
    c = ctrl(after, action.controller)
    return (bool(c.log) and isinstance(rec := c.log[-1].record, PartitionChangeRecord)
            and (rec.adding == () or rec.removing == ()))


@sometimes(
    "FailoverAbortsMigration",
    "A new leader aborts the migration transaction its predecessor left open.",
    "KIP-866 §Initial Data Migration",
)
def failover_aborts_migration(before: ClusterState, action: Action, after: ClusterState) -> bool:

    # Activation: the step where the new leader's LeaderChange commits (its BecomeLeader in a quorum of one).
    return any(
        is_active(c) and not is_active(b)
        and any(isinstance(e.record, AbortTransactionRecord) and e.epoch == c.epoch for e in c.log)
        for b, c in zip(before.controllers, after.controllers)
    )


@sometimes(
    "FailoverBetweenMigrationBatches",
    "A new leader aborts a migration transaction its predecessor left open between two batches.",
    "KIP-866 §Initial Data Migration",
)
def failover_between_migration_batches(before: ClusterState, action: Action, after: ClusterState) -> bool:
    # ZooKeeper's copy is counted only for a step that activates a leader, the rare case: counted on every step, it
    # was the costliest check of a step in the migration scope's exploration (about 5% of its time, profiled).
    for b, c in zip(before.controllers, after.controllers):
        if not is_active(c) or is_active(b):
            continue
        for i, e in enumerate(c.log):
            if isinstance(e.record, AbortTransactionRecord) and e.epoch == c.epoch:
                aborted = image_of(c.log, i).open_transaction or ()
                if 0 < sum(isinstance(r, MIGRATED_RECORDS) for r in aborted) < len(zk_metadata(after)):
                    return True
    return False


@sometimes(
    "HeartbeatHeldByOpenTransaction",
    "The active controller holds a heartbeat's answer that the Raft commit covers but the migration's open"
    " transaction does not: its deferred event queue completes at the last stable offset.",
    "KIP-866 §Initial Data Migration (one metadata transaction), §Broker Registration (ZK brokers heartbeat)",
)
def heartbeat_held_by_open_transaction(before: ClusterState, action: Action, after: ClusterState) -> bool:
    return any(is_active(c) and p.heartbeat is not None and stable_end(c) < p.offset <= c.high_watermark
               for c in after.controllers for p in c.pending)


@sometimes(
    "MigrationReachesDualWrite",
    "A driver reaches DUAL_WRITE.",
    "KIP-866 §Controller Migration",
)
def migration_reaches_dual_write(before: ClusterState, action: Action, after: ClusterState) -> bool:
    return any(
        c.driver is not None
        and c.driver.state is D.DUAL_WRITE
        and (b.driver is None or b.driver.state is not D.DUAL_WRITE)
        for b, c in zip(before.controllers, after.controllers)
    )


@sometimes(
    "MigrationFinalized",
    "POST_MIGRATION is committed.",
    "KIP-866 §Finalizing the Migration",
    changes=("committed",),
)
def migration_finalized(before: ClusterState, action: Action, after: ClusterState) -> bool:
    return (
        after.history.committed is not before.history.committed
        and committed_image(after).migration is ZkMigrationState.POST_MIGRATION
        and committed_image(before).migration is not ZkMigrationState.POST_MIGRATION
    )


@sometimes(
    "RollbackCompletes",
    "After the KRaft era, a ZK broker is elected controller again.",
    "KIP-866 §Rollback to ZK",
    actions=(ElectController,),
)
def rollback_completes(before: ClusterState, action: Action, after: ClusterState) -> bool:
    return (
        isinstance(action, ElectController)
        and after.brokers[action.broker].controller is not None
        and committed_image(before).migration is ZkMigrationState.MIGRATION
    )


@sometimes(
    "FinalizedClusterSeesFlagAgain",
    "A controller with the migration flag runs in a finalized cluster.",
    "KIP-866 §Misconfigurations",
    actions=(RestartController,),
)
def finalized_cluster_sees_flag_again(before: ClusterState, action: Action, after: ClusterState) -> bool:
    if not isinstance(action, RestartController):
        return False
    c = ctrl(after, action.controller)
    return c.config.migration_enabled and committed_image(after).migration is ZkMigrationState.POST_MIGRATION


@sometimes(
    "MigrationWaitsForOfflineBroker",
    "The driver waits for a ZK broker that is named in an assignment but not registered in ZooKeeper.",
    "KIP-866 §ZK Broker Presence",
)
def migration_waits_for_offline_broker(before: ClusterState, action: Action, after: ClusterState) -> bool:
    return any(
        c.driver is not None and c.driver.state is D.WAIT_FOR_BROKERS and is_active(c)
        and len(zkm.children(after.zk, "/brokers/ids")) < len(after.brokers)
        for c in after.controllers
    )


@sometimes(
    "ZkWriteRefusedByLagBound",
    "The write-behind lag reaches its bound with ZooKeeper unavailable.",
    "KIP-866 §Unavailable ZooKeeper",
)
def zk_write_refused_by_lag_bound(before: ClusterState, action: Action, after: ClusterState) -> bool:

    return not after.zk.available and any(is_active(c) and writes_blocked(after, c, CORRECT) for c in after.controllers)


# ---- liveness ------------------------------------------------------------------------------------

section("Liveness (KIP-866)")


def _brokers_ready_but_waiting(state: ClusterState) -> bool:

    return any(
        is_active(c) and c.driver is not None and c.driver.state is D.WAIT_FOR_BROKERS
        and state.zk.available and zk_brokers_ready(state, c, CORRECT)
        for c in state.controllers
    )


@eventually(
    "DriverLeavesWaitForBrokersWhenReady",
    "A driver waiting for ZK brokers while they are all registered eventually moves on.",
    "KIP-866 §Controller Migration (the migration begins once every known ZK broker registered)",
    when=_brokers_ready_but_waiting,
)
def driver_leaves_wait_for_brokers(state: ClusterState) -> bool:
    return not _brokers_ready_but_waiting(state)


def _migration_possible(state: ClusterState) -> bool:
    image = committed_image(state)
    return image.migration is ZkMigrationState.PRE_MIGRATION


@eventually(
    "MigrationReachesDualWriteWithoutFaults",
    "From pre-migration, with no faults from some point on, some driver reaches DUAL_WRITE.",
    "KIP-866 §Controller Migration, §Controller Crashes",
    when=_migration_possible,
)
def migration_reaches_dual_write_eventually(state: ClusterState) -> bool:
    return any(c.driver is not None and c.driver.state is D.DUAL_WRITE for c in state.controllers) or (
        committed_image(state).migration is not ZkMigrationState.PRE_MIGRATION
        and committed_image(state).migration is not ZkMigrationState.MIGRATION
    )


def _leader_driver_inactive(state: ClusterState) -> bool:
    image = committed_image(state)
    if image.migration is not ZkMigrationState.MIGRATION:
        return False
    return any(is_active(c) and c.driver is not None and c.driver.state is D.INACTIVE for c in state.controllers)


@eventually(
    "ActiveDriverNeverStaysInactive",
    "While the migration is in progress, the active controller's driver does not stay INACTIVE.",
    "KIP-866 §Controller Crashes (a new leader takes over the migration)",
    when=_leader_driver_inactive,
)
def active_driver_never_stays_inactive(state: ClusterState) -> bool:
    return not _leader_driver_inactive(state)


def _live_fenced_broker(state: ClusterState) -> bool:
    return any(
        b.alive and b.config.kraft_mode and b.kraft_epoch != UNKNOWN_BROKER_EPOCH and b.lifecycle is BrokerState.FENCED
        and not b.want_shutdown
        for b in state.brokers
    )


@eventually(
    "LiveFencedBrokerEventuallyUnfenced",
    "A live KRaft broker that is fenced is eventually unfenced (or stops).",
    "KIP-500 §Broker States (Fenced -> Online once caught up)",
    when=_live_fenced_broker,
)
def live_fenced_broker_eventually_unfenced(state: ClusterState) -> bool:
    return not _live_fenced_broker(state)


def _live_zk_broker_fenced_in_kraft(state: ClusterState) -> bool:
    image = None
    for b in state.brokers:
        if b.alive and not b.config.kraft_mode and b.kraft_epoch != UNKNOWN_BROKER_EPOCH and not b.want_shutdown:
            image = image or committed_image(state)
            reg = image.registration(b.id)
            if reg is not None and reg.epoch == b.kraft_epoch and reg.fenced:
                return True
    return False


@eventually(
    "MigratingZkBrokerEventuallyUnfenced",
    "A live migrating ZK broker whose registration with KRaft is fenced in the committed image is eventually"
    " unfenced there (or stops, or registers anew): while it heartbeats, KRaft counts it among the live brokers"
    " its UpdateMetadata go to.",
    "KIP-866 §Broker Registration (ZK brokers register with KRaft and heartbeat); KIP-500 §Broker States (Fenced ->"
    " Online once caught up)",
    when=_live_zk_broker_fenced_in_kraft,
)
def migrating_zk_broker_eventually_unfenced(state: ClusterState) -> bool:
    return not _live_zk_broker_fenced_in_kraft(state)



def _follower_without_fetcher(state: ClusterState) -> bool:
    return any(b.alive and not b.want_shutdown and any(r is not None and r.no_fetcher for r in b.replicas)
               for b in state.brokers)


@eventually(
    "FailedLeaderAndIsrIsRepaired",
    "A live ZK broker left following a partition at a leader epoch with no fetcher, by a LeaderAndIsr that failed"
    " inside it, is eventually repaired: sent the partition at a newer leader epoch, or restarted.",
    "KIP-866 §ZK Broker RPCs (the KRaft controller sends LeaderAndIsr to the ZK brokers, which see it as a ZK"
    " controller); KIP-380 §Motivation (a ZK controller sends a bounced broker its partitions again)",
    when=_follower_without_fetcher,
)
def failed_leader_and_isr_is_repaired(state: ClusterState) -> bool:
    return not _follower_without_fetcher(state)
