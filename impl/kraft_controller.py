"""A dedicated KRaft controller process: a quorum voter, the active controller while it leads, and its
migration driver (KIP-500 §Controller Quorum; KIP-866 §Controller Migration), sans-IO.

How it works:
- ``raft`` (``impl.kraft.raft.QuorumState``) is the voter's Raft state; the quorum's exchanges are
  ``Rpc`` round trips: the candidate asks each voter (``RequestVote``: one ``VoteRequest``), a
  follower fetches (``Fetch``: ``FetchRequest`` until the logs agree, then the entries and the
  high watermark).
- As leader it is QuorumController: activation (``_activate``: bootstrap records, or the check of
  the migration state against its flag) once Raft tells it of its leadership, which Raft does only
  when its LeaderChange record has committed (``_maybe_fire_leader_change``: as leader, after its
  own append and after each Fetch it serves), then deciding requests (``decide_*``, pure functions
  at module level: a request -> an error or records, from ``own_image``, the whole log with an open
  transaction counted, as QuorumController's timeline) and appending the records. Every node's knowledge is an image
  replayed from a log prefix (``impl.kraft.image``).
- The migration driver (``impl.kraft.driver``) exists while ``zookeeper.metadata.migration.enable``
  is set and the process runs; its events are the model's driver actions, performed on this node.
  It sees this node only as its ``MigrationController`` (the section "what the migration driver
  sees" below), never the whole node.
- Brokers reach it with BrokerRegistration, BrokerHeartbeat and metadata fetches
  (``RpcRequest``); it fences a broker whose heartbeats stopped (``SessionTimeout``) and tells
  the broker so. With ``answer_at_commit`` (the scope's ``Budget.answer_at_commit``) a registration
  whose record has not committed waits in its purgatory (QuorumController's deferred event queue), and
  with ``heartbeats_at_commit`` so does a heartbeat until the log up to it is stable (committed, and
  before any transaction its log leaves open): after every event it handles, it answers those its
  stable offset now covers and fails all of them with NOT_CONTROLLER once it is no longer the active
  controller (``BrokerRegistrationAnswer``, ``BrokerHeartbeatAnswer``).
- What it needs to know of the other voters (alive, flag, ZooKeeper configs: KIP-866 §Migration
  Trigger 5, §Finalizing the Migration) it asks them (``ApiVersionsRequest``); an unreachable
  voter is a voter that is down.
- Only the ``kip`` profile (``model.migration.Profile.KIP``, the seeds' text) is implemented.

Config keys: ``node.id``, ``process.roles`` (controller), ``controller.quorum.voters``,
``controller.listener.names``, ``zookeeper.metadata.migration.enable``, ``zookeeper.connect``.
Its ZooKeeper session (``zk_session``) is opened by the runner at bootstrap and never expires.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from impl.bugs import ImplBug
from impl.codec import decode
from impl.decisions import decision
from impl.kraft.driver import MIGRATION_BATCH_SIZE, KRaftMigrationDriver, MigrationController
from impl.kraft.image import NO_LEADER, Image, Partition, image_at, rename_record
from impl.kraft.raft import QuorumState, diverging_point
from impl.kraft.rpc import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    ApiError,
    ApiVersionsRequest,
    ApiVersionsResponse,
    BrokerHeartbeatAnswer,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationAnswer,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    BrokerSessionTimedOut,
    FetchRequest,
    FetchResponse,
    MetadataFetchRequest,
    MetadataFetchResponse,
    VoteRequest,
    VoteResponse,
)
from impl.kraft_broker import voter_ids
from impl.metrics import (
    ACTIVE_CONTROLLER_COUNT,
    CONTROLLER_METADATA_TYPE,
    CURRENT_EPOCH,
    DUAL,
    KRAFT,
    MIGRATING_ZK_BROKER_COUNT,
    MIGRATION_METRICS,
    ZK_MIGRATION_STATE,
    ZK_WRITE_BEHIND_LAG,
)
from impl.pacing import (
    BROKER_SESSION_TIMEOUT_MS,
    ELECTION_TIMEOUT_MS,
    FETCH_TIMEOUT_MS,
    FETCH_WAIT_MS,
    POLL_MS,
    Gates,
)
from impl.protocol import (
    Crash,
    Event,
    Handler,
    Node,
    Notifications,
    Perform,
    Reconfigure,
    Rpc,
    RpcRequest,
    Start,
    Stop,
    Trace,
)
from impl.zk.port import ConnectionLoss, GetData, NoNode, ZkError
from model.actions import (
    AlterConfigs,
    AlterPartitionReassignments,
    BecomeLeader,
    BecomeZkController,
    CompleteMigration,
    CrashController,
    CreatePartitions,
    DeleteTopics,
    DualWrite,
    DualWriteReplyLost,
    DualWriteSessionExpired,
    Fetch,
    KRaftLeaderChange,
    MigrateMetadata,
    MigrationCommitted,
    PublishMetadataChange,
    ReconfigureController,
    RecoverMigrationState,
    RequestVote,
    RestartController,
    RunMetadataChange,
    SendRPCsToBrokers,
    SessionTimeout,
    ShutdownController,
    StartElection,
    SyncKRaftToZk,
    UpdateMetadataVersion,
    WaitForControllerQuorum,
    WaitForZkBrokers,
)
from model.kraft import (
    DEFAULT_MIGRATION_BATCH_SIZE,
    METADATA_VERSION,
    TOPIC_NAME,
    AbortTransactionRecord,
    BeginTransactionRecord,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    ControllerConfig,
    ControllerId,
    EndTransactionRecord,
    FeatureLevelRecord,
    Incarnation,
    KRaftEpoch,
    LeaderChangeMessage,
    LogEntry,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    QuorumRole,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    UpgradeType,
    ZkMigrationState,
    ZkMigrationStateRecord,
)
from model.migration import MIGRATION, STATE_BYTES, MigrationDriverState, Profile
from model.state import TOPIC, HeartbeatAnswer, KRaftController, PendingAnswer
from model.types import CHANGED_METADATA, BrokerEpoch, BrokerId, Ibp, LeaderEpoch, PartitionId

MIGRATION_FLAG = "zookeeper.metadata.migration.enable"


# ---- decisions: a request and the image -> an error or records (QuorumController's, pure) -----------
# The handlers of ControllerNode check that it is the active controller, call one of these on its
# own image, and append the records unless the write-behind lag is at its bound.

@decision("NONE", "NOT_CONTROLLER")
def decide_write(image: Image) -> ApiError:
    """In pre-migration every write but registrations and heartbeats is NOT_CONTROLLER (KIP-866 §Migration
    Trigger: the KRaft controllers wait for the ZK brokers; reference §6)."""
    if image.migration_state is ZkMigrationState.PRE_MIGRATION:
        return ApiError.NOT_CONTROLLER
    return ApiError.NONE


@decision("NONE", "NOT_CONTROLLER", "INVALID_REPLICA_ASSIGNMENT")
def decide_create_partitions(image: Image, replicas: tuple[int, ...]) -> ApiError:
    """ReplicationControlManager.createPartitions with a manual assignment, after the pre-migration gate: every
    replica registered, and one of them active (unfenced, not shutting down) to lead."""
    if decide_write(image) is not ApiError.NONE:
        return ApiError.NOT_CONTROLLER
    if any(r not in image.brokers for r in replicas):
        return ApiError.INVALID_REPLICA_ASSIGNMENT
    if not any(not image.brokers[r].fenced and not image.brokers[r].in_controlled_shutdown for r in replicas):
        return ApiError.INVALID_REPLICA_ASSIGNMENT
    return ApiError.NONE


@decision("NONE", "NOT_CONTROLLER", "UNKNOWN_TOPIC_OR_PARTITION", "INVALID_REPLICA_ASSIGNMENT")
def decide_alter_partition_reassignments(image: Image, p: int, replicas: tuple[int, ...]) -> ApiError:
    """ReplicationControlManager.alterPartitionReassignments for one partition, after the pre-migration gate: the
    partition known, every target replica registered."""
    if decide_write(image) is not ApiError.NONE:
        return ApiError.NOT_CONTROLLER
    if p >= len(image.partitions):
        return ApiError.UNKNOWN_TOPIC_OR_PARTITION
    if any(r not in image.brokers for r in replicas):
        return ApiError.INVALID_REPLICA_ASSIGNMENT
    return ApiError.NONE


@decision("NONE", "NOT_CONTROLLER", "UNKNOWN_TOPIC_OR_PARTITION")
def decide_delete_topics(image: Image) -> ApiError:
    """ReplicationControlManager.deleteTopics for the one topic, after the pre-migration gate: the topic known (copied
    from ZooKeeper, and not deleted already)."""
    if decide_write(image) is not ApiError.NONE:
        return ApiError.NOT_CONTROLLER
    if not image.partitions:
        return ApiError.UNKNOWN_TOPIC_OR_PARTITION
    return ApiError.NONE


@decision("NONE", "NOT_CONTROLLER", "INVALID_UPDATE_VERSION")
def decide_metadata_version(
    image: Image, level: Ibp, upgrade_type: UpgradeType, bugs: frozenset[ImplBug] = frozenset()
) -> ApiError:
    """FeatureControlManager.updateFeature for metadata.version, in Kafka's order (KIP-584 as KRaft keeps
    it; KIP-866 §Migration Trigger for a ZK broker's [IBP, IBP]; reference §5.1)."""
    if decide_write(image) is not ApiError.NONE:
        return ApiError.NOT_CONTROLLER
    if any(r.is_migrating_zk_broker and r.ibp != level for r in image.brokers.values()):
        return ApiError.INVALID_UPDATE_VERSION  # a registered ZK broker advertises [IBP, IBP]
    current = image.metadata_version
    if current is not None and level < current and upgrade_type is UpgradeType.UPGRADE:
        return ApiError.INVALID_UPDATE_VERSION
    if current is not None and level > current and upgrade_type is not UpgradeType.UPGRADE:
        return ApiError.INVALID_UPDATE_VERSION  # "Can't downgrade to a newer version."
    # (the mistake: the check that a migration is in progress is left out)
    if image.migration_state.in_progress and ImplBug.MV_CHANGE_DURING_MIGRATION not in bugs:
        # "Unable to modify metadata.version while a ZK migration is in progress."
        return ApiError.INVALID_UPDATE_VERSION
    if current is not None and level < current and _downgrade_changes_metadata(current, level) and not (
        ImplBug.SAFE_DOWNGRADE_LOSES_METADATA in bugs and upgrade_type is UpgradeType.SAFE_DOWNGRADE
    ):
        return ApiError.INVALID_UPDATE_VERSION  # "Refusing ... because it might delete metadata information."
    return ApiError.NONE


def _downgrade_changes_metadata(current: Ibp, target: Ibp) -> bool:
    """MetadataVersion.checkIfMetadataChangedOrdered: walk down from ``current`` while the level changed
    no metadata; the downgrade is safe only if that walk reaches ``target``. A ZooKeeper-era level
    (no feature level) is a change."""
    high, low = current.feature_level, target.feature_level
    if high is None or low is None:
        return True
    while high != low and high not in CHANGED_METADATA:
        high -= 1
    return high != low


@decision(
    "NONE with record", "NONE", "BROKER_ID_NOT_REGISTERED", "DUPLICATE_BROKER_REGISTRATION", "UNSUPPORTED_VERSION",
    label=lambda r: r[0].name + (" with record" if r[1] is not None else ""),
)
def decide_broker_registration(
    image: Image, request: BrokerRegistrationRequest, migration_enabled: bool, log_end: int,
    bugs: frozenset[ImplBug] = frozenset(), lapsed: frozenset[int] = frozenset(),
) -> tuple[ApiError, RegisterBrokerRecord | None]:
    """ClusterControlManager.registerBroker's checks in Kafka's order (KIP-866 §Broker Registration;
    reference §3.1): the error, or NONE with the record to append (its epoch is its offset, ``log_end``).
    NONE with no record: the same incarnation keeps its registration. Another incarnation's registration refuses
    it only while its session is valid (hasValidSession: unfenced, and not among the ``lapsed`` sessions)."""
    is_zk = request.is_migrating_zk_broker
    existing = image.registration(request.broker_id)
    # (the mistake: the fencing record alone decides, a lapsed session counts as valid until it is written)
    valid = existing is not None and not existing.fenced and (
        request.broker_id not in lapsed or ImplBug.REGISTRATION_DECIDED_BY_FENCE in bugs)
    if existing is not None and existing.incarnation_id != request.incarnation_id and valid:
        return ApiError.DUPLICATE_BROKER_REGISTRATION, None
    if is_zk and not (migration_enabled and (image.metadata_version or 0) >= Ibp.IBP_3_4_IV0):
        return ApiError.BROKER_ID_NOT_REGISTERED, None
    if not is_zk and image.migration_state is ZkMigrationState.PRE_MIGRATION:
        # "The controller is in pre-migration mode and cannot register KRaft brokers" (102).
        return ApiError.BROKER_ID_NOT_REGISTERED, None
    # (the mistake: a ZK broker's advertised [IBP, IBP] is not compared with the finalized metadata.version)
    if is_zk and request.ibp != image.metadata_version and ImplBug.ADMIT_ZK_BROKER_WITH_OTHER_IBP not in bugs:
        return ApiError.UNSUPPORTED_VERSION, None  # ZK brokers advertise metadata.version as [IBP, IBP]
    if existing is not None and existing.incarnation_id == request.incarnation_id \
            and ImplBug.RETRIED_REGISTRATION_NEW_EPOCH not in bugs:
        # A retry whose first response was lost: the same registration, epoch and all.
        # Differs (as the model): Kafka 3.9 appends an amending RegisterBrokerRecord with the same epoch.
        return ApiError.NONE, None
    epoch = BrokerEpoch(log_end)  # the offset of the record (reference §3.1)
    return ApiError.NONE, RegisterBrokerRecord(BrokerId(request.broker_id), request.incarnation_id, epoch,
                                               is_zk, Ibp(request.ibp))


@decision(
    "NONE with records", "NONE", "STALE_BROKER_EPOCH",
    label=lambda r: r[0].error.name + (" with records" if r[1] else ""),
)
def decide_broker_heartbeat(
    image: Image, request: BrokerHeartbeatRequest, bugs: frozenset[ImplBug] = frozenset()
) -> tuple[BrokerHeartbeatResponse, list[MetadataRecord]]:
    """BrokerHeartbeatManager.calculateNextBrokerState and its records (KIP-500 §Broker States; reference §3.2):
    the response, and the records to append for it (the response says ``appended`` when there are some).

    A heartbeat of another epoch than the registration's is STALE_BROKER_EPOCH
    (ClusterControlManager.checkBrokerEpoch; KIP-380's generations as KRaft keeps them), and so is a
    heartbeat of a broker with no registration.
    """
    b = request.broker_id
    reg = image.registration(b)
    stale = reg is None or reg.epoch != request.broker_epoch
    if reg is not None and ImplBug.HEARTBEAT_ACCEPTS_OLDER_BROKER_EPOCH in bugs:
        stale = reg.epoch < request.broker_epoch  # the mistake: only a newer epoch than registered is refused
    if stale:
        return BrokerHeartbeatResponse(ApiError.STALE_BROKER_EPOCH), []
    epoch = BrokerEpoch(reg.epoch)
    leads = any(p.leader == b for p in image.partitions)
    caught_up = request.is_migrating_zk_broker or request.current_metadata_offset > reg.epoch
    records: list[MetadataRecord] = []
    shutdown_now = unfenced = False
    if reg.fenced:
        if request.want_shut_down:
            shutdown_now = True
        elif caught_up:
            records = [BrokerRegistrationChangeRecord(BrokerId(b), epoch, False)] + elect_leaderless(image, b)
            unfenced = True
    elif reg.in_controlled_shutdown or request.want_shut_down:
        if not leads:
            shutdown_now = True
            records = [BrokerRegistrationChangeRecord(BrokerId(b), epoch, True)] + move_leaders_off(image, b, True)
        elif not reg.in_controlled_shutdown:
            records = [BrokerRegistrationChangeRecord(BrokerId(b), epoch, None, True)]
            records += move_leaders_off(image, b, False)
    fenced = reg.fenced and not unfenced
    response = BrokerHeartbeatResponse(
        ApiError.NONE, is_caught_up=caught_up, is_fenced=fenced, should_shut_down=shutdown_now,
        in_controlled_shutdown=reg.in_controlled_shutdown, appended=bool(records), unfenced=unfenced,
    )
    return response, records


@decision("fence", "nothing", label=lambda records: "fence" if records else "nothing")
def decide_session_timeout(image: Image, broker: int) -> list[MetadataRecord]:
    """BrokerHeartbeatManager's session timeout (KIP-500 §Broker States: a broker whose heartbeats stopped is
    fenced): the records that fence ``broker`` and move its leaderships (none in pre-migration, where ZK
    brokers' partitions are ZooKeeper's), or none when it has no unfenced registration."""
    reg = image.registration(broker)
    if reg is None or reg.fenced:
        return []
    records: list[MetadataRecord] = [BrokerRegistrationChangeRecord(BrokerId(reg.broker_id),
                                                                    BrokerEpoch(reg.epoch), True)]
    if image.migration_state is not ZkMigrationState.PRE_MIGRATION:
        records += move_leaders_off(image, reg.broker_id, True)
    return records


@dataclass(frozen=True)
class Deferred:
    """A request in the purgatory: answered once the log's stable offset reaches ``offset``."""

    offset: int
    broker: int
    incarnation: int
    epoch: int  # a registration's answer; a heartbeat's: the epoch it was sent with
    heartbeat: BrokerHeartbeatResponse | None = None  # the heartbeat's decided response; None: a registration
    asked_shutdown: bool = False  # the heartbeat asked to shut down

    def abstract(self, rename: Callable[[int, int], int]) -> PendingAnswer:
        """The model's PendingAnswer (its HeartbeatAnswer is the registration after the heartbeat's records)."""
        answer = None
        r = self.heartbeat
        if r is not None:
            was_fenced = r.is_fenced or r.unfenced
            stops = not was_fenced and (self.asked_shutdown or r.should_shut_down)
            answer = HeartbeatAnswer(r.is_fenced or r.should_shut_down,
                                     (r.in_controlled_shutdown and not r.unfenced) or stops, r.should_shut_down)
        return PendingAnswer(BrokerId(self.broker), Incarnation(rename(self.broker, self.incarnation)),
                             BrokerEpoch(self.epoch), self.offset, answer)


class ControllerNode(Node):
    def __init__(
        self,
        node_id: int,
        config: dict[str, str],
        bootstrap_metadata_version: Ibp,
        max_lag: int,
        bugs: frozenset[ImplBug] = frozenset(),
        answer_at_commit: bool = False,
        heartbeats_at_commit: bool = False,
    ) -> None:
        self.node_id = node_id
        self.answer_at_commit = answer_at_commit
        self.heartbeats_at_commit = heartbeats_at_commit
        # requests waiting for the log up to them to be stable, in the order they came
        self.purgatory: list[Deferred] = []
        self.config = dict(config)
        self.bootstrap_metadata_version = bootstrap_metadata_version
        self.max_lag = max_lag
        self.bugs = bugs
        # the (level, upgrade type) an admin asks metadata.version updates for (an admin client's requests: the
        # node offers them while active, as AlterConfigs; the runner sets them from the scope)
        self.metadata_version_updates: tuple[tuple[Ibp, UpgradeType], ...] = ()
        self.created_replicas: tuple[BrokerId, ...] = ()  # an admin's CreatePartitions assignment (the scope's)
        # an admin's AlterPartitionReassignments (partition, target replicas: the scope's)
        self.reassignment: tuple[PartitionId, tuple[BrokerId, ...]] | None = None
        self.deletes_topic = False  # an admin's DeleteTopics of the one topic (a scope with topic deletions)
        self.notifications = Notifications()
        self.zk_session: int = 0  # opened by the runner at bootstrap
        self._alive = True
        self.raft = QuorumState(node_id, voter_ids(self.config))
        self.driver: KRaftMigrationDriver | None = self._new_driver()
        self.gates = Gates()  # its timers and backoffs (impl.pacing)
        # as the active controller: the brokers whose unfenced registration's session lapsed (BrokerHeartbeatManager)
        self.lapsed: set[int] = set()
        self._reset_election_timer(0)
        self._images_of: tuple = ()
        self._images: dict[int | None, Image] = {}

    # ---- configuration and reads -----------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return self._alive

    @property
    def migration_enabled(self) -> bool:
        return self.config.get(MIGRATION_FLAG, "false") == "true"

    @property
    def zk_configured(self) -> bool:
        return "zookeeper.connect" in self.config

    def is_active(self) -> bool:
        """It believes it is the active controller (a deposed leader does until an exchange tells it)."""
        return self._alive and self.raft.role is QuorumRole.LEADER and self.raft.active

    def awaiting_activation(self) -> bool:
        """It leads but Raft has not yet told QuorumController so: its LeaderChange has not committed."""
        return self._alive and self.raft.role is QuorumRole.LEADER and not self.raft.active

    def own_image(self) -> Image:
        """What the active controller decides from: its whole log, an open transaction counted."""
        return self.image_at().decided()

    def committed_image(self) -> Image:
        return self.image_at(self.raft.high_watermark)

    def image_at(self, upto: int | None = None) -> Image:
        """``image_at`` of its own log, remembered until the log changes (callers only read images)."""
        log = self.raft.log
        key = (id(log), len(log), self.raft.log_version)
        if key != self._images_of:
            self._images_of, self._images = key, {}
        image = self._images.get(upto)
        if image is None:
            image = self._images[upto] = image_at(log, upto)
        return image

    def migration_end(self) -> int | None:
        """The log end just after the migration's records, if they were appended."""
        log = self.raft.log
        for i, e in enumerate(log):
            if isinstance(e.record, ZkMigrationStateRecord) and e.record.state is ZkMigrationState.MIGRATION:
                ends = i + 1 < len(log) and isinstance(log[i + 1].record, EndTransactionRecord)
                return i + 2 if ends else i + 1
        return None

    @property
    def migration_batch_size(self) -> int:
        return int(self.config.get(MIGRATION_BATCH_SIZE, DEFAULT_MIGRATION_BATCH_SIZE))

    def migration_progress(self) -> tuple[int, int] | None:
        """None if this leadership has not begun copying ZooKeeper's data into the log; else how many of
        ZooKeeper's records it has appended, and the log end past the last of them (0: none)."""
        begun, copied, end = False, 0, 0
        for i, e in enumerate(self.raft.log):
            if e.epoch != self.raft.epoch:
                continue
            if isinstance(e.record, (PartitionRecord, ConfigRecord)):
                begun, copied, end = True, copied + 1, i + 1
            elif isinstance(e.record, BeginTransactionRecord):
                begun = True
        return (copied, end) if begun else None

    def writes_blocked(self, adding: int = 1) -> bool:
        """KIP-866 §Unavailable ZooKeeper: no metadata write may take the write-behind lag past its bound."""
        if self.own_image().migration_state is not ZkMigrationState.MIGRATION:
            return False
        known = self.migration_end() or 0
        if self.driver is not None:
            known = max(known, self.driver.migration_offset)
        lag = sum(1 for e in self.raft.log[known:] if _is_metadata(e.record))
        return lag + adding > self.max_lag

    # ---- what the migration driver sees (impl.kraft.driver.MigrationController) ----------------------

    def _new_driver(self) -> KRaftMigrationDriver | None:
        """A new process's driver, if its configuration asks for the migration."""
        controller: MigrationController = self
        if not self.migration_enabled:
            return None
        return KRaftMigrationDriver(self.node_id, controller, self.bugs, self.migration_batch_size)

    def quorum_epoch(self) -> int:
        return self.raft.epoch

    def published_image(self, kraft_epoch: int) -> Image:
        """The committed image without any record of a leadership newer than ``kraft_epoch``: Raft tells
        its listeners of a leader change before it hands them that leader's records."""
        raft = self.raft
        upto = raft.high_watermark
        while upto > 0 and raft.log[upto - 1].epoch > kraft_epoch:
            upto -= 1
        return self.image_at(upto)

    def append(self, records: list[MetadataRecord]) -> None:
        """ZkRecordConsumer.acceptBatch: the driver's records into the log, as the leader's own."""
        self.raft.append(records)

    def quorum_ready(self) -> Handler:
        """KIP-866 §Migration Trigger 5: every voter is up, with the flag and the ZooKeeper configs."""
        for v in self.raft.voters:
            if v == self.node_id:
                ready = self.migration_enabled and self.zk_configured
            else:
                response = yield Rpc(v, ApiVersionsRequest())
                ready = isinstance(response, ApiVersionsResponse) and response.zk_migration_ready
            if not ready:
                return False
        return True

    def _quorum_finalizing(self) -> Handler:
        """KIP-866 §Finalizing the Migration: every voter is up and runs without the flag."""
        for v in self.raft.voters:
            if v == self.node_id:
                finalizing = not self.migration_enabled
            else:
                response = yield Rpc(v, ApiVersionsRequest())
                finalizing = isinstance(response, ApiVersionsResponse) and not response.migration_enabled
            if not finalizing:
                return False
        return True

    # ---- events ----------------------------------------------------------------------------------

    def offers(self, now: int) -> list[Any]:
        """What its Raft client, QuorumController and migration driver would do next (KafkaRaftClient's
        poll, the controller's timers, the driver's events), each only in the state that runs it."""
        if not self._alive:
            return []
        g = self.gates
        g.begin()
        raft = self.raft
        c = ControllerId(self.node_id)
        others = [v for v in raft.voters if v != self.node_id]
        out: list[Any] = []
        if raft.role is not QuorumRole.LEADER and g.open(StartElection, now):
            out.append(StartElection(c))
        if raft.can_become_leader():
            out.append(BecomeLeader(c))
        if raft.role is QuorumRole.CANDIDATE:
            out += [RequestVote(c, ControllerId(v)) for v in others
                    if v not in raft.votes and g.open((RequestVote, v), now)]
        for v in others:
            # A follower fetches from its leader; from anyone else only once it has not heard from the
            # leader for the fetch timeout (another may lead now). A node that knows no leader asks around.
            if g.open((Fetch, v), now) and (v == raft.leader or raft.leader in (None, self.node_id)
                                            or g.open(StartElection, now)):
                out.append(Fetch(c, ControllerId(v)))
        if self.driver is not None:
            out += [a(c) for a in self._driver_events() if g.open(a, now)]
        if self.is_active():
            if g.open(AlterConfigs, now):
                out.append(AlterConfigs(c))
            # an admin's metadata.version updates (the scope's ``metadata_version_choices``), each at most once a poll
            out += [UpdateMetadataVersion(c, level, kind) for level, kind in self.metadata_version_updates
                    if g.open((UpdateMetadataVersion, level, kind), now)]
            if self.created_replicas and g.open(CreatePartitions, now):
                out.append(CreatePartitions(c, self.created_replicas))
            if self.reassignment is not None and g.open(AlterPartitionReassignments, now):
                out.append(AlterPartitionReassignments(c, *self.reassignment))
            if self.deletes_topic and g.open(DeleteTopics, now):
                out.append(DeleteTopics(c))
            image = self.own_image()
            # BrokerHeartbeatManager: a broker is fenced once broker.session.timeout.ms passed without a heartbeat.
            out += [SessionTimeout(BrokerId(b), c) for b in sorted(image.brokers)
                    if not image.brokers[b].fenced and g.open((SessionTimeout, b), now)]
        return out

    def next_deadline(self) -> int | None:
        """When a timer the last ``offers`` found running runs out (the simulator asks for offers again then)."""
        return self.gates.deadline()

    def _driver_events(self) -> list[type]:
        """The driver's next event, as KRaftMigrationDriver's poll decides it from its state."""
        d, raft = self.driver, self.raft
        if d.state is MigrationDriverState.UNINITIALIZED:
            return [RecoverMigrationState]
        due: list[type] = [RunMetadataChange] if d.queue else []  # queued only under FaultMix.queue_event
        if (d.kraft_epoch, d.leader) != (raft.epoch, self.is_active()):
            # (the mistake: an INACTIVE driver whose node led before takes its leading again for old news)
            deaf = ImplBug.INACTIVE_IGNORES_LEADERSHIP in self.bugs and d.state is MigrationDriverState.INACTIVE \
                and d.led and self.is_active()
            if not deaf:
                due.append(KRaftLeaderChange)
        if not d.leader:
            return due
        match d.state:
            case MigrationDriverState.WAIT_FOR_CONTROLLER_QUORUM:
                if not d.driver_image().is_empty():  # firstPublish (an empty image is not one: KAFKA-15389)
                    due.append(WaitForControllerQuorum)
            case MigrationDriverState.WAIT_FOR_BROKERS:
                due.append(WaitForZkBrokers)
            case MigrationDriverState.BECOME_CONTROLLER:
                due.append(BecomeZkController)
            case MigrationDriverState.ZK_MIGRATION:
                end = self.migration_end()
                progress = self.migration_progress()
                if end is None and self.is_active():
                    if progress is None:
                        due.append(MigrateMetadata)
                    elif not d.batches_remain():
                        due.append(CompleteMigration)
                    elif raft.high_watermark >= progress[1]:  # the last batch has committed
                        due.append(MigrateMetadata)
                if end is not None and raft.high_watermark >= end:
                    due.append(MigrationCommitted)
            case MigrationDriverState.SYNC_KRAFT_TO_ZK:
                if d.driver_image().offset >= d.migration_offset:
                    due.append(SyncKRaftToZk)
            case MigrationDriverState.KRAFT_CONTROLLER_TO_BROKER_COMM:
                newer = ImplBug.RPCS_WAIT_FOR_NEWER_OFFSET in self.bugs  # (the mistake: > instead of >=)
                if d.driver_image().offset > d.migration_offset or (not newer and
                                                                      d.driver_image().offset == d.migration_offset):
                    due.append(SendRPCsToBrokers)
            case MigrationDriverState.DUAL_WRITE:
                if d.driver_image().offset > d.migration_offset:  # a MetadataChangeEvent: new committed records
                    due.append(DualWrite)
        return due

    def _election_timeout(self, follower: bool) -> int:
        """controller.quorum.fetch.timeout.ms for a follower, else the election timeout, plus a fixed jitter."""
        key, default = ("controller.quorum.fetch.timeout.ms", FETCH_TIMEOUT_MS) if follower else \
            ("controller.quorum.election.timeout.ms", ELECTION_TIMEOUT_MS)
        election = int(self.config.get("controller.quorum.election.timeout.ms", ELECTION_TIMEOUT_MS))
        # Kafka draws the jitter at random within the election timeout; a node's own fixed share keeps it sans-IO.
        return int(self.config.get(key, default)) + (self.node_id * 397) % max(election, 1)

    def _reset_election_timer(self, now: int, follower: bool = False) -> None:
        self.gates.close(StartElection, now + self._election_timeout(follower))

    def _paced(self, action: Any, now: int, leader: int | None, done: bool) -> None:
        """After an attempt: the timer or backoff of that step (``leader``: the leader it knew before)."""
        g = self.gates
        match action:
            case StartElection():
                if done:
                    self._reset_election_timer(now)
            case RequestVote(voter=v):
                if not done:
                    g.fail((RequestVote, v), now)
            case Fetch(leader=v):
                if done:
                    g.succeed((Fetch, v))
                elif v == leader and self.raft.leader == v:
                    # Nothing new: the next fetch waits, longer while the log stays quiet (a long poll).
                    g.fail((Fetch, v), now, FETCH_WAIT_MS, self._election_timeout(True) // 2)
                else:
                    g.fail((Fetch, v), now, FETCH_TIMEOUT_MS, FETCH_TIMEOUT_MS * 4)
            case SessionTimeout(broker=b):
                g.close((SessionTimeout, b), now + BROKER_SESSION_TIMEOUT_MS)
            case AlterConfigs():
                g.close(AlterConfigs, now + POLL_MS)
            case UpdateMetadataVersion(level=level, upgrade_type=kind):
                g.close((UpdateMetadataVersion, level, kind), now + POLL_MS)
            case CreatePartitions():
                g.close(CreatePartitions, now + POLL_MS)
                if done:
                    self.created_replicas = ()  # the admin's one request: a run's partitions stay few
            case AlterPartitionReassignments():
                g.close(AlterPartitionReassignments, now + POLL_MS)
                if done:
                    self.reassignment = None  # the admin's one request
            case DeleteTopics():
                g.close(DeleteTopics, now + POLL_MS)
                if done:
                    self.deletes_topic = False  # the admin's one request
            case _ if done:
                g.succeed(type(action))
            case _:
                g.fail(type(action), now)

    def _heard_from_broker(self, broker: int, now: int) -> None:
        """BrokerHeartbeatManager.touch: the session is valid for another broker.session.timeout.ms."""
        self.gates.close((SessionTimeout, broker), now + BROKER_SESSION_TIMEOUT_MS)
        self.lapsed.discard(broker)

    def handle(self, event: Event) -> Handler:
        result = yield from self._handle(event)
        yield from self._settle_purgatory()
        return result

    def _settle_purgatory(self) -> Handler:
        """deferredEventQueue.completeUpTo(lastStableOffset), or failAll(NOT_CONTROLLER) once not the active
        controller."""
        if not self.purgatory:
            return
        active = self._alive and self.is_active()
        stable = self._stable_end()
        done = [p for p in self.purgatory if not active or p.offset <= stable]
        self.purgatory = [p for p in self.purgatory if p not in done]
        for p in done:
            error = ApiError.NONE if active else ApiError.NOT_CONTROLLER
            if p.heartbeat is not None:
                yield Rpc(p.broker, BrokerHeartbeatAnswer(p.broker, p.incarnation, error,
                                                          p.heartbeat if active else None))
            else:
                yield Rpc(p.broker, BrokerRegistrationAnswer(p.broker, p.incarnation, error,
                                                             p.epoch if active else -1))

    def _stable_end(self) -> int:
        """OffsetControlManager.lastStableOffset (a count of entries), as handleCommitBatch computes it: the high
        watermark, but not past the start of a transaction its committed log leaves open."""
        log, hw = self.raft.log, self.raft.high_watermark
        for i in range(hw - 1, -1, -1):
            if isinstance(log[i].record, (EndTransactionRecord, AbortTransactionRecord)):
                break
            if isinstance(log[i].record, BeginTransactionRecord):
                return i
        return hw

    def forget_answer(self, request: Any) -> None:
        """The connection of ``request`` is gone (its response lost): its answer, if deferred, goes nowhere."""
        if isinstance(request, (BrokerRegistrationRequest, BrokerHeartbeatRequest)):
            heartbeat = isinstance(request, BrokerHeartbeatRequest)
            self.purgatory = [p for p in self.purgatory if p.broker != request.broker_id
                              or (p.heartbeat is not None) != heartbeat]

    def _handle(self, event: Event) -> Handler:
        match event:
            case Perform(action=action):
                return (yield from self._perform(event, action))
            case RpcRequest(request=request):
                return (yield from self._serve(event, request))
            case Crash():
                if self._alive:
                    self._process_stops()
                    yield Trace(CrashController(ControllerId(self.node_id)))
            case Stop():
                yield from self._shutdown(event)
            case Start():
                if not self._alive:
                    self._alive = True
                    self.raft.restart()
                    self.gates = Gates()
                    self._reset_election_timer(event.now)
                    self.driver = self._new_driver()
                    yield Trace(RestartController(ControllerId(self.node_id)))
            case Reconfigure(changes=changes):
                yield from self._reconfigure(changes)
        return None

    def _process_stops(self) -> None:
        self._alive = False
        self.raft.process_stops()
        self.driver = None
        self.notifications.clear()

    def _shutdown(self, event: Event) -> Handler:
        """A clean stop. KIP-866 §Rollback to ZK: the leader stops only once ZooKeeper has every committed record."""
        if not self._alive:
            return
        if self.is_active() and self.driver is not None:
            if self.committed_image().migration_state is ZkMigrationState.MIGRATION:
                try:
                    data, _ = yield GetData(self.zk_session, MIGRATION)
                    offset = decode(MIGRATION, data).kraft_metadata_offset
                except ConnectionLoss:
                    # Differs: the model reads /migration even while ZooKeeper is down; the driver knows
                    # what it last read or wrote there (the same value with one controller).
                    offset = self.driver.migration_offset
                except NoNode:
                    return
                if offset < self.raft.high_watermark:
                    return
        self._process_stops()
        yield Trace(ShutdownController(ControllerId(self.node_id)))

    def _reconfigure(self, changes: tuple[tuple[str, str], ...]) -> Handler:
        if self._alive:
            return
        updated = dict(self.config)
        updated.update(changes)
        enabled = updated.get(MIGRATION_FLAG, "false") == "true"
        if enabled == self.migration_enabled:
            return
        self.config = updated
        yield Trace(ReconfigureController(ControllerId(self.node_id), enabled))

    def _perform(self, event: Perform, action: Any) -> Handler:
        if getattr(action, "controller", None) != self.node_id or not self._alive:
            return None
        handler = self._ACTIONS.get(type(action))
        if handler is None:
            return None
        leader = self.raft.leader
        try:
            done = yield from handler(self, event, action)
        except ZkError:
            done = False  # ZooKeeper unavailable: refused before anything changed
        self._paced(action, event.now, leader, bool(done))
        if done:
            yield Trace(action)
        return None

    # ---- the quorum ------------------------------------------------------------------------------

    def _start_election(self, event: Perform, action: StartElection) -> Handler:
        return self.raft.start_election()
        yield  # pragma: no cover - makes this a generator

    def _request_vote(self, event: Perform, action: RequestVote) -> Handler:
        """One Vote round trip (KafkaRaftClient.handleVoteRequest / handleVoteResponse)."""
        raft, voter = self.raft, action.voter
        if voter == self.node_id or raft.role is not QuorumRole.CANDIDATE or voter in raft.votes:
            return False
        response = yield Rpc(voter, raft.vote_request())
        if not isinstance(response, VoteResponse):
            return False
        return raft.handle_vote_response(voter, response)

    def _become_leader(self, event: Perform, action: BecomeLeader) -> Handler:
        if not self.raft.can_become_leader():
            return False
        self.raft.become_leader()
        yield from self._maybe_fire_leader_change(event.now)  # a quorum of one has committed it already
        return True

    def _maybe_fire_leader_change(self, now: int) -> Handler:
        """KafkaRaftClient.pollLeader: once the LeaderChange record has committed, QuorumController's
        QuorumMetaLogListener.handleLeaderChange hears that it leads, and the controller activates."""
        if not self.raft.leader_change_due():
            return
        yield from self._activate()
        self.lapsed.clear()  # activate() builds a new BrokerHeartbeatManager
        if self.is_active():
            for b in self.own_image().brokers:  # BrokerHeartbeatManager starts every broker's session afresh
                self._heard_from_broker(b, now)

    def _activate(self) -> Handler:
        """QuorumController's activation (ActivationRecordsGenerator): bootstrap the log, or check it.

        Raft tells it of its leadership only once everything before its LeaderChange has committed,
        so the log it reads here is the committed one.
        """
        image = self.committed_image()
        flag = self.migration_enabled
        records: list[MetadataRecord] = []
        if image.open_transaction is not None:
            # KIP-866 §Initial Data Migration: the next active controller aborts the unfinished migration.
            records.append(AbortTransactionRecord())
        if image.metadata_version is None:  # an empty log: bootstrap
            records.append(FeatureLevelRecord(METADATA_VERSION, self.bootstrap_metadata_version))
            state = ZkMigrationState.PRE_MIGRATION if flag else ZkMigrationState.NONE
            records.append(ZkMigrationStateRecord(state))
        else:
            current = image.migration_state
            if current.in_progress and not flag:
                finalizing = current is ZkMigrationState.MIGRATION and (yield from self._quorum_finalizing())
                if not finalizing:
                    # KIP-866 §Misconfigurations: a migration is in progress and this controller lacks the flag.
                    self.raft.resign()
                    return
                records.append(ZkMigrationStateRecord(ZkMigrationState.POST_MIGRATION))
        self.raft.active = True
        if records:
            self.raft.append(records)

    def _fetch(self, event: Perform, action: Fetch) -> Handler:
        """One Fetch exchange: the epoch check, truncation where the logs diverge, replication, the HW."""
        raft, leader = self.raft, action.leader
        if leader == self.node_id:
            return False
        before = raft.snapshot()
        leader_changed = False
        while True:
            response = yield Rpc(leader, raft.fetch_request(acknowledge=True))
            if not isinstance(response, FetchResponse):
                return False
            leader_changed = leader_changed or response.leader_changed
            if response.error is ApiError.FENCED_LEADER_EPOCH:
                return leader_changed  # the deposed leader learned of this voter's newer epoch
            if response.error is not ApiError.NONE:
                return False
            raft.follow(response.leader_epoch, leader)
            self._reset_election_timer(event.now, follower=True)  # it heard from the leader
            if response.diverging_epoch < 0:
                raft.replicate(response.records, response.high_watermark)
                break
            raft.truncate(response.diverging_epoch, response.diverging_end_offset)
        return leader_changed or raft.snapshot() != before

    # ---- brokers ---------------------------------------------------------------------------------

    def _session_timeout(self, event: Perform, action: SessionTimeout) -> Handler:
        """maybeFenceOneStaleBroker: fence a registration whose heartbeats stopped, and say so to the broker; or
        (``fence=False``) only its session lapses."""
        if not self.is_active():
            return False
        image = self.own_image()
        records = decide_session_timeout(image, action.broker)
        if not action.fence:
            return self._lapse(action.broker, bool(records))
        if not records or self.writes_blocked(len(records)):
            return False
        self.raft.append(records)
        self.lapsed.discard(action.broker)  # BrokerHeartbeatManager drops a fenced broker from its sessions
        reg = image.registration(action.broker)
        yield Rpc(reg.broker_id, BrokerSessionTimedOut(reg.broker_id, reg.incarnation_id, reg.epoch))
        return True

    def _lapse(self, broker: int, unfenced: bool) -> bool:
        """BrokerHeartbeatManager.hasValidSession turns false for ``broker``'s unfenced registration."""
        if not unfenced or broker in self.lapsed:
            return False
        self.lapsed.add(broker)
        return True

    def _lapse_on_registration(self, request: BrokerRegistrationRequest, now: int) -> Handler:
        """A new incarnation's registration finds the old one's session timer run out: the session has lapsed
        (hasValidSession reads the clock), whether or not the fencing loop has run since."""
        b = request.broker_id
        existing = self.own_image().registration(b) if self.is_active() else None
        if existing is None or existing.incarnation_id == request.incarnation_id \
                or not self.gates.passed((SessionTimeout, b), now):
            return
        if self._lapse(b, not existing.fenced):
            yield Trace(SessionTimeout(BrokerId(b), ControllerId(self.node_id), fence=False))

    def _register_broker(self, request: BrokerRegistrationRequest) -> BrokerRegistrationResponse:
        """ClusterControlManager.registerBroker (reference §3.1; KIP-866 §Broker Registration)."""
        if not self.is_active():
            return BrokerRegistrationResponse(ApiError.NOT_CONTROLLER)
        image = self.own_image()
        error, record = decide_broker_registration(image, request, self.migration_enabled, len(self.raft.log),
                                                   self.bugs, frozenset(self.lapsed))
        if error is not ApiError.NONE:
            return BrokerRegistrationResponse(error)
        if record is None:
            return self._answer(request, image.registration(request.broker_id).epoch)
        if self.writes_blocked():
            return BrokerRegistrationResponse(ApiError.THROTTLING_QUOTA_EXCEEDED)
        self.raft.append([record])
        return self._answer(request, record.epoch)

    def _answer(self, request: BrokerRegistrationRequest, epoch: int) -> BrokerRegistrationResponse:
        """The epoch now, or (``answer_at_commit``) once the log up to its end commits: ControllerWriteEvent's future
        completes at its last record's offset, a write with no record at the purgatory's highest one."""
        offset = len(self.raft.log)
        deferred = self.answer_at_commit and ImplBug.REGISTRATION_ANSWERED_BEFORE_COMMIT not in self.bugs
        if not deferred or offset <= self._stable_end():
            # Differs (as the model): without answer_at_commit, Kafka answers once the record commits; this at once.
            return BrokerRegistrationResponse(ApiError.NONE, epoch)
        self.purgatory.append(Deferred(offset, request.broker_id, request.incarnation_id, epoch))
        return BrokerRegistrationResponse(ApiError.NONE, deferred=True)

    def _broker_heartbeat(self, request: BrokerHeartbeatRequest) -> BrokerHeartbeatResponse:
        """BrokerHeartbeatManager.calculateNextBrokerState and its records (reference §3.2, KIP-500 §Broker
        States); with ``heartbeats_at_commit`` answered once the log up to its end is stable (processBrokerHeartbeat's
        future in the deferred event queue: at its last record, or, with none, at the queue's highest offset)."""
        if not self.is_active():
            return BrokerHeartbeatResponse(ApiError.NOT_CONTROLLER)
        image = self.own_image()
        response, records = decide_broker_heartbeat(image, request, self.bugs)
        if records:
            if self.writes_blocked(len(records)):
                return BrokerHeartbeatResponse(ApiError.THROTTLING_QUOTA_EXCEEDED)
            self.raft.append(records)
        offset = len(self.raft.log)
        deferred = self.heartbeats_at_commit and ImplBug.HEARTBEAT_ANSWERED_BEFORE_COMMIT not in self.bugs
        if response.error is not ApiError.NONE or not deferred or offset <= self._stable_end():
            return response
        # the process that asked holds the registration's epoch, so it is the registration's incarnation
        incarnation = image.registration(request.broker_id).incarnation_id
        self.purgatory.append(Deferred(offset, request.broker_id, incarnation, request.broker_epoch, response,
                                       request.want_shut_down))
        return BrokerHeartbeatResponse(ApiError.NONE, appended=response.appended, deferred=True)

    def _metadata_fetch(self, request: MetadataFetchRequest) -> MetadataFetchResponse:
        """A broker fetches committed metadata from the leader (a deposed one serves what it has)."""
        raft = self.raft
        if raft.role is not QuorumRole.LEADER:
            return MetadataFetchResponse(ApiError.NOT_LEADER_OR_FOLLOWER)
        hw = raft.high_watermark
        if ImplBug.METADATA_FETCH_PAST_HIGH_WATERMARK in self.bugs:
            hw = len(raft.log)  # the mistake: the log end, committed or not
        if request.fetch_offset >= hw:
            return MetadataFetchResponse(ApiError.NONE, hw)
        committed = raft.log[:hw]
        diverging = diverging_point(committed, request.fetch_offset, request.last_fetched_epoch)
        if diverging is not None:
            return MetadataFetchResponse(ApiError.NONE, hw, *diverging)
        return MetadataFetchResponse(ApiError.NONE, hw, records=tuple(committed[request.fetch_offset:]))

    # ---- admin requests --------------------------------------------------------------------------

    def _alter_configs(self, event: Perform, action: AlterConfigs) -> Handler:
        if not self.is_active() or self.writes_blocked():
            return False
        image = self.own_image()
        if decide_write(image) is ApiError.NONE:
            self.raft.append([ConfigRecord((image.config or 0) + 1)])
        return True  # answered, refused or not
        yield  # pragma: no cover - makes this a generator

    def _create_partitions(self, event: Perform, action: CreatePartitions) -> Handler:
        """A new partition with the admin's assignment: its active replicas the ISR, the first the leader."""
        if not self.is_active() or self.writes_blocked():
            return False
        image = self.own_image()
        if decide_create_partitions(image, action.replicas) is ApiError.NONE:
            reg = image.brokers
            isr = tuple(r for r in action.replicas if not reg[r].fenced and not reg[r].in_controlled_shutdown)
            self.raft.append([PartitionRecord(len(image.partitions), isr[0], isr, LeaderEpoch(0), action.replicas)])
        return True  # answered, refused or not
        yield  # pragma: no cover - makes this a generator

    def _alter_partition_reassignments(self, event: Perform, action: AlterPartitionReassignments) -> Handler:
        """changePartitionReassignment: a PartitionChangeRecord with the target followed by the replicas it drops,
        the adding and removing replicas, leader and ISR kept; completed at once when the ISR holds the target
        (``reassignment_change``). A partition copied from ZooKeeper and never moved has no replicas in the image:
        its move starts from the assignment ZooKeeper holds, read in the same event (as the model reads it)."""
        if not self.is_active() or self.writes_blocked():
            return False
        image = self.own_image()
        p = action.partition
        if decide_alter_partition_reassignments(image, p, action.replicas) is ApiError.NONE:
            part = image.partitions[p]
            current = part.replicas
            if not current:
                from impl.codec import decode

                try:
                    data, _ = yield GetData(self.zk_session, TOPIC)
                except NoNode:
                    data = None
                assignment = () if data is None else decode(TOPIC, data)
                current = tuple(assignment[p]) if p < len(assignment) else ()
            removing = tuple(sorted(set(current) - set(action.replicas)))
            adding = tuple(sorted(set(action.replicas) - set(current)))
            record = reassignment_change(image, p, current, action.replicas + removing, adding, removing, part.isr,
                                         self.migration_enabled, self.bugs)
            if record is not None:
                self.raft.append([record])
        return True  # answered, refused or not

    def _alter_partition(self, request: AlterPartitionRequest) -> AlterPartitionResponse:
        """ReplicationControlManager.alterPartition, for the ISR join of a reassignment's adding replica: the leader
        at the image's leader epoch asks, the replica is adding, outside the ISR and may lead (registered, unfenced,
        not shutting down: INELIGIBLE_REPLICA); the record completes the reassignment once every adding replica is
        in."""
        if not self.is_active():
            return AlterPartitionResponse(ApiError.NOT_CONTROLLER)
        if self.writes_blocked():
            return AlterPartitionResponse(ApiError.THROTTLING_QUOTA_EXCEEDED)
        image = self.own_image()
        if request.partition >= len(image.partitions):
            return AlterPartitionResponse(ApiError.UNKNOWN_TOPIC_OR_PARTITION)
        part = image.partitions[request.partition]
        if part.leader != request.broker_id:
            return AlterPartitionResponse(ApiError.NOT_LEADER_OR_FOLLOWER)
        if part.leader_epoch != request.leader_epoch:
            return AlterPartitionResponse(ApiError.FENCED_LEADER_EPOCH)
        r = request.joining
        # Differs: Kafka takes any ISR within the replicas; here only an adding replica outside the ISR joins.
        if r not in part.adding or r in part.isr:
            return AlterPartitionResponse(ApiError.INVALID_REQUEST)
        if not _acceptable(image, r):
            return AlterPartitionResponse(ApiError.INELIGIBLE_REPLICA)
        record = reassignment_change(image, request.partition, part.replicas, part.replicas, part.adding,
                                     part.removing, part.isr + (r,), self.migration_enabled, self.bugs)
        if record is None:
            return AlterPartitionResponse(ApiError.NONE)
        self.raft.append([record])
        return AlterPartitionResponse(ApiError.NONE, appended=True)

    def _delete_topics(self, event: Perform, action: DeleteTopics) -> Handler:
        """A RemoveTopicRecord for the one topic; in dual write the driver deletes it from ZooKeeper and sends the ZK
        brokers StopReplica with deletePartitions."""
        if not self.is_active() or self.writes_blocked():
            return False
        if decide_delete_topics(self.own_image()) is ApiError.NONE:
            self.raft.append([RemoveTopicRecord(TOPIC_NAME)])
        return True  # answered, refused or not
        yield  # pragma: no cover - makes this a generator

    def _update_metadata_version(self, event: Perform, action: UpdateMetadataVersion) -> Handler:
        if not self.is_active() or self.writes_blocked():
            return False
        image = self.own_image()
        refused = decide_metadata_version(image, action.level, action.upgrade_type, self.bugs) is not ApiError.NONE
        if not refused and action.level != image.metadata_version:
            self.raft.append([FeatureLevelRecord(METADATA_VERSION, action.level)])
        return True
        yield  # pragma: no cover - makes this a generator

    # ---- requests from other nodes ---------------------------------------------------------------

    def _serve(self, event: RpcRequest, request: Any) -> Handler:
        if not self._alive:
            return None
        match request:
            case VoteRequest():
                response = self.raft.handle_vote(request, ImplBug.VOTE_IGNORES_LOG in self.bugs)
                if response.vote_granted:
                    self._reset_election_timer(event.now)
                return response
            case FetchRequest():
                response = self.raft.handle_fetch(request)
                yield from self._maybe_fire_leader_change(event.now)  # the fetch may have committed LeaderChange
                return response
            case ApiVersionsRequest():
                return ApiVersionsResponse(self.migration_enabled and self.zk_configured, self.migration_enabled)
            case BrokerRegistrationRequest():
                yield from self._lapse_on_registration(request, event.now)
                response = self._register_broker(request)
                if response.error is ApiError.NONE:
                    self._heard_from_broker(request.broker_id, event.now)
                return response
            case BrokerHeartbeatRequest():
                response = self._broker_heartbeat(request)
                forgotten = request.is_migrating_zk_broker and ImplBug.TIMEOUT_IGNORES_ZK_BROKER_HEARTBEATS in self.bugs
                if response.error is ApiError.NONE and not forgotten:
                    self._heard_from_broker(request.broker_id, event.now)
                return response
            case MetadataFetchRequest():
                return self._metadata_fetch(request)
            case AlterPartitionRequest():
                return self._alter_partition(request)
        raise TypeError(f"not a request a KRaft controller serves: {request!r}")
        yield  # pragma: no cover - makes this a generator

    _ACTIONS: dict[type, Any] = {}

    # ---- metrics (KIP-866 §Metrics) ---------------------------------------------------------------

    def metrics(self) -> dict[str, int | None]:
        """Its MBeans: the migration's are reported only while it believes it is the active controller."""
        report: dict[str, int | None] = dict.fromkeys(MIGRATION_METRICS)
        report[ACTIVE_CONTROLLER_COUNT] = int(self.is_active()) if self._alive else None
        report[CURRENT_EPOCH] = self.raft.epoch if self._alive else None
        if not self.is_active():
            return report
        image = self.committed_image()  # ControllerMetadataMetrics: the published image
        report[ZK_MIGRATION_STATE] = STATE_BYTES[Profile.KIP][image.migration_state]
        report[MIGRATING_ZK_BROKER_COUNT] = sum(
            1 for r in image.brokers.values() if r.is_migrating_zk_broker and not r.fenced)
        dual = self.driver is not None and self.driver.state in (MigrationDriverState.KRAFT_CONTROLLER_TO_BROKER_COMM,
                                                                 MigrationDriverState.DUAL_WRITE)
        report[CONTROLLER_METADATA_TYPE] = DUAL if dual else KRAFT
        report[ZK_WRITE_BEHIND_LAG] = self.zk_write_behind_lag(self._dual_write_offset())
        return report

    def _dual_write_offset(self) -> int | None:
        """Kafka's dualWriteOffset: /migration's offset as its driver last wrote or read it (None: never read)."""
        driver = self.driver
        if driver is None or driver.state is MigrationDriverState.UNINITIALIZED:
            return None
        return driver.migration_offset

    def zk_write_behind_lag(self, zk_offset: int | None) -> int | None:
        """Committed metadata records past ``zk_offset``; reported only by the active controller while migrating."""
        if zk_offset is None or not self.is_active():
            return None
        if self.committed_image().migration_state is not ZkMigrationState.MIGRATION:
            return None
        return sum(1 for e in self.raft.log[max(zk_offset, 0):self.raft.high_watermark] if _is_metadata(e.record))

    # ---- the refinement map ----------------------------------------------------------------------

    def abstract(self, view: Any) -> KRaftController:
        raft = self.raft

        def rename(broker: int, incarnation: int) -> int:
            return view.incarnation(broker, incarnation)

        log = tuple(LogEntry(e.epoch, rename_record(e.record, rename)) for e in raft.log)
        return KRaftController(
            id=ControllerId(self.node_id),
            config=ControllerConfig(self.migration_enabled, self.bootstrap_metadata_version, self.zk_configured,
                                    self.migration_batch_size),
            alive=self._alive,
            epoch=KRaftEpoch(raft.epoch),
            voted_for=None if raft.voted_for is None else ControllerId(raft.voted_for),
            log=log,
            role=raft.role,
            leader=None if raft.leader is None else ControllerId(raft.leader),
            votes=frozenset(ControllerId(v) for v in raft.votes),
            high_watermark=raft.high_watermark,
            fetched=tuple(raft.fetched),
            active=raft.active,
            driver=None if self.driver is None else self.driver.abstract(),
            pending=tuple(p.abstract(rename) for p in self.purgatory),
            lapsed=frozenset(BrokerId(b) for b in self.lapsed) if self.is_active() else frozenset(),
        )


def _driver_event(handler: Callable[[KRaftMigrationDriver, int], Handler]):
    """The handler of a driver action: the driver's event method (refused without a driver)."""

    def run(node: ControllerNode, event: Perform, action: Any) -> Handler:
        if node.driver is None:
            return False
        return (yield from handler(node.driver, event.now))

    return run


ControllerNode._ACTIONS = {
    StartElection: ControllerNode._start_election,
    RequestVote: ControllerNode._request_vote,
    BecomeLeader: ControllerNode._become_leader,
    Fetch: ControllerNode._fetch,
    SessionTimeout: ControllerNode._session_timeout,
    AlterConfigs: ControllerNode._alter_configs,
    UpdateMetadataVersion: ControllerNode._update_metadata_version,
    CreatePartitions: ControllerNode._create_partitions,
    AlterPartitionReassignments: ControllerNode._alter_partition_reassignments,
    DeleteTopics: ControllerNode._delete_topics,
    **{
        action: _driver_event(handler)
        for action, handler in (
            (RecoverMigrationState, KRaftMigrationDriver.recover_migration_state),
            (KRaftLeaderChange, KRaftMigrationDriver.kraft_leader_change),
            (WaitForControllerQuorum, KRaftMigrationDriver.wait_for_controller_quorum),
            (WaitForZkBrokers, KRaftMigrationDriver.wait_for_zk_brokers),
            (BecomeZkController, KRaftMigrationDriver.become_zk_controller),
            (MigrateMetadata, KRaftMigrationDriver.migrate_metadata),
            (CompleteMigration, KRaftMigrationDriver.complete_migration),
            (MigrationCommitted, KRaftMigrationDriver.migration_committed),
            (SyncKRaftToZk, KRaftMigrationDriver.sync_kraft_to_zk),
            (SendRPCsToBrokers, KRaftMigrationDriver.send_rpcs_to_brokers),
            (DualWrite, KRaftMigrationDriver.dual_write),
            (DualWriteSessionExpired, KRaftMigrationDriver.dual_write_session_expired),
            (DualWriteReplyLost, KRaftMigrationDriver.dual_write_reply_lost),
            (PublishMetadataChange, KRaftMigrationDriver.publish_metadata_change),
            (RunMetadataChange, KRaftMigrationDriver.run_metadata_change),
        )
    },
}


# ---- partition changes a broker's state causes (ReplicationControlManager) ---------------------------

class PartitionChangeBuilder:
    """ReplicationControlManager's PartitionChangeBuilder, for one partition: a target ISR, a leader
    election among acceptable replicas, and a PartitionChangeRecord only if something changed."""

    def __init__(self, partition_id: int, current: Partition, acceptable: Callable[[int], bool]) -> None:
        self.partition_id, self.current, self.acceptable = partition_id, current, acceptable
        self.target_isr = current.isr
        self.target_leader = current.leader

    def shrink_isr(self, broker: int) -> PartitionChangeBuilder:
        self.target_isr = tuple(r for r in self.target_isr if r != broker)
        return self

    def elect_leader(self) -> PartitionChangeBuilder:
        """The first acceptable member of the target ISR (in ISR order). With none, the partition goes
        offline and keeps its ISR: Kafka never empties it, so a clean election stays possible."""
        for replica in self.target_isr:
            if self.acceptable(replica):
                self.target_leader = replica
                return self
        self.target_leader, self.target_isr = NO_LEADER, self.current.isr
        return self

    def build(self) -> PartitionChangeRecord | None:
        if (self.target_leader, self.target_isr) == (self.current.leader, self.current.isr):
            return None
        return PartitionChangeRecord(self.partition_id, BrokerId(self.target_leader), self.target_isr,
                                     LeaderEpoch(self.current.leader_epoch + 1))


def _acceptable(image: Image, b: int) -> bool:
    """LeaderAcceptor: registered, unfenced and not in controlled shutdown."""
    reg = image.brokers.get(b)
    return reg is not None and not reg.fenced and not reg.in_controlled_shutdown


def reassignment_change(
    image: Image, p: int, current: tuple[int, ...], replicas: tuple[int, ...], adding: tuple[int, ...],
    removing: tuple[int, ...], isr: tuple[int, ...], migration_enabled: bool, bugs: frozenset[ImplBug],
) -> PartitionChangeRecord | None:
    """PartitionChangeBuilder.build for partition ``p`` moving from ``current`` to ``replicas`` with ``adding`` and
    ``removing`` at ``isr``: completeReassignmentIfNeeded (once the ISR less the removing replicas holds the
    replicas kept: those are the replicas and the ISR, adding and removing cleared), tryElection (a leader outside
    the ISR gives way to the first kept replica in it that may lead), and the leader epoch bumped at a new leader,
    when replicas leave, or at any move while the migration is enabled (so a ZK broker takes the LeaderAndIsr).
    None when nothing changes."""
    part = image.partitions[p]
    # A partition copied from ZooKeeper has no replicas in the image (``Partition.replicas``): it holds ``current``
    # as Kafka's image would, so a move to the assignment it has is no change (changeRecordIsNoOp), as in the model.
    part = replace(part, replicas=part.replicas or current)
    if adding or removing:
        kept_isr = tuple(r for r in isr if r not in removing)
        kept = tuple(r for r in replicas if r not in removing)
        # (the mistake: the completion check skipped, a reassignment ends before its adding replicas joined)
        early = ImplBug.REASSIGNMENT_COMPLETES_EARLY in bugs
        if kept_isr and kept and (set(kept) <= set(kept_isr) or early):
            replicas, isr, adding, removing = kept, kept_isr, (), ()
    leader = part.leader
    if leader not in isr:
        leader = next((r for r in replicas if r in isr and _acceptable(image, r)), NO_LEADER)
    moves = replicas != current and migration_enabled and ImplBug.REASSIGNMENT_KEEPS_LEADER_EPOCH not in bugs
    bump = leader != part.leader or not set(current) <= set(replicas) or moves
    record = PartitionChangeRecord(
        p, BrokerId(leader), isr, LeaderEpoch(part.leader_epoch + bump),
        tuple(BrokerId(r) for r in replicas) if replicas != part.replicas else (),
        tuple(BrokerId(r) for r in adding) if adding != part.adding else None,
        tuple(BrokerId(r) for r in removing) if removing != part.removing else None)
    if record == PartitionChangeRecord(p, BrokerId(part.leader), part.isr, LeaderEpoch(part.leader_epoch)):
        return None
    return record


def move_leaders_off(image: Image, b: int, drop_from_isr: bool) -> list[MetadataRecord]:
    """generateLeaderAndIsrUpdates for a broker going away: its leaderships move to an active ISR
    member (it leaves the ISR of those), and when it is fenced it leaves every ISR."""
    active = set(image.unfenced()) - {b}
    records: list[MetadataRecord] = []
    for p, partition in enumerate(image.partitions):
        leads = partition.leader == b
        if not leads and not (drop_from_isr and b in partition.isr):
            continue
        builder = PartitionChangeBuilder(p, partition, active.__contains__).shrink_isr(b)
        if leads:
            builder.elect_leader()
        change = builder.build()
        if change is not None:
            records.append(change)
    return records


def elect_leaderless(image: Image, b: int) -> list[MetadataRecord]:
    """generateLeaderAndIsrUpdates for a broker unfenced: offline partitions it is in the ISR of elect it."""
    records: list[MetadataRecord] = []
    for p, partition in enumerate(image.partitions):
        if partition.leader == NO_LEADER and b in partition.isr:
            change = PartitionChangeBuilder(p, partition, lambda r: r == b).elect_leader().build()
            if change is not None:
                records.append(change)
    return records


def _is_metadata(rec: MetadataRecord) -> bool:
    """Records that carry metadata (what the write-behind lag counts), not Raft or transaction markers."""
    return not isinstance(rec, (LeaderChangeMessage, BeginTransactionRecord, EndTransactionRecord,
                                AbortTransactionRecord))
