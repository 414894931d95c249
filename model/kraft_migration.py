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
- A MetadataChangeEvent may wait in the driver's queue (``PublishMetadataChange``, ``RunMetadataChange``; only
  where ``Budget.queued_events`` allows, scope event-queue) carrying the leader and epoch it was raised in; it
  runs only if Raft still reports them (KAFKA-16667), else it is dropped.
- A dual write may fail because its ZooKeeper session expired while it waited (``DualWriteSessionExpired``; only
  where ``Budget.write_failures`` allows, scope dual-write-failure): under kip the next dual write writes the
  change again, under kafka-3.9 the driver keeps the image it was handed and the next delta starts there.
- A dual write may apply in ZooKeeper and lose its reply (``DualWriteReplyLost``; only where
  ``Budget.lost_write_replies`` allows, scope dual-write-resend): the client's resent copy fails on /migration's
  version. Under kip the driver reads /migration, finds its own write and goes on; under kafka-3.9 it keeps the
  stale version, and its next dual write fails the same way (the driver parks in INACTIVE) until a new leadership.
- The operator's steps (a controller's migration flag, a broker moved to KRaft and back, the
  KRaft znodes deleted at the end of a rollback) spend the scope's ``migrations`` budget.
- What the quorum does (appending, activating, brokers, the lag bound) is ``model.kraft_quorum``'s,
  used here by its public names. Handlers return the next state, or a ``Refused`` (not enabled:
  why) or an ``Unchanged`` (nothing to change), ``model.outcome``.

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
    DualWriteReplyLost,
    DualWriteSessionExpired,
    KRaftLeaderChange,
    MigrateBrokerToKRaft,
    MigrateMetadata,
    MigrationAction,
    MigrationCommitted,
    PublishMetadataChange,
    ReconfigureController,
    RecoverMigrationState,
    RollbackBrokerToZk,
    RunMetadataChange,
    SendRPCsToBrokers,
    SyncKRaftToZk,
    WaitForControllerQuorum,
    WaitForZkBrokers,
)
from model.bugs import CORRECT, Bug, Variant
from model.kraft import (
    TOPIC_NAME,
    BeginTransactionRecord,
    ConfigRecord,
    ControllerId,
    EndTransactionRecord,
    KRaftEpoch,
    MetadataImage,
    MetadataRecord,
    Offset,
    PartitionImage,
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
    QUEUE_BOUND,
    Driver,
    KRaftControllerZNode,
    MigrationDriverState,
    MigrationZNode,
    Profile,
    QueuedEvent,
    is_valid_transition,
    pending_deletion_path,
    topic_path,
)
from model.outcome import BUDGET_SPENT, IN_FLIGHT_CAP, Refused, Result, Unchanged
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
    StopReplica,
    UpdateMetadata,
    kraft_claim,
    partition_state_path,
    seen_by,
    znode_data,
)
from model.transitions import put_broker, send, spend
from model.types import (
    ANY_VERSION,
    NO_SESSION,
    BrokerEpoch,
    BrokerId,
    ControllerEpoch,
    Ibp,
    LeaderEpoch,
    PartitionId,
    ZkCode,
    ZkVersion,
)
from model.zookeeper import Check, Create, Delete, Op, SetData

D = MigrationDriverState
MIGRATION_BEGINS = BeginTransactionRecord("ZK Migration")  # QuorumController.MigrationRecordConsumer.beginMigration


# Refusals without arguments, built once (model.outcome).
_ZK_UNAVAILABLE = Refused(None, "ZooKeeper is unavailable")
_NOT_RUNNING = Refused(None, "the controller is not running")
_NO_DRIVER = Refused(None, "the controller runs no migration driver (no migration flag)")
_NOT_IN = {s: Refused(None, f"the driver is not in {s.name}") for s in MigrationDriverState}
_NOT_LEADING = Refused(None, "the driver does not believe its node leads")
_NOT_ACTIVE = Refused(None, "the controller is not the active controller")
_UNRECOVERED = Refused(None, "the driver has not recovered /migration")
_NO_LEADERSHIP_CHANGE = Refused(None, "the driver knows of the leadership: no change to handle")
_IGNORES_LEADERSHIP = Refused(None, "an INACTIVE driver ignores the leadership (seeded bug)")
_NO_IMAGE = Refused(None, "no metadata image is published yet (KAFKA-15389)")
_BROKERS_NOT_READY = Refused(None, "not every known ZK broker has registered with KRaft")
_NO_CONTROLLER_EPOCH = Refused(None, "there is no /controller_epoch")
_BEGUN = Refused(None, "this leadership has begun the migration")
_NOT_BEGUN = Refused(None, "this leadership has not begun the migration")
_NO_MIGRATION_RECORD = Refused(None, "the log holds no MIGRATION record")
_ZK_CAUGHT_UP = Unchanged("ZooKeeper has every committed record the driver has seen")
_SAME_FLAG = Unchanged("the migration flag is as asked")
_KRAFT_BROKER = Unchanged("the broker is a KRaft broker")
_NO_FLAG = Refused(None, "the broker lacks the migration flag")
_ZK_BROKER = Unchanged("the broker is a ZK broker")
_NO_KRAFT_CONTROLLER = Refused(None, "/controller names no KRaft controller")
_QUORUM_RUNNING = Refused(None, "a KRaft controller is running")


def handle(state: ClusterState, action: MigrationAction, variant: Variant) -> Result:
    """The state after a migration action, or why it is refused or changes nothing (``model.outcome``)."""
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
        case DualWriteSessionExpired(controller=c):
            return _dual_write_session_expired(state, c, variant)
        case DualWriteReplyLost(controller=c):
            return _dual_write_reply_lost(state, c, variant)
        case PublishMetadataChange(controller=c):
            return _publish_metadata_change(state, c)
        case RunMetadataChange(controller=c):
            return _run_metadata_change(state, c, variant)
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


def _driver(c: KRaftController, expected: MigrationDriverState | None = None) -> Driver | Refused:
    """The driver if the controller runs and has one (in ``expected``, when given), else why not."""
    if not c.alive:
        return _NOT_RUNNING
    if c.driver is None:
        return _NO_DRIVER
    if expected is not None and c.driver.state is not expected:
        return _NOT_IN[expected]
    return c.driver


def _leading_driver(c: KRaftController, expected: MigrationDriverState) -> Driver | Refused:
    """The driver in ``expected`` whose node it believes leads (``_leading``), else why not: the opening of each
    driver event that reads the image but writes nothing to ZooKeeper (those that do ask ``_driver_event``)."""
    d = _driver(c, expected)
    if isinstance(d, Refused):
        return d
    return d if _leading(c) else _NOT_LEADING


def _driver_event(
    state: ClusterState, c: KRaftController, expected: MigrationDriverState | None = None
) -> Refused | None:
    """Why a driver event that writes to ZooKeeper cannot run now (no driver in ``expected``, its node not
    believed leading, ZooKeeper down), or None."""
    d = _driver(c, expected)
    if isinstance(d, Refused):
        return d
    if not _leading(c):
        return _NOT_LEADING
    if not state.zk.available:
        return _ZK_UNAVAILABLE
    return None


def _behind(image: MetadataImage, d: Driver) -> Refused:
    return Refused(None, "the driver's image (offset {}) is behind /migration's offset {}",
                   (image.offset, d.migration_offset))


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

def _recover_migration_state(state: ClusterState, cid: ControllerId) -> Result:
    """RecoverMigrationStateFromZKEvent: read /migration, or create it empty."""
    c = ctrl(state, cid)
    d = _driver(c, D.UNINITIALIZED)
    if isinstance(d, Refused):
        return d
    if not state.zk.available:
        return _ZK_UNAVAILABLE
    node = zkm.get(seen_by(state, cid).zk, MIGRATION)
    if node is None:
        empty = MigrationZNode(ControllerId(-1), KRaftEpoch(-1), Offset(-1))
        zk, results = zkm.multi(state.zk, NO_SESSION, (Create(MIGRATION, empty),), reader=cid)
        state = state.replace(zk=zk, ghost=state.ghost.replace(last_multi=results))
        if not zkm.succeeded(results):
            # A lagging read showed no /migration: the create fails with NodeExists (createInitialMigrationState's
            # maybeThrow), the event fails and is retried from UNINITIALIZED, its server now caught up.
            return state
        node = zkm.get_existing(zk, MIGRATION)
    c = c.replace(driver=d.replace(state=D.INACTIVE, migration_offset=node.data.kraft_metadata_offset,
                                   migration_version=node.version))
    return put_ctrl(state, c)


def _kraft_leader_change(state: ClusterState, cid: ControllerId, variant: Variant) -> Result:
    """KRaftLeaderEvent: leading -> WAIT_FOR_CONTROLLER_QUORUM (re-reading /migration); else INACTIVE."""
    c = ctrl(state, cid)
    d = _driver(c)
    if isinstance(d, Refused):
        return d
    if d.state is D.UNINITIALIZED:
        return _UNRECOVERED
    leads = is_active(c)
    if (d.kraft_epoch, d.leader) == (c.epoch, leads):
        return _NO_LEADERSHIP_CHANGE
    if not leads:
        c = _drive(c, D.INACTIVE, variant, kraft_epoch=c.epoch, leader=False, zk_epoch=-1, zk_epoch_version=-2,
                   umr_sent=frozenset())
        return put_ctrl(state, c)
    if variant.has(Bug.INACTIVE_IGNORES_LEADERSHIP) and d.state is D.INACTIVE and d.kraft_epoch >= 0:
        return _IGNORES_LEADERSHIP
    if not state.zk.available:
        return _ZK_UNAVAILABLE
    if d.state is not D.INACTIVE:
        # The event of losing the leadership in between comes first: INACTIVE, then this one.
        return put_ctrl(state, _drive(c, D.INACTIVE, variant, leader=False, zk_epoch=-1, zk_epoch_version=-2,
                                       umr_sent=frozenset()))
    # A driver past UNINITIALIZED has read or created /migration; only DeleteControllerZNodes deletes it,
    # with every controller down, and a controller that starts again starts with a new driver.
    node = zkm.get_existing(seen_by(state, cid).zk, MIGRATION)
    c = _drive(c, D.WAIT_FOR_CONTROLLER_QUORUM, variant, kraft_epoch=c.epoch, leader=True, zk_epoch=-1,
               zk_epoch_version=-2, umr_sent=frozenset(), migration_offset=node.data.kraft_metadata_offset,
               migration_version=node.version)
    return put_ctrl(state, c)


def quorum_not_ready(state: ClusterState, c: KRaftController, variant: Variant) -> Refused | None:
    """KIP-866 §Migration Trigger 5: why the quorum is not ready to migrate (every member online with the flag
    and the ZooKeeper configs), or None. Under kafka-3.9, QuorumFeatures.reasonAllControllersZkMigrationNotReady's
    reasons in its order, read from the committed image's controller registrations (reference §1.4)."""
    if variant.profile is Profile.KAFKA_3_9:
        image = committed_image(c)
        if image.metadata_version is not None and image.metadata_version < Ibp.IBP_3_4_IV0:
            # Differs: Kafka's readiness refuses a level below 3.4-IV0 ("The metadata.version too low",
            # QuorumFeatures.reasonAllControllersZkMigrationNotReady); kip's reads only the members.
            return Refused(None, "The metadata.version too low at {}", (image.metadata_version.name,))
        if image.metadata_version is not None and image.metadata_version < Ibp.IBP_3_7_IV0:
            # Differs: below 3.7-IV0 Kafka has no controller registrations and skips the check (reference §1.4).
            return None
        # Differs: Kafka reads each voter's RegisterControllerRecord (KIP-919), whether or not the voter is up;
        # kip asks every member to be online with the flag. Voters in id order: QuorumFeatures' quorumNodeIds come
        # from a HashMap of controller.quorum.voters (QuorumConfig), which iterates consecutive ids ascending.
        for o in sorted(state.controllers, key=lambda o: o.id):
            if variant.has(Bug.READINESS_READS_CONFIGURATION):
                if not (o.config.migration_enabled and o.config.zk_configured):
                    return Refused(None, "Controller {} has not enabled zookeeper.metadata.migration.enable", (o.id,))
                continue
            registration = image.controller_registration(o.id)
            if registration is None:
                return Refused(None, "No registration found for controller {}", (o.id,))
            if not registration.zk_migration_ready:
                return Refused(None, "Controller {} has not enabled zookeeper.metadata.migration.enable", (o.id,))
        return None
    for o in state.controllers:
        if not o.alive:
            return Refused(None, "controller {} is not running", (o.id,))
        if not (o.config.migration_enabled and o.config.zk_configured):
            return Refused(None, "controller {} lacks the migration flag or the ZooKeeper configs", (o.id,))
    return None


def _wait_for_controller_quorum(state: ClusterState, cid: ControllerId, variant: Variant) -> Result:
    c = ctrl(state, cid)
    d = _leading_driver(c, D.WAIT_FOR_CONTROLLER_QUORUM)
    if isinstance(d, Refused):
        return d
    image = driver_image(c)
    if image.is_empty:
        # No image published yet (firstPublish): KAFKA-15389, an empty image (a committed LeaderChange whose
        # bootstrap records have not committed yet) is not taken as the first; it would read as NONE.
        return _NO_IMAGE
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
            not_ready = quorum_not_ready(state, c, variant)
            if not_ready is not None:
                return not_ready
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


def _wait_for_zk_brokers(state: ClusterState, cid: ControllerId, variant: Variant) -> Result:
    c = ctrl(state, cid)
    refused = _driver_event(state, c, D.WAIT_FOR_BROKERS)
    if refused is not None:
        return refused
    if not zk_brokers_ready(seen_by(state, cid), c, variant):
        return _BROKERS_NOT_READY
    return put_ctrl(state, _drive(c, D.BECOME_CONTROLLER, variant))


def _become_zk_controller(state: ClusterState, cid: ControllerId, variant: Variant) -> Result:
    """BecomeZkControllerEvent (reference §1.4, §2.3; KIP-866 §Controller Leadership), in its two ZooKeeper writes.

    First the claim (KafkaZkClient.tryRegisterKRaftControllerAsActiveController): one multi that
    bumps /controller_epoch by compare-and-set and replaces /controller with a persistent one
    carrying the Raft epoch. Then (KAFKA-16171) an unconditional write of /migration to learn its
    version. They are two round trips, so another controller's write may land between them.
    """
    c = ctrl(state, cid)
    d = _driver(c, D.BECOME_CONTROLLER)
    if isinstance(d, Refused):
        return d
    refused = _driver_event(state, c)
    if refused is not None:
        return refused
    if d.zk_epoch_version < 0:
        return _claim(state, c, d, variant)
    # Differs: Kafka writes back the /migration it read at the leader change (KRaftLeaderChange); the model reads
    # it here, through the controller's view, which its claim (a write) has just brought up to date. Under a lagging
    # server (scope stale-reads) Kafka may write back an older offset than the model does.
    node = zkm.get_existing(seen_by(state, cid).zk, MIGRATION)
    data = node.data.replace(kraft_controller_id=c.id, kraft_controller_epoch=d.kraft_epoch)
    zk, results = zkm.multi(state.zk, NO_SESSION, (SetData(MIGRATION, data, ZkVersion(-1)),), reader=cid)
    state = state.replace(zk=zk, ghost=state.ghost.replace(last_multi=results))
    version = zkm.get_existing(zk, MIGRATION).version
    done = data.kraft_metadata_offset > 0
    if variant.profile is Profile.KIP:
        done = done or committed_image(c).migration_state is ZkMigrationState.MIGRATION
    c = _drive(c, D.SYNC_KRAFT_TO_ZK if done else D.ZK_MIGRATION, variant, migration_version=version,
               migration_offset=data.kraft_metadata_offset)
    return put_ctrl(state, c)


def _claim(state: ClusterState, c: KRaftController, d: Driver, variant: Variant) -> Result:
    seen = seen_by(state, c.id)  # its reads may lag; the multi's versions are checked at the leader
    epoch_node = zkm.get(seen.zk, CONTROLLER_EPOCH)
    current = zkm.get(seen.zk, CONTROLLER)
    claimed = kraft_claim(seen)
    newer = claimed is not None and claimed.kraft_epoch >= d.kraft_epoch
    # IllegalStateException / ControllerMovedException: wait for a newer leadership.
    if epoch_node is None:
        return _NO_CONTROLLER_EPOCH
    if newer and not variant.has(Bug.CLAIM_IGNORES_NEWER_KRAFT_EPOCH):
        assert claimed is not None
        return Refused(None, "/controller holds KRaft epoch {}, not older than the driver's {}",
                       (claimed.kraft_epoch, d.kraft_epoch))
    new_epoch = ControllerEpoch(epoch_node.data + (0 if variant.has(Bug.CLAIM_REUSES_ZK_EPOCH) else 1))
    trusts = variant.has(Bug.CLAIM_TRUSTS_STALE_READ)  # the mistake: no versions, trusting what it read
    ops: list[Op] = [SetData(CONTROLLER_EPOCH, new_epoch, ANY_VERSION if trusts else epoch_node.version)]
    if current is not None:
        ops.append(Delete(CONTROLLER, ANY_VERSION if trusts else current.version))
    ops.append(Create(CONTROLLER, KRaftControllerZNode(c.id, d.kraft_epoch)))
    state = _record_attempt(state, c)
    zk, results = zkm.multi(state.zk, NO_SESSION, tuple(ops), reader=c.id)
    state = state.replace(zk=zk, ghost=state.ghost.replace(last_multi=results))
    if not zkm.succeeded(results):
        # FailedRegistrationResult: only a stale read fails it (the multi runs against what was read); the driver
        # stays in BECOME_CONTROLLER and retries, reading from a server that has caught up with this write.
        return state
    history = state.history.replace(max_controller_epoch=max(state.history.max_controller_epoch, new_epoch))
    state = _note_kraft_write(state.replace(history=history), c, "claim", -1)
    c = c.replace(driver=d.replace(zk_epoch=new_epoch, zk_epoch_version=zkm.get_existing(zk, CONTROLLER_EPOCH).version))
    return put_ctrl(state, c)


def migrated_partition(partition: int, s: PartitionState) -> PartitionRecord:
    """What the migration copies of a partition's state znode: leader, ISR and leader epoch; not the
    controller epoch of its last writer, which KRaft has no use for (KIP-866 §Controller Migration)."""
    return PartitionRecord(partition, s.leader, s.isr, s.leader_epoch)


def zk_metadata(state: ClusterState, variant: Variant = CORRECT) -> list[MetadataRecord]:
    """What the migration copies from ZooKeeper: partitions of live topics and the dynamic config.

    A partition assigned with no state znode yet (added by an admin, not yet started by a ZK controller) is
    copied as ZkTopicMigrationClient does: its replicas as ISR, the first as leader, leader epoch 0."""
    records: list[MetadataRecord] = []
    assignment = znode_data(state, TOPIC)
    # A topic pending deletion is not copied (KIP-866 §Topic Deletions; ZkTopicMigrationClient.iterateTopics since
    # KAFKA-15605's fix, 3.6.1); the seeded bug MIGRATES_PENDING_DELETION copies it live, as Kafka 3.4 to 3.6.0 did.
    pending = zkm.get(state.zk, pending_deletion_path(TOPIC_NAME)) is not None
    if assignment is not None and (not pending or variant.has(Bug.MIGRATES_PENDING_DELETION)):
        for p, replicas in enumerate(assignment):
            s = znode_data(state, partition_state_path(PartitionId(p)))
            if s is not None:
                records.append(migrated_partition(p, s))
            elif not variant.has(Bug.MIGRATION_SKIPS_UNSTARTED_PARTITION):
                records.append(PartitionRecord(p, replicas[0], replicas, LeaderEpoch(0)))
    config = znode_data(state, CONFIG)
    if config is not None:
        records.append(ConfigRecord(config))
    # A topic pending deletion is not copied (KIP-866 §Topic Deletions); the sync removes it from ZooKeeper.
    return records


def _migrate_metadata(state: ClusterState, cid: ControllerId, variant: Variant) -> Result:
    """MigrateMetadataEvent: beginMigration with the first batch of ZooKeeper's data, then one batch a step.

    A batch is ``zookeeper.metadata.migration.min.batch.size`` records (KRaftMigrationDriver's
    BufferingBatchConsumer); the driver waits for each batch to commit before the next (acceptBatch's
    future), so the transaction stays open while the rest of the cluster steps (KIP-866 §Initial Data
    Migration: one transaction however many batches). The begin marker travels with the first batch, where
    Kafka waits for it alone, and ``CompleteMigration`` does not wait for the last batch to commit, where Kafka
    does (as the one-batch migration always had it): the orders allowed are a superset of Kafka's."""
    c = ctrl(state, cid)
    refused = _driver_event(state, c, D.ZK_MIGRATION)
    if refused is not None:
        return refused
    # Appending needs the Raft leadership, not just the driver's belief (NotControllerException otherwise).
    if not is_active(c):
        return _NOT_ACTIVE
    records = zk_metadata(seen_by(state, cid), variant)
    # Differs: Kafka's readAllMetadata hands its BufferingBatchConsumer a topic's records at once, and it flushes
    # once it holds the batch size or more; the model cuts ZooKeeper's records into batches of exactly that size.
    size = max(c.config.migration_batch_size, 1)
    if _migration_begun(c):
        copied, end = migration_copied(c)
        if copied >= len(records) or _migration_appended(c):
            return _BEGUN
        if c.high_watermark < end:
            return Refused(None, "the last batch is not committed: high watermark {} < {}", (c.high_watermark, end))
        return append(state, c, _batch(c, records[copied:copied + size], False, variant), variant)
    if _migration_appended(c):
        return _MIGRATION_APPENDED
    return append(state, c, _batch(c, records[:size], True, variant), variant)


def migrates_in_transaction(c: KRaftController, variant: Variant) -> bool:
    """Whether the initial migration is one metadata transaction (KIP-866 §Initial Data Migration)."""
    mv = own_image(c).metadata_version
    # Differs: Kafka (3.6 to 3.9, MigrationRecordConsumer.beginMigration; 3.4 and 3.5 always) migrates without a
    # transaction at a metadata.version below 3.6-IV1 ("not safe since a controller failover ... may lead to
    # partially migrated metadata"); the KIP has one transaction always.
    return variant.profile is Profile.KIP or mv is None or mv >= Ibp.IBP_3_6_IV1


def _batch(c: KRaftController, records: list[MetadataRecord], first: bool, variant: Variant) -> list[MetadataRecord]:
    """A batch as appended: the first opens the migration's transaction (unless a seeded bug leaves it out)."""
    if variant.has(Bug.BATCH_ENDS_TRANSACTION):
        return [MIGRATION_BEGINS, *records, EndTransactionRecord()]
    if first and migrates_in_transaction(c, variant) and not variant.has(Bug.MIGRATION_OUTSIDE_TRANSACTION):
        return [MIGRATION_BEGINS, *records]
    return records


def _migration_begun(c: KRaftController) -> bool:
    """This leadership has begun copying ZooKeeper's data into the log (a bootstrap's transaction is not it)."""
    return any(e.epoch == c.epoch and (isinstance(e.record, MIGRATED_RECORDS) or e.record == MIGRATION_BEGINS)
               for e in c.log)


MIGRATED_RECORDS = (PartitionRecord, ConfigRecord)  # what the initial migration copies (zk_metadata)


def migration_copied(c: KRaftController) -> tuple[int, int]:
    """How many of ZooKeeper's records this leadership's migration has appended, and the log end just past
    the last of them (0 when none)."""
    copied, end = 0, 0
    for i, e in enumerate(c.log):
        if e.epoch == c.epoch and isinstance(e.record, MIGRATED_RECORDS):
            copied, end = copied + 1, i + 1
    return copied, end


def _migration_appended(c: KRaftController) -> bool:
    return any(isinstance(e.record, ZkMigrationStateRecord) and e.record.state is ZkMigrationState.MIGRATION
               for e in c.log)


_MIGRATION_APPENDED = Refused(None, "the log holds the MIGRATION record")


def _complete_migration(state: ClusterState, cid: ControllerId, variant: Variant) -> Result:
    c = ctrl(state, cid)
    d = _leading_driver(c, D.ZK_MIGRATION)
    if isinstance(d, Refused):
        return d
    if not is_active(c):
        return _NOT_ACTIVE
    if not _migration_begun(c):
        return _NOT_BEGUN
    if _migration_appended(c):
        return _MIGRATION_APPENDED
    copied, _ = migration_copied(c)
    remaining = len(zk_metadata(state, variant)) - copied
    if remaining > 0 and not variant.has(Bug.COMPLETE_BEFORE_LAST_BATCH):
        return Refused(None, "{} of ZooKeeper's records are not copied yet", (remaining,))
    records: list[MetadataRecord] = [ZkMigrationStateRecord(ZkMigrationState.MIGRATION)]
    if image_of(c.log).open_transaction is not None:
        records.append(EndTransactionRecord())
    return append(state, c, records, variant)


def _migration_committed(state: ClusterState, cid: ControllerId, variant: Variant) -> Result:
    """completeMigration's future resolved: write /migration with the migration's offset."""
    c = ctrl(state, cid)
    refused = _driver_event(state, c, D.ZK_MIGRATION)
    if refused is not None:
        return refused
    end = migration_end(c)
    if end is None:
        return _NO_MIGRATION_RECORD
    if c.high_watermark < end:
        return Refused(None, "the migration's records are not committed: high watermark {} < {}",
                       (c.high_watermark, end))
    state, ok = _kraft_zk_write(state, c, "migration", [], Offset(end), variant)
    c = ctrl(state, cid)
    if not ok:
        return state
    return put_ctrl(state, _drive(c, D.SYNC_KRAFT_TO_ZK, variant))


def zk_reconcile_ops(state: ClusterState, image: MetadataImage, c: KRaftController, variant: Variant) -> list[Op]:
    """KRaftMigrationZkWriter.handleSnapshot: read ZooKeeper's metadata, write whatever differs from the image.

    The full reconciliation of a SyncKRaftToZk (every leadership's first write): it heals any divergence
    between ZooKeeper and the image, whatever made it. ``state`` is ZooKeeper as the driver reads it."""
    ops = _assignment_write(state, image, variant)
    for p, part in enumerate(image.partitions):
        s: PartitionState | None = znode_data(state, partition_state_path(PartitionId(p)))
        if s is None or (s.leader, s.isr, s.leader_epoch) != (part.leader, part.isr, part.leader_epoch):
            ops.append(_partition_write(p, part, c, variant, new=s is None))
    if image.config is not None and znode_data(state, CONFIG) != image.config and not variant.has(
        Bug.DUAL_WRITE_DROPS_CONFIG
    ):
        if zkm.get(state.zk, CONFIG) is None:
            ops.append(Create(CONFIG, image.config))
        else:
            ops.append(SetData(CONFIG, image.config, ZkVersion(-1)))
    if TOPIC_NAME in image.removed_topics or (not image.partitions and _pending(state, TOPIC_NAME, variant)):
        # handleTopicsSnapshot deletes a topic the image does not hold, and (since KAFKA-15605's fix) the sync clears
        # the pending deletions it did not migrate.
        ops += topic_deletion_ops(state)
        if _pending(state, TOPIC_NAME, variant):
            ops.append(Delete(pending_deletion_path(TOPIC_NAME)))
    if zkm.get(state.zk, pending_deletion_path(DELETED_TOPIC)) is not None and not variant.has(
        Bug.SYNC_SKIPS_TOPIC_DELETION
    ):
        ops.append(Delete(topic_path(DELETED_TOPIC)))
        ops.append(Delete(pending_deletion_path(DELETED_TOPIC)))
    return ops


def zk_delta_ops(
    state: ClusterState, before: MetadataImage, image: MetadataImage, c: KRaftController, variant: Variant
) -> list[Op]:
    """KRaftMigrationZkWriter.handleDelta: write what changed from ``before`` (the image at /migration's offset,
    which ZooKeeper holds) to ``image`` (KIP-866 §Dual Metadata Writes: "writing metadata changes to ZK"). Both
    profiles: the KIP and Kafka 3.9 write the changes. A divergence between ZooKeeper and ``before`` is therefore
    never healed here, only by the next leadership's SyncKRaftToZk.

    It reads nothing, but for a partition created or reassigned on KRaft since ``before``: then it reads the
    topic's assignment from ``state`` (ZooKeeper as the driver reads it) to grow or change it.

    A topic an admin deleted on KRaft since ``before`` (a RemoveTopicRecord: scope delete-topics) has its znodes
    deleted, read from ``state`` as Kafka's deleteTopic reads their paths; the topic pending deletion in ZooKeeper
    when the migration began is the sync's (``zk_reconcile_ops``)."""
    deleted = topic_deleted_between(before, image)
    if deleted:
        ops = topic_deletion_ops(state)
    else:
        moved = tuple(part.replicas for part in image.partitions) != tuple(part.replicas for part in before.partitions)
        # Differs: Kafka's updateTopic writes the whole assignment from its image; the model's image holds no replicas
        # for the partitions copied from ZooKeeper, so it writes the assignment ZooKeeper has, grown or changed.
        ops = _assignment_write(state, image, variant) if moved else []
    for p, part in enumerate(image.partitions):
        # A partition created after the deletion (the one topic stands for another, created since: Kafka's delta
        # deletes the one and creates the other's) is new, whatever ``before`` had at its index: its znode is gone.
        new = deleted or p >= len(before.partitions)
        if new or before.partitions[p] != part:
            ops.append(_partition_write(p, part, c, variant, new=new))
    if image.config is not None and image.config != before.config and not variant.has(Bug.DUAL_WRITE_DROPS_CONFIG):
        # ZooKeeper holds ``before``: its config znode exists exactly when ``before`` has a config.
        write = Create(CONFIG, image.config) if before.config is None else SetData(CONFIG, image.config, ANY_VERSION)
        ops.append(write)
    return ops


def _pending(state: ClusterState, topic: str, variant: Variant) -> bool:
    """ZooKeeper marks ``topic`` for deletion, and the sync reads the marks (not before KAFKA-15605's fix: the
    seeded bug MIGRATES_PENDING_DELETION)."""
    return zkm.get(state.zk, pending_deletion_path(topic)) is not None and not variant.has(
        Bug.MIGRATES_PENDING_DELETION)


def topic_deleted_between(before: MetadataImage, image: MetadataImage) -> bool:
    """The one topic was deleted (a RemoveTopicRecord) between ``before`` and ``image``."""
    return TOPIC_NAME in image.removed_topics and TOPIC_NAME not in before.removed_topics


def topic_deletion_ops(state: ClusterState) -> list[Op]:
    """ZkTopicMigrationClient.deleteTopic: the topic's partition state znodes (its children as ``state`` lists
    them), then the topic znode, any version; nothing when ZooKeeper has no such topic."""
    assignment = znode_data(state, TOPIC)
    if assignment is None:
        return []
    ops: list[Op] = [Delete(partition_state_path(PartitionId(p))) for p in range(len(assignment))
                     if zkm.get(state.zk, partition_state_path(PartitionId(p))) is not None]
    return ops + [Delete(TOPIC)]


def _assignment_write(state: ClusterState, image: MetadataImage, variant: Variant) -> list[Op]:
    """updateTopic (KRaftMigrationZkWriter.handleTopicsDelta): /brokers/topics/t as the image assigns it, grown by
    the partitions created on KRaft since and with the new replicas of a partition reassigned on KRaft, before the
    state znodes are written. A partition copied from ZooKeeper and never moved keeps ZooKeeper's replicas."""
    assignment = znode_data(state, TOPIC)
    if assignment is None or variant.has(Bug.DUAL_WRITE_KEEPS_ASSIGNMENT):
        return []
    kept = tuple(assignment[p] for p in range(len(image.partitions), len(assignment)))
    # Differs: Kafka's updateTopic also writes each partition's adding_replicas and removing_replicas into the topic
    # znode; the model's znode holds the replicas alone (a reassignment in progress shows in them, target first).
    wanted = tuple(part.replicas or assignment[p] for p, part in enumerate(image.partitions)) + kept
    return [] if wanted == assignment else [SetData(TOPIC, wanted, ZkVersion(-1))]


def _partition_write(p: int, part: PartitionImage, c: KRaftController, variant: Variant, new: bool) -> Op:
    """The partition's state znode set to the image's leader, ISR and leader epoch; created when ``new``
    (createTopicPartitions: a partition ZooKeeper has no znode for)."""
    # Differs: Kafka writes the Raft epoch as the partition's controller_epoch (reference §2.4); the
    # KIP treats the KRaft controller as a ZK controller, so the model writes the claimed ZK epoch.
    epoch = ControllerEpoch(c.epoch if variant.profile is Profile.KAFKA_3_9 else _known_driver(c).zk_epoch)
    data = PartitionState(part.leader, part.leader_epoch, part.isr, epoch)
    path = partition_state_path(PartitionId(p))
    if new and not variant.has(Bug.DUAL_WRITE_SETS_NEW_PARTITION):
        return Create(path, data)
    return SetData(path, data, ZkVersion(-1))


def _kraft_zk_write(
    state: ClusterState, c: KRaftController, kind: str, ops: list[Op], offset: Offset, variant: Variant,
    reply_lost: bool = False,
) -> tuple[ClusterState, bool]:
    """One fenced multi: check /controller_epoch, the ops, CAS /migration to ``offset`` (reference §2.4).

    On success the driver learns /migration's new version and offset. A fencing failure means
    another controller claimed ZooKeeper: the driver goes INACTIVE until a leadership event.
    With ``reply_lost`` the multi applies but its reply is lost, and the driver hears only of the resent copy
    (``_resent_write``).
    """
    d = _known_driver(c)
    fenced = not (variant.has(Bug.DUAL_WRITE_SKIPS_EPOCH_CHECK) and kind == "dual-write")
    head: list[Op] = [Check(CONTROLLER_EPOCH, ZkVersion(d.zk_epoch_version))] if fenced else []
    update = SetData(MIGRATION, MigrationZNode(c.id, d.kraft_epoch, offset), ZkVersion(d.migration_version))
    state = _record_attempt(state, c)
    zk, results = zkm.multi(state.zk, NO_SESSION, tuple(head + ops + [update]), reader=c.id)
    state = state.replace(zk=zk, ghost=state.ghost.replace(last_multi=results))
    if not zkm.succeeded(results) and variant.has(Bug.FENCED_WRITE_ADOPTS_NEWER_CLAIM):
        adopted = _adopt_claim(state, c)
        if adopted is not None:  # the mistake: write again under the newer claim
            once = variant.replace(bugs=variant.bugs - {Bug.FENCED_WRITE_ADOPTS_NEWER_CLAIM})
            return _kraft_zk_write(put_ctrl(state, adopted), adopted, kind, ops, offset, once)
    failed_at = next((i for i, r in enumerate(results) if r not in (ZkCode.OK, ZkCode.RUNTIME_INCONSISTENCY)), -1)
    if len(head) <= failed_at < len(head) + len(ops):
        # The fencing held and a metadata op failed: it was made from a stale read (a lagging server). The claim's
        # and the sync's events are retried by the driver's next poll, which reads from the server this write brought
        # up to date. Kafka's poll does nothing in DUAL_WRITE: a dual write is the failed MetadataChangeEvent's
        # (``after_failed_dual_write``: kip's next DualWrite writes the change again, kafka-3.9's does not).
        if kind == "dual-write":
            state = put_ctrl(state, after_failed_dual_write(c, offset, variant))
        return state, False
    if not zkm.succeeded(results):
        # Differs: Kafka's driver retries the event on its next poll; every retry fails the same way until a
        # KRaftLeaderEvent, so the model parks the driver in INACTIVE (a valid move from every state).
        c = _drive(c, D.INACTIVE, variant, zk_epoch=-1, zk_epoch_version=-2)
        return put_ctrl(state, c), False
    state = _note_kraft_write(state, c, kind, offset)
    if state.history.crashed_controllers and offset >= len(state.history.committed):
        # ZooKeeper has caught up with everything committed: a crash before now has lost nothing.
        state = state.replace(history=state.history.replace(crashed_controllers=frozenset()))
    version: int = zkm.get_existing(zk, MIGRATION).version
    if reply_lost:
        state, learnt = _resent_write(state, c, head + [update] + ops, offset, variant)
        if learnt is None:
            return state, False
        version = learnt
    c = c.replace(driver=d.replace(migration_offset=offset, migration_version=version, handed_offset=Offset(0)))
    return put_ctrl(state, c), True


def _resent_write(
    state: ClusterState, c: KRaftController, resent: list[Op], offset: Offset, variant: Variant
) -> tuple[ClusterState, int | None]:
    """The client resends a multi ZooKeeper applied but whose reply was lost (ZooKeeperClient answers
    CONNECTIONLOSS, KafkaZkClient.retryRequestsUntilConnected sends it again). The copy fails on /migration, whose
    version the first copy bumped: Kafka's migration multi puts the /migration op before the data op
    (KafkaZkClient.wrapMigrationRequest), so ``resent`` does too. The version the driver then holds, or None when
    the write failed for it.

    kip: KIP-866 §Migration State ZNode fences with /migration's conditional update "old KRaft controllers ... if
    there has been a new election"; §Failure Modes asks that a failed write hold ZooKeeper back only within the lag
    bound. So a conflict is no fence when /migration holds this controller's id and Raft epoch and an offset at or
    past the one written: the driver reads its version and goes on, the change written."""
    d = _known_driver(c)
    # (The ghost's last multi stays the first copy's, which changed the tree; the copy changes nothing.)
    zk, _ = zkm.multi(state.zk, NO_SESSION, tuple(resent), reader=c.id)
    state = state.replace(zk=zk)
    # The seeded bug RESEND_KEEPS_STALE_VERSION: kafka-3.9's rule under kip.
    if variant.profile is Profile.KAFKA_3_9 or variant.has(Bug.RESEND_KEEPS_STALE_VERSION):
        # Differs: Kafka 3.9 throws "Conditional update on KRaft Migration ZNode failed" (a RuntimeException, handled
        # as an unhandled fault: logged, not fatal); ZkMigrationLeadershipState is replaced only by a write that
        # returns, so the driver keeps /migration's old version and every later dual write of this leadership fails
        # its check (BADVERSION, "Will retry."): the model's next DualWrite parks the driver in INACTIVE. The image
        # was handed to the driver before the write (``handed_offset``). Only the next leadership, which reads
        # /migration afresh, writes again. The KIP goes on (a finding, docs/model.md).
        return put_ctrl(state, c.replace(driver=d.replace(handed_offset=offset))), None
    node = zkm.get(zkm.seen_by(state.zk, c.id), MIGRATION)
    own = node is not None and isinstance(node.data, MigrationZNode) and (
        node.data.kraft_controller_id, node.data.kraft_controller_epoch) == (c.id, d.kraft_epoch) and (
        node.data.kraft_metadata_offset >= offset)
    if not own:
        return put_ctrl(state, _drive(c, D.INACTIVE, variant, zk_epoch=-1, zk_epoch_version=-2)), None
    assert node is not None
    return state, node.version


def _adopt_claim(state: ClusterState, c: KRaftController) -> KRaftController | None:
    """The seeded bug FENCED_WRITE_ADOPTS_NEWER_CLAIM: the driver takes the claim ZooKeeper shows now (its
    versions and Raft epoch) as its own."""
    claim, epoch, migration = kraft_claim(state), zkm.get(state.zk, CONTROLLER_EPOCH), zkm.get(
        state.zk, MIGRATION)
    if c.driver is None or claim is None or epoch is None or migration is None:
        return None
    return c.replace(driver=c.driver.replace(kraft_epoch=claim.kraft_epoch, zk_epoch=epoch.data,
                                             zk_epoch_version=epoch.version, migration_version=migration.version))


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


def _sync_kraft_to_zk(state: ClusterState, cid: ControllerId, variant: Variant) -> Result:
    """SyncKRaftMetadataEvent: write the whole committed image to ZooKeeper before any RPC."""
    c = ctrl(state, cid)
    d = _driver(c, D.SYNC_KRAFT_TO_ZK)
    if isinstance(d, Refused):
        return d
    refused = _driver_event(state, c)
    if refused is not None:
        return refused
    image = driver_image(c)
    if image.offset < d.migration_offset:
        return _behind(image, d)
    ops = zk_reconcile_ops(seen_by(state, cid), image, c, variant)
    state, ok = _kraft_zk_write(state, c, "sync", ops, image.offset, variant)
    if not ok:
        return state
    return put_ctrl(state, _drive(ctrl(state, cid), D.KRAFT_CONTROLLER_TO_BROKER_COMM, variant))


def zk_broker_targets(image: MetadataImage) -> list[tuple[BrokerId, BrokerEpoch]]:
    """ZK brokers the KRaft controller sends RPCs to: registered as migrating and not fenced (KIP-866
    §Incompatible Brokers)."""
    return [(r.broker, r.epoch) for r in image.brokers if r.is_migrating_zk_broker and not r.fenced]


def _controller_rpcs(
    c: KRaftController, image: MetadataImage, partitions: list[int], full: bool, variant: Variant,
    deleted: tuple[int, ...] = (), incremental: bool = False,
) -> list[Message]:
    """UpdateMetadata, then LeaderAndIsr, to each target ZK broker, marked IsKRaftController; then, for the
    partitions of a topic ``deleted`` since the last write, StopReplica with deletePartitions (``topic_stops``).
    ``full``: every target is sent UpdateMetadata and every partition's LeaderAndIsr; ``incremental``: the
    UpdateMetadata's type, which leaves the partitions it does not name in the broker's cache."""
    d = _known_driver(c)
    leaders = tuple((p.leader, p.leader_epoch) for p in image.partitions)
    live = served_brokers(image, variant)
    out: list[Message] = []
    cid = BrokerId(c.id)
    epoch = ControllerEpoch(d.zk_epoch)
    for b, broker_epoch in zk_broker_targets(image):
        update: list[Message] = [
            UpdateMetadata(cid, epoch, broker_epoch, b, leaders, kraft=True, live=live, incremental=incremental)
        ]
        if not (full or partitions or deleted):
            update = []
        leaderships: list[Message] = [
            LeaderAndIsr(cid, epoch, broker_epoch, b, PartitionId(p), image.partitions[p].leader,
                         image.partitions[p].leader_epoch, image.partitions[p].isr, True, image.partitions[p].replicas)
            for p in partitions
            if full or b in image.partitions[p].isr or b == image.partitions[p].leader
            or b in image.partitions[p].replicas
        ]
        # KIP-866 §ZK Broker RPCs: a broker learns of the KRaft controller (and of live brokers) from the
        # UpdateMetadata, so it must be queued first.
        out += leaderships + update if variant.has(Bug.LEADER_AND_ISR_BEFORE_UPDATE_METADATA) else update + leaderships
    return out + topic_stops(c, image, deleted, variant)


def topic_stops(c: KRaftController, image: MetadataImage, deleted: tuple[int, ...], variant: Variant) -> list[Message]:
    """MigrationPropagator's deleted topics: StopReplica with deletePartitions for each partition of the deleted topic,
    so that the ZK brokers stop hosting it (KIP-866 §ZK Broker RPCs: "following reassignments and topic deletions,
    we will need to send StopReplicas to ZK brokers for them to stop managing certain replicas")."""
    cid, epoch = BrokerId(c.id), ControllerEpoch(_known_driver(c).zk_epoch)
    # The seeded bug DELETION_STOPS_WITHOUT_DELETE: the KIP's "stop managing" read as a StopReplica that keeps the
    # partition (deletePartitions false, as the ZK controller's first StopReplica of a deletion is).
    delete = not variant.has(Bug.DELETION_STOPS_WITHOUT_DELETE)
    # Differs: Kafka addresses them to the partition's replicas; the model's image holds no replicas for a partition
    # copied from ZooKeeper, so it addresses every registered ZK broker (one that hosts no such partition has nothing
    # to stop). kip sends them to the fenced ones too, so that a broker away when the topic goes stops hosting it once
    # it is back. kafka-3.9 (and the seeded bug DELETION_SKIPS_FENCED_BROKER): the channel manager holds only the
    # unfenced ZK brokers (MigrationPropagator.publishMetadata), so a fenced one's is skipped ("since it is offline")
    # and never sent again: the Kafka bug the real runs found (docs/guide/real-kafka.md, Findings).
    skips_fenced = variant.profile is Profile.KAFKA_3_9 or variant.has(Bug.DELETION_SKIPS_FENCED_BROKER)
    return [StopReplica(cid, epoch, r.epoch, r.broker, PartitionId(p), delete, kraft=True)
            for r in image.brokers if r.is_migrating_zk_broker and not (skips_fenced and r.fenced) for p in deleted]


def replicas_removed(
    before: MetadataImage, image: MetadataImage, p: int, assignment: tuple[tuple[BrokerId, ...], ...] | None,
) -> tuple[BrokerId, ...]:
    """MigrationPropagator's removed replicas of partition ``p``: those ``before`` (the delta's base) assigns it and
    ``image`` does not, in id order; none for a partition new since ``before`` or whose replicas ``image`` leaves
    implicit. A partition copied from ZooKeeper and never moved has its replicas in ``assignment`` (/brokers/topics/t
    as the dual write read it, which ``before`` equals; None: not read)."""
    # Differs: Kafka's image holds every partition's replicas; the model's only those created or moved on KRaft, so a
    # copied one's come from the assignment ZooKeeper holds (``_alter_partition_reassignments`` does the same).
    old = before.partitions[p].replicas if p < len(before.partitions) else ()
    if not old and p < len(before.partitions) and assignment is not None and p < len(assignment):
        old = assignment[p]
    new = image.partitions[p].replicas
    return tuple(sorted(set(old) - set(new))) if new else ()


def reassignment_stops(
    c: KRaftController, before: MetadataImage, image: MetadataImage, changed: list[int],
    assignment: tuple[tuple[BrokerId, ...], ...] | None, variant: Variant,
) -> list[Message]:
    """MigrationPropagator.sendRPCsToBrokersFromMetadataDelta's removed replicas: for each partition ``changed``
    since ``before``, StopReplica with deletePartition to each replica ``image`` no longer assigns it (a reassignment
    completing drops its removing replicas), so that the ZK broker stops hosting it (KIP-866 §ZK Broker RPCs:
    "following reassignments and topic deletions, we will need to send StopReplicas to ZK brokers for them to stop
    managing certain replicas"). Only a target ZK broker gets one (migrating, unfenced): Kafka's
    addStopReplicaRequestForBrokers goes through the channel manager, which holds those alone. Both profiles, as
    Kafka 3.6.2 and 3.7.0 on do (3.5.0 to 3.6.1 sent it without deletePartition)."""
    # The seeded bug REASSIGNMENT_SENDS_NO_STOP_REPLICA: the removed replicas are told the new assignment only.
    if variant.has(Bug.REASSIGNMENT_SENDS_NO_STOP_REPLICA):
        return []
    cid, epoch = BrokerId(c.id), ControllerEpoch(_known_driver(c).zk_epoch)
    targets = dict(zk_broker_targets(image))
    return [StopReplica(cid, epoch, targets[b], b, PartitionId(p), True, kraft=True)
            for p in changed for b in replicas_removed(before, image, p, assignment) if b in targets]


def _send_rpcs_to_brokers(state: ClusterState, cid: ControllerId, variant: Variant) -> Result:
    c = ctrl(state, cid)
    d = _leading_driver(c, D.KRAFT_CONTROLLER_TO_BROKER_COMM)
    if isinstance(d, Refused):
        return d
    image = driver_image(c)
    if image.offset < d.migration_offset or (
        variant.has(Bug.RPCS_WAIT_FOR_NEWER_OFFSET) and image.offset <= d.migration_offset
    ):
        return _behind(image, d)
    # The partitions as ZooKeeper holds them (the image at /migration's offset): a partition change committed
    # since the sync reaches the brokers with its dual write, once ZooKeeper has it (KIP-866 §Dual Metadata
    # Writes). Kafka's driver dual-writes every change it handles in this state, so what it sends is
    # ZooKeeper's too. The live brokers are KRaft's alone; they are the newest.
    told = image.replace(partitions=image_of(c.log, d.migration_offset).partitions)
    rpcs = _controller_rpcs(c, told, list(range(len(told.partitions))), True, variant)
    sent = send(state, rpcs)
    if sent is None:
        return IN_FLIGHT_CAP
    targets = frozenset(b for b, _ in zk_broker_targets(told))
    return put_ctrl(sent, _drive(c, D.DUAL_WRITE, variant, umr_sent=targets))


def _dual_write(state: ClusterState, cid: ControllerId, variant: Variant) -> Result:
    """MetadataChangeEvent in DUAL_WRITE: the committed delta to ZooKeeper, then RPCs to ZK brokers."""
    c = ctrl(state, cid)
    d = _driver(c)
    if isinstance(d, Refused):
        return d
    allowed = (D.DUAL_WRITE, D.SYNC_KRAFT_TO_ZK) if variant.has(Bug.DUAL_WRITE_BEFORE_SYNC) else (D.DUAL_WRITE,)
    if d.state not in allowed:
        return _NOT_IN[D.DUAL_WRITE]
    if not _leading(c):
        return _NOT_LEADING
    # A mistake of the design (shared_dual_write_rpcs_before_zk) sends the RPCs while ZooKeeper is away.
    zk_first = state.zk.available or not variant.has(Bug.DUAL_WRITE_RPCS_BEFORE_ZK)
    if zk_first and not state.zk.available:
        return _ZK_UNAVAILABLE
    image = image_of(c.log) if variant.has(Bug.DUAL_WRITE_UNCOMMITTED) else driver_image(c)
    if image.offset <= d.migration_offset:
        return _ZK_CAUGHT_UP
    if image.offset <= d.handed_offset:
        return _HANDED_ALREADY
    return _dual_write_image(state, c, image, zk_first, variant)


_HANDED_ALREADY = Refused(None, "a failed dual write was handed this image: no new event until a newer commit")


def _dual_write_session_expired(state: ClusterState, cid: ControllerId, variant: Variant) -> Result:
    """A MetadataChangeEvent in DUAL_WRITE whose ZooKeeper write fails: ZooKeeper stalled past the session timeout
    while the write waited (so it is enabled whether ZooKeeper answers now or not), and the session had expired
    when it answered. Nothing is written, no RPC sent; it spends ``Budget.write_failures``, 0 outside scope
    dual-write-failure. KIP-866 §Failure Modes ("ZK Write Failures"): the change stays unwritten and is retried
    within the lag bound: the next DualWrite writes everything since /migration's offset."""
    c = ctrl(state, cid)
    image = _unwritten_image(c)
    if not isinstance(image, MetadataImage):
        return image
    spent = spend(state, write_failures=1)
    if spent is None:
        return BUDGET_SPENT
    return put_ctrl(spent, after_failed_dual_write(c, image.offset, variant))


def _unwritten_image(c: KRaftController) -> MetadataImage | Refused | Unchanged:
    """The image a MetadataChangeEvent in DUAL_WRITE hands its leading driver, when the driver has neither written
    it (/migration's offset) nor been handed it by a failed write; else why no event runs."""
    d = _leading_driver(c, D.DUAL_WRITE)
    if isinstance(d, Refused):
        return d
    image = driver_image(c)
    return _ZK_CAUGHT_UP if image.offset <= max(d.migration_offset, d.handed_offset) else image


def _dual_write_reply_lost(state: ClusterState, cid: ControllerId, variant: Variant) -> Result:
    """A MetadataChangeEvent in DUAL_WRITE whose multi ZooKeeper applies but whose reply is lost: the client resends
    it, and the copy fails on /migration's version (``_resent_write``). It spends ``Budget.lost_write_replies``, 0
    outside scope dual-write-resend. kip: the driver finds its own write in /migration and goes on (the RPCs sent);
    kafka-3.9: it keeps the stale version and sends nothing."""
    c = ctrl(state, cid)
    image = _unwritten_image(c)
    if not isinstance(image, MetadataImage):
        return image
    if not state.zk.available:
        return _ZK_UNAVAILABLE
    spent = spend(state, lost_write_replies=1)
    if spent is None:
        return BUDGET_SPENT
    return _dual_write_image(spent, c, image, True, variant, reply_lost=True)


def after_failed_dual_write(c: KRaftController, offset: int, variant: Variant) -> KRaftController:
    """The controller after a MetadataChangeEvent whose dual write of the image at ``offset`` failed (its session
    expired, or a metadata op failed on a stale read: a MigrationClientException either way). KIP-866 §Failure
    Modes: the change stays unwritten, and the next DualWrite writes everything since /migration's offset."""
    # The seeded bug FAILED_WRITE_DROPS_DELTA: kafka-3.9's rule under kip.
    if variant.profile is Profile.KAFKA_3_9 or variant.has(Bug.FAILED_WRITE_DROPS_DELTA):
        # Differs: Kafka 3.9's MetadataChangeEvent.run sets KRaftMigrationDriver.image before it writes, its
        # handleException only logs "Will retry." and the PollEvent does nothing in DUAL_WRITE: the next event writes
        # only its own delta (since this image) and moves /migration past the lost one, whose RPCs are never sent;
        # only the next leadership's SyncKRaftToZk heals it. The KIP retries the change (a finding, docs/model.md).
        return c.replace(driver=_known_driver(c).replace(handed_offset=Offset(offset)))
    return c


def _dual_write_image(
    state: ClusterState, c: KRaftController, image: MetadataImage, zk_first: bool, variant: Variant,
    reply_lost: bool = False,
) -> Result:
    """What a MetadataChangeEvent does in DUAL_WRITE with ``image``: ZooKeeper made equal to it in one fenced multi
    (/migration to its offset), then the changed partitions' RPCs to the ZK brokers."""
    cid, d = c.id, _known_driver(c)
    # The delta starts at /migration's offset, or (kafka-3.9) at the image a failed write was handed past it.
    written = d.handed_offset if d.migration_offset < d.handed_offset < image.offset else d.migration_offset
    before = image_of(c.log, written) if written > 0 else None
    # The assignment the write reads (``_assignment_write``), before it changes it: a moved partition's old replicas.
    assignment = znode_data(seen_by(state, cid), TOPIC) if zk_first else None
    if zk_first:
        # The mistake DUAL_WRITE_DELTA_OF_LAST_RECORD: the delta of the newest committed record alone (the last
        # MetadataChangeEvent's), though every record since /migration's offset is unwritten.
        last = variant.has(Bug.DUAL_WRITE_DELTA_OF_LAST_RECORD)
        base = image_of(c.log, max(written, image.offset - 1 if last else 0))
        # Differs: Kafka's handleDelta writes the loader's delta one multi per change; the model writes it in one
        # multi (KIP-866 only says "changes"), from the image at /migration's offset unless a failed write moved
        # the driver's handed image past it (kafka-3.9, ``handed_offset``).
        ops = zk_delta_ops(seen_by(state, cid), base, image, c, variant)
        state, ok = _kraft_zk_write(state, c, "dual-write", ops, image.offset, variant, reply_lost)
        if not ok:
            return state
    c = ctrl(state, cid)
    changed = [
        p for p, part in enumerate(image.partitions)
        if before is None or p >= len(before.partitions) or before.partitions[p] != part
    ]
    deleted: tuple[int, ...] = ()
    if before is not None and topic_deleted_between(before, image):
        deleted = tuple(range(len(before.partitions)))
    # The UpdateMetadata's type. kip: full, so that a ZK broker unfenced after a change it missed (it was no target)
    # learns it. kafka-3.9 (and the seeded bug DELETION_SKIPS_FENCED_BROKER): MigrationPropagator's delta path sends
    # incremental ones (only sendRPCsToBrokersFromMetadataImage, SendRPCsToBrokers here, sends full ones, KAFKA-15799),
    # so a broker unfenced after a deletion it missed keeps the deleted topic cached. A deletion's own names its
    # partitions (LeaderDuringDelete), which the model's one topic makes a full one.
    incremental = not deleted and (
        variant.profile is Profile.KAFKA_3_9 or variant.has(Bug.DELETION_SKIPS_FENCED_BROKER))
    if changed or deleted:
        rpcs = _controller_rpcs(c, image, changed, False, variant, deleted, incremental)
        if before is not None and not deleted:
            rpcs += reassignment_stops(c, before, image, changed, assignment, variant)
    elif before is None or before.brokers != image.brokers:
        rpcs = [m for m in _controller_rpcs(c, image, [], True, variant, incremental=incremental)
                if isinstance(m, UpdateMetadata)]
    else:
        rpcs = []
    if not rpcs:
        return state
    sent = send(state, rpcs)
    return IN_FLIGHT_CAP if sent is None else sent


# ---- the driver's event queue (KAFKA-16667) ------------------------------------------------------

_QUEUE_FULL = Refused(None, "the driver's queue holds QUEUE_BOUND events")
_QUEUE_EMPTY = Refused(None, "the driver's queue is empty")
_QUEUED_ALREADY = Unchanged("an event with this image and leadership is queued already")


def _publish_metadata_change(state: ClusterState, cid: ControllerId) -> Result:
    """MetadataPublisher.onMetadataUpdate: a MetadataChangeEvent with the committed image ZooKeeper lacks, queued
    with Raft's current leader and epoch (curLeaderAndEpoch). Raised only in DUAL_WRITE, the one state where it
    writes (elsewhere it only wakes the poll); it spends ``Budget.queued_events``, 0 outside scope event-queue."""
    c = ctrl(state, cid)
    d = _driver(c, D.DUAL_WRITE)
    if isinstance(d, Refused):
        return d
    if state.budget.queued_events <= 0:
        return BUDGET_SPENT
    if len(d.queue) >= QUEUE_BOUND:
        return _QUEUE_FULL
    image = committed_image(c)
    if image.offset <= d.migration_offset:
        return _ZK_CAUGHT_UP
    # Differs: Kafka's queue is FIFO, so a KRaftLeaderEvent queued after this event runs after it; KRaftLeaderChange
    # is not queued and may run first, a superset of Kafka's orders (the stale event then meets the driver of a newer
    # leadership, which it may have lost and regained).
    event = QueuedEvent(Offset(image.offset), c.epoch, is_active(c))
    if event in d.queue:
        return _QUEUED_ALREADY
    spent = spend(state, queued_events=1)
    if spent is None:
        return BUDGET_SPENT
    return put_ctrl(spent, c.replace(driver=d.replace(queue=d.queue + (event,))))


def stale_event(c: KRaftController, event: QueuedEvent) -> bool:
    """KRaftMigrationDriver.checkDriverState / MetadataChangeEvent.run: the event was raised under a leader and
    epoch other than the ones Raft reports now."""
    return (event.kraft_epoch, event.leader) != (c.epoch, is_active(c))


def _run_metadata_change(state: ClusterState, cid: ControllerId, variant: Variant) -> Result:
    """MetadataChangeEvent.run for the queue's head: a stale event is dropped (KAFKA-16667); a current one in
    DUAL_WRITE dual-writes the image it carries unless ZooKeeper has it already; anything else is dropped."""
    c = ctrl(state, cid)
    d = _driver(c)
    if isinstance(d, Refused):
        return d
    if not d.queue:
        return _QUEUE_EMPTY
    event = d.queue[0]
    popped = c.replace(driver=d.replace(queue=d.queue[1:]))
    dropped = put_ctrl(state, popped)
    stale = stale_event(c, event)
    # The seeded bug STALE_EVENT_RUNS: no leader-epoch check, and the event's image taken as the newest.
    as_current = stale and variant.has(Bug.STALE_EVENT_RUNS)
    if stale and not as_current:
        # Differs: KIP-866 has no event queue; both profiles follow Kafka 3.8+ (KAFKA-16667): an event runs only under
        # the leader and epoch it was raised in.
        return dropped
    if d.state is not D.DUAL_WRITE or not _leading(c):
        return dropped  # allowDualWrite: the event only wakes the poll
    if event.offset <= d.migration_offset and not as_current:
        return dropped  # "Ignoring ... metadata that has already been written to ZK"
    if not state.zk.available:
        return _ZK_UNAVAILABLE  # its ZooKeeper reads throw: the event waits
    return _dual_write_image(dropped, popped, image_of(c.log, event.offset), True, variant)


# ---- the operator's steps of KIP-866's runbooks -------------------------------------------------

_RUNNING = Refused(None, "the process is running: the operator reconfigures a stopped one")


def _reconfigure_controller(state: ClusterState, cid: ControllerId, enabled: bool) -> Result:
    c = ctrl(state, cid)
    if c.alive:
        return _RUNNING
    if c.config.migration_enabled == enabled:
        return _SAME_FLAG
    spent = spend(state, migrations=1)
    if spent is None:
        return BUDGET_SPENT
    return put_ctrl(spent, c.replace(config=c.config.replace(migration_enabled=enabled)))


def _migrate_broker(state: ClusterState, bid: BrokerId) -> Result:
    """KIP-866 §Broker Migration: a stopped ZK broker is configured as a KRaft broker; meta.properties stays v0."""
    b = state.brokers[bid]
    if b.alive:
        return _RUNNING
    if b.config.kraft_mode:
        return _KRAFT_BROKER
    if not b.config.migration_enabled:
        return _NO_FLAG
    spent = spend(state, migrations=1)
    return BUDGET_SPENT if spent is None else put_broker(spent, b.replace(config=b.config.replace(kraft_mode=True)))


def _rollback_broker(state: ClusterState, bid: BrokerId) -> Result:
    """KIP-866 §Rollback to ZK: back to ZK mode, possible only while meta.properties is still v0."""
    b = state.brokers[bid]
    if b.alive:
        return _RUNNING
    if not b.config.kraft_mode:
        return _ZK_BROKER
    if b.meta_properties != 0:
        return Refused(None, "meta.properties is v{}: the migration was finalized", (b.meta_properties,))
    spent = spend(state, migrations=1)
    return BUDGET_SPENT if spent is None else put_broker(spent, b.replace(config=b.config.replace(kraft_mode=False)))


def _delete_controller_znodes(state: ClusterState, variant: Variant) -> Result:
    """KIP-866 §Rollback to ZK, last step, once the quorum is down."""
    if kraft_claim(state) is None:
        return _NO_KRAFT_CONTROLLER
    if any(c.alive for c in state.controllers):
        return _QUORUM_RUNNING
    if not state.zk.available:
        return _ZK_UNAVAILABLE
    spent = spend(state, migrations=1)
    if spent is None:
        return BUDGET_SPENT
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
