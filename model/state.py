"""The state of a ZooKeeper-era Kafka control plane: ZooKeeper, brokers, the network.

Rules:
- Everything is a frozen record of tuples, frozensets and enums, so a state is hashable and can
  be a set member or a graph node. Small maps are sorted tuples of pairs.
- Ground truth lives in ZooKeeper (``zk``); each broker holds only what it has learned, which may
  be stale: that gap is what the invariants are about.
- Two records exist for the checks only and never influence a step. ``history`` holds what past
  steps established that later steps are compared with (the epoch of each broker's last
  registration, every leadership term taken); it is part of the state's identity, since two
  states with different histories can go on to different verdicts. ``ghost`` holds per-step
  annotations (the last multi's results, the log of applied controller writes) whose
  invariants are decided when the entry is made; it is left out of equality and hashing, so
  it never splits a state. Its ``observed`` record alone is carried from step to step: what the
  model-independent properties need of the past, as observations (``model.observations``). A state
  reached along two paths keeps the first path's, so only TRANSITION properties read it.
- ``budget`` counts the perturbations still allowed (crashes, elections, ...); healing actions
  never spend budget.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import field
from typing import TypedDict, overload

from model import zookeeper as zkm
from model.kraft import (
    EMPTY_IMAGE,
    FIRST_CONTROLLER_ID,
    QUIET_WHEN_EMPTY,
    TOPIC_NAME,
    BrokerState,
    ControllerConfig,
    ControllerId,
    Incarnation,
    KRaftEpoch,
    Log,
    MetadataImage,
    QuorumRole,
)
from model.migration import Driver, KRaftControllerZNode, MigrationDriverState, pending_deletion_path
from model.record import Record, record, repr_quiet_when_empty
from model.types import (
    NO_SESSION,
    UNKNOWN_BROKER_EPOCH,
    BrokerEpoch,
    BrokerId,
    ControllerEpoch,
    D,
    FeatureEpoch,
    FeatureLevel,
    FeatureStatus,
    Ibp,
    LeaderEpoch,
    PartitionId,
    ReplicaRole,
    SessionId,
    ZDir,
    ZkCode,
    ZkVersion,
    ZPath,
)
from model.zookeeper import ZkState

# ---- znode paths (core/src/main/scala/kafka/zk/ZkData.scala) -------------------------------

# The replicas of each partition of the one topic, in assignment order.
Assignment = tuple[tuple[BrokerId, ...], ...]

# A ZK controller's broker id, or after the claim a KRaft controller's znode (model.migration).
CONTROLLER: ZPath[BrokerId | KRaftControllerZNode] = ZPath("/controller")
CONTROLLER_EPOCH: ZPath[ControllerEpoch] = ZPath("/controller_epoch")
BROKER_IDS: ZDir[BrokerRegistration] = ZDir("/brokers/ids")
TOPIC: ZPath[Assignment] = ZPath(f"/brokers/topics/{TOPIC_NAME}")
FEATURES: ZPath[FeaturesZNode] = ZPath("/features")


def broker_path(broker: BrokerId) -> ZPath[BrokerRegistration]:
    return ZPath(f"{BROKER_IDS}/{broker}")


def partition_state_path(partition: PartitionId) -> ZPath[PartitionState]:
    return ZPath(f"{TOPIC}/partitions/{partition}/state")


FeatureRanges = tuple[tuple[str, tuple[FeatureLevel, FeatureLevel]], ...]  # sorted: name -> (min, max)


# ---- znode data --------------------------------------------------------------------------

@record
class PartitionState(Record):
    """/brokers/topics/t/partitions/<p>/state: leader, leader epoch, ISR, writer's controller epoch."""

    leader: BrokerId
    leader_epoch: LeaderEpoch
    isr: tuple[BrokerId, ...]
    controller_epoch: ControllerEpoch


@record
class BrokerRegistration(Record):
    """/brokers/ids/<id> data: what the controller needs from a broker's registration (KIP-584)."""

    ibp: Ibp
    supported: FeatureRanges


@record
class FeaturesZNode(Record):
    """/features data (KIP-584 "Feature ZK node"); the znode's version is the feature epoch."""

    status: FeatureStatus
    finalized: FeatureRanges  # name -> (min_version_level, max_version_level)


# ---- brokers -----------------------------------------------------------------------------

@record
class BrokerConfig(Record):
    ibp: Ibp  # inter.broker.protocol.version
    supported: FeatureRanges  # what this broker's software supports
    kraft_mode: bool = False  # process.roles=broker (a KRaft broker) instead of a ZooKeeper broker
    migration_enabled: bool = False  # zookeeper.metadata.migration.enable (KIP-866 §Migration Trigger 2)
    controller_configs: bool = False  # controller.quorum.voters and controller.listener.names (Trigger 3)


@record
class LocalReplica(Record):
    leader_epoch: LeaderEpoch
    role: ReplicaRole
    replicas: tuple[BrokerId, ...] = ()  # the replica set its last accepted LeaderAndIsr carried (see there)
    # a follower that took its leader epoch from a LeaderAndIsr that failed part-way and started no fetcher
    # (``LeaderAndIsrFailsInBroker``, kafka-3.9): it neither fetches nor catches up until a newer leader epoch
    no_fetcher: bool = False

    def __repr__(self) -> str:
        return repr_quiet_when_empty(self, QUIET_WHEN_EMPTY)


@record
class FeatureCache(Record):
    """A broker's copy of the finalized features; epoch -1 before it has read /features."""

    epoch: FeatureEpoch
    status: FeatureStatus
    finalized: FeatureRanges


NO_FEATURES = FeatureCache(FeatureEpoch(-1), FeatureStatus.DISABLED, ())


@record
class LiveBroker(Record):
    """The controller's cached view of an admitted broker, read from its registration."""

    id: BrokerId
    epoch: BrokerEpoch
    supported: FeatureRanges


@record
class ControllerRole(Record):
    """What a broker that won the /controller election believes (and may keep believing as a zombie)."""

    epoch: ControllerEpoch
    epoch_zk_version: ZkVersion  # the /controller_epoch version every write of this controller checks
    live: tuple[LiveBroker, ...]  # admitted live brokers, by id
    initialized: bool  # onControllerFailover ran: features set up, brokers read, watch armed
    # registered brokers it left out for their features, with the czxid it saw (re-checked at every change)
    refused: frozenset[tuple[BrokerId, BrokerEpoch]] = frozenset()

    def cached_epoch(self, broker: BrokerId) -> BrokerEpoch | None:
        for b in self.live:
            if b.id == broker:
                return b.epoch
        return None

    def epochs(self) -> dict[BrokerId, BrokerEpoch]:
        return {b.id: b.epoch for b in self.live}


@record
class Broker(Record):
    id: BrokerId
    config: BrokerConfig
    alive: bool
    session: SessionId  # the ZooKeeper session this process holds (may have expired)
    registered: bool  # /brokers/ids/<id> was created in ``session``
    epoch: BrokerEpoch  # own broker epoch (czxid of its registration); -1 before the first
    controller_epoch: ControllerEpoch  # the newest controller epoch it has accepted a request from
    # per partition; None: not hosted in this process (a partition created later grows it, ``with_replica``)
    replicas: tuple[LocalReplica | None, ...]
    metadata: tuple[tuple[BrokerId, LeaderEpoch], ...]  # per partition, from the last UpdateMetadata
    features: FeatureCache
    shutdown_sent: bool  # a ControlledShutdown was sent in this generation
    observed_epoch: tuple[ControllerEpoch, ZkVersion] | None  # /controller_epoch read before an election
    controller: ControllerRole | None
    # ---- the KRaft side (KIP-866 §Broker Registration, KIP-500 §Broker States); unused by part 1's scopes
    incarnation: Incarnation = Incarnation(0)  # a new one per process start
    kraft_epoch: BrokerEpoch = UNKNOWN_BROKER_EPOCH  # the offset of its RegisterBrokerRecord, once accepted
    lifecycle: BrokerState = BrokerState.OFFLINE  # KRaft brokers' own view of their state
    image: MetadataImage = EMPTY_IMAGE  # KRaft brokers: the committed metadata replayed so far
    metadata_live: tuple[BrokerId, ...] = ()  # ZK brokers: live brokers of the last KRaft UpdateMetadata
    meta_properties: int = 0  # meta.properties version in its log dirs (KIP-866 §Meta.Properties)
    want_shutdown: bool = False  # SIGINT received: controlled shutdown under way


def with_replica(b: Broker, p: PartitionId, replica: LocalReplica | None) -> Broker:
    """``b`` holding ``replica`` for partition ``p``, its per-partition tuple grown for a partition created since."""
    replicas = list(b.replicas) + [None] * (p + 1 - len(b.replicas))
    replicas[p] = replica
    return b.replace(replicas=tuple(replicas))


class InMemory(TypedDict):
    """The fields of a ``Broker`` that live in its process's memory (``nothing_in_memory``)."""

    session: SessionId
    registered: bool
    epoch: BrokerEpoch
    controller_epoch: ControllerEpoch
    replicas: tuple[LocalReplica | None, ...]
    metadata: tuple[tuple[BrokerId, LeaderEpoch], ...]
    features: FeatureCache
    shutdown_sent: bool
    observed_epoch: tuple[ControllerEpoch, ZkVersion] | None
    controller: ControllerRole | None
    kraft_epoch: BrokerEpoch
    lifecycle: BrokerState
    image: MetadataImage
    metadata_live: tuple[BrokerId, ...]
    want_shutdown: bool


def nothing_in_memory(partitions: int) -> InMemory:
    """A broker process as it starts: no session, registration, epochs, replicas, metadata, role or image.

    Its identity, configuration, incarnation and meta.properties are what it keeps across a restart."""
    return InMemory(
        session=NO_SESSION, registered=False, epoch=UNKNOWN_BROKER_EPOCH, controller_epoch=ControllerEpoch(0),
        replicas=(None,) * partitions, metadata=(), features=NO_FEATURES, shutdown_sent=False, observed_epoch=None,
        controller=None, kraft_epoch=UNKNOWN_BROKER_EPOCH, lifecycle=BrokerState.OFFLINE, image=EMPTY_IMAGE,
        metadata_live=(), want_shutdown=False,
    )


# ---- KRaft controllers (KIP-500 §Controller Quorum; KIP-866 §Controller Migration) --------------

@record
class HeartbeatAnswer(Record):
    """BrokerHeartbeatResponse as the model has it: the registration after the heartbeat's records."""

    fenced: bool  # IsFenced
    in_controlled_shutdown: bool
    shutdown_now: bool  # ShouldShutDown


@record
class PendingAnswer(Record):
    """A broker's registration or heartbeat the active controller has decided but not answered: QuorumController's
    deferred event queue holds a write's future until the log up to ``offset`` commits (``completeUpTo``), and
    fails it with NOT_CONTROLLER when the controller resigns or stops first."""

    broker: BrokerId
    incarnation: Incarnation  # the process that asked: another incarnation ignores the answer
    epoch: BrokerEpoch  # the epoch the answer carries (a heartbeat's: the one it was sent with)
    offset: int  # answered once the high watermark reaches it (the log's end when the request was decided)
    heartbeat: HeartbeatAnswer | None = None  # a heartbeat's answer; None: a registration's
    # Kafka's deferredEventQueue completes at the last stable offset (an open transaction's records wait for its end);
    # a RUNS_IN_PREMIGRATION event run in pre-migration goes to deferredUnstableEventQueue, completed at the Raft
    # commit (KAFKA-15441; kraft_quorum.answered_at_raft_commit)
    unstable: bool = False


@record
class KRaftController(Record):
    """A dedicated KRaft controller: a quorum voter, and the active controller while it leads."""

    id: ControllerId
    config: ControllerConfig
    alive: bool
    # persisted (the quorum-state file and the log): survives a crash
    epoch: KRaftEpoch
    voted_for: ControllerId | None
    log: Log
    # in memory only
    role: QuorumRole
    leader: ControllerId | None  # the leader it follows (itself when leading)
    votes: frozenset[ControllerId]  # granted to it as a candidate
    high_watermark: int  # entries known committed
    fetched: tuple[int, ...]  # as leader: each voter's log end offset, by index
    active: bool  # as leader: activation ran (QuorumController's completeActivation)
    driver: Driver | None  # the migration driver; exists when the migration flag is set
    # as the active controller: registrations and heartbeats answered once the log up to them commits
    # (Budget.answer_at_commit, Budget.heartbeats_at_commit)
    pending: tuple[PendingAnswer, ...] = ()
    # as the active controller: BrokerHeartbeatManager's lapsed sessions, brokers whose unfenced registration went
    # unheard for broker.session.timeout.ms and is not fenced yet (maybeFenceOneStaleBroker runs later); empty
    # whenever it is not active, as activate() starts every registration's session afresh
    lapsed: frozenset[BrokerId] = frozenset()
    # as the active controller: brokers whose fencing BrokerHeartbeatManager holds the other way from the
    # controller's image (kraft_quorum.heartbeat_fenced). Kafka 3.9's activate() fills the manager from the
    # registrations as replayed, an open transaction's records included; the AbortTransactionRecord activation then
    # writes reverts the registrations (timeline maps) but not the manager (a plain map). Set right when the
    # controller writes the broker's next registration or registration change; empty whenever it is not active
    stale_fencing: frozenset[BrokerId] = frozenset()


def controller_index(c: ControllerId) -> int:
    return c - FIRST_CONTROLLER_ID


# ---- messages (KIP-380 §Public Interfaces) -------------------------------------------------

@record
class LeaderAndIsr(Record):
    controller_id: BrokerId
    controller_epoch: ControllerEpoch
    broker_epoch: BrokerEpoch
    dest: BrokerId
    partition: PartitionId
    leader: BrokerId
    leader_epoch: LeaderEpoch
    isr: tuple[BrokerId, ...]
    kraft: bool = False  # IsKRaftController (KIP-866 §Controller RPCs)
    # The partition's replica set as a KRaft controller's image holds it for a partition created or reassigned on
    # KRaft; () otherwise: the model leaves an assignment ZooKeeper holds implicit, as its PartitionImage does.
    replicas: tuple[BrokerId, ...] = ()

    def __repr__(self) -> str:
        return repr_quiet_when_empty(self, QUIET_WHEN_EMPTY)


UPDATE_METADATA_QUIET = frozenset({"incremental"})  # shown only when set, as every other scope printed it before


@record
class UpdateMetadata(Record):
    controller_id: BrokerId
    controller_epoch: ControllerEpoch
    broker_epoch: BrokerEpoch
    dest: BrokerId
    partitions: tuple[tuple[BrokerId, LeaderEpoch], ...]  # (leader, leader epoch) per partition
    kraft: bool = False  # IsKRaftController
    live: tuple[BrokerId, ...] = ()  # LiveBrokers as a KRaft controller sends them: the unfenced
    # The request's type (KAFKA-15799): a full one replaces the broker's cached partitions; an incremental one only
    # adds or changes those it names, and the broker keeps the rest (kafka-3.9's dual writes send these).
    incremental: bool = False

    def __repr__(self) -> str:
        return repr_quiet_when_empty(self, UPDATE_METADATA_QUIET)


@record
class StopReplica(Record):
    controller_id: BrokerId
    controller_epoch: ControllerEpoch
    broker_epoch: BrokerEpoch
    dest: BrokerId
    partition: PartitionId
    delete_partition: bool
    kraft: bool = False


@record
class ControlledShutdown(Record):
    broker_id: BrokerId
    broker_epoch: BrokerEpoch
    dest: BrokerId  # the controller it was sent to


ControlRequest = LeaderAndIsr | UpdateMetadata | StopReplica
Message = ControlRequest | ControlledShutdown


# ---- requests to a KRaft controller (KIP-500 §New Controller APIs) --------------------------------
# Exchanges, not messages in flight: the model handles each in one step (``model.kraft_quorum``). What a
# network can do to one is an exchange too: a request that never arrives, or whose answer is refused, is
# no step; one that took effect on the controller and whose response was lost is a step of its own
# (``RegistrationResponseLost``, ``HeartbeatResponseLost``: the controller's side only), after which the
# broker, which learned nothing, sends it again as BrokerLifecycleManager does. One kind is also a message
# in flight: a heartbeat the network holds (``HoldHeartbeat``, ``ClusterState.held``, Budget.held_requests)
# reaches its controller later (``DeliverHeartbeat``), with the broker epoch it was sent with.

@record
class BrokerRegistrationRequest(Record):
    broker: BrokerId
    controller: ControllerId  # the controller it is sent to
    incarnation: Incarnation  # IncarnationId: a new one per process start
    is_migrating_zk_broker: bool  # IsMigratingZkBroker
    ibp: Ibp  # the metadata.version it supports; a ZK broker advertises [IBP, IBP]


@record
class BrokerHeartbeatRequest(Record):
    broker: BrokerId
    controller: ControllerId
    broker_epoch: BrokerEpoch
    want_shutdown: bool  # WantShutDown
    metadata_offset: int | None  # CurrentMetadataOffset; None: a ZK broker, which replays no log


@record
class ControllerRegistrationRequest(Record):
    """KIP-919's ControllerRegistration; only a script injects one (``model.harness``): a controller's own
    registration is the ``RegisterController`` action."""

    controller_id: ControllerId  # ControllerId: the one registering
    controller: ControllerId  # the controller it is sent to
    zk_migration_ready: bool  # ZkMigrationReady


KRaftRequest = BrokerRegistrationRequest | BrokerHeartbeatRequest | ControllerRegistrationRequest

_MESSAGE_ORDER = {LeaderAndIsr: 0, UpdateMetadata: 1, StopReplica: 2, ControlledShutdown: 3}


def message_sort_key(m: Message) -> tuple[int, tuple[object, ...]]:
    """A total order on messages that does not depend on hash randomisation."""
    names: tuple[str, ...] = m.__slots__
    return (_MESSAGE_ORDER[type(m)], tuple(getattr(m, f) for f in names))


def heartbeat_sort_key(r: BrokerHeartbeatRequest) -> tuple[int, int, int, bool, int]:
    """A total order on held heartbeats that does not depend on hash randomisation."""
    return (r.broker, r.controller, r.broker_epoch, r.want_shutdown, -1 if r.metadata_offset is None
            else r.metadata_offset)


# ---- budgets and ghosts -------------------------------------------------------------------

@record
class Budget(Record):
    crashes: int = 0  # broker processes dying without closing their session
    restarts: int = 0  # operator stops (clean shutdown); restarting a stopped broker is free
    expiries: int = 0  # ZooKeeper session expiries
    elections: int = 0  # controller elections won
    outages: int = 0  # ZooKeeper unavailable
    drops: int = 0  # messages lost
    duplicates: int = 0  # messages delivered twice (Redeliver)
    operator: int = 0  # UpdateFeatures requests and IBP changes
    shutdowns: int = 0  # ControlledShutdown requests brokers may send
    max_in_flight: int = 6  # a cap, not spent: a send that would exceed it waits
    # the KRaft side
    kraft_elections: int = 0  # election timeouts of KRaft voters
    controller_crashes: int = 0  # KRaft controllers dying without a clean shutdown
    timeouts: int = 0  # a live broker's heartbeats lost long enough to time its session out
    migrations: int = 0  # operator steps of the migration and its rollback (restarts with new configs)
    max_lag: int = 4  # KIP-866 §Unavailable ZooKeeper: the bound on records not yet written to ZooKeeper
    # a broker's registration or heartbeat took effect on the controller and its response was lost (it retries)
    lost_responses: int = 0
    # a broker's heartbeat held in the network, to reach the controller later, maybe after the broker registered again
    held_requests: int = 0
    stale_reads: int = 0  # a KRaft controller's ZooKeeper server falling behind the leader (model.zookeeper views)
    # a ZooKeeper-mode broker's ZooKeeper server falling behind the leader while it is not the controller (its views)
    broker_stale_reads: int = 0
    partition_creations: int = 0  # an admin's CreatePartitions, in ZooKeeper mode (AddPartitions) or on KRaft
    reassignments: int = 0  # an admin's AlterPartitionReassignments, on the ZK controller or on KRaft
    topic_deletions: int = 0  # an admin's DeleteTopics of the one topic, on KRaft
    queued_events: int = 0  # MetadataChangeEvents queued to run later, maybe under a newer leadership (KAFKA-16667)
    write_failures: int = 0  # a dual write fails: its ZooKeeper session expired as it waited (KIP-866 §Failure Modes)
    # a dual write applies in ZooKeeper, its reply is lost and the resent copy fails on /migration's version
    lost_write_replies: int = 0
    # a ZK broker's LeaderAndIsr from a KRaft controller fails inside it, its ZooKeeper session expired
    failed_leader_and_isrs: int = 0
    # A mode, not spent: a BrokerRegistration is answered once its record commits, as Kafka's controller does
    # (its deferred event queue); off, the model answers at once (the Differs at model.kraft_quorum).
    answer_at_commit: bool = False
    # A mode, not spent: a BrokerHeartbeat is answered once the log up to its end is stable (committed; outside an
    # open transaction unless Kafka's KAFKA-15441 exception applies), as Kafka's controller does; off, at once.
    heartbeats_at_commit: bool = False


@record
class AppliedWrite(Record):
    """Ghost: a controller write that ZooKeeper applied, and the controller epoch current then."""

    writer: BrokerId
    writer_epoch: ControllerEpoch
    # /controller_epoch's value when the write applied; None: absent, which only a write that skips its check sees
    zk_epoch: ControllerEpoch | None
    path: str


@record
class KRaftWrite(Record):
    """Ghost: a KRaft controller's ZooKeeper write that applied, with what held when it was made."""

    writer: ControllerId
    writer_epoch: KRaftEpoch
    kind: str  # "claim", "recover", "migration", "sync", "dual-write"
    driver_state: MigrationDriverState  # the writer's driver state when it wrote
    writer_offset: int  # the /migration offset it wrote (-1: none)
    writer_log_end: int
    post_migration: bool  # the writer's own log said POST_MIGRATION


@record
class Observations(Record):
    """Ghost: what the model-independent properties (``model.end_to_end_invariants``) need of the past.

    Only observations of what a user can see are kept (messages sent and delivered; requests an operator
    made; brokers gone unheard for a session timeout), never a decision of the rules; ``model.observations``
    records them after every step, from the step's states and actions alone.
    """

    # Per ZK broker: the last KRaft UpdateMetadata sent to it by the newest controller epoch it was sent one by.
    told: tuple[tuple[BrokerId, UpdateMetadata], ...] = ()
    settled: frozenset[BrokerId] = frozenset()  # ZK brokers whose last ``told`` message was the last delivered
    unsafe_downgrades: frozenset[Ibp] = frozenset()  # metadata.version levels an operator forced a downgrade to
    # This step: brokers whose heartbeats the environment kept from the controller for a whole session timeout.
    silenced: frozenset[BrokerId] = frozenset()
    # (broker, partition, leader epoch) of each KRaft LeaderAndIsr lost, until one as new reaches that broker.
    lost: frozenset[tuple[BrokerId, PartitionId, LeaderEpoch]] = frozenset()
    # (broker, partition) of a deleted topic's partition a broker hosts and was not told to delete: its StopReplica
    # lost or refused, or overtaken by a LeaderAndIsr sent before it, or the image without the topic reached it from a
    # controller that had no StopReplica to send (one sending from its image after a failover: Kafka's "we cannot
    # send StopReplica requests from the image"); and a partition a broker hosts outside the replicas a KRaft
    # LeaderAndIsr told (a reassignment removed it) with no StopReplica to come: told from the image, or the
    # controller's requests of that step did not reach the broker (``model.observations``).
    strays: frozenset[tuple[BrokerId, PartitionId]] = frozenset()
    stopped: frozenset[tuple[BrokerId, PartitionId]] = frozenset()  # a KRaft StopReplica deleted it on that broker


NOTHING_OBSERVED = Observations()


@record
class Ghost(Record):
    """Per-step annotations for the checks: not part of a state's identity."""

    applied_writes: tuple[AppliedWrite, ...] = ()
    last_multi: tuple[ZkCode, ...] = ()  # ZkCode results of the multi this step ran, () if none
    kraft_writes: tuple[KRaftWrite, ...] = ()  # ZooKeeper writes of KRaft controllers that applied
    sent: tuple[Message, ...] = ()  # messages this step sent, in the order they were queued
    # (writer, epoch) of a KRaft write to ZooKeeper this step tried, () if none
    attempted_kraft_write: tuple[()] | tuple[ControllerId, KRaftEpoch] = ()
    # Carried from step to step (``step`` does not clear it): what ``model.observations`` has recorded so far.
    observed: Observations = NOTHING_OBSERVED


@record
class History(Record):
    """What past steps established, for the checks: part of a state's identity."""

    registered_epochs: tuple[tuple[BrokerId, BrokerEpoch], ...] = ()  # epoch of each id's latest registration
    # every leadership a broker took on: (partition, leader epoch, broker, its broker epoch, sender's controller epoch)
    leader_terms: frozenset[tuple[PartitionId, LeaderEpoch, BrokerId, BrokerEpoch, ControllerEpoch]] = frozenset()
    kraft_terms: frozenset[tuple[KRaftEpoch, ControllerId]] = frozenset()  # every KRaft leadership won
    committed: Log = ()  # the longest committed prefix of the metadata log so far
    max_controller_epoch: ControllerEpoch = ControllerEpoch(0)  # the largest /controller_epoch ever written
    # KRaft controllers that crashed since ZooKeeper last caught up with the committed log
    crashed_controllers: frozenset[ControllerId] = frozenset()
    handed_back: int | None = None  # committed entries when the operator gave ZooKeeper back (rollback)

    def registered_epoch(self, broker: BrokerId) -> BrokerEpoch | None:
        for b, e in self.registered_epochs:
            if b == broker:
                return e
        return None


@record
class ClusterState(Record):
    zk: ZkState
    brokers: tuple[Broker, ...]
    network: frozenset[Message]
    budget: Budget
    controllers: tuple[KRaftController, ...] = ()
    history: History = History()
    # Heartbeats held in the network (``HoldHeartbeat``): each reaches the controller it was sent to later, or never.
    held: frozenset[BrokerHeartbeatRequest] = frozenset()
    ghost: Ghost = field(default=Ghost(), compare=False, hash=False, repr=False)


@overload
def znode_data(state: ClusterState, path: ZPath[D]) -> D | None: ...
@overload
def znode_data(state: ClusterState, path: str) -> Hashable | None: ...
def znode_data(state: ClusterState, path: str) -> Hashable | None:
    """The data of the znode at ``path``, or None when there is none."""
    node = zkm.get(state.zk, path)
    return None if node is None else node.data


def zk_partitions(state: ClusterState) -> tuple[PartitionState, ...]:
    """Each partition /brokers/topics/t assigns, as ZooKeeper holds it and the migration reads it
    (ZkTopicMigrationClient): one an admin added whose state znode no controller has created yet reads as its
    replicas for ISR, the first leading, at leader epoch 0 (its controller epoch, which nothing compares, 0). A topic
    marked for deletion (/admin/delete_topics/t) is no live topic: it has none (the migration does not read it)."""
    if zkm.get(state.zk, pending_deletion_path(TOPIC_NAME)) is not None:
        return ()
    found = []
    for p, replicas in enumerate(znode_data(state, TOPIC) or ()):
        s = znode_data(state, partition_state_path(PartitionId(p)))
        found.append(s if s is not None else PartitionState(replicas[0], LeaderEpoch(0), replicas, ControllerEpoch(0)))
    return tuple(found)


def seen_by(state: ClusterState, client: int) -> ClusterState:
    """``state`` with ZooKeeper as ``client`` reads it (``model.zookeeper.seen_by``): for reads only, never
    a next state. The very ``state`` when its server does not lag."""
    zk = zkm.seen_by(state.zk, client)
    return state if zk is state.zk else state.replace(zk=zk)


def kraft_claim(state: ClusterState) -> KRaftControllerZNode | None:
    """/controller as a KRaft controller wrote it, when one has claimed ZooKeeper (KIP-866 §Controller
    Leadership); None while a ZooKeeper-mode broker holds it or nobody does."""
    data = znode_data(state, CONTROLLER)
    return data if isinstance(data, KRaftControllerZNode) else None
