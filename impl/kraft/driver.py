"""KRaftMigrationDriver: the active controller's ZooKeeper side during the migration (KIP-866; reference §1.4).

Rules:
- The driver's fields are Kafka's ZkMigrationLeadershipState plus the driver state
  (``MigrationDriverState``). It moves only through ``_transition``, which refuses a move outside
  ``model.migration.VALID_TRANSITIONS`` (KRaftMigrationDriver.isValidStateChange).
- Each event is one generator method, run only in the one driver state that handles it and only
  while the driver believes its node leads (``leader``: KAFKA-16667, an event runs for the
  leadership it was raised in; a deposed leader's driver learns of it from a KRaftLeaderEvent).
  A method returns True when the event did something (the node then traces it), False when it
  was refused; it reads ZooKeeper before it changes anything, so a ``ConnectionLoss`` thrown
  into a read leaves no trace.
- Every ZooKeeper write after the claim is one multi (``_fenced_write``): check /controller_epoch's
  version, the metadata ops, compare-and-set /migration (KIP-866 §Dual Metadata Writes). A failed
  multi parks the driver in INACTIVE until the next leadership event (the model's rule).
- What the driver reads from the log is the committed image without any record of a leadership
  newer than the one it has heard of (``driver_image``): Raft tells its listeners of a leader
  change before it hands them that leader's records.
- The driver sees its controller only through ``MigrationController``, as Kafka's driver sees
  QuorumController only through narrow interfaces (the images its MetadataPublisher is handed, the
  leadership its RaftClient.Listener hears of, ZkRecordConsumer for the migration's records,
  QuorumFeatures for the voters' readiness). It exists only while its process runs: the
  controller drops it at a crash or a stop and makes a new one at a start.
- The rules the driver decides by are named pure functions (``decide_claim``,
  ``zk_brokers_registered``, ``is_valid_state_change``); its event methods carry them out.
- MetadataChangeEvents may wait in the driver's queue (``queue``; filled only when a fault mix queues
  them, ``FaultMix.queue_event``): each carries the committed image's offset and the leader and epoch
  Raft reported when it was queued, and runs only if they are still current (KAFKA-16667, Kafka 3.8+).
- A dual write may fail with its ZooKeeper session expired (``dual_write_session_expired``; only when a fault mix
  fails one, ``FaultMix.fail_write``): nothing is written, and the next dual write writes the change since
  /migration's offset again (KIP-866 §Failure Modes).
- A dual write may apply in ZooKeeper and lose its reply (``dual_write_reply_lost``; only when a fault mix loses
  one, ``FaultMix.lose_reply``): the client's resent copy fails on /migration's version; the driver reads /migration,
  finds its own write (its id, its Raft epoch, an offset at or past the one written) and goes on.
- Only the ``kip`` profile's rules are implemented (Profile.KIP).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Protocol

from impl.bugs import ImplBug
from impl.codec import encode
from impl.decisions import decision
from impl.kraft.image import Image
from impl.protocol import Handler, Send
from impl.zk.port import (
    ANY_VERSION,
    CheckOp,
    ConnectionLoss,
    CreateOp,
    DeleteOp,
    Exists,
    GetChildren,
    GetData,
    Multi,
    NoNode,
    Op,
    SetDataOp,
    ZkCode,
    tree_deletion,
)
from model.kraft import (
    DEFAULT_MIGRATION_BATCH_SIZE,
    TOPIC_NAME,
    BeginTransactionRecord,
    ConfigRecord,
    EndTransactionRecord,
    MetadataRecord,
    PartitionRecord,
    ZkMigrationState,
    ZkMigrationStateRecord,
)
from model.migration import (
    CONFIG,
    DELETED_TOPIC,
    EMPTY_MIGRATION,
    MIGRATION,
    QUEUE_BOUND,
    VALID_TRANSITIONS,
    KRaftControllerZNode,
    MigrationDriverState,
    MigrationZNode,
    pending_deletion_path,
    topic_path,
)
from model.state import (
    BROKER_IDS,
    CONTROLLER,
    CONTROLLER_EPOCH,
    TOPIC,
    LeaderAndIsr,
    PartitionState,
    StopReplica,
    UpdateMetadata,
    partition_state_path,
)
from model.types import BrokerId, ControllerEpoch, Errors, LeaderEpoch, PartitionId

D = MigrationDriverState


MIGRATION_BATCH_SIZE = "zookeeper.metadata.migration.min.batch.size"  # records a batch of the initial migration


@decision("NONE", "STALE_CONTROLLER_EPOCH")
def decide_claim(controller_epoch: int | None, current: Any, kraft_epoch: int) -> Errors:
    """Whether a KRaft controller of Raft epoch ``kraft_epoch`` may claim ZooKeeper's controllership
    (KafkaZkClient.tryRegisterKRaftControllerAsActiveController; KIP-866 §Controller Leadership), from
    /controller_epoch's value (None: absent) and /controller's (``current``). STALE_CONTROLLER_EPOCH (Kafka's
    ControllerMovedException) when /controller names a KRaft controller of this Raft epoch or a newer one,
    or /controller_epoch is absent; the claim itself is a CAS on /controller_epoch's version."""
    newer = isinstance(current, KRaftControllerZNode) and current.kraft_epoch >= kraft_epoch
    if controller_epoch is None or newer:
        return Errors.STALE_CONTROLLER_EPOCH
    return Errors.NONE


@decision("yes", "no")
def zk_brokers_registered(image: Image, live: list[str], assignment: Any) -> bool:
    """KIP-866 §ZK Broker Presence: every ZK broker ZooKeeper knows of (registered under /brokers/ids, or a
    replica of the topic) has registered with KRaft as a migrating ZK broker and is not fenced."""
    if not image.brokers or not live:
        return False
    known = {int(name) for name in live} | {r for replicas in assignment or () for r in replicas}
    for b in known:
        reg = image.registration(b)
        # Differs (as the model's kip profile): the KIP asks for registered brokers "in a valid state".
        if reg is None or not reg.is_migrating_zk_broker or reg.fenced:
            return False
    return True


class MigrationController(Protocol):
    """All the driver may see of, or ask of, the controller it runs in (``impl.kraft_controller.ControllerNode``)."""

    zk_session: int  # the session of its ZooKeeper client (ZkMigrationClient's)

    # The leadership, as RaftClient.Listener hears of it (what a KRaftLeaderEvent carries).
    def quorum_epoch(self) -> int:
        """The Raft epoch this controller knows."""
        ...

    def is_active(self) -> bool:
        """It believes it is the active controller in that epoch."""
        ...

    # The metadata log's images, as the MetadataLoader hands them to the driver (a MetadataPublisher).
    def published_image(self, kraft_epoch: int) -> Image:
        """The committed image without any record of a leadership newer than ``kraft_epoch``."""
        ...

    def committed_image(self) -> Image: ...

    def image_at(self, upto: int | None = None) -> Image:
        """The image of its log's first ``upto`` entries (the whole log when None)."""
        ...

    # ZkRecordConsumer: the migration's records go into the log through the controller.
    def migration_progress(self) -> tuple[int, int] | None:
        """None if this leadership has not begun copying ZooKeeper's data into the log; else how many of
        ZooKeeper's records it has appended, and the log end past the last of them (0: none)."""
        ...

    def migration_end(self) -> int | None: ...

    def append(self, records: list[MetadataRecord]) -> None: ...

    # QuorumFeatures.reasonAllControllersZkMigrationNotReady: a round of ApiVersions to the voters.
    def quorum_ready(self) -> Handler: ...


def is_valid_state_change(old: MigrationDriverState, new: MigrationDriverState) -> bool:
    """KRaftMigrationDriver.isValidStateChange: self-moves are valid, nothing goes back to UNINITIALIZED."""
    if old == new:
        return True
    if new is D.UNINITIALIZED:
        return False
    return new in VALID_TRANSITIONS[old]


class KRaftMigrationDriver:
    def __init__(self, node_id: int, controller: MigrationController, bugs: frozenset[ImplBug] = frozenset(),
                 batch_size: int = DEFAULT_MIGRATION_BATCH_SIZE) -> None:
        self.node_id = node_id
        self.controller = controller
        self.bugs = bugs
        self.batch_size = max(batch_size, 1)  # zookeeper.metadata.migration.min.batch.size (minBatchSize)
        self.state = D.UNINITIALIZED
        # ZkMigrationLeadershipState
        self.kraft_epoch = -1  # the leadership it last heard of (KRaftLeaderEvent)
        self.leader = False  # that leadership is its node's
        self.migration_offset = -1  # /migration's kraft_metadata_offset as last read or written
        self.migration_version = -2  # /migration's zkVersion; -2: unknown
        self.zk_epoch = -1  # the /controller_epoch value it claimed
        self.zk_epoch_version = -2  # /controller_epoch's version after its claim; -2: unknown
        self.umr_sent: set[int] = set()  # ZK brokers sent a full UpdateMetadata in this leadership
        # /controller_epoch as read when it recovered its state (only the seeded bug CLAIM_WITHOUT_EPOCH_CAS uses it)
        self.seen_zk_epoch: tuple[int, int] | None = None
        self.led = False  # its node has led while it ran (only the seeded bug INACTIVE_IGNORES_LEADERSHIP reads it)
        # How many records ZooKeeper's metadata made at the migration's last read (readAllMetadata), in the Raft
        # epoch of that read: whether a batch remains, which the controller asks without reading ZooKeeper again.
        self.zk_records: tuple[int, int] = (-1, 0)
        # MetadataChangeEvents queued, oldest first: (the image's offset, Raft's epoch, its node led) at queueing
        self.queue: list[tuple[int, int, bool]] = []
        # The image a failed dual write was handed, past /migration's offset, where the next delta starts: set only by
        # the seeded bug FAILED_WRITE_DROPS_DELTA (Kafka 3.9's rule); 0: none. A successful write clears it.
        self.handed_offset = 0

    # ---- helpers -----------------------------------------------------------------------------

    def _transition(self, new: MigrationDriverState, check: bool = True, **changes: Any) -> None:
        if check and not is_valid_state_change(self.state, new):
            raise AssertionError(f"driver of {self.node_id}: {self.state.value} -> {new.value} is not valid")
        self.state = new
        for name, value in changes.items():
            setattr(self, name, value)

    def _forget_zk_controller(self) -> dict[str, Any]:
        return {"zk_epoch": -1, "zk_epoch_version": -2}

    def _in(self, state: MigrationDriverState) -> bool:
        """The event is handled: the driver is in ``state`` and believes its node leads."""
        return self.state is state and self.leader

    @property
    def _session(self) -> int:
        return self.controller.zk_session

    def _read(self, path: str) -> Handler:
        """(value, stat) of ``path``, or (None, None); ConnectionLoss propagates (the event is refused)."""
        from impl.codec import decode

        try:
            data, stat = yield GetData(self._session, path)
        except NoNode:
            return None, None
        return decode(path, data), stat

    def _exists(self, path: str) -> Handler:
        return (yield Exists(self._session, path)) is not None

    def _multi(self, ops: list[Op]) -> Handler:
        return (yield Multi(self._session, tuple(ops)))

    def driver_image(self) -> Image:
        return self.controller.published_image(self.kraft_epoch)

    # ---- events ------------------------------------------------------------------------------

    def recover_migration_state(self, now: int) -> Handler:
        """RecoverMigrationStateFromZKEvent: read /migration, creating it empty when absent."""
        if self.state is not D.UNINITIALIZED:
            return False
        value, stat = yield from self._read(MIGRATION)
        zk_epoch, zk_epoch_stat = yield from self._read(CONTROLLER_EPOCH)
        if value is None:
            results = yield from self._multi([CreateOp(MIGRATION, encode(MIGRATION, EMPTY_MIGRATION, now))])
            if not _succeeded(results):
                # A lagging server showed no /migration: createInitialMigrationState throws NodeExists and the
                # event is retried from UNINITIALIZED; the write brought the server up to date.
                return True
            value, stat = yield from self._read(MIGRATION)
        self._transition(D.INACTIVE, migration_offset=value.kraft_metadata_offset, migration_version=stat.version,
                         seen_zk_epoch=None if zk_epoch is None else (zk_epoch, zk_epoch_stat.version))
        return True

    def kraft_leader_change(self, now: int) -> Handler:
        """KRaftLeaderEvent: leading -> WAIT_FOR_CONTROLLER_QUORUM (re-reading /migration); else INACTIVE."""
        if self.state is D.UNINITIALIZED:
            return False
        leads = self.controller.is_active()
        epoch = self.controller.quorum_epoch()
        if (self.kraft_epoch, self.leader) == (epoch, leads):
            return False
        if not leads:
            self._transition(D.INACTIVE, kraft_epoch=epoch, leader=False, umr_sent=set(),
                             **self._forget_zk_controller())
            return True
        value, stat = yield from self._read(MIGRATION)
        if value is None:
            return False
        wrong_state = ImplBug.MIGRATION_EVENT_IN_WRONG_DRIVER_STATE in self.bugs
        if self.state is not D.INACTIVE and not wrong_state:
            # The event of losing the leadership in between comes first: INACTIVE, then this one.
            self._transition(D.INACTIVE, leader=False, umr_sent=set(), **self._forget_zk_controller())
            return True
        self._transition(
            D.WAIT_FOR_CONTROLLER_QUORUM, check=not wrong_state, kraft_epoch=epoch, leader=True, led=True,
            umr_sent=set(),
            migration_offset=value.kraft_metadata_offset, migration_version=stat.version,
            **self._forget_zk_controller(),
        )
        return True

    def wait_for_controller_quorum(self, now: int) -> Handler:
        """WaitForControllerQuorumEvent: where the committed migration state says the driver goes."""
        if not self._in(D.WAIT_FOR_CONTROLLER_QUORUM):
            return False
        image = self.driver_image()
        if image.is_empty():
            # firstPublish: MetadataChangeEvent skips an empty image (KAFKA-15389) such as a new leader's
            # committed LeaderChange alone, before its bootstrap records commit.
            return False
        match image.migration_state:
            case ZkMigrationState.NONE:
                self._transition(D.INACTIVE)  # a cluster born in KRaft never migrates
            case ZkMigrationState.POST_MIGRATION:
                self._transition(D.INACTIVE)  # KIP-866 §Misconfigurations: never re-enter migration
            case ZkMigrationState.MIGRATION:
                self._transition(D.BECOME_CONTROLLER)
            case _:
                ready = yield from self.controller.quorum_ready()
                if not ready:
                    return False
                self._transition(D.WAIT_FOR_BROKERS)
        return True

    def wait_for_zk_brokers(self, now: int) -> Handler:
        """WaitForZkBrokersEvent: every known ZK broker registered with KRaft (KIP-866 §ZK Broker Presence)."""
        if not self._in(D.WAIT_FOR_BROKERS):
            return False
        live = yield GetChildren(self._session, BROKER_IDS)
        assignment, _ = yield from self._read(TOPIC)
        if not zk_brokers_registered(self.driver_image(), live, assignment):
            return False
        if ImplBug.READY_COMPARES_ZK_EPOCH in self.bugs:  # the mistake: a KRaft broker epoch against a czxid
            for name in live:
                stat = yield Exists(self._session, f"{BROKER_IDS}/{name}")
                reg = self.driver_image().registration(int(name))
                if stat is None or reg is None or stat.czxid != reg.epoch:
                    return False
        self._transition(D.BECOME_CONTROLLER)
        return True

    def become_zk_controller(self, now: int) -> Handler:
        """BecomeZkControllerEvent: the claim, then (KAFKA-16171) an unconditional write of /migration."""
        if not self._in(D.BECOME_CONTROLLER):
            return False
        if self.zk_epoch_version < 0:
            return (yield from self._claim(now))
        value, _ = yield from self._read(MIGRATION)
        if value is None:
            return False
        data = value.replace(kraft_controller_id=self.node_id, kraft_controller_epoch=self.kraft_epoch)
        results = yield from self._multi([SetDataOp(MIGRATION, encode(MIGRATION, data, now), ANY_VERSION)])
        version = results[-1].stat.version if _succeeded(results) else self.migration_version
        if ImplBug.STALE_MIGRATION_VERSION_AFTER_CLAIM in self.bugs:
            version = self.migration_version
        done = data.kraft_metadata_offset > 0
        done = done or self.controller.committed_image().migration_state is ZkMigrationState.MIGRATION
        self._transition(D.SYNC_KRAFT_TO_ZK if done else D.ZK_MIGRATION, migration_version=version,
                         migration_offset=data.kraft_metadata_offset)
        return True

    def _claim(self, now: int) -> Handler:
        """KafkaZkClient.tryRegisterKRaftControllerAsActiveController: CAS /controller_epoch + 1, new /controller."""
        epoch, epoch_stat = yield from self._read(CONTROLLER_EPOCH)
        current, current_stat = yield from self._read(CONTROLLER)
        if decide_claim(epoch, current, self.kraft_epoch) is not Errors.NONE:
            return False  # wait for a newer leadership
        new_epoch, version = epoch + 1, epoch_stat.version
        if ImplBug.CLAIM_WITHOUT_EPOCH_CAS in self.bugs and self.seen_zk_epoch is not None:
            # The mistake: bump what it read when it recovered its state, and set it whatever is there now.
            new_epoch, version = self.seen_zk_epoch[0] + 1, -1
        trusts = ImplBug.CLAIM_TRUSTS_STALE_READ in self.bugs  # the mistake: no versions, trusting its reads
        bump = encode(CONTROLLER_EPOCH, ControllerEpoch(new_epoch), now)
        ops: list[Op] = [SetDataOp(CONTROLLER_EPOCH, bump, ANY_VERSION if trusts else version)]
        if current is not None:
            ops.append(DeleteOp(CONTROLLER, ANY_VERSION if trusts else current_stat.version))
        claim = KRaftControllerZNode(self.node_id, self.kraft_epoch)
        ops.append(CreateOp(CONTROLLER, encode(CONTROLLER, claim, now)))
        results = yield from self._multi(ops)
        if not _succeeded(results):
            # FailedRegistrationResult: only a stale read fails it; the driver stays in BECOME_CONTROLLER and
            # retries, reading from a server this write brought up to date.
            return True
        self.zk_epoch, self.zk_epoch_version = new_epoch, results[0].stat.version
        return True

    def migrate_metadata(self, now: int) -> Handler:
        """MigrateMetadataEvent: beginMigration with the first batch of ZooKeeper's data as records, then one batch
        an event, each once the one before has committed (acceptBatch's future; KIP-866 §Initial Data Migration)."""
        controller = self.controller
        if not self._in(D.ZK_MIGRATION) or not controller.is_active():
            return False  # appending needs the Raft leadership, not only the driver's belief
        if controller.migration_end() is not None:
            return False
        records: list = []
        assignment, _ = yield from self._read(TOPIC)
        # A topic pending deletion is not copied (iterateTopics since KAFKA-15605's fix); the mistake copies it live.
        if (yield from self._exists(pending_deletion_path(TOPIC_NAME))) and \
                ImplBug.MIGRATES_PENDING_DELETION not in self.bugs:
            assignment = None
        if assignment is not None:
            for p, replicas in enumerate(assignment):
                s, _ = yield from self._read(partition_state_path(PartitionId(p)))
                if s is not None:
                    records.append(PartitionRecord(p, s.leader, s.isr, s.leader_epoch))
                elif ImplBug.MIGRATION_SKIPS_UNSTARTED_PARTITION not in self.bugs:
                    # No state znode yet (an admin added it, no ZK controller started it): ZkTopicMigrationClient
                    # copies it as its replicas for ISR, the first leading, at leader epoch 0.
                    records.append(PartitionRecord(p, replicas[0], tuple(replicas), LeaderEpoch(0)))
        config, _ = yield from self._read(CONFIG)
        if config is not None:
            records.append(ConfigRecord(config))
        # A topic pending deletion is not copied (KIP-866 §Topic Deletions); the sync removes it from ZooKeeper.
        progress = controller.migration_progress()
        first = progress is None
        copied, end = progress or (0, 0)
        if not first and (copied >= len(records) or controller.committed_image().offset < end):
            return False  # every batch copied, or the last one not committed yet
        batch: list = records[copied:copied + self.batch_size]
        if ImplBug.BATCH_ENDS_TRANSACTION in self.bugs:  # (the mistake: each batch a transaction of its own)
            batch = [BeginTransactionRecord("ZK Migration"), *batch, EndTransactionRecord()]
        elif first:
            batch = [BeginTransactionRecord("ZK Migration"), *batch]
        self.zk_records = (controller.quorum_epoch(), len(records))
        controller.append(batch)
        return True

    def batches_remain(self) -> bool:
        """This leadership's migration has records of ZooKeeper's last read still to copy."""
        if ImplBug.COMPLETE_BEFORE_LAST_BATCH in self.bugs:
            return False  # (the mistake: the first batch taken for the whole of ZooKeeper)
        epoch, records = self.zk_records
        progress = self.controller.migration_progress()
        return epoch == self.controller.quorum_epoch() and progress is not None and progress[0] < records

    def complete_migration(self, now: int) -> Handler:
        """The last records of the migration, once every batch is copied: ZkMigrationStateRecord(MIGRATION), and
        the transaction's end."""
        controller = self.controller
        if not self._in(D.ZK_MIGRATION) or not controller.is_active():
            return False
        if controller.migration_progress() is None or controller.migration_end() is not None:
            return False
        if self.batches_remain():
            return False
        records: list = [ZkMigrationStateRecord(ZkMigrationState.MIGRATION)]
        if controller.image_at().open_transaction is not None:
            records.append(EndTransactionRecord())
        controller.append(records)
        return True
        yield  # pragma: no cover - makes this a generator

    def migration_committed(self, now: int) -> Handler:
        """completeMigration's future resolved: /migration gets the migration's offset."""
        if not self._in(D.ZK_MIGRATION):
            return False
        end = self.controller.migration_end()
        if end is None or self.controller.committed_image().offset < end:  # not committed yet
            return False
        ok = yield from self._fenced_write([], end, now)
        if ok:
            self._transition(D.SYNC_KRAFT_TO_ZK)
        return True

    def sync_kraft_to_zk(self, now: int) -> Handler:
        """SyncKRaftMetadataEvent: the whole committed image to ZooKeeper before any RPC."""
        if not self._in(D.SYNC_KRAFT_TO_ZK):
            return False
        image = self.driver_image()
        if image.offset < self.migration_offset:
            return False
        ops = yield from self._reconcile_ops(image, now)
        ok = yield from self._fenced_write(ops, image.offset, now)
        if ok:
            self._transition(D.KRAFT_CONTROLLER_TO_BROKER_COMM)
        return True

    def send_rpcs_to_brokers(self, now: int) -> Handler:
        """SendRPCsToBrokersEvent: a full UpdateMetadata, then full LeaderAndIsr, to every ZK broker."""
        if not self._in(D.KRAFT_CONTROLLER_TO_BROKER_COMM):
            return False
        image = self.driver_image()
        if image.offset < self.migration_offset:
            return False
        # The partitions as ZooKeeper holds them: a partition change committed since the sync reaches the brokers
        # with its dual write (KIP-866 §Dual Metadata Writes; Kafka's driver dual-writes every change it handles
        # in this state). The live brokers are KRaft's alone; they are the newest.
        told = replace(image, partitions=self.controller.image_at(self.migration_offset).partitions)
        for m in self._controller_rpcs(told, list(range(len(told.partitions))), True):
            yield Send(m)
        self._transition(D.DUAL_WRITE, umr_sent={b for b, _ in zk_broker_targets(told)})
        return True

    def dual_write(self, now: int) -> Handler:
        """MetadataChangeEvent in DUAL_WRITE: the committed delta to ZooKeeper, then RPCs to the ZK brokers."""
        if not self._in(D.DUAL_WRITE):
            return False
        image = self.driver_image()
        if image.offset <= max(self.migration_offset, self.handed_offset):
            return False
        return (yield from self._write_image(image, now, ImplBug.DUAL_WRITE_RPCS_BEFORE_ZK in self.bugs))

    def dual_write_session_expired(self, now: int) -> Handler:
        """A MetadataChangeEvent in DUAL_WRITE whose ZooKeeper write fails with its session expired (ZooKeeper
        stalled past the session timeout while it waited): nothing written, no RPC sent, and the change stays for the
        next dual write (KIP-866 §Failure Modes: retried within the lag bound)."""
        if not self._in(D.DUAL_WRITE):
            return False
        image = self.driver_image()
        if image.offset <= max(self.migration_offset, self.handed_offset):
            return False
        if ImplBug.FAILED_WRITE_DROPS_DELTA in self.bugs:
            self.handed_offset = image.offset  # the mistake (Kafka 3.9's): the image is the driver's, written or not
        return True
        yield  # pragma: no cover - makes this a generator

    def dual_write_reply_lost(self, now: int) -> Handler:
        """A MetadataChangeEvent in DUAL_WRITE whose multi ZooKeeper applies but whose reply is lost: the client
        resends it and the copy fails on /migration's version (``_resend``)."""
        if not self._in(D.DUAL_WRITE):
            return False
        image = self.driver_image()
        if image.offset <= max(self.migration_offset, self.handed_offset):
            return False
        return (yield from self._write_image(image, now, reply_lost=True))

    def publish_metadata_change(self, now: int) -> Handler:
        """MetadataPublisher.onMetadataUpdate in DUAL_WRITE: a MetadataChangeEvent with the committed image ZooKeeper
        lacks, queued with the leader and epoch Raft reports now (curLeaderAndEpoch)."""
        if self.state is not D.DUAL_WRITE or len(self.queue) >= QUEUE_BOUND:
            return False
        offset = self.controller.committed_image().offset
        event = (offset, self.controller.quorum_epoch(), self.controller.is_active())
        if offset <= self.migration_offset or event in self.queue:
            return False
        self.queue.append(event)
        return True
        yield  # pragma: no cover - makes this a generator

    def run_metadata_change(self, now: int) -> Handler:
        """The queue's head MetadataChangeEvent: dropped when raised under another leader and epoch (KAFKA-16667),
        or outside DUAL_WRITE, or when ZooKeeper has its image; else the dual write of the image it carries."""
        if not self.queue:
            return False
        event = self.queue[0]
        offset, epoch, leader = event
        stale = (epoch, leader) != (self.controller.quorum_epoch(), self.controller.is_active())
        as_current = stale and ImplBug.STALE_EVENT_RUNS in self.bugs  # the mistake: no leader-epoch check
        if (stale and not as_current) or not self._in(D.DUAL_WRITE) or (
                offset <= self.migration_offset and not as_current):
            self.queue.pop(0)
            return True
        image = self.controller.image_at(offset)
        self.queue.pop(0)
        try:
            return (yield from self._write_image(image, now))
        except ConnectionLoss:
            self.queue.insert(0, event)  # its reads failed before it changed anything: the event waits
            raise

    def _write_image(self, image: Image, now: int, rpcs_before_zk: bool = False, reply_lost: bool = False) -> Handler:
        """ZooKeeper made equal to ``image`` in one fenced multi (/migration to its offset), then the changed
        partitions' RPCs to the ZK brokers."""
        # The delta since /migration's offset, which ZooKeeper holds (KRaftMigrationZkWriter.handleDelta), or since
        # the image a failed write was handed (the seeded bug FAILED_WRITE_DROPS_DELTA); the seeded bug
        # DUAL_WRITE_DELTA_OF_LAST_RECORD takes the newest committed record's change alone.
        # Differs (as the model): Kafka writes the delta one multi per change.
        handed = self.migration_offset < self.handed_offset < image.offset
        written = self.handed_offset if handed else self.migration_offset
        before = self.controller.image_at(written) if written > 0 else None
        last = ImplBug.DUAL_WRITE_DELTA_OF_LAST_RECORD in self.bugs
        base = self.controller.image_at(max(written, image.offset - 1 if last else 0))
        assignment = None  # /brokers/topics/t as the write read it: a moved partition's old replicas
        try:
            ops, assignment = yield from self._delta_ops(base, image, now)
            ok = yield from self._fenced_write(ops, image.offset, now, dual_write=True, reply_lost=reply_lost)
        except ConnectionLoss:
            if not rpcs_before_zk:
                raise
            ok = True  # the mistake: ZooKeeper is down, so the brokers are told first and ZooKeeper later
        if not ok:
            return True
        parts = image.partitions
        changed = [
            p for p, part in enumerate(parts)
            if before is None or p >= len(before.partitions) or before.partitions[p] != part
        ]
        deleted = list(range(len(before.partitions))) if before is not None and _deleted(before, image) else []
        # The UpdateMetadata's type: full (kip, as the model), so that a ZK broker unfenced after a change it missed
        # learns it; the seeded bug DELETION_SKIPS_FENCED_BROKER (Kafka 3.9's delta path, KAFKA-15799) sends
        # incremental ones but for a deletion's.
        incremental = not deleted and ImplBug.DELETION_SKIPS_FENCED_BROKER in self.bugs
        if changed or deleted:
            rpcs = self._controller_rpcs(image, changed, False, deleted, incremental)
            if before is not None and not deleted:
                rpcs += self._reassignment_stops(before, image, changed, assignment)
        elif before is None or before.to_model().brokers != image.to_model().brokers:
            rpcs = [m for m in self._controller_rpcs(image, [], True, incremental=incremental)
                    if isinstance(m, UpdateMetadata)]
        else:
            rpcs = []
        for m in rpcs:
            yield Send(m)
        return True

    # ---- ZooKeeper writes ----------------------------------------------------------------------

    def _adopt_claim(self) -> Handler:
        """The seeded bug FENCED_WRITE_ADOPTS_NEWER_CLAIM: take the claim ZooKeeper shows now as its own."""
        claim, _ = yield from self._read(CONTROLLER)
        epoch, epoch_stat = yield from self._read(CONTROLLER_EPOCH)
        _, migration_stat = yield from self._read(MIGRATION)
        if not isinstance(claim, KRaftControllerZNode) or epoch_stat is None or migration_stat is None:
            return False
        self.kraft_epoch, self.zk_epoch, self.zk_epoch_version = claim.kraft_epoch, epoch, epoch_stat.version
        self.migration_version = migration_stat.version
        return True

    def _fenced_write(
        self, ops: list[Op], offset: int, now: int, dual_write: bool = False, retry: bool = True,
        reply_lost: bool = False,
    ) -> Handler:
        """One multi: check /controller_epoch, the ops, CAS /migration to ``offset`` (reference §2.4). With
        ``reply_lost`` it applies but its reply is lost, and the driver hears only of the resent copy."""
        fenced = not (dual_write and ImplBug.DUAL_WRITE_WITHOUT_EPOCH_CHECK in self.bugs)
        head: list[Op] = [CheckOp(CONTROLLER_EPOCH, self.zk_epoch_version)] if fenced else []
        migration = MigrationZNode(self.node_id, self.kraft_epoch, offset)
        update = SetDataOp(MIGRATION, encode(MIGRATION, migration, now), self.migration_version)
        results = yield from self._multi(head + ops + [update])
        if not _succeeded(results) and retry and ImplBug.FENCED_WRITE_ADOPTS_NEWER_CLAIM in self.bugs:
            if (yield from self._adopt_claim()):
                return (yield from self._fenced_write(ops, offset, now, dual_write, retry=False))
        if not _succeeded(results) and _failed_at(results) in range(len(head), len(head) + len(ops)):
            # The fencing held and a metadata op failed: it was made from a stale read (a lagging server). The
            # driver's next poll retries a claim or a sync, reading from the server this write brought up to date; a
            # dual write's change is written again by the next dual write (the seeded bug FAILED_WRITE_DROPS_DELTA:
            # not, as in Kafka 3.9, whose poll does nothing in DUAL_WRITE).
            if dual_write and ImplBug.FAILED_WRITE_DROPS_DELTA in self.bugs:
                self.handed_offset = offset
            return False
        if not _succeeded(results):
            # Differs (as the model): Kafka retries on its next poll and fails the same way until a
            # KRaftLeaderEvent; the driver parks in INACTIVE instead.
            self._transition(D.INACTIVE, **self._forget_zk_controller())
            return False
        version = results[-1].stat.version
        if reply_lost:
            version = yield from self._resend(head + [update] + ops, offset)
            if version is None:
                return False
        self.migration_offset, self.migration_version, self.handed_offset = offset, version, 0
        return True

    def _resend(self, resent: list[Op], offset: int) -> Handler:
        """The copy of a multi ZooKeeper applied, resent after its reply was lost (KafkaZkClient
        .retryRequestsUntilConnected); the /migration op comes before the data ops, as Kafka's wrapMigrationRequest
        puts it, so the copy fails on the version the first copy bumped. KIP-866 §Migration State ZNode fences only
        a newer election: /migration holding this driver's id and Raft epoch and an offset at or past the one
        written is its own write, whose version it takes. Returns that version, or None when the write failed."""
        yield from self._multi(resent)
        if ImplBug.RESEND_KEEPS_STALE_VERSION in self.bugs:
            self.handed_offset = offset  # the mistake (Kafka 3.9's): the stale version kept, the image handed
            return None
        migration, stat = yield from self._read(MIGRATION)
        own = isinstance(migration, MigrationZNode) and stat is not None and migration.kraft_metadata_offset >= offset \
            and (migration.kraft_controller_id, migration.kraft_controller_epoch) == (self.node_id, self.kraft_epoch)
        if not own:
            self._transition(D.INACTIVE, **self._forget_zk_controller())
            return None
        return stat.version

    def _reconcile_ops(self, image: Image, now: int) -> Handler:
        """KRaftMigrationZkWriter.handleSnapshot: read ZooKeeper, write whatever differs from ``image``."""
        ops, _ = yield from self._assignment_write(image, now)
        for p, part in enumerate(image.partitions):
            s, _ = yield from self._read(partition_state_path(PartitionId(p)))
            if s is None or (s.leader, s.isr, s.leader_epoch) != (part.leader, part.isr, part.leader_epoch):
                ops += self._partition_write(p, image, now, new=s is None)
        if image.config is not None:
            config, _ = yield from self._read(CONFIG)
            if config != image.config:
                data = encode(CONFIG, image.config, now)
                ops.append(CreateOp(CONFIG, data) if config is None else SetDataOp(CONFIG, data, ANY_VERSION))
        # handleTopicsSnapshot: a topic the image does not hold; and the marks of pending deletions the migration did
        # not copy (clearPendingTopicDeletions; the mistake, Kafka before 3.6.1, reads no marks)
        marked = ImplBug.MIGRATES_PENDING_DELETION not in self.bugs and \
            (yield from self._exists(pending_deletion_path(TOPIC_NAME)))
        if TOPIC_NAME in image.removed_topics or (marked and not image.partitions):
            ops += yield from self._topic_deletion_ops()
            if marked:
                ops.append(DeleteOp(pending_deletion_path(TOPIC_NAME), ANY_VERSION))
        if (yield from self._exists(pending_deletion_path(DELETED_TOPIC))):
            ops.append(DeleteOp(topic_path(DELETED_TOPIC), ANY_VERSION))
            ops.append(DeleteOp(pending_deletion_path(DELETED_TOPIC), ANY_VERSION))
        return ops

    def _delta_ops(self, before: Image, image: Image, now: int) -> Handler:
        """KRaftMigrationZkWriter.handleDelta: write what changed from ``before`` (what ZooKeeper holds) to
        ``image``, reading nothing but, for a partition created or reassigned on KRaft since, the assignment it
        grows or changes, or a topic deleted since, whose znodes it lists to delete them; a divergence in ZooKeeper
        waits for the next leadership's full sync. Returns the ops and the assignment it read (None: not read)."""
        moved = [part.replicas for part in image.partitions] != [part.replicas for part in before.partitions]
        assignment = None
        deleted = _deleted(before, image)
        if deleted:
            ops: list[Op] = yield from self._topic_deletion_ops()
        elif moved:
            ops, assignment = yield from self._assignment_write(image, now)
        else:
            ops = []
        for p, part in enumerate(image.partitions):
            new = deleted or p >= len(before.partitions)  # created after the deletion: its znode is gone
            if new or before.partitions[p] != part:
                ops += self._partition_write(p, image, now, new=new)
        if image.config is not None and image.config != before.config:
            data = encode(CONFIG, image.config, now)
            ops.append(CreateOp(CONFIG, data) if before.config is None else SetDataOp(CONFIG, data, ANY_VERSION))
        return ops, assignment

    def _topic_deletion_ops(self) -> Handler:
        """ZkTopicMigrationClient.deleteTopic: every znode below the topic's, deepest first (recursiveChildren),
        then the topic's own, any version; nothing when ZooKeeper has no such topic."""
        return (yield from tree_deletion(self._session, TOPIC))

    def _assignment_write(self, image: Image, now: int) -> Handler:
        """updateTopic: the assignment as the image has it, grown by the partitions created on KRaft since and with
        the replicas of one reassigned on KRaft (only those carry their replicas), before createTopicPartitions
        creates the new state znodes. Returns the ops and the assignment read (None: not read, or no topic)."""
        if not any(part.replicas for part in image.partitions):
            return [], None
        assignment, _ = yield from self._read(TOPIC)
        if assignment is None:
            return [], None
        current = tuple(tuple(BrokerId(r) for r in replicas) for replicas in assignment)
        wanted = tuple(tuple(BrokerId(r) for r in part.replicas) or current[p]
                       for p, part in enumerate(image.partitions)) + current[len(image.partitions):]
        ops = [] if wanted == current else [SetDataOp(TOPIC, encode(TOPIC, wanted, now), ANY_VERSION)]
        return ops, current

    def _partition_write(self, p: int, image: Image, now: int, new: bool) -> list[Op]:
        """The partition's state znode set to the image's, or created with its parent when ``new``
        (createTopicPartitions); KIP profile: the KRaft controller writes as a ZK controller of the epoch it
        claimed."""
        part, path = image.partitions[p], partition_state_path(PartitionId(p))
        state = PartitionState(BrokerId(part.leader), LeaderEpoch(part.leader_epoch), part.isr,
                               ControllerEpoch(self.zk_epoch))
        data = encode(path, state, now)
        if new and ImplBug.DUAL_WRITE_SETS_NEW_PARTITION not in self.bugs:
            return [CreateOp(path.rsplit("/", 1)[0], b""), CreateOp(path, data)]
        return [SetDataOp(path, data, ANY_VERSION)]

    # ---- RPCs to ZK brokers ----------------------------------------------------------------------

    def _controller_rpcs(
        self, image: Image, partitions: list[int], full: bool, deleted: list[int] | None = None,
        incremental: bool = False,
    ) -> list:
        """UpdateMetadata (of type ``incremental`` or full), then LeaderAndIsr, to each target ZK broker, marked
        IsKRaftController; then StopReplica with deletePartitions for each partition of a topic ``deleted`` since the
        last write, to every registered ZK broker, fenced or not (MigrationPropagator sends them to the partition's
        replicas: as the model, the image holds no replicas for a partition copied from ZooKeeper)."""
        deleted = deleted or []
        leaders = tuple((BrokerId(p.leader), LeaderEpoch(p.leader_epoch)) for p in image.partitions)
        live = image.unfenced()
        cid = BrokerId(self.node_id)
        epoch = ControllerEpoch(self.zk_epoch)
        out: list = []
        for b, broker_epoch in zk_broker_targets(image):
            update = [UpdateMetadata(cid, epoch, broker_epoch, b, leaders, kraft=True, live=live,
                                     incremental=incremental)]
            if not (full or partitions or deleted):
                update = []
            leaderships = [
                LeaderAndIsr(cid, epoch, broker_epoch, b, PartitionId(p), BrokerId(image.partitions[p].leader),
                             LeaderEpoch(image.partitions[p].leader_epoch), image.partitions[p].isr, True,
                             tuple(BrokerId(r) for r in image.partitions[p].replicas))
                for p in partitions
                if full or b in image.partitions[p].isr or b == image.partitions[p].leader
                or b in image.partitions[p].replicas
            ]
            # KIP-866 §ZK Broker RPCs: the broker learns of the KRaft controller from the UpdateMetadata first.
            if ImplBug.LEADER_AND_ISR_BEFORE_UPDATE_METADATA in self.bugs:
                out += leaderships + update
            else:
                out += update + leaderships
        if ImplBug.DELETION_SENDS_NO_STOP_REPLICA in self.bugs:
            return out  # the mistake: the topic is gone from ZooKeeper and the metadata, its replicas stay hosted
        delete = ImplBug.DELETION_STOPS_WITHOUT_DELETE not in self.bugs  # (the mistake: "stop managing" only)
        # The seeded bug DELETION_SKIPS_FENCED_BROKER (Kafka 3.7 to 3.9, found on real runs): the channel manager
        # holds the unfenced ZK brokers alone, so a fenced one's StopReplica is skipped and never sent again.
        skips_fenced = ImplBug.DELETION_SKIPS_FENCED_BROKER in self.bugs
        return out + [StopReplica(cid, epoch, reg.epoch, BrokerId(b), PartitionId(p), delete, kraft=True)
                      for b, reg in sorted(image.brokers.items())
                      if reg.is_migrating_zk_broker and not (skips_fenced and reg.fenced) for p in deleted]

    def _reassignment_stops(self, before: Image, image: Image, changed: list[int], assignment: tuple | None) -> list:
        """MigrationPropagator's removed replicas (KIP-866 §ZK Broker RPCs: StopReplicas "following reassignments"):
        StopReplica with deletePartitions, for each changed partition, to each replica ``before`` assigned it (a copied
        partition's: ``assignment``, as the write read it) and ``image`` no longer does, when it is a target ZK broker
        (Kafka's channel manager reaches those alone)."""
        if ImplBug.REASSIGNMENT_SENDS_NO_STOP_REPLICA in self.bugs:
            return []  # the mistake: the removed replica is told the new assignment only, and keeps hosting it
        cid, epoch = BrokerId(self.node_id), ControllerEpoch(self.zk_epoch)
        targets = dict(zk_broker_targets(image))
        out = []
        for p in changed:
            new = image.partitions[p].replicas
            old = before.partitions[p].replicas if p < len(before.partitions) else ()
            if not old and p < len(before.partitions) and assignment is not None and p < len(assignment):
                old = assignment[p]
            gone = sorted(set(old) - set(new)) if new else []
            out += [StopReplica(cid, epoch, targets[b], BrokerId(b), PartitionId(p), True, kraft=True)
                    for b in gone if b in targets]
        return out

    # ---- the refinement map ----------------------------------------------------------------------

    def abstract(self):
        from model.kraft import KRaftEpoch, Offset
        from model.migration import Driver, QueuedEvent

        return Driver(
            state=self.state, kraft_epoch=KRaftEpoch(self.kraft_epoch), leader=self.leader,
            migration_offset=Offset(self.migration_offset), migration_version=self.migration_version,
            zk_epoch=self.zk_epoch, zk_epoch_version=self.zk_epoch_version,
            umr_sent=frozenset(BrokerId(b) for b in self.umr_sent),
            queue=tuple(QueuedEvent(Offset(o), KRaftEpoch(e), leader) for o, e, leader in self.queue),
            handed_offset=Offset(self.handed_offset),
        )


def _deleted(before: Image, image: Image) -> bool:
    """The one topic was deleted (a RemoveTopicRecord) between ``before`` and ``image``."""
    return TOPIC_NAME in image.removed_topics and TOPIC_NAME not in before.removed_topics


def zk_broker_targets(image: Image) -> list[tuple[BrokerId, int]]:
    """ZK brokers the KRaft controller sends RPCs to: registered as migrating and not fenced."""
    return [(BrokerId(b), r.epoch) for b, r in sorted(image.brokers.items())
            if r.is_migrating_zk_broker and not r.fenced]


def _failed_at(results: list) -> int:
    """The index of the op a failed multi failed at (the ops before it report OK, those after it
    RUNTIME_INCONSISTENCY)."""
    return next(i for i, r in enumerate(results) if r.code not in (ZkCode.OK, ZkCode.RUNTIME_INCONSISTENCY))


def _succeeded(results) -> bool:
    return all(r.code is ZkCode.OK for r in results)

