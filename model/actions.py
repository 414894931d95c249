"""The closed set of actions, each a protocol step named as Kafka or ZooKeeper names it.

Every action carries who acts. Perturbations (the environment breaking things) spend budget;
healing actions and protocol steps never do. ``PERTURBATIONS`` lists the former, which the
liveness checks leave out of fairness. ``Action`` is the union of ``ZkEraAction`` and
``KRaftAction``, whose order is the catalogue's (``ACTION_TYPES``). Each handler module takes one
closed union and ends in ``assert_never`` over it: ``ZkEraAction`` (``model.zk_era``),
``KRaftQuorumAction`` (``model.kraft_quorum``) and ``MigrationAction`` (``model.kraft_migration``);
the last two split ``KRaftAction`` between them, which is checked when this module loads.
"""

from __future__ import annotations

from typing import TypeGuard

from model.kraft import ControllerId, UpgradeType
from model.record import Record, record
from model.state import BrokerHeartbeatRequest, LeaderAndIsr, Message
from model.types import BrokerId, FeatureLevel, Ibp, PartitionId, SessionId

# ---- the environment ----------------------------------------------------------------------


@record
class ZkOutage(Record):
    """ZooKeeper loses its quorum: nothing can be read or written. (perturbation)"""


@record
class ZkRecover(Record):
    """ZooKeeper serves again."""


@record
class ZkServerLags(Record):
    """The ZooKeeper server a KRaft controller's client reads from stops applying transactions: its reads
    show the tree as it is now until its server catches up or it writes. (perturbation)"""

    controller: ControllerId


@record
class ZkServerCatchesUp(Record):
    """That server has applied every transaction: the controller reads the leader's tree again."""

    controller: ControllerId


@record
class BrokerZkServerLags(Record):
    """The ZooKeeper server a ZooKeeper-mode broker's session is connected to stops applying transactions, while
    the broker is not the controller: its reads (/controller, /controller_epoch, its own /brokers/ids znode,
    /features) show the tree as it is now until the server catches up or the broker writes. (perturbation)"""

    broker: BrokerId


@record
class BrokerZkServerCatchesUp(Record):
    """That server has applied every transaction: the broker reads the leader's tree again."""

    broker: BrokerId


@record
class ExpireSession(Record):
    """ZooKeeper expires a session: its ephemerals and watches are gone. (perturbation)"""

    session: SessionId


@record
class Drop(Record):
    """The network loses a message. (perturbation)"""

    message: Message


@record
class Deliver(Record):
    """The network delivers a message, in any order relative to the others."""

    message: Message


@record
class LeaderAndIsrFailsInBroker(Record):
    """A ZK broker handles a KRaft controller's LeaderAndIsr for a partition it follows while its ZooKeeper session
    is expired (its client starting a new one): the request also names a partition new to it, whose log it cannot
    create (the topic config read throws), and it answers UNKNOWN_SERVER_ERROR. kip: nothing changed; kafka-3.9: it
    took the new leader epoch and started no fetcher (``LocalReplica.no_fetcher``). (perturbation)"""

    message: LeaderAndIsr


@record
class Redeliver(Record):
    """The network delivers a copy of a message that stays in flight: a request resent after a
    reconnect (Kafka's RequestSendThread resends until it gets a response). (perturbation)"""

    message: Message


# ---- broker processes ----------------------------------------------------------------------


@record
class CrashBroker(Record):
    """The process dies without closing its ZooKeeper session. (perturbation)"""

    broker: BrokerId


@record
class StopBroker(Record):
    """The operator stops the broker cleanly: its session closes at once. (perturbation)"""

    broker: BrokerId


@record
class RestartBroker(Record):
    """A stopped or crashed broker starts again with an empty memory."""

    broker: BrokerId


@record
class ChangeIbp(Record):
    """The operator edits inter.broker.protocol.version of a stopped broker. (perturbation)"""

    broker: BrokerId
    ibp: Ibp


@record
class OpenSession(Record):
    """The broker opens a ZooKeeper session (at start-up or after its session expired)."""

    broker: BrokerId


@record
class RegisterBroker(Record):
    """The broker creates its ephemeral /brokers/ids/<id>; the znode's czxid is its epoch (KIP-380)."""

    broker: BrokerId


@record
class SendControlledShutdown(Record):
    """The broker asks the controller to move its leaderships away (KIP-380 ControlledShutdown v2). (perturbation)"""

    broker: BrokerId


@record
class RefreshFeatureCache(Record):
    """The broker reads /features after its watch fired (KIP-584 FinalizedFeatureChangeListener)."""

    broker: BrokerId


# ---- the ZooKeeper controller ----------------------------------------------------------------


@record
class ObserveControllerEpoch(Record):
    """A broker that sees no /controller reads /controller_epoch before trying to win."""

    broker: BrokerId


@record
class ElectController(Record):
    """Create the ephemeral /controller and bump /controller_epoch by compare-and-set, in one multi."""

    broker: BrokerId


@record
class ResignController(Record):
    """A controller learns that it lost /controller (or its session) and steps down."""

    broker: BrokerId


@record
class InitializeController(Record):
    """onControllerFailover: set up feature versioning (KIP-584), read the brokers, arm the watch."""

    controller: BrokerId


@record
class ProcessBrokerChange(Record):
    """Handle a /brokers/ids child notification: classify new, dead and bounced brokers (KIP-380)."""

    controller: BrokerId


@record
class ElectPartitionLeader(Record):
    """Elect a live ISR replica for a partition whose leader is not live, and tell the replicas."""

    controller: BrokerId
    partition: PartitionId


@record
class AddPartitions(Record):
    """An admin's CreatePartitions served by a ZooKeeper-mode broker (ZkAdminManager, AdminZkClient.addPartitions):
    a new partition with ``replicas`` appended to /brokers/topics/t. Its state znode is the controller's to create
    (``ProcessPartitionModifications``). (perturbation)"""

    broker: BrokerId
    replicas: tuple[BrokerId, ...]


@record
class ProcessPartitionModifications(Record):
    """KafkaController.processPartitionModifications: the ZK controller starts the partitions /brokers/topics/t
    assigns that have no state znode yet (onNewPartitionCreation): state znodes, LeaderAndIsr, UpdateMetadata."""

    controller: BrokerId


@record
class MarkTopicDeletion(Record):
    """An admin's DeleteTopics served by a ZooKeeper-mode broker (ZkAdminManager.deleteTopics,
    AdminZkClient.deleteTopic): /admin/delete_topics/t created; the ZK controller deletes the topic later
    (``TopicDeletion``). (perturbation)"""

    broker: BrokerId


@record
class TopicDeletion(Record):
    """KafkaController's TopicDeletion event (TopicDeletionManager): the ZK controller deletes the topic marked in
    /admin/delete_topics: its znodes and the mark in a fenced write, StopReplica with deletePartitions to its live
    replicas, UpdateMetadata without its partitions to every live broker."""

    controller: BrokerId


@record
class ApiPartitionReassignment(Record):
    """An admin's AlterPartitionReassignments on the ZK controller (KafkaController's ApiPartitionReassignment
    event, onPartitionReassignment): partition ``partition`` moved to ``replicas``, its assignment written to
    /brokers/topics/t and its leader epoch bumped, LeaderAndIsr to its replicas. (perturbation)"""

    controller: BrokerId
    partition: PartitionId
    replicas: tuple[BrokerId, ...]


@record
class UpdateFeatures(Record):
    """An operator's UpdateFeatures request, handled by whoever believes it is the controller. (perturbation)"""

    controller: BrokerId
    feature: str
    level: FeatureLevel
    allow_downgrade: bool


# ---- the KRaft quorum (KIP-500 §Controller Quorum; reference §7) ------------------------------


@record
class StartElection(Record):
    """A voter's election timeout fires: a candidate in the next epoch, voting for itself. (perturbation)"""

    controller: ControllerId


@record
class RequestVote(Record):
    """One Vote exchange: the voter grants it if it has not voted in this epoch and the candidate's log is as fresh."""

    controller: ControllerId  # the candidate
    voter: ControllerId


@record
class BecomeLeader(Record):
    """A candidate with a majority leads and appends LeaderChange; it activates once that commits."""

    controller: ControllerId


@record
class Fetch(Record):
    """One Fetch exchange: the follower truncates where it diverges, copies the leader's log, the HW moves."""

    controller: ControllerId  # the follower
    leader: ControllerId


@record
class CrashController(Record):
    """A KRaft controller dies; its quorum-state file and log survive. (perturbation)"""

    controller: ControllerId


@record
class ShutdownController(Record):
    """The operator stops a KRaft controller cleanly; a leader waits until ZooKeeper has caught up. (perturbation)"""

    controller: ControllerId


@record
class RestartController(Record):
    """A stopped KRaft controller starts again from its persisted epoch, vote and log."""

    controller: ControllerId


@record
class ReconfigureController(Record):
    """The operator sets zookeeper.metadata.migration.enable on a stopped controller. (perturbation)"""

    controller: ControllerId
    migration_enabled: bool


# ---- the migration driver (KRaftMigrationDriver; reference §1.4) ------------------------------


@record
class RecoverMigrationState(Record):
    """UNINITIALIZED -> INACTIVE: read /migration, creating it when absent."""

    controller: ControllerId


@record
class KRaftLeaderChange(Record):
    """The driver handles a KRaftLeaderEvent: INACTIVE, or WAIT_FOR_CONTROLLER_QUORUM when this node leads."""

    controller: ControllerId


@record
class WaitForControllerQuorum(Record):
    """Decide from the committed migration state and the quorum's readiness where the driver goes."""

    controller: ControllerId


@record
class WaitForZkBrokers(Record):
    """Every known ZK broker (live or named in an assignment) has registered with KRaft: go claim."""

    controller: ControllerId


@record
class BecomeZkController(Record):
    """Claim ZooKeeper controllership: CAS /controller_epoch + 1 and write a persistent /controller, in one multi."""

    controller: ControllerId


@record
class MigrateMetadata(Record):
    """Begin the migration transaction and copy ZooKeeper's metadata into the log."""

    controller: ControllerId


@record
class CompleteMigration(Record):
    """Append ZkMigrationStateRecord(MIGRATION) and end the transaction."""

    controller: ControllerId


@record
class MigrationCommitted(Record):
    """The migration transaction is committed: record its offset in /migration."""

    controller: ControllerId


@record
class SyncKRaftToZk(Record):
    """Reconcile ZooKeeper with the whole committed image, read and compared (after any failover), fenced as a
    dual write."""

    controller: ControllerId


@record
class SendRPCsToBrokers(Record):
    """A full UpdateMetadata, then full LeaderAndIsr, to every registered ZK broker."""

    controller: ControllerId


@record
class DualWrite(Record):
    """Write the change since /migration's offset (the delta, ZooKeeper unread), with its new offset, in one fenced
    multi."""

    controller: ControllerId


@record
class PublishMetadataChange(Record):
    """Queue a MetadataChangeEvent with the committed image and Raft's current leader and epoch (KAFKA-16667).

    The metadata publisher hands the driver the image; the event waits in the driver's queue. (perturbation)"""

    controller: ControllerId


@record
class DualWriteSessionExpired(Record):
    """A MetadataChangeEvent's dual write fails: ZooKeeper stalled past the controller's session timeout while the
    write waited, and the session had expired when it answered (ZooKeeperClientExpiredException). Nothing is
    written, no RPC sent. (perturbation)"""

    controller: ControllerId


@record
class DualWriteReplyLost(Record):
    """A MetadataChangeEvent's dual write applies in ZooKeeper but its reply is lost (the connection timed out while
    ZooKeeper stalled): the client resends the multi after CONNECTIONLOSS (KafkaZkClient.retryRequestsUntilConnected),
    and the copy fails its check on /migration's version, which the first copy bumped. (perturbation)"""

    controller: ControllerId


@record
class RunMetadataChange(Record):
    """Run the queue's head MetadataChangeEvent: dropped if stale (Kafka 3.8+), else a dual write of its image.

    Stale: raised under a leader and epoch other than Raft's current ones."""

    controller: ControllerId


# ---- brokers talking to the KRaft controller ------------------------------------------------


@record
class RegisterWithKRaft(Record):
    """BrokerRegistration to the active controller (a ZK broker sets IsMigratingZkBroker)."""

    broker: BrokerId
    controller: ControllerId


@record
class RegisterController(Record):
    """ControllerRegistration (KIP-919) to the active controller, which appends a RegisterControllerRecord;
    sent once the controller's committed metadata.version supports it (3.7-IV0) and its registration there
    is missing or not what it would send. kafka-3.9 only."""

    controller: ControllerId  # the one registering
    leader: ControllerId  # the active controller it sends to


@record
class BrokerHeartbeat(Record):
    """BrokerHeartbeat with the exact broker epoch: unfence, start or finish a controlled shutdown."""

    broker: BrokerId
    controller: ControllerId


@record
class RegistrationResponseLost(Record):
    """A BrokerRegistration the active controller accepted, whose response is lost: the controller's side
    happened (its RegisterBrokerRecord appended), the broker's did not; it registers again with the same
    incarnation, as BrokerLifecycleManager does on a timeout. (perturbation)"""

    broker: BrokerId
    controller: ControllerId


@record
class HeartbeatResponseLost(Record):
    """A BrokerHeartbeat whose records the active controller appended (an unfencing, a controlled shutdown),
    whose response is lost: the broker keeps the state it had and heartbeats again. (perturbation)"""

    broker: BrokerId
    controller: ControllerId


@record
class HoldHeartbeat(Record):
    """A BrokerHeartbeat the network holds: it is in flight (``ClusterState.held``) and the broker, whose request
    timed out, learned nothing and heartbeats again; the held one reaches the controller later
    (``DeliverHeartbeat``), maybe after the broker registered again with a new epoch. (perturbation)"""

    broker: BrokerId
    controller: ControllerId


@record
class DeliverHeartbeat(Record):
    """A held BrokerHeartbeat reaches the controller it was sent to, with the broker epoch it was sent with. Its
    answer goes nowhere: BrokerLifecycleManager takes only the answer to its current request, and the sender's
    timed out long ago (or the sender is a process that is gone)."""

    request: BrokerHeartbeatRequest


@record
class FetchMetadata(Record):
    """A KRaft broker replays the committed metadata the leader has."""

    broker: BrokerId
    controller: ControllerId


@record
class SessionTimeout(Record):
    """The active controller fences a broker whose heartbeats stopped (a live one's were lost: perturbation);
    ``fence=False``: its session only lapses (BrokerHeartbeatManager.hasValidSession turns false), the fencing
    record comes later, if at all."""

    broker: BrokerId
    controller: ControllerId
    fence: bool = True


@record
class BeginControlledShutdown(Record):
    """A KRaft broker gets SIGINT: Stopping, and its heartbeats ask to shut down. (perturbation)"""

    broker: BrokerId


@record
class MigrateBrokerToKRaft(Record):
    """The operator turns a stopped ZK broker into a KRaft broker (meta.properties stays v0). (perturbation)"""

    broker: BrokerId


@record
class RollbackBrokerToZk(Record):
    """The operator turns a stopped KRaft broker back into a ZK broker (rollback). (perturbation)"""

    broker: BrokerId


@record
class AlterConfigs(Record):
    """An admin's IncrementalAlterConfigs on the active controller (refused in pre-migration). (perturbation)"""

    controller: ControllerId


@record
class CreatePartitions(Record):
    """An admin's CreatePartitions on the active controller with a manual assignment: a PartitionRecord for a new
    partition with ``replicas`` (refused in pre-migration). (perturbation)"""

    controller: ControllerId
    replicas: tuple[BrokerId, ...]


@record
class AlterPartitionReassignments(Record):
    """An admin's AlterPartitionReassignments on the active controller (ReplicationControlManager): a
    PartitionChangeRecord giving ``partition`` the replicas ``replicas`` (refused in pre-migration). (perturbation)"""

    controller: ControllerId
    partition: PartitionId
    replicas: tuple[BrokerId, ...]


@record
class AlterPartition(Record):
    """``broker``, leading ``partition``, asks the active controller ``controller`` to add ``replica``, an adding
    replica of a reassignment that has caught up, to the ISR (AlterPartition, ReplicationControlManager
    .alterPartition); the record completes the reassignment once every adding replica is in. Enabled while
    ``broker`` leads the partition at the image's leader epoch and ``replica`` is registered and unfenced."""

    broker: BrokerId
    controller: ControllerId
    partition: PartitionId
    replica: BrokerId


@record
class DeleteTopics(Record):
    """An admin's DeleteTopics of the one topic on the active controller (ReplicationControlManager.deleteTopics): a
    RemoveTopicRecord (refused in pre-migration); in dual write the driver deletes it from ZooKeeper and sends the ZK
    brokers StopReplica with deletePartitions. (perturbation)"""

    controller: ControllerId


@record
class UpdateMetadataVersion(Record):
    """An admin's UpdateFeatures for metadata.version on the active controller. (perturbation)"""

    controller: ControllerId
    level: Ibp
    upgrade_type: UpgradeType = UpgradeType.UPGRADE


@record
class DeleteControllerZNodes(Record):
    """Rollback's last step: the operator removes the KRaft /controller (and /controller_epoch). (perturbation)"""


# The actions of the ZooKeeper era: ZooKeeper itself, the network, ZooKeeper-mode brokers and their controller
# (``model.zk_era``).
ZkEraAction = (
    ZkOutage
    | ZkRecover
    | ZkServerLags
    | ZkServerCatchesUp
    | BrokerZkServerLags
    | BrokerZkServerCatchesUp
    | ExpireSession
    | Drop
    | Redeliver
    | Deliver
    | LeaderAndIsrFailsInBroker
    | CrashBroker
    | StopBroker
    | RestartBroker
    | ChangeIbp
    | OpenSession
    | RegisterBroker
    | SendControlledShutdown
    | RefreshFeatureCache
    | ObserveControllerEpoch
    | ElectController
    | ResignController
    | InitializeController
    | ProcessBrokerChange
    | ElectPartitionLeader
    | UpdateFeatures
    | AddPartitions
    | ProcessPartitionModifications
    | ApiPartitionReassignment
    | MarkTopicDeletion
    | TopicDeletion
)

# The actions of the KRaft side, in the catalogue's order: the quorum, its migration driver, brokers on KRaft,
# and the operator's steps of KIP-866's runbooks. ``KRaftQuorumAction`` and ``MigrationAction`` below split
# it between the two modules that handle it.
KRaftAction = (
    StartElection
    | RequestVote
    | BecomeLeader
    | Fetch
    | CrashController
    | ShutdownController
    | RestartController
    | ReconfigureController
    | RecoverMigrationState
    | KRaftLeaderChange
    | WaitForControllerQuorum
    | WaitForZkBrokers
    | BecomeZkController
    | MigrateMetadata
    | CompleteMigration
    | MigrationCommitted
    | SyncKRaftToZk
    | SendRPCsToBrokers
    | DualWrite
    | DualWriteSessionExpired
    | DualWriteReplyLost
    | PublishMetadataChange
    | RunMetadataChange
    | RegisterWithKRaft
    | RegisterController
    | BrokerHeartbeat
    | RegistrationResponseLost
    | HeartbeatResponseLost
    | HoldHeartbeat
    | DeliverHeartbeat
    | FetchMetadata
    | SessionTimeout
    | BeginControlledShutdown
    | MigrateBrokerToKRaft
    | RollbackBrokerToZk
    | AlterConfigs
    | UpdateMetadataVersion
    | DeleteControllerZNodes
    | CreatePartitions
    | AlterPartitionReassignments
    | AlterPartition
    | DeleteTopics
)

# The KRaft quorum and what its active controller decides: Raft, brokers on KRaft, admin writes
# (``model.kraft_quorum``).
KRaftQuorumAction = (
    StartElection
    | RequestVote
    | BecomeLeader
    | Fetch
    | CrashController
    | ShutdownController
    | RestartController
    | RegisterWithKRaft
    | RegisterController
    | BrokerHeartbeat
    | RegistrationResponseLost
    | HeartbeatResponseLost
    | HoldHeartbeat
    | DeliverHeartbeat
    | FetchMetadata
    | SessionTimeout
    | BeginControlledShutdown
    | AlterConfigs
    | UpdateMetadataVersion
    | CreatePartitions
    | AlterPartitionReassignments
    | AlterPartition
    | DeleteTopics
)

# The ZooKeeper-to-KRaft migration: the driver's events and the operator's runbook steps (``model.kraft_migration``).
MigrationAction = (
    ReconfigureController
    | RecoverMigrationState
    | KRaftLeaderChange
    | WaitForControllerQuorum
    | WaitForZkBrokers
    | BecomeZkController
    | MigrateMetadata
    | CompleteMigration
    | MigrationCommitted
    | SyncKRaftToZk
    | SendRPCsToBrokers
    | DualWrite
    | DualWriteSessionExpired
    | DualWriteReplyLost
    | PublishMetadataChange
    | RunMetadataChange
    | MigrateBrokerToKRaft
    | RollbackBrokerToZk
    | DeleteControllerZNodes
)

Action = ZkEraAction | KRaftAction

ZK_ERA_ACTION_TYPES: tuple[type, ...] = ZkEraAction.__args__
KRAFT_ACTION_TYPES: tuple[type, ...] = KRaftAction.__args__
KRAFT_QUORUM_ACTION_TYPES: tuple[type, ...] = KRaftQuorumAction.__args__
MIGRATION_ACTION_TYPES: tuple[type, ...] = MigrationAction.__args__

_ZK_ERA = frozenset(ZK_ERA_ACTION_TYPES)
_KRAFT_QUORUM = frozenset(KRAFT_QUORUM_ACTION_TYPES)
_MIGRATION = frozenset(MIGRATION_ACTION_TYPES)
if _KRAFT_QUORUM & _MIGRATION or _KRAFT_QUORUM | _MIGRATION != frozenset(KRAFT_ACTION_TYPES):
    raise AssertionError("KRaftQuorumAction and MigrationAction must split KRaftAction between them")


def is_zk_era_action(action: object) -> TypeGuard[ZkEraAction]:
    return type(action) in _ZK_ERA


def is_kraft_quorum_action(action: object) -> TypeGuard[KRaftQuorumAction]:
    return type(action) in _KRAFT_QUORUM


def is_migration_action(action: object) -> TypeGuard[MigrationAction]:
    return type(action) in _MIGRATION


ACTION_TYPES: tuple[type, ...] = Action.__args__

PERTURBATIONS: frozenset[type] = frozenset(
    {
        ZkOutage,
        ZkServerLags,
        BrokerZkServerLags,
        PublishMetadataChange,
        DualWriteSessionExpired,
        DualWriteReplyLost,
        ExpireSession,
        Drop,
        Redeliver,
        LeaderAndIsrFailsInBroker,
        CrashBroker,
        StopBroker,
        ChangeIbp,
        UpdateFeatures,
        SendControlledShutdown,
        StartElection,
        CrashController,
        ShutdownController,
        ReconfigureController,
        SessionTimeout,
        RegistrationResponseLost,
        HeartbeatResponseLost,
        HoldHeartbeat,
        BeginControlledShutdown,
        MigrateBrokerToKRaft,
        RollbackBrokerToZk,
        AlterConfigs,
        UpdateMetadataVersion,
        DeleteControllerZNodes,
        AddPartitions,
        CreatePartitions,
        ApiPartitionReassignment,
        AlterPartitionReassignments,
        DeleteTopics,
        MarkTopicDeletion,
    }
)


def actor(action: Action) -> BrokerId | None:
    """The broker that takes the action, if one does."""
    for name in ("broker", "controller"):
        if hasattr(action, name):
            who = getattr(action, name)
            assert isinstance(who, int)
            return BrokerId(who)
    return None
