"""The ZooKeeper-to-KRaft migration's tables: driver states, their transitions, znodes and profiles.

Rules (after h11's ``_state.py``: the protocol's tables in one module, no behaviour here):
- ``MigrationDriverState`` and ``VALID_TRANSITIONS`` are KRaftMigrationDriver's enum and
  ``isValidStateChange`` (reference §1.2-1.3); ``model.kraft_migration`` moves the driver only
  through its ``_drive``, which asks ``is_valid_transition``, and the invariant
  ``DriverTakesOnlyTableTransitions`` re-checks every step against the same table. docs/ draws
  the diagrams from these tables.
- ``Profile`` names whose rules the model follows where the seeds and shipped Kafka differ:
  ``KIP`` (the default: the seeds' text) and ``KAFKA_3_9`` (reference §10). Every place that
  consults the profile says so with a ``# Differs:`` line.
- The znodes the migration adds (``/migration``) or changes (``/controller``) are records here,
  as ``ZkData.scala`` defines them (reference §2.2).
"""

from __future__ import annotations

from enum import Enum

from model.kraft import ControllerId, KRaftEpoch, Offset, ZkMigrationState
from model.record import Record, record
from model.types import BrokerId, ZDir, ZPath

MIGRATION: ZPath[MigrationZNode] = ZPath("/migration")
DELETE_TOPICS: ZDir[tuple[()]] = ZDir("/admin/delete_topics")  # a child per topic, holding nothing
CONFIG: ZPath[int] = ZPath("/config/cluster")  # the one dynamic config, as a version number
DELETED_TOPIC = "d"  # a topic whose deletion ZooKeeper has not finished when the migration starts


def topic_path(topic: str) -> ZPath[tuple[()]]:
    return ZPath(f"/brokers/topics/{topic}")


def pending_deletion_path(topic: str) -> ZPath[tuple[()]]:
    return ZPath(f"{DELETE_TOPICS}/{topic}")


class Profile(Enum):
    KIP = "kip"  # the seeds as written
    KAFKA_3_9 = "kafka-3.9"  # as shipped (reference §10)


# Differs: the KIP numbers PreMigration 1 and Migration 2; Kafka >= 3.5 swapped them (reference §1.1).
STATE_BYTES: dict[Profile, dict[ZkMigrationState, int]] = {
    Profile.KIP: {
        ZkMigrationState.NONE: 0,
        ZkMigrationState.PRE_MIGRATION: 1,
        ZkMigrationState.MIGRATION: 2,
        ZkMigrationState.POST_MIGRATION: 3,
    },
    Profile.KAFKA_3_9: {
        ZkMigrationState.NONE: 0,
        ZkMigrationState.MIGRATION: 1,
        ZkMigrationState.PRE_MIGRATION: 2,
        ZkMigrationState.POST_MIGRATION: 3,
    },
}

# The persisted state's only legal moves (KIP-866 §Migration Overview; reference §1.1's writers).
STATE_ORDER: dict[ZkMigrationState | None, frozenset[ZkMigrationState]] = {
    None: frozenset({ZkMigrationState.NONE, ZkMigrationState.PRE_MIGRATION}),
    ZkMigrationState.NONE: frozenset(),
    ZkMigrationState.PRE_MIGRATION: frozenset({ZkMigrationState.MIGRATION}),
    ZkMigrationState.MIGRATION: frozenset({ZkMigrationState.POST_MIGRATION}),
    ZkMigrationState.POST_MIGRATION: frozenset(),
}


class MigrationDriverState(Enum):
    UNINITIALIZED = "UNINITIALIZED"
    INACTIVE = "INACTIVE"
    WAIT_FOR_CONTROLLER_QUORUM = "WAIT_FOR_CONTROLLER_QUORUM"
    WAIT_FOR_BROKERS = "WAIT_FOR_BROKERS"
    BECOME_CONTROLLER = "BECOME_CONTROLLER"
    ZK_MIGRATION = "ZK_MIGRATION"
    SYNC_KRAFT_TO_ZK = "SYNC_KRAFT_TO_ZK"
    KRAFT_CONTROLLER_TO_BROKER_COMM = "KRAFT_CONTROLLER_TO_BROKER_COMM"
    DUAL_WRITE = "DUAL_WRITE"

    @property
    def allows_dual_write(self) -> bool:
        return self in (MigrationDriverState.KRAFT_CONTROLLER_TO_BROKER_COMM, MigrationDriverState.DUAL_WRITE)


D = MigrationDriverState
VALID_TRANSITIONS: dict[MigrationDriverState, frozenset[MigrationDriverState]] = {
    D.UNINITIALIZED: frozenset({D.INACTIVE}),
    D.INACTIVE: frozenset({D.WAIT_FOR_CONTROLLER_QUORUM}),
    D.WAIT_FOR_CONTROLLER_QUORUM: frozenset({D.INACTIVE, D.WAIT_FOR_BROKERS, D.BECOME_CONTROLLER}),
    D.WAIT_FOR_BROKERS: frozenset({D.INACTIVE, D.BECOME_CONTROLLER}),
    D.BECOME_CONTROLLER: frozenset({D.INACTIVE, D.ZK_MIGRATION, D.SYNC_KRAFT_TO_ZK}),
    D.ZK_MIGRATION: frozenset({D.INACTIVE, D.SYNC_KRAFT_TO_ZK}),
    D.SYNC_KRAFT_TO_ZK: frozenset({D.INACTIVE, D.KRAFT_CONTROLLER_TO_BROKER_COMM}),
    D.KRAFT_CONTROLLER_TO_BROKER_COMM: frozenset({D.INACTIVE, D.DUAL_WRITE}),
    D.DUAL_WRITE: frozenset({D.INACTIVE}),
}


def is_valid_transition(old: MigrationDriverState, new: MigrationDriverState) -> bool:
    """KRaftMigrationDriver.isValidStateChange: self-moves are valid, nothing goes to UNINITIALIZED."""
    if old == new:
        return True
    if new is D.UNINITIALIZED:
        return False
    return new in VALID_TRANSITIONS[old]


# ---- znodes ---------------------------------------------------------------------------------

@record
class MigrationZNode(Record):
    """/migration (KIP-866 §Migration State ZNode): how far ZooKeeper has caught up with the log."""

    kraft_controller_id: ControllerId
    kraft_controller_epoch: KRaftEpoch
    kraft_metadata_offset: Offset  # entries of the log written to ZooKeeper; <= 0: no migration yet


EMPTY_MIGRATION = MigrationZNode(ControllerId(-1), KRaftEpoch(-1), Offset(-1))


@record
class KRaftControllerZNode(Record):
    """/controller as a KRaft controller writes it: persistent, with its Raft epoch (KIP-866 §Controller ZNodes)."""

    controller: ControllerId
    kraft_epoch: KRaftEpoch


# KRaftMigrationDriver's event queue holds MetadataChangeEvents for at most this many published images (the model's
# bound, which keeps the state finite; Kafka's KafkaEventQueue is unbounded).
QUEUE_BOUND = 2


@record
class QueuedEvent(Record):
    """A MetadataChangeEvent waiting in the driver's queue: the committed image it carries (the log's first
    ``offset`` entries) and the leader and epoch Raft had reported when it was raised (KAFKA-16667)."""

    offset: Offset
    kraft_epoch: KRaftEpoch
    leader: bool  # that leadership was this node's


@record
class Driver(Record):
    """KRaftMigrationDriver's in-memory state with its ZkMigrationLeadershipState (reference §2.1)."""

    state: MigrationDriverState = D.UNINITIALIZED
    kraft_epoch: KRaftEpoch = KRaftEpoch(-1)  # the leadership it last heard of (KRaftLeaderEvent)
    leader: bool = False  # that leadership is this node's
    migration_offset: Offset = Offset(-1)  # /migration's kraft_metadata_offset as last read or written
    migration_version: int = -2  # /migration's zkVersion; -2: unknown
    zk_epoch: int = -1  # the /controller_epoch value it claimed
    zk_epoch_version: int = -2  # /controller_epoch's version after its claim; -2: unknown
    umr_sent: frozenset[BrokerId] = frozenset()  # ZK brokers sent a full UpdateMetadata in this leadership
    queue: tuple[QueuedEvent, ...] = ()  # MetadataChangeEvents raised, not yet run, oldest first (QUEUE_BOUND)
    # kafka-3.9: the offset of the image a failed dual write had been handed (KRaftMigrationDriver.image, set before
    # the write), past /migration's: the next delta starts there. 0: none; a successful write clears it.
    handed_offset: Offset = Offset(0)
