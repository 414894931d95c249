"""The ZooKeeper-to-KRaft migration: the migration driver's events and the operator's runbook steps.

How it works (``model.step.step`` dispatches here a ``MigrationAction``; ``handle`` matches on it
and ends in ``assert_never``):
- The driver moves only through ``_drive``, which refuses a transition outside
  ``model.migration.VALID_TRANSITIONS`` (unless a seeded bug skips states). Each driver action
  is one event of KRaftMigrationDriver, enabled in the one driver state that runs it, and reads
  the committed image as the driver has it (``driver_image``).
- Every ZooKeeper write of a KRaft controller after its claim goes through ``_kraft_zk_write``:
  one multi with the /controller_epoch check, the metadata ops and the compare-and-set of
  /migration (KIP-866 §Dual Metadata Writes). A write that fails its fencing sends the driver
  to INACTIVE until the next leadership event (``# Differs:`` below).
- The operator's steps (a controller's migration flag, a broker moved to KRaft and back, the
  KRaft znodes deleted at the end of a rollback) spend the scope's ``migrations`` budget.
- What the quorum does (appending, activating, brokers, the lag bound) is ``model.kraft_quorum``'s,
  used here by its public names. Handlers return None when the action is not enabled or would
  change nothing.

Seeds: KIP-866 (all sections cited at each rule); reference §1.4, §2.
"""

from __future__ import annotations

from typing import assert_never

from model import zookeeper as zkm
from model.actions import (
    BecomeZkController,
    CompleteMigration,
    DeleteControllerZNodes,
    DualWrite,
    KRaftLeaderChange,
    MigrateBrokerToKRaft,
    MigrateMetadata,
    MigrationAction,
    MigrationCommitted,
    ReconfigureController,
    RecoverMigrationState,
    RollbackBrokerToZk,
    SendRPCsToBrokers,
    SyncKRaftToZk,
    WaitForControllerQuorum,
    WaitForZkBrokers,
)
from model.bugs import Bug, Variant
from model.kraft import (
    BeginTransactionRecord,
    ConfigRecord,
    ControllerId,
    EndTransactionRecord,
    KRaftEpoch,
    MetadataImage,
    MetadataRecord,
    Offset,
    PartitionRecord,
    ZkMigrationState,
    ZkMigrationStateRecord,
    image_of,
)
from model.kraft_quorum import (
    append,
    committed_image,
    ctrl,
    is_active,
    migration_end,
    own_image,
    put_ctrl,
    served_brokers,
)
from model.migration import (
    CONFIG,
    DELETED_TOPIC,
    MIGRATION,
    Driver,
    KRaftControllerZNode,
    MigrationDriverState,
    MigrationZNode,
    Profile,
    is_valid_transition,
    pending_deletion_path,
    topic_path,
)
from model.state import (
    BROKER_IDS,
    CONTROLLER,
    CONTROLLER_EPOCH,
    TOPIC,
    ClusterState,
    KRaftController,
    KRaftWrite,
    LeaderAndIsr,
    Message,
    PartitionState,
    UpdateMetadata,
    partition_state_path,
    znode_data,
)
from model.transitions import put_broker, send, spend
from model.types import NO_SESSION, BrokerEpoch, BrokerId, ControllerEpoch, Ibp, PartitionId, ZkVersion
from model.zookeeper import Check, Create, Delete, Op, SetData

D = MigrationDriverState
MIGRATION_BEGINS = BeginTransactionRecord("ZK Migration")  # QuorumController.MigrationRecordConsumer.beginMigration


def handle(state: ClusterState, action: MigrationAction, variant: Variant) -> ClusterState | None:
    """The state after a migration action, or None when it is not enabled."""
    match action:
        case ReconfigureController(controller=c, migration_enabled=enabled):
            return _reconfigure_controller(state, c, enabled)
        case RecoverMigrationState(controller=c):
            return _recover_migration_state(state, c)
        case KRaftLeaderChange(controller=c):
            return _kraft_leader_change(state, c, variant)
        case WaitForControllerQuorum(controller=c):
            return _wait_for_controller_quorum(state, c, variant)
        case WaitForZkBrokers(controller=c):
            return _wait_for_zk_brokers(state, c, variant)
        case BecomeZkController(controller=c):
            return _become_zk_controller(state, c, variant)
        case MigrateMetadata(controller=c):
            return _migrate_metadata(state, c, variant)
        case CompleteMigration(controller=c):
            return _complete_migration(state, c, variant)
        case MigrationCommitted(controller=c):
            return _migration_committed(state, c, variant)
        case SyncKRaftToZk(controller=c):
            return _sync_kraft_to_zk(state, c, variant)
        case SendRPCsToBrokers(controller=c):
            return _send_rpcs_to_brokers(state, c, variant)
        case DualWrite(controller=c):
            return _dual_write(state, c, variant)
        case MigrateBrokerToKRaft(broker=b):
            return _migrate_broker(state, b)
        case RollbackBrokerToZk(broker=b):
            return _rollback_broker(state, b)
        case DeleteControllerZNodes():
            return _delete_controller_znodes(state, variant)
        case _:
            assert_never(action)


# ---- helpers ------------------------------------------------------------------------------------

def driver_image(c: KRaftController) -> MetadataImage:
    """The committed image as the migration driver has it: no record of a leadership newer than the one
    it has heard of. Raft tells its listeners of a leader change before it hands them that leader's
    records, so a deposed driver learns of the change before it sees what the new leader committed."""
    d = c.driver
    upto = c.high_watermark
    if d is not None:
        while upto > 0 and c.log[upto - 1].epoch > d.kraft_epoch:
            upto -= 1
    return image_of(c.log, upto)


def _kraft_controller_znode(state: ClusterState) -> KRaftControllerZNode | None:
    data = znode_data(state, CONTROLLER)
    return data if isinstance(data, KRaftControllerZNode) else None


def _driver(c: KRaftController, expected: MigrationDriverState | None = None) -> Driver | None:
    """The driver if the controller runs and has one (in ``expected``, when given)."""
    if not c.alive or c.driver is None:
        return None
    if expected is not None and c.driver.state is not expected:
        return None
    return c.driver


def _leading(c: KRaftController) -> bool:
    """The driver believes its node leads (KAFKA-16667: an event runs only for the leadership it was raised in).

    It is the driver's belief, updated only by ``KRaftLeaderChange``: a deposed leader's driver
    goes on with its events until it handles the leadership change, as Kafka's event queue does.
    """
    d = c.driver
    return c.alive and d is not None and d.leader


def _known_driver(c: KRaftController) -> Driver:
    """The driver of a controller the caller knows runs one (a driver event is running); fails loudly if not."""
    d = c.driver
    if d is None:
        raise AssertionError(f"controller {c.id} has no migration driver")
    return d


def _drive(c: KRaftController, new: MigrationDriverState, variant: Variant, **changes: object) -> KRaftController:
    """Move the driver; a transition outside the table is an IllegalStateException in Kafka 3.9."""
    d = _known_driver(c)
    if not is_valid_transition(d.state, new):
        raise AssertionError(f"driver of {c.id}: {d.state.value} -> {new.value} is not in the table")
    return c.replace(driver=d.replace(state=new, **changes))


# ---- the migration driver's events (KRaftMigrationDriver) ---------------------------------------

def _recover_migration_state(state: ClusterState, cid: ControllerId) -> ClusterState | None:
    """RecoverMigrationStateFromZKEvent: read /migration, or create it empty."""
    c = ctrl(state, cid)
    d = _driver(c, D.UNINITIALIZED)
    if d is None or not state.zk.available:
        return None
    node = zkm.get(state.zk, MIGRATION)
    if node is None:
        empty = MigrationZNode(ControllerId(-1), KRaftEpoch(-1), Offset(-1))
        zk, results = zkm.multi(state.zk, NO_SESSION, (Create(MIGRATION, empty),))
        state = state.replace(zk=zk, ghost=state.ghost.replace(last_multi=results))
        node = zkm.get_existing(zk, MIGRATION)
    c = c.replace(driver=d.replace(state=D.INACTIVE, migration_offset=node.data.kraft_metadata_offset,
                                   migration_version=node.version))
    return put_ctrl(state, c)


def _kraft_leader_change(state: ClusterState, cid: ControllerId, variant: Variant) -> ClusterState | None:
    """KRaftLeaderEvent: leading -> WAIT_FOR_CONTROLLER_QUORUM (re-reading /migration); else INACTIVE."""
    c = ctrl(state, cid)
    d = _driver(c)
    if d is None or d.state is D.UNINITIALIZED:
        return None
    leads = is_active(c)
    if (d.kraft_epoch, d.leader) == (c.epoch, leads):
        return None
    if not leads:
        c = _drive(c, D.INACTIVE, variant, kraft_epoch=c.epoch, leader=False, zk_epoch=-1, zk_epoch_version=-2,
                   umr_sent=frozenset())
        return put_ctrl(state, c)
    if variant.has(Bug.INACTIVE_IGNORES_LEADERSHIP) and d.state is D.INACTIVE and d.kraft_epoch >= 0:
        return None
    if not state.zk.available:
        return None
    if d.state is not D.INACTIVE:
        # The event of losing the leadership in between comes first: INACTIVE, then this one.
        return put_ctrl(state, _drive(c, D.INACTIVE, variant, leader=False, zk_epoch=-1, zk_epoch_version=-2,
                                       umr_sent=frozenset()))
    # A driver past UNINITIALIZED has read or created /migration; only DeleteControllerZNodes deletes it,
    # with every controller down, and a controller that starts again starts with a new driver.
    node = zkm.get_existing(state.zk, MIGRATION)
    c = _drive(c, D.WAIT_FOR_CONTROLLER_QUORUM, variant, kraft_epoch=c.epoch, leader=True, zk_epoch=-1,
               zk_epoch_version=-2, umr_sent=frozenset(), migration_offset=node.data.kraft_metadata_offset,
               migration_version=node.version)
    return put_ctrl(state, c)


def quorum_ready(state: ClusterState, c: KRaftController, variant: Variant) -> bool:
    """KIP-866 §Migration Trigger 5: the quorum is online and every member has the flag and ZK configs."""
    if variant.profile is Profile.KAFKA_3_9:
        image = committed_image(c)
        if image.metadata_version is not None and image.metadata_version < Ibp.IBP_3_4_IV0:
            # Differs: Kafka's readiness refuses a level below 3.4-IV0 ("The metadata.version too low",
            # QuorumFeatures.reasonAllControllersZkMigrationNotReady); kip's reads only the members.
            return False
        if image.metadata_version is not None and image.metadata_version < Ibp.IBP_3_7_IV0:
            # Differs: below 3.7-IV0 Kafka has no controller registrations and skips the check (reference §1.4).
            return True
        # Differs: Kafka reads zkMigrationReady from RegisterControllerRecords, whether or not the voter is up.
        return all(o.config.migration_enabled and o.config.zk_configured for o in state.controllers)
    return all(o.alive and o.config.migration_enabled and o.config.zk_configured for o in state.controllers)


def _wait_for_controller_quorum(state: ClusterState, cid: ControllerId, variant: Variant) -> ClusterState | None:
    c = ctrl(state, cid)
    d = _driver(c, D.WAIT_FOR_CONTROLLER_QUORUM)
    if d is None or not _leading(c):
        return None
    image = driver_image(c)
    if image.is_empty:
        # No image published yet (firstPublish): KAFKA-15389, an empty image (a committed LeaderChange whose
        # bootstrap records have not committed yet) is not taken as the first; it would read as NONE.
        return None
    match image.migration_state:
        case ZkMigrationState.NONE if not variant.has(Bug.KRAFT_BORN_MIGRATES):
            c = _drive(c, D.INACTIVE, variant)  # a cluster born in KRaft never migrates
        case ZkMigrationState.POST_MIGRATION:
            if variant.has(Bug.REENTER_MIGRATION_AFTER_FINALIZE):
                c = _drive(c, D.BECOME_CONTROLLER, variant)
            else:
                c = _drive(c, D.INACTIVE, variant)  # KIP-866 §Misconfigurations: never re-enter migration
        case ZkMigrationState.MIGRATION:
            if d.migration_offset <= 0 and variant.profile is Profile.KAFKA_3_9:
                # Differs: Kafka 3.9 needs /migration to show the initial migration as done, else INACTIVE
                # (a leader that died between committing the migration and writing /migration strands it).
                c = _drive(c, D.INACTIVE, variant)
            else:
                c = _drive(c, D.BECOME_CONTROLLER, variant)
        case _:
            if not quorum_ready(state, c, variant):
                return None
            if variant.has(Bug.DRIVER_SKIPS_TO_DUAL_WRITE):
                return put_ctrl(state, c.replace(driver=d.replace(state=D.DUAL_WRITE)))
            c = _drive(c, D.WAIT_FOR_BROKERS, variant)
    return put_ctrl(state, c)


def known_zk_brokers(state: ClusterState, variant: Variant) -> set[BrokerId]:
    """KIP-866 §ZK Broker Presence: live registrations plus every broker named in an assignment."""
    known = {BrokerId(int(name)) for name, _ in zkm.children(state.zk, BROKER_IDS)}
    if not variant.has(Bug.WAIT_ONLY_FOR_LIVE_BROKERS):
        assignment = znode_data(state, TOPIC) or ()
        known |= {r for replicas in assignment for r in replicas}
    return known


def zk_brokers_ready(state: ClusterState, c: KRaftController, variant: Variant) -> bool:
    image = driver_image(c)
    if not image.brokers or not zkm.children(state.zk, BROKER_IDS):
        return False
    for b in known_zk_brokers(state, variant):
        reg = image.registration(b)
        if reg is None or not reg.is_migrating_zk_broker:
            return False
        if variant.has(Bug.READY_COMPARES_ZK_EPOCH):
            node = zkm.get(state.zk, f"{BROKER_IDS}/{b}")
            if node is None or BrokerEpoch(node.czxid) != reg.epoch:
                return False
        # Differs: the KIP asks for registered brokers "in a valid state" (unfenced); Kafka does not check.
        if reg.fenced and variant.profile is Profile.KIP:
            return False
    return True


def _wait_for_zk_brokers(state: ClusterState, cid: ControllerId, variant: Variant) -> ClusterState | None:
    c = ctrl(state, cid)
    if _driver(c, D.WAIT_FOR_BROKERS) is None or not _leading(c) or not state.zk.available:
        return None
    if not zk_brokers_ready(state, c, variant):
        return None
    return put_ctrl(state, _drive(c, D.BECOME_CONTROLLER, variant))


def _become_zk_controller(state: ClusterState, cid: ControllerId, variant: Variant) -> ClusterState | None:
    """BecomeZkControllerEvent (reference §1.4, §2.3; KIP-866 §Controller Leadership), in its two ZooKeeper writes.

    First the claim (KafkaZkClient.tryRegisterKRaftControllerAsActiveController): one multi that
    bumps /controller_epoch by compare-and-set and replaces /controller with a persistent one
    carrying the Raft epoch. Then (KAFKA-16171) an unconditional write of /migration to learn its
    version. They are two round trips, so another controller's write may land between them.
    """
    c = ctrl(state, cid)
    d = _driver(c, D.BECOME_CONTROLLER)
    if d is None or not _leading(c) or not state.zk.available:
        return None
    if d.zk_epoch_version < 0:
        return _claim(state, c, d, variant)
    node = zkm.get_existing(state.zk, MIGRATION)  # the driver read it in KRaftLeaderChange
    data = node.data.replace(kraft_controller_id=c.id, kraft_controller_epoch=d.kraft_epoch)
    zk, results = zkm.multi(state.zk, NO_SESSION, (SetData(MIGRATION, data, ZkVersion(-1)),))
    state = state.replace(zk=zk, ghost=state.ghost.replace(last_multi=results))
    version = zkm.get_existing(zk, MIGRATION).version
    done = data.kraft_metadata_offset > 0
    if variant.profile is Profile.KIP:
        done = done or committed_image(c).migration_state is ZkMigrationState.MIGRATION
    c = _drive(c, D.SYNC_KRAFT_TO_ZK if done else D.ZK_MIGRATION, variant, migration_version=version,
               migration_offset=data.kraft_metadata_offset)
    return put_ctrl(state, c)


def _claim(state: ClusterState, c: KRaftController, d: Driver, variant: Variant) -> ClusterState | None:
    epoch_node = zkm.get(state.zk, CONTROLLER_EPOCH)
    current = zkm.get(state.zk, CONTROLLER)
    claimed = _kraft_controller_znode(state)
    newer = claimed is not None and claimed.kraft_epoch >= d.kraft_epoch
    if epoch_node is None or (newer and not variant.has(Bug.CLAIM_IGNORES_NEWER_KRAFT_EPOCH)):
        return None  # IllegalStateException / ControllerMovedException: wait for a newer leadership
    new_epoch = ControllerEpoch(epoch_node.data + (0 if variant.has(Bug.CLAIM_REUSES_ZK_EPOCH) else 1))
    ops: list[Op] = [SetData(CONTROLLER_EPOCH, new_epoch, epoch_node.version)]
    if current is not None:
        ops.append(Delete(CONTROLLER, current.version))
    ops.append(Create(CONTROLLER, KRaftControllerZNode(c.id, d.kraft_epoch)))
    state = _record_attempt(state, c)
    zk, results = zkm.multi(state.zk, NO_SESSION, tuple(ops))
    state = state.replace(zk=zk, ghost=state.ghost.replace(last_multi=results))
    if not zkm.succeeded(results):
        return None
    history = state.history.replace(max_controller_epoch=max(state.history.max_controller_epoch, new_epoch))
    state = _note_kraft_write(state.replace(history=history), c, "claim", -1)
    c = c.replace(driver=d.replace(zk_epoch=new_epoch, zk_epoch_version=zkm.get_existing(zk, CONTROLLER_EPOCH).version))
    return put_ctrl(state, c)


def zk_metadata(state: ClusterState) -> list[MetadataRecord]:
    """What the migration copies from ZooKeeper: partitions of live topics and the dynamic config."""
    records: list[MetadataRecord] = []
    assignment = znode_data(state, TOPIC)
    if assignment is not None:
        for p in range(len(assignment)):
            s = zkm.get_existing(state.zk, partition_state_path(PartitionId(p))).data
            records.append(PartitionRecord(p, s.leader, s.isr, s.leader_epoch))
    config = znode_data(state, CONFIG)
    if config is not None:
        records.append(ConfigRecord(config))
    # A topic pending deletion is not copied (KIP-866 §Topic Deletions); the sync removes it from ZooKeeper.
    return records


def _migrate_metadata(state: ClusterState, cid: ControllerId, variant: Variant) -> ClusterState | None:
    """MigrateMetadataEvent: beginMigration, then the batches of ZooKeeper data."""
    c = ctrl(state, cid)
    # Appending needs the Raft leadership, not just the driver's belief (NotControllerException otherwise).
    if _driver(c, D.ZK_MIGRATION) is None or not _leading(c) or not is_active(c) or not state.zk.available:
        return None
    if _migration_begun(c) or _migration_appended(c):
        return None
    records = zk_metadata(state)
    if not variant.has(Bug.MIGRATION_OUTSIDE_TRANSACTION):
        records = [MIGRATION_BEGINS] + records
    return append(state, c, records, variant)


def _migration_begun(c: KRaftController) -> bool:
    """This leadership has begun copying ZooKeeper's data into the log (a bootstrap's transaction is not it)."""
    return any(
        e.epoch == c.epoch and (isinstance(e.record, (PartitionRecord, ConfigRecord)) or e.record == MIGRATION_BEGINS)
        for e in c.log
    )


def _migration_appended(c: KRaftController) -> bool:
    return any(isinstance(e.record, ZkMigrationStateRecord) and e.record.state is ZkMigrationState.MIGRATION
               for e in c.log)


def _complete_migration(state: ClusterState, cid: ControllerId, variant: Variant) -> ClusterState | None:
    c = ctrl(state, cid)
    if _driver(c, D.ZK_MIGRATION) is None or not _leading(c) or not is_active(c):
        return None
    if not _migration_begun(c) or _migration_appended(c):
        return None
    records: list[MetadataRecord] = [ZkMigrationStateRecord(ZkMigrationState.MIGRATION)]
    if image_of(c.log).open_transaction is not None:
        records.append(EndTransactionRecord())
    return append(state, c, records, variant)


def _migration_committed(state: ClusterState, cid: ControllerId, variant: Variant) -> ClusterState | None:
    """completeMigration's future resolved: write /migration with the migration's offset."""
    c = ctrl(state, cid)
    d = _driver(c, D.ZK_MIGRATION)
    if d is None or not _leading(c) or not state.zk.available:
        return None
    end = migration_end(c)
    if end is None or c.high_watermark < end:
        return None
    state, ok = _kraft_zk_write(state, c, "migration", [], Offset(end), variant)
    c = ctrl(state, cid)
    if not ok:
        return state
    return put_ctrl(state, _drive(c, D.SYNC_KRAFT_TO_ZK, variant))


def zk_reconcile_ops(state: ClusterState, image: MetadataImage, c: KRaftController, variant: Variant) -> list[Op]:
    """The writes that make ZooKeeper's projection equal the image's (KRaftMigrationZkWriter)."""
    ops: list[Op] = []
    d = _known_driver(c)
    for p, part in enumerate(image.partitions):
        path = partition_state_path(PartitionId(p))
        s: PartitionState | None = znode_data(state, path)
        if s is None or (s.leader, s.isr, s.leader_epoch) != (part.leader, part.isr, part.leader_epoch):
            # Differs: Kafka writes the Raft epoch as the partition's controller_epoch (reference §2.4); the
            # KIP treats the KRaft controller as a ZK controller, so the model writes the claimed ZK epoch.
            epoch = ControllerEpoch(c.epoch if variant.profile is Profile.KAFKA_3_9 else d.zk_epoch)
            ops.append(SetData(path, PartitionState(part.leader, part.leader_epoch, part.isr, epoch), ZkVersion(-1)))
    if image.config is not None and znode_data(state, CONFIG) != image.config and not variant.has(
        Bug.DUAL_WRITE_DROPS_CONFIG
    ):
        if zkm.get(state.zk, CONFIG) is None:
            ops.append(Create(CONFIG, image.config))
        else:
            ops.append(SetData(CONFIG, image.config, ZkVersion(-1)))
    if zkm.get(state.zk, pending_deletion_path(DELETED_TOPIC)) is not None and not variant.has(
        Bug.SYNC_SKIPS_TOPIC_DELETION
    ):
        ops.append(Delete(topic_path(DELETED_TOPIC)))
        ops.append(Delete(pending_deletion_path(DELETED_TOPIC)))
    return ops


def _kraft_zk_write(
    state: ClusterState, c: KRaftController, kind: str, ops: list[Op], offset: Offset, variant: Variant
) -> tuple[ClusterState, bool]:
    """One fenced multi: check /controller_epoch, the ops, CAS /migration to ``offset`` (reference §2.4).

    On success the driver learns /migration's new version and offset. A fencing failure means
    another controller claimed ZooKeeper: the driver goes INACTIVE until a leadership event.
    """
    d = _known_driver(c)
    fenced = not (variant.has(Bug.DUAL_WRITE_SKIPS_EPOCH_CHECK) and kind == "dual-write")
    head: list[Op] = [Check(CONTROLLER_EPOCH, ZkVersion(d.zk_epoch_version))] if fenced else []
    update = SetData(MIGRATION, MigrationZNode(c.id, d.kraft_epoch, offset), ZkVersion(d.migration_version))
    state = _record_attempt(state, c)
    zk, results = zkm.multi(state.zk, NO_SESSION, tuple(head + ops + [update]))
    state = state.replace(zk=zk, ghost=state.ghost.replace(last_multi=results))
    if not zkm.succeeded(results):
        # Differs: Kafka's driver retries the event on its next poll; every retry fails the same way until a
        # KRaftLeaderEvent, so the model parks the driver in INACTIVE (a valid move from every state).
        c = _drive(c, D.INACTIVE, variant, zk_epoch=-1, zk_epoch_version=-2)
        return put_ctrl(state, c), False
    state = _note_kraft_write(state, c, kind, offset)
    if state.history.crashed_controllers and offset >= len(state.history.committed):
        # ZooKeeper has caught up with everything committed: a crash before now has lost nothing.
        state = state.replace(history=state.history.replace(crashed_controllers=frozenset()))
    c = c.replace(driver=d.replace(migration_offset=offset, migration_version=zkm.get_existing(zk, MIGRATION).version))
    return put_ctrl(state, c), True


def _acting_epoch(c: KRaftController) -> KRaftEpoch:
    """The Raft epoch a controller's ZooKeeper writes speak for: the leadership its driver believes in."""
    return c.driver.kraft_epoch if c.driver is not None else c.epoch


def _record_attempt(state: ClusterState, c: KRaftController) -> ClusterState:
    return state.replace(ghost=state.ghost.replace(attempted_kraft_write=(c.id, _acting_epoch(c))))


def _note_kraft_write(state: ClusterState, c: KRaftController, kind: str, offset: int) -> ClusterState:
    write = KRaftWrite(
        c.id, _acting_epoch(c), kind, _known_driver(c).state, offset, len(c.log),
        own_image(c).migration_state is ZkMigrationState.POST_MIGRATION,
    )
    return state.replace(ghost=state.ghost.replace(kraft_writes=state.ghost.kraft_writes + (write,)))


def _sync_kraft_to_zk(state: ClusterState, cid: ControllerId, variant: Variant) -> ClusterState | None:
    """SyncKRaftMetadataEvent: write the whole committed image to ZooKeeper before any RPC."""
    c = ctrl(state, cid)
    d = _driver(c, D.SYNC_KRAFT_TO_ZK)
    if d is None or not _leading(c) or not state.zk.available:
        return None
    image = driver_image(c)
    if image.offset < d.migration_offset:
        return None
    state, ok = _kraft_zk_write(state, c, "sync", zk_reconcile_ops(state, image, c, variant), image.offset, variant)
    if not ok:
        return state
    return put_ctrl(state, _drive(ctrl(state, cid), D.KRAFT_CONTROLLER_TO_BROKER_COMM, variant))


def zk_broker_targets(image: MetadataImage) -> list[tuple[BrokerId, BrokerEpoch]]:
    """ZK brokers the KRaft controller sends RPCs to: registered as migrating and not fenced (§Incompatible Brokers)."""
    return [(r.broker, r.epoch) for r in image.brokers if r.is_migrating_zk_broker and not r.fenced]


def _controller_rpcs(
    c: KRaftController, image: MetadataImage, partitions: list[int], full: bool, variant: Variant
) -> list[Message]:
    """UpdateMetadata, then LeaderAndIsr, to each target ZK broker, marked IsKRaftController."""
    d = _known_driver(c)
    leaders = tuple((p.leader, p.leader_epoch) for p in image.partitions)
    live = served_brokers(image, variant)
    out: list[Message] = []
    cid = BrokerId(c.id)
    epoch = ControllerEpoch(d.zk_epoch)
    for b, broker_epoch in zk_broker_targets(image):
        update: list[Message] = [UpdateMetadata(cid, epoch, broker_epoch, b, leaders, kraft=True, live=live)]
        if not (full or partitions):
            update = []
        leaderships: list[Message] = [
            LeaderAndIsr(cid, epoch, broker_epoch, b, PartitionId(p), image.partitions[p].leader,
                         image.partitions[p].leader_epoch, image.partitions[p].isr, kraft=True)
            for p in partitions
            if full or b in image.partitions[p].isr or b == image.partitions[p].leader
        ]
        # KIP-866 §ZK Broker RPCs: a broker learns of the KRaft controller (and of live brokers) from the
        # UpdateMetadata, so it must be queued first.
        out += leaderships + update if variant.has(Bug.LEADER_AND_ISR_BEFORE_UPDATE_METADATA) else update + leaderships
    return out


def _send_rpcs_to_brokers(state: ClusterState, cid: ControllerId, variant: Variant) -> ClusterState | None:
    c = ctrl(state, cid)
    d = _driver(c, D.KRAFT_CONTROLLER_TO_BROKER_COMM)
    if d is None or not _leading(c):
        return None
    image = driver_image(c)
    if image.offset < d.migration_offset or (
        variant.has(Bug.RPCS_WAIT_FOR_NEWER_OFFSET) and image.offset <= d.migration_offset
    ):
        return None
    rpcs = _controller_rpcs(c, image, list(range(len(image.partitions))), True, variant)
    sent = send(state, rpcs)
    if sent is None:
        return None
    targets = frozenset(b for b, _ in zk_broker_targets(image))
    return put_ctrl(sent, _drive(c, D.DUAL_WRITE, variant, umr_sent=targets))


def _dual_write(state: ClusterState, cid: ControllerId, variant: Variant) -> ClusterState | None:
    """MetadataChangeEvent in DUAL_WRITE: the committed delta to ZooKeeper, then RPCs to ZK brokers."""
    c = ctrl(state, cid)
    d = _driver(c)
    allowed = (D.DUAL_WRITE, D.SYNC_KRAFT_TO_ZK) if variant.has(Bug.DUAL_WRITE_BEFORE_SYNC) else (D.DUAL_WRITE,)
    if d is None or d.state not in allowed or not _leading(c) or not state.zk.available:
        return None
    image = image_of(c.log) if variant.has(Bug.DUAL_WRITE_UNCOMMITTED) else driver_image(c)
    if image.offset <= d.migration_offset:
        return None
    before = image_of(c.log, d.migration_offset) if d.migration_offset > 0 else None
    ops = zk_reconcile_ops(state, image, c, variant)
    state, ok = _kraft_zk_write(state, c, "dual-write", ops, image.offset, variant)
    if not ok:
        return state
    c = ctrl(state, cid)
    changed = [
        p for p, part in enumerate(image.partitions)
        if before is None or p >= len(before.partitions) or before.partitions[p] != part
    ]
    if changed:
        rpcs = _controller_rpcs(c, image, changed, False, variant)
    elif before is None or before.brokers != image.brokers:
        rpcs = [m for m in _controller_rpcs(c, image, [], True, variant) if isinstance(m, UpdateMetadata)]
    else:
        rpcs = []
    return send(state, rpcs) if rpcs else state


# ---- the operator's steps of KIP-866's runbooks -------------------------------------------------

def _reconfigure_controller(state: ClusterState, cid: ControllerId, enabled: bool) -> ClusterState | None:
    c = ctrl(state, cid)
    if c.alive or c.config.migration_enabled == enabled:
        return None
    spent = spend(state, migrations=1)
    return None if spent is None else put_ctrl(spent, c.replace(config=c.config.replace(migration_enabled=enabled)))


def _migrate_broker(state: ClusterState, bid: BrokerId) -> ClusterState | None:
    """KIP-866 §Broker Migration: a stopped ZK broker is configured as a KRaft broker; meta.properties stays v0."""
    b = state.brokers[bid]
    if b.alive or b.config.kraft_mode or not b.config.migration_enabled:
        return None
    spent = spend(state, migrations=1)
    return None if spent is None else put_broker(spent, b.replace(config=b.config.replace(kraft_mode=True)))


def _rollback_broker(state: ClusterState, bid: BrokerId) -> ClusterState | None:
    """KIP-866 §Rollback to ZK: back to ZK mode, possible only while meta.properties is still v0."""
    b = state.brokers[bid]
    if b.alive or not b.config.kraft_mode or b.meta_properties != 0:
        return None
    spent = spend(state, migrations=1)
    return None if spent is None else put_broker(spent, b.replace(config=b.config.replace(kraft_mode=False)))


def _delete_controller_znodes(state: ClusterState, variant: Variant) -> ClusterState | None:
    """KIP-866 §Rollback to ZK, last step, once the quorum is down."""
    if _kraft_controller_znode(state) is None or any(c.alive for c in state.controllers) or not state.zk.available:
        return None
    spent = spend(state, migrations=1)
    if spent is None:
        return None
    state = spent
    ops: list[Op] = [Delete(CONTROLLER)]
    if variant.profile is Profile.KIP:
        ops.append(Delete(CONTROLLER_EPOCH))
    elif zkm.get(state.zk, MIGRATION) is not None:
        # Differs: Kafka's documented rollback removes /controller and /migration and keeps /controller_epoch.
        ops.append(Delete(MIGRATION))
    zk, results = zkm.multi(state.zk, NO_SESSION, tuple(ops))
    # What KRaft had committed when it handed ZooKeeper back: what the next ZK controller must find.
    history = state.history.replace(handed_back=len(state.history.committed))
    return state.replace(zk=zk, history=history, ghost=state.ghost.replace(last_multi=results))
