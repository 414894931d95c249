"""The metadata image and its replay, as Kafka's MetadataDelta / MetadataImage do it (metadata/.../image/).

Rules:
- ``Image`` is mutable and is changed only by ``Image.replay(record)``, one record at a time;
  every node (the active controller deciding, the migration driver, a broker) builds what it
  knows by replaying a prefix of the log (``image_at``), so they agree on what a prefix means.
- Transactions (KIP-868): between BeginTransactionRecord and EndTransactionRecord records are
  buffered and applied at the end; AbortTransactionRecord drops them; the Raft control record
  (LeaderChangeMessage) is never buffered. ``decided()`` is the active controller's timeline,
  where an open transaction's records already count.
- ``to_model()`` is the refinement map's part: the model's ``MetadataImage`` record, with
  incarnation ids renamed by the caller's ``rename``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from model.kraft import (
    TOPIC_NAME,
    AbortTransactionRecord,
    BeginTransactionRecord,
    BrokerRegistrationChangeRecord,
    BrokerRegistrationImage,
    ConfigRecord,
    EndTransactionRecord,
    FeatureLevelRecord,
    LeaderChangeMessage,
    LogEntry,
    MetadataImage,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionImage,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    ZkMigrationState,
    ZkMigrationStateRecord,
)
from model.types import BrokerId, Ibp, LeaderEpoch

NO_LEADER = -1


@dataclass
class BrokerRegistration:
    """ClusterControlManager's BrokerRegistration."""

    broker_id: int
    incarnation_id: int
    epoch: int
    is_migrating_zk_broker: bool
    ibp: Ibp
    fenced: bool = True
    in_controlled_shutdown: bool = False


@dataclass
class Partition:
    """PartitionRegistration, for the one topic the model tracks."""

    leader: int
    isr: tuple[int, ...]
    leader_epoch: int
    # the assignment of one created or reassigned on KRaft; () for one copied from ZooKeeper and never moved
    replicas: tuple[int, ...] = ()
    adding: tuple[int, ...] = ()  # a reassignment in progress: its replicas not yet in the ISR
    removing: tuple[int, ...] = ()  # a reassignment in progress: the replicas its completion drops


@dataclass
class Image:
    offset: int = 0  # entries replayed
    metadata_version: Ibp | None = None
    migration: ZkMigrationState | None = None  # None: no ZkMigrationStateRecord replayed (implicitly NONE)
    brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    partitions: list[Partition] = field(default_factory=list)
    config: int | None = None
    removed_topics: set[str] = field(default_factory=set)
    open_transaction: list[MetadataRecord] | None = None  # buffered records of an open transaction

    # ---- reads ---------------------------------------------------------------------------------

    @property
    def migration_state(self) -> ZkMigrationState:
        return ZkMigrationState.NONE if self.migration is None else self.migration

    def is_empty(self) -> bool:
        """MetadataImage.isEmpty: every part of it is empty (only control records replayed, if any)."""
        return (self.metadata_version is None and self.migration is None and not self.brokers
                and not self.partitions and self.config is None and not self.removed_topics)

    def registration(self, broker: int) -> BrokerRegistration | None:
        return self.brokers.get(broker)

    def unfenced(self) -> tuple[BrokerId, ...]:
        return tuple(BrokerId(b) for b in sorted(self.brokers) if not self.brokers[b].fenced)

    def copy(self) -> Image:
        return Image(
            self.offset, self.metadata_version, self.migration,
            {b: replace(r) for b, r in self.brokers.items()},
            [replace(p) for p in self.partitions], self.config, set(self.removed_topics),
            None if self.open_transaction is None else list(self.open_transaction),
        )

    def decided(self) -> Image:
        """The active controller's view: an open transaction's records count at once."""
        if not self.open_transaction:
            return self
        image = self.copy()
        for rec in self.open_transaction:
            image._apply(rec)
        image.open_transaction = []
        return image

    # ---- replay --------------------------------------------------------------------------------

    def replay(self, rec: MetadataRecord) -> None:
        self.offset += 1
        match rec:
            case BeginTransactionRecord():
                self.open_transaction = []
                return
            case EndTransactionRecord():
                buffered, self.open_transaction = self.open_transaction or [], None
                for r in buffered:
                    self._apply(r)
                return
            case AbortTransactionRecord():
                self.open_transaction = None
                return
        if self.open_transaction is not None and not isinstance(rec, LeaderChangeMessage):
            self.open_transaction.append(rec)
            return
        self._apply(rec)

    def _apply(self, rec: MetadataRecord) -> None:
        match rec:
            case RegisterBrokerRecord():
                self.brokers[rec.broker] = BrokerRegistration(
                    rec.broker, rec.incarnation, rec.epoch, rec.is_migrating_zk_broker, rec.ibp
                )
            case BrokerRegistrationChangeRecord():
                reg = self.brokers.get(rec.broker)
                if reg is None or reg.epoch != rec.epoch:
                    return  # Kafka throws on replay; the deciding code never writes such a record
                if rec.fenced is not None:
                    reg.fenced = rec.fenced
                reg.in_controlled_shutdown = reg.in_controlled_shutdown or rec.in_controlled_shutdown
            case PartitionRecord() | PartitionChangeRecord():
                while len(self.partitions) <= rec.partition:
                    self.partitions.append(Partition(NO_LEADER, (), -1))
                if isinstance(rec, PartitionRecord):
                    self.partitions[rec.partition] = Partition(rec.leader, tuple(rec.isr), rec.leader_epoch,
                                                               tuple(rec.replicas))
                else:  # PartitionRegistration.merge: a field the record leaves out (None, or no replicas) is kept
                    old = self.partitions[rec.partition]
                    self.partitions[rec.partition] = Partition(
                        rec.leader, tuple(rec.isr), rec.leader_epoch, tuple(rec.replicas or old.replicas),
                        old.adding if rec.adding is None else tuple(rec.adding),
                        old.removing if rec.removing is None else tuple(rec.removing))
            case ConfigRecord():
                self.config = rec.value
            case RemoveTopicRecord():
                self.removed_topics.add(rec.topic)
                if rec.topic == TOPIC_NAME:  # the tracked topic takes its partitions with it
                    self.partitions = []
            case FeatureLevelRecord():
                self.metadata_version = rec.level
            case ZkMigrationStateRecord():
                self.migration = rec.state

    # ---- the refinement map ----------------------------------------------------------------------

    def to_model(self, rename: Callable[[int, int], int] = lambda b, i: i) -> MetadataImage:
        """The model's MetadataImage; ``rename(broker, incarnation)`` gives the model's incarnation."""
        brokers = tuple(
            BrokerRegistrationImage(
                BrokerId(r.broker_id), rename(r.broker_id, r.incarnation_id), r.epoch, r.is_migrating_zk_broker,
                r.ibp, r.fenced, r.in_controlled_shutdown,
            )
            for _, r in sorted(self.brokers.items())
        )
        partitions = tuple(PartitionImage(BrokerId(p.leader), p.isr, LeaderEpoch(p.leader_epoch),
                                          tuple(BrokerId(r) for r in p.replicas),
                                          tuple(BrokerId(r) for r in p.adding), tuple(BrokerId(r) for r in p.removing))
                           for p in self.partitions)
        return MetadataImage(
            offset=self.offset,
            metadata_version=self.metadata_version,
            migration=self.migration,
            brokers=brokers,
            partitions=partitions,
            config=self.config,
            removed_topics=frozenset(self.removed_topics),
            open_transaction=None if self.open_transaction is None else tuple(
                rename_record(r, rename) for r in self.open_transaction
            ),
        )


def rename_record(rec: MetadataRecord, rename: Callable[[int, int], int]) -> MetadataRecord:
    """A record with its incarnation id renamed (only RegisterBrokerRecord carries one)."""
    if isinstance(rec, RegisterBrokerRecord):
        return rec.replace(incarnation=rename(rec.broker, rec.incarnation))
    return rec


def image_at(log: Iterable[LogEntry], upto: int | None = None) -> Image:
    """The image of the first ``upto`` entries of ``log`` (all of them when None)."""
    image = Image()
    for i, entry in enumerate(log):
        if upto is not None and i >= upto:
            break
        image.replay(entry.record)
    return image


# ---- a broker's replayed log ------------------------------------------------------------------------

def end_offset_for_epoch(epochs: list[int], epoch: int) -> tuple[int, int]:
    """Kafka's LeaderEpochFileCache.endOffsetFor: (largest epoch <= ``epoch`` in the log, its end offset).

    Epochs never decrease along a log, so the end offset is the number of entries of epoch <= ``epoch``.
    """
    end = 0
    while end < len(epochs) and epochs[end] <= epoch:
        end += 1
    return (epochs[end - 1] if end else 0), end


@dataclass(frozen=True)
class BrokerImage:
    """The committed entries a broker has replayed, and their image (never mutated: replaced)."""

    entries: tuple[LogEntry, ...] = ()
    image: Image = field(default_factory=Image)

    @property
    def offset(self) -> int:
        return len(self.entries)

    @property
    def last_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else 0

    def truncated(self, diverging_epoch: int, diverging_end_offset: int) -> BrokerImage:
        """Truncate where the leader says this log diverges (KafkaRaftClient's follower rule); replay again."""
        _, own_end = end_offset_for_epoch([e.epoch for e in self.entries], diverging_epoch)
        keep = min(own_end, diverging_end_offset)
        kept = self.entries[:keep]
        return BrokerImage(kept, image_at(kept))

    def extended(self, records: Iterable[LogEntry]) -> BrokerImage:
        image = self.image.copy()
        added = tuple(records)
        for entry in added:
            image.replay(entry.record)
        return BrokerImage(self.entries + added, image)
