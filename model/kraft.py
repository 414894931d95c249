"""The KRaft side: the metadata log's records, the image they replay into, and the Raft quorum.

Rules (KIP-500 §Controller Quorum, reference §3 and §7; Kafka's ``metadata/.../image/``):
- A record is a frozen value named as Kafka names it. Deciding (a request -> records) lives in
  ``model.kraft_quorum`` and ``model.kraft_migration``; replaying (a record -> a new image) lives
  here, in ``replay``, and is the only place an image changes. Every node derives what it knows
  from a log prefix through ``image_of``, so the active controller, a KRaft broker and the
  checks agree by construction on what a prefix means.
- Transactions (KIP-868, used by the initial migration): records between a
  ``BeginTransactionRecord`` and its ``EndTransactionRecord`` are buffered and applied together
  at the end; an ``AbortTransactionRecord`` drops them. A prefix that ends inside an open
  transaction shows none of it.
- The quorum is modelled at the level of atomic request/response exchanges: one action is a
  Vote or a Fetch round trip. That keeps split votes (two candidates in one epoch), deposed
  leaders that go on acting (a leader learns of a newer epoch only when an exchange tells it)
  and truncation (a follower drops entries that diverge from the leader's log), while the
  network between controllers is not a separate queue. Offsets are 0-based list positions; the
  high watermark is the number of committed entries.
"""

from __future__ import annotations

from enum import Enum
from functools import lru_cache
from typing import NewType

from model.record import Record, record, repr_quiet_when_empty
from model.types import BrokerEpoch, BrokerId, Ibp, LeaderEpoch

ControllerId = NewType("ControllerId", int)
KRaftEpoch = NewType("KRaftEpoch", int)
Offset = NewType("Offset", int)
Incarnation = NewType("Incarnation", int)

# Kafka's documentation numbers controllers from 3000 (KIP-866's /migration example).
FIRST_CONTROLLER_ID = 3000
NO_OFFSET = Offset(-1)


class ZkMigrationState(Enum):
    """The persisted migration state (ZkMigrationStateRecord; KIP-866 §Migration Overview)."""

    NONE = "NONE"
    PRE_MIGRATION = "PRE_MIGRATION"
    MIGRATION = "MIGRATION"
    POST_MIGRATION = "POST_MIGRATION"

    @property
    def in_progress(self) -> bool:
        return self in (ZkMigrationState.PRE_MIGRATION, ZkMigrationState.MIGRATION)


class UpgradeType(Enum):
    """How an UpdateFeatures request may move a level (clients/.../FeatureUpdate.java; KIP-778)."""

    UPGRADE = 1
    SAFE_DOWNGRADE = 2
    UNSAFE_DOWNGRADE = 3


class QuorumRole(Enum):
    """KIP-500 / KIP-595 quorum states (raft/.../QuorumState.java; 3.9 folds Voted into Unattached)."""

    UNATTACHED = "Unattached"
    VOTED = "Voted"
    CANDIDATE = "Candidate"
    LEADER = "Leader"
    FOLLOWER = "Follower"
    RESIGNED = "Resigned"


class BrokerState(Enum):
    """KIP-500 §Broker States, as a broker itself sees it."""

    OFFLINE = "Offline"
    FENCED = "Fenced"
    ONLINE = "Online"
    STOPPING = "Stopping"


# ---- records (metadata/src/main/resources/common/metadata/*.json) ----------------------------

@record
class LeaderChangeMessage(Record):
    """The control record a new leader appends first (KIP-595); it carries no metadata."""

    leader: ControllerId


@record
class RegisterBrokerRecord(Record):
    broker: BrokerId
    incarnation: Incarnation
    epoch: BrokerEpoch  # the offset of this very record (reference §3.1)
    is_migrating_zk_broker: bool
    ibp: Ibp  # the metadata.version the broker advertised as [ibp, ibp]; a KRaft broker supports all


@record
class RegisterControllerRecord(Record):
    """A controller's registration (KIP-919, from metadata.version 3.7-IV0; ClusterControlManager.registerController).

    Kafka's record carries the process's incarnation id, and every start of a controller registers anew;
    the model has no controller incarnations, so a controller registers again only when what it would send
    differs from the image's registration (marked at ``model.kraft_quorum._register_controller``)."""

    controller: ControllerId
    zk_migration_ready: bool  # zookeeper.metadata.migration.enable, as the controller was started with


@record
class BrokerRegistrationChangeRecord(Record):
    broker: BrokerId
    epoch: BrokerEpoch
    fenced: bool | None  # True: FENCE, False: UNFENCE, None: no change
    in_controlled_shutdown: bool = False


def _repr_without_empty_replicas(r: Record) -> str:
    """A partition's repr, its ``replicas`` (and a reassignment's adding and removing replicas) left out when empty
    (``QUIET_WHEN_EMPTY``): the partitions of every scope without creations or reassignments print as they did
    before the fields existed (pinned scenario outputs show them)."""
    return repr_quiet_when_empty(r, QUIET_WHEN_EMPTY)


TOPIC_NAME = "t"  # the one topic whose partitions the image tracks (/brokers/topics/t)
QUIET_WHEN_EMPTY = frozenset({"replicas", "adding", "removing", "no_fetcher"})  # partition fields shown only when set


@record
class PartitionRecord(Record):
    """A partition as the migration copies it from ZooKeeper, or a later change of it."""

    partition: int
    leader: BrokerId
    isr: tuple[BrokerId, ...]
    leader_epoch: LeaderEpoch
    # The assignment of a partition an admin created on KRaft; () for one copied from ZooKeeper, whose assignment
    # stays in /brokers/topics/t (the model copies only the state znode's fields; a reassignment on KRaft sets it).
    replicas: tuple[BrokerId, ...] = ()

    def __repr__(self) -> str:
        return _repr_without_empty_replicas(self)


@record
class PartitionChangeRecord(Record):
    partition: int
    leader: BrokerId
    isr: tuple[BrokerId, ...]
    leader_epoch: LeaderEpoch
    # A reassignment's new replica set (AlterPartitionReassignments); () for a change that keeps the replicas.
    replicas: tuple[BrokerId, ...] = ()
    # A reassignment's adding and removing replicas (PartitionChangeRecord's addingReplicas, removingReplicas):
    # None keeps them (Kafka's absent field), () clears them (its completion).
    adding: tuple[BrokerId, ...] | None = None
    removing: tuple[BrokerId, ...] | None = None

    def __repr__(self) -> str:
        shown = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__
                          if (n != "replicas" or self.replicas) and getattr(self, n) is not None)
        return f"{type(self).__name__}({shown})"


@record
class ConfigRecord(Record):
    """A dynamic cluster config (KIP-866 §Dual Metadata Writes: ZK brokers read these from ZooKeeper)."""

    value: int


@record
class RemoveTopicRecord(Record):
    topic: str


@record
class FeatureLevelRecord(Record):
    name: str
    level: Ibp  # only metadata.version is modelled on KRaft; its levels are the IBPs


@record
class ZkMigrationStateRecord(Record):
    state: ZkMigrationState


@record
class BeginTransactionRecord(Record):
    name: str


@record
class EndTransactionRecord(Record):
    pass


@record
class AbortTransactionRecord(Record):
    pass


MetadataRecord = (
    LeaderChangeMessage
    | RegisterBrokerRecord
    | RegisterControllerRecord
    | BrokerRegistrationChangeRecord
    | PartitionRecord
    | PartitionChangeRecord
    | ConfigRecord
    | RemoveTopicRecord
    | FeatureLevelRecord
    | ZkMigrationStateRecord
    | BeginTransactionRecord
    | EndTransactionRecord
    | AbortTransactionRecord
)

CONTROL_RECORDS = (LeaderChangeMessage,)
TRANSACTION_RECORDS = (BeginTransactionRecord, EndTransactionRecord, AbortTransactionRecord)
METADATA_VERSION = "metadata.version"


@record
class LogEntry(Record):
    epoch: KRaftEpoch  # the leader epoch it was appended in
    record: MetadataRecord


Log = tuple[LogEntry, ...]


def is_metadata(entry: LogEntry) -> bool:
    """Records that carry metadata (what the write-behind lag counts), not Raft or transaction markers."""
    return not isinstance(entry.record, CONTROL_RECORDS + TRANSACTION_RECORDS)


# ---- the image ------------------------------------------------------------------------------

@record
class BrokerRegistrationImage(Record):
    broker: BrokerId
    incarnation: Incarnation
    epoch: BrokerEpoch
    is_migrating_zk_broker: bool
    ibp: Ibp
    fenced: bool
    in_controlled_shutdown: bool


@record
class PartitionImage(Record):
    leader: BrokerId
    isr: tuple[BrokerId, ...]
    leader_epoch: LeaderEpoch
    replicas: tuple[BrokerId, ...] = ()  # as its PartitionRecord gave it (a change keeps it, a reassignment sets it)
    adding: tuple[BrokerId, ...] = ()  # a reassignment in progress: replicas not yet in the ISR it waits for
    removing: tuple[BrokerId, ...] = ()  # a reassignment in progress: replicas its completion drops

    @property
    def reassigning(self) -> bool:
        """A reassignment is in progress (PartitionReassignmentReplicas.isReassignmentInProgress)."""
        return bool(self.adding or self.removing)

    def __repr__(self) -> str:
        return _repr_without_empty_replicas(self)


@record
class MetadataImage(Record):
    """What a log prefix means (Kafka's MetadataImage), restricted to what the model tracks."""

    offset: Offset = Offset(0)  # entries replayed
    metadata_version: Ibp | None = None
    migration: ZkMigrationState | None = None  # None: no ZkMigrationStateRecord yet (implicitly NONE)
    brokers: tuple[BrokerRegistrationImage, ...] = ()  # by id
    controllers: tuple[RegisterControllerRecord, ...] = ()  # by id: cluster().controllers(), the last record of each
    partitions: tuple[PartitionImage, ...] = ()  # by partition; empty until the migration copies them
    config: int | None = None
    removed_topics: frozenset[str] = frozenset()
    open_transaction: tuple[MetadataRecord, ...] | None = None  # buffered records of an open transaction

    @property
    def migration_state(self) -> ZkMigrationState:
        return ZkMigrationState.NONE if self.migration is None else self.migration

    @property
    def bootstrapped_migration(self) -> ZkMigrationState | None:
        """The migration state once the log is bootstrapped, None before: a bootstrapped log without a
        ZkMigrationStateRecord (kafka-3.9's KRaft-born bootstrap below 3.6-IV1) is NONE, as Kafka reads it."""
        if self.migration is None and self.metadata_version is None:
            return None
        return self.migration_state

    @property
    def is_empty(self) -> bool:
        """Kafka's MetadataImage.isEmpty: no metadata replayed yet (a prefix of control records only, such as
        a new leader's LeaderChange before its bootstrap records commit)."""
        return (self.metadata_version is None and self.migration is None and not self.brokers
                and not self.controllers and not self.partitions and self.config is None and not self.removed_topics)

    def registration(self, broker: BrokerId) -> BrokerRegistrationImage | None:
        for r in self.brokers:
            if r.broker == broker:
                return r
        return None

    def controller_registration(self, controller: ControllerId) -> RegisterControllerRecord | None:
        for r in self.controllers:
            if r.controller == controller:
                return r
        return None

    def unfenced(self) -> tuple[BrokerId, ...]:
        return tuple(r.broker for r in self.brokers if not r.fenced)


EMPTY_IMAGE = MetadataImage()


def replay(image: MetadataImage, rec: MetadataRecord) -> MetadataImage:
    """Apply one record. Transaction markers buffer, flush or drop; the rest go through ``_apply``."""
    image = image.replace(offset=Offset(image.offset + 1))
    match rec:
        case BeginTransactionRecord():
            return image.replace(open_transaction=())
        case EndTransactionRecord():
            for buffered in image.open_transaction or ():
                image = _apply(image, buffered)
            return image.replace(open_transaction=None)
        case AbortTransactionRecord():
            return image.replace(open_transaction=None)
    if image.open_transaction is not None and not isinstance(rec, CONTROL_RECORDS):
        return image.replace(open_transaction=image.open_transaction + (rec,))
    return _apply(image, rec)


def _apply(image: MetadataImage, rec: MetadataRecord) -> MetadataImage:
    match rec:
        case LeaderChangeMessage():
            return image
        case RegisterBrokerRecord(broker=b):
            new = BrokerRegistrationImage(
                b, rec.incarnation, rec.epoch, rec.is_migrating_zk_broker, rec.ibp, True, False
            )
            return image.replace(brokers=_with_broker(image.brokers, new))
        case RegisterControllerRecord(controller=cid):
            # A newer registration of the same id replaces the older (ClusterDelta.replay).
            kept = [r for r in image.controllers if r.controller != cid]
            return image.replace(controllers=tuple(sorted(kept + [rec], key=lambda r: r.controller)))
        case BrokerRegistrationChangeRecord(broker=b, epoch=epoch):
            reg = image.registration(b)
            if reg is None or reg.epoch != epoch:
                return image  # Kafka throws on replay; the deciding code never writes such a record
            fenced = reg.fenced if rec.fenced is None else rec.fenced
            shutting = reg.in_controlled_shutdown or rec.in_controlled_shutdown
            reg = reg.replace(fenced=fenced, in_controlled_shutdown=shutting)
            return image.replace(brokers=_with_broker(image.brokers, reg))
        case PartitionRecord(partition=p) | PartitionChangeRecord(partition=p):
            parts = list(image.partitions)
            while len(parts) <= p:
                parts.append(PartitionImage(BrokerId(-1), (), LeaderEpoch(-1)))
            if isinstance(rec, PartitionRecord):
                parts[p] = PartitionImage(rec.leader, rec.isr, rec.leader_epoch, rec.replicas)
            else:  # PartitionRegistration.merge: an absent field keeps what the partition had
                old = parts[p]
                parts[p] = PartitionImage(rec.leader, rec.isr, rec.leader_epoch, rec.replicas or old.replicas,
                                          old.adding if rec.adding is None else rec.adding,
                                          old.removing if rec.removing is None else rec.removing)
            return image.replace(partitions=tuple(parts))
        case ConfigRecord(value=value):
            return image.replace(config=value)
        case RemoveTopicRecord(topic=topic):
            # The tracked topic takes its partitions with it (TopicsDelta.replay); any other is a name only.
            partitions = () if topic == TOPIC_NAME else image.partitions
            return image.replace(partitions=partitions, removed_topics=image.removed_topics | {topic})
        case FeatureLevelRecord(level=level):
            return image.replace(metadata_version=level)
        case ZkMigrationStateRecord(state=s):
            return image.replace(migration=s)
    return image


@lru_cache(maxsize=1 << 14)
def decided_view(image: MetadataImage) -> MetadataImage:
    """The active controller's view: an open transaction's records count at once (its timeline).

    Kafka's controller applies its own records to in-memory state as it appends them; the
    image that brokers and the migration driver read shows a transaction only once it ends.
    """
    if not image.open_transaction:
        return image
    for rec in image.open_transaction:
        image = _apply(image, rec)
    return image.replace(open_transaction=())


def _with_broker(
    brokers: tuple[BrokerRegistrationImage, ...], reg: BrokerRegistrationImage
) -> tuple[BrokerRegistrationImage, ...]:
    kept = [r for r in brokers if r.broker != reg.broker]
    return tuple(sorted(kept + [reg], key=lambda r: r.broker))


_CHECKPOINT = 64  # images are cached at prefixes of multiples of this many entries, and at each log asked for


def image_of(log: Log, upto: int | None = None) -> MetadataImage:
    """The image of ``log[:upto]`` (all of it when None)."""
    return _image_of_prefix(log if upto is None else log[:upto])


@lru_cache(maxsize=1 << 16)
def _image_of_prefix(entries: Log) -> MetadataImage:
    """Cached by the entries themselves, so logs that share a prefix share its images. The image
    starts from the last checkpoint below (recursion one level per checkpoint, not per entry: a
    simulation's logs grow to thousands of entries)."""
    n = len(entries)
    if n == 0:
        return EMPTY_IMAGE
    start = (n - 1) // _CHECKPOINT * _CHECKPOINT
    image = _image_of_prefix(entries[:start]) if start else EMPTY_IMAGE
    for entry in entries[start:]:
        image = replay(image, entry.record)
    return image


# ---- the quorum ------------------------------------------------------------------------------

DEFAULT_MIGRATION_BATCH_SIZE = 200  # Kafka's zookeeper.metadata.migration.min.batch.size


@record
class ControllerConfig(Record):
    """A KRaft controller's configuration (KIP-866 §Configuration, §Additional KRaft Broker Configs)."""

    migration_enabled: bool  # zookeeper.metadata.migration.enable
    metadata_version: Ibp = Ibp.IBP_3_4_IV0  # what the quorum was formatted with (its bootstrap metadata.version)
    zk_configured: bool = True  # zookeeper.connect and the other ZooKeeper configs
    # zookeeper.metadata.migration.min.batch.size: the initial migration's records per batch (Kafka's default,
    # 200, copies a model's ZooKeeper in one batch; 1 writes one record a batch, KRaftMigrationDriver's
    # BufferingBatchConsumer flushing at that size).
    migration_batch_size: int = DEFAULT_MIGRATION_BATCH_SIZE


def last_epoch(log: Log) -> KRaftEpoch:
    return log[-1].epoch if log else KRaftEpoch(0)


def log_up_to_date(candidate: Log, voter: Log) -> bool:
    """Raft's vote rule: the candidate's (last epoch, end offset) is at least the voter's."""
    return (last_epoch(candidate), len(candidate)) >= (last_epoch(voter), len(voter))


def common_prefix(a: Log, b: Log) -> int:
    """Length of the longest common prefix; by Raft's log matching, equal epochs at an offset suffice."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i].epoch == b[i].epoch:
        i += 1
    return i


def majority(voters: int) -> int:
    return voters // 2 + 1


def advance_high_watermark(log: Log, epoch: KRaftEpoch, ends: tuple[int, ...], current: int) -> int:
    """The leader's HW: the largest offset a majority holds, if its entry is of the leader's epoch.

    Raft commits only entries of the current epoch directly (the earlier ones with them); the
    high watermark never moves back.
    """
    ranked = sorted(ends, reverse=True)
    candidate = ranked[majority(len(ends)) - 1]
    if candidate > current and log[candidate - 1].epoch == epoch:
        return candidate
    return current
