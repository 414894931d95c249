"""A Kafka broker process in ZooKeeper mode (``KafkaServer``), and its KRaft side during a migration.

How it works:
- ``BrokerNode`` is a sans-IO node (``impl.protocol``): one event is one step, its ZooKeeper
  calls and messages are effects, and it names the model step it committed with a ``Trace``.
  A guard that does not hold (ZooKeeper says no, or the process is in the wrong state) yields
  no trace: a stutter.
- What it holds in memory is what a KafkaServer holds: its ZooKeeper session and whether it
  registered in it, its broker epoch (the czxid of /brokers/ids/<id>, KIP-380), the newest
  controller epoch it accepted a request from, its replicas (leader epoch and role per
  partition), the metadata cache of the last UpdateMetadata, the finalized-feature cache
  (KIP-584), and, when it won /controller, the controller role (``impl.zk_controller``).
  A crash or a stop loses all of it; the configuration and meta.properties stay.
- Connectivity is learned from ZooKeeper itself: a read raises ``SessionExpired`` when the
  session is gone and ``ConnectionLoss`` when ZooKeeper is unavailable; either refuses a step
  that needs a live session. The node never asks for a watch the model does not arm (only the
  controller's /brokers/ids child watch), so the watch tables agree.
- Control requests (LeaderAndIsr, UpdateMetadata, StopReplica) are checked as KafkaApis does
  (``decide_control_request``): broker epoch first (STALE_BROKER_EPOCH when addressed to an
  earlier generation; -1 is accepted), then controller epoch (STALE_CONTROLLER_EPOCH). Until the
  process knows its own epoch it does not serve them: the message stays in flight (``DEFER``).
- Each rule's decision is a pure function of what the process knows, named ``decide_*``
  (``decide_control_request``, ``decide_feature_cache_update``); the handlers carry it out.
- KRaft-facing work (registering with the KRaft quorum, heartbeats, metadata fetches) is done
  by ``impl.kraft_broker.KRaftBrokerClient`` (``self.kraft``), created at each process start;
  the node delegates those actions to it and merges its fields into the abstraction.

Seeds: KIP-380 (broker generations), KIP-584 (feature versioning), KIP-866 §Broker Migration and
§Rollback to ZK.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, assert_never

from impl.bugs import ImplBug
from impl.codec import IBP_BY_NAME, decode, encode
from impl.decisions import decision
from impl.metrics import (
    ACTIVE_CONTROLLER_COUNT,
    BROKER_METADATA_TYPE,
    CONTROLLER_METADATA_TYPE,
    KRAFT,
    ZOOKEEPER,
)
from impl.pacing import POLL_MS, Gates, committed, earliest
from impl.protocol import (
    DEFER,
    Crash,
    Event,
    Handler,
    Node,
    Notifications,
    Perform,
    Receive,
    Reconfigure,
    RpcRequest,
    Send,
    Start,
    Stop,
    Trace,
    nothing,
)
from impl.zk.port import (
    ANY_VERSION,
    CloseSession,
    ConnectionLoss,
    CreateOp,
    CreateSession,
    Exists,
    GetChildren,
    GetData,
    Multi,
    NoNode,
    SessionExpired,
    SetDataOp,
    ZkCode,
)
from impl.zk_controller import (
    KafkaController,
    incompatible_features,
    read_controller_epoch,
    read_features,
    register_controller_and_increment_controller_epoch,
)
from model.actions import (
    Action,
    AddPartitions,
    AlterPartition,
    ApiPartitionReassignment,
    BeginControlledShutdown,
    BrokerHeartbeat,
    ChangeIbp,
    CrashBroker,
    ElectController,
    ElectPartitionLeader,
    FetchMetadata,
    InitializeController,
    MarkTopicDeletion,
    MigrateBrokerToKRaft,
    ObserveControllerEpoch,
    OpenSession,
    ProcessBrokerChange,
    ProcessPartitionModifications,
    RefreshFeatureCache,
    RegisterBroker,
    RegisterWithKRaft,
    ResignController,
    RestartBroker,
    RollbackBrokerToZk,
    SendControlledShutdown,
    StopBroker,
    TopicDeletion,
    UpdateFeatures,
)
from model.kraft import EMPTY_IMAGE, TOPIC_NAME, BrokerState
from model.migration import pending_deletion_path
from model.state import (
    BROKER_IDS,
    CONTROLLER,
    CONTROLLER_EPOCH,
    TOPIC,
    Broker,
    BrokerConfig,
    BrokerRegistration,
    ControlledShutdown,
    ControllerRole,
    FeatureCache,
    FeatureRanges,
    FeaturesZNode,
    LeaderAndIsr,
    LiveBroker,
    LocalReplica,
    StopReplica,
    UpdateMetadata,
    broker_path,
)
from model.types import (
    NO_SESSION,
    UNKNOWN_BROKER_EPOCH,
    BrokerEpoch,
    BrokerId,
    ControllerEpoch,
    Errors,
    FeatureEpoch,
    FeatureLevel,
    FeatureStatus,
    Ibp,
    LeaderEpoch,
    PartitionId,
    ReplicaRole,
    ZkVersion,
)

try:  # written by another engineer; part-1 scopes run without it
    from impl.kraft.rpc import BROKER_REQUESTS
    from impl.kraft_broker import KRaftBrokerClient
except ImportError:  # pragma: no cover - until impl/kraft_broker.py exists
    KRaftBrokerClient = None  # type: ignore[assignment,misc]
    BROKER_REQUESTS = ()

SESSION_TIMEOUT_MS = 6_000  # zookeeper.session.timeout.ms when the config does not say
KRAFT_ACTIONS = (RegisterWithKRaft, BrokerHeartbeat, FetchMetadata, BeginControlledShutdown, AlterPartition)
# Fields of the model's Broker the node keeps itself even when the KRaft client reports them.
_NODE_FIELDS = frozenset({"metadata_live", "meta_properties"})


def _flag(config: dict[str, str], key: str) -> bool:
    return config.get(key, "false").strip().lower() == "true"


# ---- decisions: pure functions of what the process knows ----------------------------------------

@decision("NONE", "STALE_BROKER_EPOCH", "STALE_CONTROLLER_EPOCH")
def decide_control_request(own_broker_epoch: int, own_controller_epoch: int,
                           request: LeaderAndIsr | UpdateMetadata | StopReplica,
                           bugs: frozenset[ImplBug] = frozenset()) -> Errors:
    """Whether the broker applies a control request, checked as KafkaApis does: the broker epoch first, then
    the controller epoch (KIP-380 §Broker Rejects Control Requests; KAFKA-6082 for the controller epoch).

    ``own_broker_epoch`` is the epoch the request must be addressed to: the czxid of the broker's
    registration, or for a request marked IsKRaftController the epoch KRaft gave it (reference §4).
    A newer epoch than its own and UNKNOWN_BROKER_EPOCH (-1) are accepted, as shipped Kafka does.
    """
    older = request.broker_epoch != UNKNOWN_BROKER_EPOCH and request.broker_epoch < own_broker_epoch
    if older and ImplBug.ACCEPT_OLDER_BROKER_EPOCH not in bugs:
        return Errors.STALE_BROKER_EPOCH
    if request.controller_epoch < own_controller_epoch and ImplBug.ACCEPT_STALE_CONTROLLER_EPOCH not in bugs:
        return Errors.STALE_CONTROLLER_EPOCH
    return Errors.NONE


class FeatureCacheUpdate(Enum):
    """What FinalizedFeatureChangeListener does with a /features znode it read (KIP-584 §Broker protections)."""

    UNCHANGED = "unchanged"  # the version it holds: nothing to do
    REFUSED = "refused"  # an older version than it holds: FeatureCacheUpdateException, the cache stays
    DISABLED = "disabled"  # the znode says Disabled: nothing is finalized
    INCOMPATIBLE = "incompatible"  # a finalized range this software cannot run: the broker exits
    UPDATED = "updated"  # the cache takes the znode's finalized features


@decision("UNCHANGED", "REFUSED", "DISABLED", "INCOMPATIBLE", "UPDATED")
def decide_feature_cache_update(cached_epoch: int, znode: FeaturesZNode, version: int,
                                supported: FeatureRanges) -> FeatureCacheUpdate:
    """The feature cache never goes back in epoch, and a broker never runs with finalized features it does not
    support (KIP-584 §Broker protections: FinalizedFeatureCache.updateOrThrow, BrokerFeatures.incompatibleFeatures)."""
    if version == cached_epoch:
        return FeatureCacheUpdate.UNCHANGED
    if version < cached_epoch:
        return FeatureCacheUpdate.REFUSED
    if znode.status is FeatureStatus.DISABLED:
        return FeatureCacheUpdate.DISABLED
    if incompatible_features(supported, znode.finalized):
        return FeatureCacheUpdate.INCOMPATIBLE
    return FeatureCacheUpdate.UPDATED


class BrokerNode(Node):
    def __init__(self, broker_id: int, config: dict[str, str], supported: FeatureRanges,
                 bugs: frozenset[ImplBug] = frozenset()) -> None:
        self.node_id = broker_id
        self.broker_id = broker_id
        self.config = dict(config)
        self.supported = supported  # what this broker's software supports (KIP-584), not a config
        self.bugs = bugs
        # the UpdateFeatures requests an admin sends while this broker is the controller (feature, level,
        # allow_downgrade): an admin client's, offered as the controller's; the runner sets them from the scope
        self.feature_updates: tuple[tuple[str, int, bool], ...] = ()
        # an admin's CreatePartitions assignment (the scope's), sent through this broker once in its life
        self.created_replicas: tuple[BrokerId, ...] = ()
        self.creates_partitions = False  # the cluster's admin may add partitions (the scope's created_replicas)
        # an admin's AlterPartitionReassignments (partition, target replicas: the scope's), sent to this broker's
        # ZK controller once in its life
        self.reassignment: tuple[PartitionId, tuple[BrokerId, ...]] | None = None
        # a reassignment may be made (the scope's): leading a partition, it asks for its replicas' ISR joins
        self.joins_isr = False
        # an admin's DeleteTopics of the one topic, sent through this broker once in its life, and the controller's
        # TopicDeletion polled for (a scope with topic deletions)
        self.deletes_topic = False
        self.topic_deletions = False
        self.notifications = Notifications()
        # persisted: survives the process
        self.meta_properties = 0  # meta.properties version in the log dirs (KIP-866 §Meta.Properties)
        # Partitions it has been told of, past the scope's: the model's per-partition tuple grows with a partition
        # created since (model.state.with_replica) and keeps its length across restarts, so the abstraction does.
        self.replica_slots = 0
        self.incarnation = 0  # the id of the current process, when it talks to KRaft
        self._probe_session: int | None = None  # the last session this host opened: asks ZooKeeper if it serves
        self._alive = True
        self._fresh_process()
        self.kraft = self._new_kraft_client()

    # ---- configuration -------------------------------------------------------------------------

    @property
    def ibp(self) -> Ibp:
        return IBP_BY_NAME[self.config["inter.broker.protocol.version"]]

    @property
    def kraft_mode(self) -> bool:
        return "broker" in [r.strip() for r in self.config.get("process.roles", "").split(",") if r.strip()]

    @property
    def migration_enabled(self) -> bool:
        return _flag(self.config, "zookeeper.metadata.migration.enable")

    @property
    def controller_configs(self) -> bool:
        return bool(self.config.get("controller.quorum.voters", "").strip()) and \
            bool(self.config.get("controller.listener.names", "").strip())

    @property
    def model_config(self) -> BrokerConfig:
        return BrokerConfig(self.ibp, self.supported, self.kraft_mode, self.migration_enabled, self.controller_configs)

    # ---- process lifecycle -----------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return self._alive

    def _fresh_process(self) -> None:
        """What a process holds in memory, as it starts: nothing learned yet."""
        self.session: int | None = None
        self.registered = False
        self.epoch = UNKNOWN_BROKER_EPOCH  # czxid of our registration (impl zxid)
        self.controller_epoch = 0
        # partition -> (leader epoch, role, replicas: what its last LeaderAndIsr carried, () when it carried none)
        self.replicas: dict[int, tuple[int, ReplicaRole, tuple[BrokerId, ...]]] = {}
        self.metadata: tuple = ()
        self.features = (-1, FeatureStatus.DISABLED, ())  # (epoch, status, finalized)
        self.shutdown_sent = False
        self.observed_epoch: tuple[int, int] | None = None
        self.controller: KafkaController | None = None
        self.metadata_live: tuple[BrokerId, ...] = ()
        self.session_lost = False  # a read of its session said SessionExpired (ZooKeeper's Expired event)
        self.gates = Gates()  # when it tries a step again (impl.pacing)
        self.elections_won = 0  # how often this process became the controller

    def _new_kraft_client(self):
        if KRaftBrokerClient is None:
            return None
        return KRaftBrokerClient(self.broker_id, self.incarnation, self.kraft_mode)

    def die(self) -> None:
        """The process is gone (a crash, a fatal error, a shutdown): memory and queued events with it."""
        self._fresh_process()
        self._alive = False
        self.notifications.clear()
        if self.kraft is not None:
            self.kraft.process_stopped()

    def exit_process(self) -> None:
        """A heartbeat answered ShouldShutDown: the process exits without closing its ZooKeeper session."""
        self.die()

    # ---- the node contract -----------------------------------------------------------------------

    def offers(self, now: int) -> list[Action]:
        if not self._alive:
            return []
        b = BrokerId(self.broker_id)
        if self.kraft_mode:  # process.roles=broker: no ZooKeeper client (KIP-866 §Broker Migration)
            return self.kraft.offers(self, now) if self.kraft is not None else []
        g = self.gates
        g.begin()
        out: list[Action] = []
        # (the mistake: a restarted broker takes the session its host had before for its own, and never opens one)
        waits = ImplBug.RESTARTED_BROKER_KEEPS_DEAD_SESSION in self.bugs and self.session is None \
            and self._probe_session is not None
        if not waits and self._due(OpenSession, now, known=self.session is None or self.session_lost):
            out.append(OpenSession(b))
        if self.session is not None:
            if not self.registered and self._due(RegisterBroker, now, known=True):
                out.append(RegisterBroker(b))
            if self._due(RefreshFeatureCache, now):
                out.append(RefreshFeatureCache(b))
            if self.registered and not self.shutdown_sent and self._due(SendControlledShutdown, now, known=True):
                out.append(SendControlledShutdown(b))
            if self.registered and self.created_replicas and g.open(AddPartitions, now):
                out.append(AddPartitions(b, self.created_replicas))
            if self.registered and self.deletes_topic and g.open(MarkTopicDeletion, now):
                out.append(MarkTopicDeletion(b))
            if self.registered and self.controller is None:
                if self.observed_epoch is None and self._due(ObserveControllerEpoch, now):
                    out.append(ObserveControllerEpoch(b))
                if self.observed_epoch is not None and self._due(ElectController, now, known=True):
                    out.append(ElectController(b))
        role = self.controller
        if role is not None:
            if self._due(ResignController, now, known=self.session_lost):
                out.append(ResignController(b))
            if not role.initialized:
                if self._due(InitializeController, now, known=True):
                    out.append(InitializeController(b))
            else:
                # (the mistake: the broker-change handler, unregistered at a resignation, is not registered again)
                deaf = ImplBug.REELECTED_CONTROLLER_IGNORES_BROKER_CHANGE in self.bugs and self.elections_won > 1
                if not deaf and self.notifications.has(BROKER_IDS, "child") and \
                        self._due(ProcessBrokerChange, now, known=True):
                    out.append(ProcessBrokerChange(b))
                out += [ElectPartitionLeader(b, PartitionId(p)) for p in range(role.partitions)
                        if self._due((ElectPartitionLeader, p), now, known=role.may_elect(p))]
                # (polled: the model arms no data watch on the topic; only where an admin may add partitions)
                if self.creates_partitions and self._due(ProcessPartitionModifications, now):
                    out.append(ProcessPartitionModifications(b))
                if self.reassignment is not None and g.open(ApiPartitionReassignment, now):
                    out.append(ApiPartitionReassignment(b, *self.reassignment))
                # (polled, as the partition modifications: the model arms no child watch on /admin/delete_topics)
                if self.topic_deletions and self._due(TopicDeletion, now):
                    out.append(TopicDeletion(b))
                # an admin's UpdateFeatures requests (the scope's ``feature_updates``), each at most once a poll
                out += [UpdateFeatures(b, f, FeatureLevel(level), allow) for f, level, allow in self.feature_updates
                        if g.open(("admin", f, level, allow), now)]
        if self.kraft is not None:
            out += self.kraft.offers(self, now)
        return out

    def next_deadline(self) -> int | None:
        """When a gate the last ``offers`` found closed opens (the simulator asks for offers again then)."""
        return earliest(self.gates.deadline(), self.kraft.gates.deadline() if self.kraft is not None else None)

    # What the broker cannot know from its memory it polls: Kafka learns it from a watch the model
    # does not arm (/features, /controller) or, for its session, from the ZooKeeper client's pings.
    def _polled(self) -> dict[type, int]:
        ping = int(self.config.get("zookeeper.session.timeout.ms", SESSION_TIMEOUT_MS)) // 3
        return {OpenSession: ping, RefreshFeatureCache: POLL_MS, ObserveControllerEpoch: POLL_MS,
                ResignController: POLL_MS, ElectPartitionLeader: POLL_MS, ProcessPartitionModifications: POLL_MS,
                TopicDeletion: POLL_MS}

    def _due(self, key, now: int, known: bool = False) -> bool:
        """Offer the step: no retry backoff pending, and it is known to be due or its poll is."""
        g = self.gates
        return g.open(("retry", key), now) and (known or g.open(("poll", key), now))

    def _paced(self, action: Action, now: int, traced: bool) -> None:
        """After an attempt: a refusal backs off, a poll waits for its next turn, and what it learned opens others."""
        g = self.gates
        key = (ElectPartitionLeader, action.partition) if isinstance(action, ElectPartitionLeader) else type(action)
        if traced:
            g.succeed(("retry", key))
        else:
            g.fail(("retry", key), now)
        poll = self._polled().get(type(action))
        if poll is not None and (traced or type(action) is OpenSession):
            g.succeed(("poll", key))
            g.close(("poll", key), now + poll)
        elif poll is not None:  # nothing changed there: poll less often while it stays so
            g.fail(("poll", key), now, poll, 4 * poll)
        if isinstance(action, UpdateFeatures):
            g.close(("admin", action.feature, action.level, action.allow_downgrade), now + POLL_MS)
        if isinstance(action, AddPartitions):
            g.close(AddPartitions, now + POLL_MS)
            if traced:
                self.created_replicas = ()  # the admin's one request: a run's partitions stay few
        if isinstance(action, ApiPartitionReassignment):
            g.close(ApiPartitionReassignment, now + POLL_MS)
            if traced:
                self.reassignment = None  # the admin's one request
        if isinstance(action, MarkTopicDeletion):
            g.close(MarkTopicDeletion, now + POLL_MS)
            if traced:
                self.deletes_topic = False  # the admin's one request
        if not traced:
            return
        match action:
            case OpenSession():
                g.clear(("retry", RegisterBroker))
            case RegisterBroker() if self.registered:
                # KafkaServer's start-up: the feature cache is initialized and the controller elected.
                g.clear(("poll", RefreshFeatureCache))
                g.clear(("poll", ObserveControllerEpoch))
            case ResignController():
                g.clear(("poll", ObserveControllerEpoch))
            case InitializeController() | UpdateFeatures():
                g.clear(("poll", RefreshFeatureCache))  # the controller may have written /features

    def handle(self, event: Event) -> Handler:
        match event:
            case Perform(action=action):
                if isinstance(action, KRAFT_ACTIONS):
                    return self._perform(event, action)  # the KRaft client paces its own requests
                return committed(self._perform(event, action),
                                 lambda traced: self._paced(action, event.now, traced))
            case Receive(message=message):
                return self._receive(event, message)
            case RpcRequest(request=request):
                if self.kraft is not None and isinstance(request, BROKER_REQUESTS):
                    return self.kraft.handle_request(self, event)
                return nothing()
            case Crash():
                return self._crash()
            case Stop():
                return self._stop()
            case Start(incarnation=incarnation):
                return self._start(incarnation)
            case Reconfigure(changes=changes):
                return self._reconfigure(changes)
        raise TypeError(f"broker {self.broker_id}: unknown event {event!r}")

    def _perform(self, event: Perform, action: Action) -> Handler:
        if not self._alive:
            return None
        b = BrokerId(self.broker_id)
        if isinstance(action, KRAFT_ACTIONS):
            if self.kraft is None:
                return None
            return (yield from self.kraft.perform(self, event))
        if self.kraft_mode:
            return None  # process.roles=broker has no ZooKeeper client: no ZooKeeper-mode step (KIP-866)
        match action:
            case OpenSession():
                yield from self._open_session(b)
            case RegisterBroker():
                yield from self._register(b, event.now)
            case SendControlledShutdown():
                yield from self._send_controlled_shutdown(b)
            case RefreshFeatureCache():
                yield from self._refresh_feature_cache(b)
            case ObserveControllerEpoch():
                yield from self._observe_controller_epoch(b)
            case ElectController():
                yield from self._elect_controller(b, event.now)
            case ResignController():
                yield from self._resign_controller(b)
            case InitializeController():
                yield from self._initialize_controller(b, event.now)
            case ProcessBrokerChange():
                yield from self._process_broker_change(b)
            case ElectPartitionLeader(partition=p):
                yield from self._elect_partition_leader(b, p)
            case UpdateFeatures(feature=f, level=level, allow_downgrade=allow):
                yield from self._update_features(b, f, level, allow, event.now)
            case AddPartitions(replicas=replicas):
                yield from self._add_partitions(b, replicas, event.now)
            case ProcessPartitionModifications():
                yield from self._process_partition_modifications(b)
            case ApiPartitionReassignment(partition=p, replicas=replicas):
                yield from self._reassign_partition(b, p, replicas)
            case MarkTopicDeletion():
                yield from self._mark_topic_deletion(b)
            case TopicDeletion():
                yield from self._topic_deletion(b)
        return None

    # ---- sessions and registration (KIP-380 §Broker Registration) --------------------------------

    def _session_alive(self) -> Handler:
        """True / False for our session, None when ZooKeeper does not answer (ConnectionLoss)."""
        if self.session is None:
            return False
        try:
            yield Exists(self.session, "/")
        except SessionExpired:
            self.session_lost = True
            return False
        except ConnectionLoss:
            return None
        return True

    def _open_session(self, b: BrokerId) -> Handler:
        alive = yield from self._session_alive()
        if alive is not False:
            return
        try:
            session = yield CreateSession(int(self.config.get("zookeeper.session.timeout.ms",
                                                                        SESSION_TIMEOUT_MS)))
        except ConnectionLoss:
            return
        self.session, self._probe_session, self.registered, self.session_lost = session, session, False, False
        yield Trace(OpenSession(b))

    def _register(self, b: BrokerId, now: int) -> Handler:
        """Create the ephemeral /brokers/ids/<id> and learn its czxid in one multi: the broker epoch."""
        if self.session is None or self.registered:
            return
        path = broker_path(b)
        try:
            if (yield Exists(self.session, path)) is not None:
                return  # the previous generation's znode is still there (its session has not expired)
        except (SessionExpired, ConnectionLoss):
            return
        data = encode(path, BrokerRegistration(self.ibp, self.supported), now)
        results = yield Multi(self.session, (CreateOp(path, data, ephemeral=True), SetDataOp(path, data, 0)))
        yield Trace(RegisterBroker(b))
        if any(r.code is not ZkCode.OK for r in results):
            return
        epoch = results[1].stat.czxid
        if ImplBug.BROKER_EPOCH_FROM_SESSION_ID in self.bugs:
            epoch = self.session
        self.registered, self.epoch, self.shutdown_sent = True, epoch, False

    def _send_controlled_shutdown(self, b: BrokerId) -> Handler:
        if self.session is None or not self.registered or self.shutdown_sent:
            return
        try:
            data, _ = yield GetData(self.session, CONTROLLER)
        except (NoNode, SessionExpired, ConnectionLoss):
            return
        controller = decode(CONTROLLER, data)
        if not isinstance(controller, int):  # a KRaft controller: shutdown goes by heartbeats then
            return
        yield Send(ControlledShutdown(b, BrokerEpoch(self.epoch), BrokerId(controller)))
        yield Trace(SendControlledShutdown(b))
        self.shutdown_sent = True

    # ---- features (KIP-584 §Broker protections) ---------------------------------------------------

    def _refresh_feature_cache(self, b: BrokerId) -> Handler:
        """FinalizedFeatureChangeListener: read /features; never go back in epoch; exit if incompatible."""
        if self.session is None:
            return
        try:
            features = yield from read_features(self.session)
        except (SessionExpired, ConnectionLoss):
            return
        if features is None:
            return
        data, version = features
        decision = decide_feature_cache_update(self.features[0], data, version, self.supported)
        if decision is FeatureCacheUpdate.UNCHANGED:
            return
        yield Trace(RefreshFeatureCache(b))
        match decision:
            case FeatureCacheUpdate.REFUSED:
                pass
            case FeatureCacheUpdate.DISABLED:
                # Kafka clears the cache; here the epoch stays (the model's choice) unless the seeded bug forgets it.
                epoch = -1 if ImplBug.FEATURE_CACHE_GOES_BACK in self.bugs else version
                self.features = (epoch, FeatureStatus.DISABLED, ())
            case FeatureCacheUpdate.INCOMPATIBLE:
                self.die()  # fatal: the broker exits without closing its session
            case FeatureCacheUpdate.UPDATED:
                self.features = (version, FeatureStatus.ENABLED, data.finalized)
            case _:
                assert_never(decision)

    # ---- the controller election (KafkaController.elect) ------------------------------------------

    def _observe_controller_epoch(self, b: BrokerId) -> Handler:
        if self.session is None or not self.registered or self.controller is not None \
                or self.observed_epoch is not None:
            return
        try:
            if (yield Exists(self.session, CONTROLLER)) is not None:
                return
            observed = yield from read_controller_epoch(self.session)
        except (SessionExpired, ConnectionLoss):
            return
        self.observed_epoch = observed
        yield Trace(ObserveControllerEpoch(b))

    def _elect_controller(self, b: BrokerId, now: int) -> Handler:
        if self.observed_epoch is None or self.session is None or not self.registered:
            return
        try:
            if (yield Exists(self.session, CONTROLLER)) is not None:
                return
        except (SessionExpired, ConnectionLoss):
            return
        role = yield from register_controller_and_increment_controller_epoch(
            self.broker_id, self.session, self.observed_epoch, self.bugs, now)
        yield Trace(ElectController(b))
        self.observed_epoch = None
        self.controller = role
        self.elections_won += 1

    def _is_current_controller(self) -> Handler:
        """ZooKeeper agrees we are the controller: our session holds /controller and the epoch version.

        None when ZooKeeper does not answer.
        """
        try:
            node = yield Exists(self.session, CONTROLLER)
            epoch = yield Exists(self.session, CONTROLLER_EPOCH)
        except SessionExpired:
            return False
        except ConnectionLoss:
            return None
        return (node is not None and node.ephemeral_owner == self.session and epoch is not None
                and epoch.version == self.controller.epoch_zk_version)

    def _resign_controller(self, b: BrokerId) -> Handler:
        """onControllerResignation: ZooKeeper says someone else is the controller now, or our session is gone."""
        if self.controller is None:
            return
        current = yield from self._is_current_controller()
        if current is not False:
            return
        yield Trace(ResignController(b))
        self._drop_controller_role()

    def _drop_controller_role(self) -> None:
        self.controller = None
        self.notifications.clear()  # the controller's event queue goes with it

    def _acting_controller(self) -> Handler:
        """The initialized role, if the session still answers (it may be a zombie: nothing asks ZooKeeper)."""
        if self.controller is None or not self.controller.initialized:
            return None
        alive = yield from self._session_alive()
        return self.controller if alive else None

    def _after_controller_write(self) -> None:
        if self.controller is not None and self.controller.resigned:
            self._drop_controller_role()

    def _initialize_controller(self, b: BrokerId, now: int) -> Handler:
        role = self.controller
        if role is None or role.initialized:
            return
        alive = yield from self._session_alive()
        if not alive:
            return
        yield from role.on_controller_failover(self.session, self.ibp, self.supported, now)
        if role.initialized:
            self.notifications.take(BROKER_IDS, "child")
        yield Trace(InitializeController(b))
        self._after_controller_write()

    def _process_broker_change(self, b: BrokerId) -> Handler:
        role = yield from self._acting_controller()
        if role is None or not self.notifications.has(BROKER_IDS, "child"):
            return
        self.notifications.take(BROKER_IDS, "child")
        yield from role.process_broker_change(self.session)
        yield Trace(ProcessBrokerChange(b))
        self._after_controller_write()

    def _elect_partition_leader(self, b: BrokerId, p: int) -> Handler:
        role = yield from self._acting_controller()
        if role is None:
            return
        if not (yield from role.elect_offline_partition(self.session, p)):
            return
        yield Trace(ElectPartitionLeader(b, p))
        self._after_controller_write()

    def _update_features(self, b: BrokerId, feature: str, level: int, allow: bool, now: int) -> Handler:
        role = yield from self._acting_controller()
        if role is None:
            return
        features = yield from read_features(self.session)
        yield from role.update_features(self.session, features, self.ibp, self.supported, feature, level, allow, now)
        yield Trace(UpdateFeatures(b, feature, level, allow))
        self._after_controller_write()

    # ---- partition creation ----------------------------------------------------------------------

    def _add_partitions(self, b: BrokerId, replicas: tuple[BrokerId, ...], now: int) -> Handler:
        """ZkAdminManager.createPartitions (AdminZkClient.addPartitions): the manual assignment checked against the
        registered brokers, the grown assignment written with any version. Once KRaft has claimed /controller, a
        migrating broker forwards the request to the KRaft controller instead: nothing here."""
        if not (yield from self._session_alive()):
            return
        try:
            if (yield from self._forwarded()):
                return
            registered = {int(n) for n in (yield GetChildren(self.session, BROKER_IDS))}
            if all(r in registered for r in replicas):  # else INVALID_REPLICA_ASSIGNMENT, nothing written
                data, _ = yield GetData(self.session, TOPIC)
                grown = decode(TOPIC, data) + (tuple(replicas),)
                yield Multi(self.session, (SetDataOp(TOPIC, encode(TOPIC, grown, now), ANY_VERSION),))
        except (NoNode, SessionExpired, ConnectionLoss):  # pragma: no cover - nothing changes inside one event
            return
        yield Trace(AddPartitions(b, replicas))

    def _forwarded(self) -> Handler:
        """A KRaft controller owns the metadata (its /controller): an admin's request is forwarded to it."""
        if (yield Exists(self.session, CONTROLLER)) is None:
            return False
        data, _ = yield GetData(self.session, CONTROLLER)
        return not isinstance(decode(CONTROLLER, data), int)

    def _mark_topic_deletion(self, b: BrokerId) -> Handler:
        """ZkAdminManager.deleteTopics: /admin/delete_topics/t created, unless the topic is gone
        (UNKNOWN_TOPIC_OR_PARTITION) or marked already (answered NONE); nothing written either way. Once KRaft has
        claimed /controller, a migrating broker forwards the request to the KRaft controller instead: nothing here."""
        if not (yield from self._session_alive()):
            return
        mark = pending_deletion_path(TOPIC_NAME)
        try:
            if (yield from self._forwarded()):
                return
            if (yield Exists(self.session, TOPIC)) is not None and (yield Exists(self.session, mark)) is None:
                yield Multi(self.session, (CreateOp(mark, encode(mark, ())),))
        except (NoNode, SessionExpired, ConnectionLoss):  # pragma: no cover - nothing changes inside one event
            return
        yield Trace(MarkTopicDeletion(b))

    def _topic_deletion(self, b: BrokerId) -> Handler:
        yield from self._controller_event(TopicDeletion(b), lambda role: role.delete_topic(self.session))

    def _process_partition_modifications(self, b: BrokerId) -> Handler:
        yield from self._controller_event(ProcessPartitionModifications(b),
                                          lambda role: role.process_partition_modifications(self.session))

    def _controller_event(self, action: Action, run) -> Handler:
        """A controller event handled by the acting controller's ``run(role)``: traced unless it refused (False)."""
        role = yield from self._acting_controller()
        if role is None:
            return
        if not (yield from run(role)):
            return
        yield Trace(action)
        self._after_controller_write()

    def _reassign_partition(self, b: BrokerId, p: PartitionId, replicas: tuple[BrokerId, ...]) -> Handler:
        role = yield from self._acting_controller()
        if role is None:
            return
        if (yield from role.reassign_partition(self.session, p, replicas)) is None:
            return
        yield Trace(ApiPartitionReassignment(b, p, replicas))
        self._after_controller_write()

    # ---- the network -----------------------------------------------------------------------------

    def _receive(self, event: Receive, m) -> Handler:
        if not self._alive or self.kraft_mode:
            return None  # the connection died with the process (a KRaft broker is a new process)
        if isinstance(m, ControlledShutdown):
            if self.controller is None or self.session is None:
                return None
            try:
                yield from self.controller.process_controlled_shutdown(self.session, m.broker_id, m.broker_epoch)
            except (SessionExpired, ConnectionLoss):
                return None
            self._after_controller_write()
            return None
        own = self._kraft_epoch() if m.kraft else self.epoch
        if own == UNKNOWN_BROKER_EPOCH:
            # KafkaServer opens request processing only after it registered: the request waits (KAFKA-7235).
            return DEFER
        if decide_control_request(own, self.controller_epoch, m, self.bugs) is not Errors.NONE:
            return None  # refused: the one-way request is dropped, the broker unchanged
        self.controller_epoch = m.controller_epoch  # ReplicaManager: the request's epoch, checked above
        match m:
            case LeaderAndIsr(partition=p, leader=leader, leader_epoch=leader_epoch, replicas=replicas):
                local = self.replicas.get(p)
                if local is None or leader_epoch > local[0]:
                    role = ReplicaRole.LEADER if leader == self.broker_id else ReplicaRole.FOLLOWER
                    self.replicas[p] = (leader_epoch, role, replicas)
                    self.replica_slots = max(self.replica_slots, p + 1)
            case UpdateMetadata(partitions=partitions, kraft=kraft, live=live, incremental=incremental):
                # ZkMetadataCache: an incremental request leaves the partitions it does not name cached.
                self.metadata = partitions + self.metadata[len(partitions):] if incremental else partitions
                if kraft and ImplBug.ZK_BROKER_KEEPS_REMOVED_BROKERS in self.bugs:
                    self.metadata_live = tuple(sorted(set(self.metadata_live) | set(live)))
                elif kraft:
                    self.metadata_live = live
            case StopReplica(partition=p, delete_partition=delete):
                local = self.replicas.get(p)
                if local is not None and delete:
                    del self.replicas[p]  # ReplicaManager.stopReplicas: the partition is no longer hosted
                elif local is not None:
                    self.replicas[p] = (local[0], ReplicaRole.STOPPED, local[2])
        return None

    def _kraft_epoch(self) -> int:
        if self.kraft is None:
            return UNKNOWN_BROKER_EPOCH
        return getattr(self.kraft, "kraft_epoch", UNKNOWN_BROKER_EPOCH)

    # ---- crash, stop, start, reconfigure ----------------------------------------------------------

    def _crash(self) -> Handler:
        if not self._alive:
            return
        self.die()
        yield Trace(CrashBroker(BrokerId(self.broker_id)))

    def _stop(self) -> Handler:
        """SIGTERM: close the ZooKeeper session (its ephemerals go at once), then exit."""
        if not self._alive:
            return
        b = BrokerId(self.broker_id)
        probe = self.session if self.session is not None else self._probe_session
        alive = False
        if probe is not None:
            try:
                yield Exists(probe, "/")
                alive = probe == self.session
            except SessionExpired:
                pass
            except ConnectionLoss:
                # ZooKeeper is down: the shutdown gives up on closing the session and exits; the
                # session lives on until the server expires it (as the model's StopBroker).
                self.die()
                yield Trace(StopBroker(b))
                return
        if alive:
            yield CloseSession(self.session)
        self.die()
        yield Trace(StopBroker(b))

    def _start(self, incarnation: int) -> Handler:
        if self._alive:
            return
        if self.migration_enabled or self.kraft_mode:
            # A process that talks to KRaft gets a new incarnation id at each start (KIP-866 §Broker Registration).
            self.incarnation = incarnation
        self._fresh_process()
        self._alive = True
        if self.migration_enabled or self.kraft_mode or self.kraft is None:
            self.kraft = self._new_kraft_client()  # else the process keeps its old (stopped) client
        yield Trace(RestartBroker(BrokerId(self.broker_id)))

    def _reconfigure(self, changes: tuple[tuple[str, str], ...]) -> Handler:
        """The operator edits server.properties of the stopped broker: an IBP change, or a move to or from KRaft."""
        if self._alive:
            return
        before = self.model_config
        config = dict(self.config)
        for key, value in changes:
            if value == "":
                config.pop(key, None)
            else:
                config[key] = value
        old, self.config = self.config, config
        after = self.model_config
        b = BrokerId(self.broker_id)
        action: Action | None = None
        if after == before.replace(ibp=after.ibp) and after.ibp != before.ibp:
            action = ChangeIbp(b, after.ibp)
        elif after == before.replace(kraft_mode=True) and not before.kraft_mode and before.migration_enabled:
            action = MigrateBrokerToKRaft(b)
        elif after == before.replace(kraft_mode=False) and before.kraft_mode and self.meta_properties == 0:
            # KIP-866 §Rollback to ZK: only while meta.properties is still v0.
            action = RollbackBrokerToZk(b)
        if action is None:
            self.config = old
            return
        yield Trace(action)

    # ---- metrics (KIP-866 §Metrics) -------------------------------------------------------------------

    def metrics(self) -> dict[str, int | None]:
        """KafkaServer's MetadataType, and while it is the ZooKeeper controller, KafkaController's gauges."""
        if not self._alive:
            return {BROKER_METADATA_TYPE: None, ACTIVE_CONTROLLER_COUNT: None, CONTROLLER_METADATA_TYPE: None}
        controller = self.controller is not None
        return {
            BROKER_METADATA_TYPE: KRAFT if self.kraft_mode else ZOOKEEPER,
            ACTIVE_CONTROLLER_COUNT: int(controller),  # a zombie controller reports 1 until it resigns
            CONTROLLER_METADATA_TYPE: ZOOKEEPER if controller else None,
        }

    # ---- the refinement map ------------------------------------------------------------------------

    def abstract(self, view: Any) -> Broker:
        role = None
        if self.controller is not None:
            c = self.controller
            role = ControllerRole(
                ControllerEpoch(c.epoch),
                ZkVersion(c.epoch_zk_version),
                tuple(LiveBroker(BrokerId(b), self._epoch_of(view, e.epoch), e.supported)
                      for b, e in sorted(c.live.items())),
                c.initialized,
                frozenset((BrokerId(b), self._epoch_of(view, z)) for b, z in c.refused),
            )
        replicas = tuple(
            LocalReplica(LeaderEpoch(self.replicas[p][0]), self.replicas[p][1], self.replicas[p][2])
            if p in self.replicas else None
            for p in range(max(view.partitions, self.replica_slots))
        )
        epoch, status, finalized = self.features
        features = FeatureCache(FeatureEpoch(epoch), status, finalized)
        observed = None
        if self.observed_epoch is not None:
            observed = (ControllerEpoch(self.observed_epoch[0]), ZkVersion(self.observed_epoch[1]))
        broker = Broker(
            id=BrokerId(self.broker_id),
            config=self.model_config,
            alive=self._alive,
            session=view.session(self.session) if self.session is not None else NO_SESSION,
            registered=self.registered,
            epoch=self._epoch_of(view, self.epoch),
            controller_epoch=ControllerEpoch(self.controller_epoch),
            replicas=replicas,
            metadata=self.metadata,
            features=features,
            shutdown_sent=self.shutdown_sent,
            observed_epoch=observed,
            controller=role,
            incarnation=view.incarnation(self.broker_id, self.incarnation),
            kraft_epoch=UNKNOWN_BROKER_EPOCH,
            lifecycle=BrokerState.OFFLINE,
            image=EMPTY_IMAGE,
            metadata_live=self.metadata_live,
            meta_properties=self.meta_properties,
            want_shutdown=False,
        )
        if self.kraft is not None:
            fields = {k: v for k, v in self.kraft.abstract_fields(view).items() if k not in _NODE_FIELDS}
            broker = broker.replace(**fields)
        return broker

    def _epoch_of(self, view: Any, epoch: int) -> BrokerEpoch:
        """A broker epoch (a czxid) in the model's numbering."""
        if epoch == UNKNOWN_BROKER_EPOCH:
            return UNKNOWN_BROKER_EPOCH
        if ImplBug.BROKER_EPOCH_FROM_SESSION_ID in self.bugs and view.knows_session(epoch):
            return BrokerEpoch(view.session(epoch))
        return BrokerEpoch(view.zxid(epoch))

