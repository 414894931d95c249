"""The ZooKeeper era: ZooKeeper itself, the network, ZooKeeper-mode brokers and their controller.

Rules:
- ``handle(state, action)`` takes one ``ZkEraAction`` (``model.step.step`` dispatches it here) and
  matches on it, ending in ``assert_never``: an action added to ``ZkEraAction`` without a handler
  is a type error. Each handler first checks its enabling conditions (returning a ``Refused``
  that says which failed when the action is not enabled, ``model.outcome``), then computes the
  new state. Nothing is mutated; untouched parts of the state are shared.
- Decisions are pure functions of what the deciding node knows (``decide_*``), kept apart from
  the state changes; each returns its refusal with Kafka's error code and why (or None), which
  the handler passes on as the step's outcome, so tests can assert the exact error code.
- Every controller write goes through ``_controller_write``: one ZooKeeper multi that starts
  with a check on /controller_epoch's version (KIP-380/KAFKA-6082, KIP-866 §Controller
  Leadership). A write that fails that check tells the controller it has moved: it resigns.
- A KRaft broker's process and the KRaft controllers are ``model.kraft_quorum``'s; the only thing
  this module takes from there is what a restarted migrating broker's process starts with.

Seeds: KIP-380 (broker generations), KIP-584 (feature versioning), KIP-866 §Controller Leadership.
"""

from __future__ import annotations

from typing import assert_never

from model import zookeeper as zkm
from model.actions import (
    AddPartitions,
    ApiPartitionReassignment,
    BrokerZkServerCatchesUp,
    BrokerZkServerLags,
    ChangeIbp,
    CrashBroker,
    Deliver,
    Drop,
    ElectController,
    ElectPartitionLeader,
    ExpireSession,
    InitializeController,
    LeaderAndIsrFailsInBroker,
    MarkTopicDeletion,
    ObserveControllerEpoch,
    OpenSession,
    ProcessBrokerChange,
    ProcessPartitionModifications,
    Redeliver,
    RefreshFeatureCache,
    RegisterBroker,
    ResignController,
    RestartBroker,
    SendControlledShutdown,
    StopBroker,
    TopicDeletion,
    UpdateFeatures,
    ZkEraAction,
    ZkOutage,
    ZkRecover,
    ZkServerCatchesUp,
    ZkServerLags,
)
from model.bugs import CORRECT, Bug, Variant
from model.kraft import TOPIC_NAME
from model.kraft_quorum import fresh_kraft_process
from model.migration import Profile, pending_deletion_path
from model.outcome import BUDGET_SPENT, IN_FLIGHT_CAP, MOVES_LEADER, Refused, Result, Unchanged
from model.state import (
    BROKER_IDS,
    CONTROLLER,
    CONTROLLER_EPOCH,
    FEATURES,
    TOPIC,
    AppliedWrite,
    Assignment,
    Broker,
    BrokerRegistration,
    ClusterState,
    ControlledShutdown,
    ControllerRole,
    FeatureCache,
    FeatureRanges,
    FeaturesZNode,
    LeaderAndIsr,
    LiveBroker,
    LocalReplica,
    Message,
    PartitionState,
    StopReplica,
    UpdateMetadata,
    broker_path,
    kraft_claim,
    partition_state_path,
    seen_by,
    with_replica,
    znode_data,
)
from model.transitions import forget_notifications, process_dies, put_broker, send, spend, spend_checked
from model.types import (
    NO_LEADER,
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
    SessionId,
    ZkCode,
    ZkVersion,
)
from model.zookeeper import Check, Create, Delete, Op, SetData, WatchKind, children

# /controller_epoch read as absent: the election creates it instead of setting it.
ABSENT = ZkVersion(-2)

# Refusals without arguments, built once (model.outcome).
_ZK_UNAVAILABLE = Refused(None, "ZooKeeper is unavailable")
_NOT_IN_FLIGHT = Refused(None, "the message is not in flight")
_NOT_RUNNING = Refused(None, "the broker is not running")
_RUNNING = Refused(None, "the broker is running")
_NO_SESSION = Refused(None, "the broker holds no live ZooKeeper session of its own")
_NOT_REGISTERED = Refused(None, "the broker has not registered in this session")
_NOT_ACTING = Refused(None, "the broker is not an initialized controller with a ZooKeeper session")
_NOT_CONTROLLER = Refused(Errors.NOT_CONTROLLER, _NOT_ACTING.why)
_NO_NOTIFICATION = Refused(None, "no /brokers/ids notification is pending")
_CONTROLLER_EXISTS = Refused(None, "/controller exists")
_KRAFT_BROKER = Refused(None, "a KRaft broker does not talk to ZooKeeper")
_WAITS_FOR_REGISTRATION = Refused(
    None, "the broker serves no request before it has registered: the request waits (KAFKA-7235)"
)
_EDITS_STOPPED = Refused(None, "the broker is running: the operator edits a stopped broker's configuration")
_SAME_IBP = Unchanged("the broker runs that IBP")
_HOLDS_SESSION = Refused(None, "the broker holds a live session")
_KEEPS_DEAD_SESSION = Refused(None, "the broker keeps its dead session (seeded bug)")
_REGISTERED = Refused(None, "the broker has registered in this session")
_SHUTDOWN_SENT = Refused(None, "this generation has sent its ControlledShutdown")
_NO_ZK_CONTROLLER = Refused(None, "/controller names no ZooKeeper controller")
_NO_FEATURES = Refused(None, "there is no /features")
_CACHE_CURRENT = Unchanged("the cache holds /features' epoch")
_IS_CONTROLLER = Refused(None, "the broker is a controller")
_OBSERVED = Refused(None, "the broker has read /controller_epoch")
_NOT_OBSERVED = Refused(None, "the broker has not read /controller_epoch")
_NOT_A_CONTROLLER = Refused(None, "the broker is not a controller")
_STILL_CONTROLLER = Refused(None, "ZooKeeper says the broker is the controller")
_INITIALIZED = Refused(None, "the controller is initialized")
_LEADER_LIVE = Refused(None, "the partition's leader is live")
_ZK_AVAILABLE = Refused(None, "ZooKeeper is available")
_NO_SUCH_CONTROLLER = Refused(None, "no such KRaft controller")
_LAGGING = Refused(None, "the controller's ZooKeeper server lags already")
_NOT_LAGGING = Refused(None, "the controller's ZooKeeper server is up to date")
_BROKER_LAGGING = Refused(None, "the broker's ZooKeeper server lags already")
_BROKER_NOT_LAGGING = Refused(None, "the broker's ZooKeeper server is up to date")
_NO_LIVE_SESSION = Refused(None, "no such live session")
_NODE_EXISTS = Refused(None, "its /brokers/ids znode exists (NodeExists): another session's registration")
_NO_CANDIDATE = Refused(None, "no replica of the ISR is live")
_NOT_STARTED = Refused(None, "the partition has no state znode yet")
_NO_NEW_PARTITION = Refused(None, "every partition /brokers/topics/t assigns has its state znode")
_NO_LIVE_REPLICA = Refused(None, "no replica of a new partition is live")
_FORWARDED = Refused(None, "a KRaft controller owns the metadata: the request is forwarded to it (CreatePartitions)")


def handle(state: ClusterState, action: ZkEraAction, variant: Variant) -> Result:
    """The state after a ZooKeeper-era action, or why it is refused or changes nothing (``model.outcome``)."""
    match action:
        case ZkOutage():
            return _zk_outage(state)
        case ZkRecover():
            return _zk_recover(state)
        case ZkServerLags(controller=c):
            return _zk_server_lags(state, c)
        case ZkServerCatchesUp(controller=c):
            return _zk_server_catches_up(state, c)
        case BrokerZkServerLags(broker=b):
            return _broker_zk_server_lags(state, b)
        case BrokerZkServerCatchesUp(broker=b):
            return _zk_server_catches_up(state, b, _BROKER_NOT_LAGGING)
        case ExpireSession(session=session):
            return _expire_session(state, session, variant)
        case Redeliver(message=message):
            return _redeliver(state, message, variant)
        case Drop(message=message):
            return _drop(state, message)
        case Deliver(message=message):
            return _deliver(state, message, variant)
        case LeaderAndIsrFailsInBroker(message=message):
            return _leader_and_isr_fails(state, message, variant)
        case CrashBroker(broker=b):
            return _crash(state, b)
        case StopBroker(broker=b):
            return _stop(state, b, variant)
        case RestartBroker(broker=b):
            return _restart(state, b)
        case ChangeIbp(broker=b, ibp=ibp):
            return _change_ibp(state, b, ibp)
        case OpenSession(broker=b):
            return _open_session(state, b, variant)
        case RegisterBroker(broker=b):
            return _register(state, b, variant)
        case SendControlledShutdown(broker=b):
            return _send_controlled_shutdown(state, b)
        case RefreshFeatureCache(broker=b):
            return _refresh_feature_cache(state, b, variant)
        case ObserveControllerEpoch(broker=b):
            return _observe_controller_epoch(state, b)
        case ElectController(broker=b):
            return _elect_controller(state, b, variant)
        case ResignController(broker=b):
            return _resign(state, b)
        case InitializeController(controller=c):
            return _initialize_controller(state, c, variant)
        case ProcessBrokerChange(controller=c):
            return _process_broker_change(state, c, variant)
        case ElectPartitionLeader(controller=c, partition=p):
            return _elect_partition_leader(state, c, p, variant)
        case UpdateFeatures(controller=c, feature=f, level=level, allow_downgrade=allow):
            return _update_features(state, c, f, level, allow, variant)
        case AddPartitions(broker=b, replicas=replicas):
            return _add_partitions(state, b, replicas)
        case ProcessPartitionModifications(controller=c):
            return _process_partition_modifications(state, c, variant)
        case ApiPartitionReassignment(controller=c, partition=p, replicas=replicas):
            return _api_partition_reassignment(state, c, p, replicas, variant)
        case MarkTopicDeletion(broker=b):
            return _mark_topic_deletion(state, b)
        case TopicDeletion(controller=c):
            return _topic_deletion(state, c, variant)
        case _:
            assert_never(action)


# ---- small helpers ----------------------------------------------------------------------------

def _connected(state: ClusterState, b: Broker) -> bool:
    """The broker's process runs and can talk to ZooKeeper through a live session."""
    return b.alive and state.zk.available and _holds_session(state, b)


def _unconnected(state: ClusterState, b: Broker) -> Refused | None:
    """Why the broker cannot talk to ZooKeeper (``_connected``'s conditions, each with its reason), or None."""
    if not b.alive:
        return _NOT_RUNNING
    if not state.zk.available:
        return _ZK_UNAVAILABLE
    if not _holds_session(state, b):
        return _NO_SESSION
    return None


def _holds_session(state: ClusterState, b: Broker) -> bool:
    """The broker's session is alive and is its own (the model hands out freed session ids again)."""
    return zkm.session_client(state.zk, b.session) == b.id


def _acting_controller(state: ClusterState, c: BrokerId) -> tuple[Broker, ControllerRole] | None:
    """The broker and its role if it believes it is an initialized controller and can reach ZooKeeper.

    It may be a zombie: nothing here asks ZooKeeper whether it still is the controller.
    """
    b = state.brokers[c]
    role = b.controller
    if role is None or not role.initialized or not _connected(state, b):
        return None
    return b, role


def is_current_controller(state: ClusterState, b: Broker) -> bool:
    """ZooKeeper agrees that ``b`` is the controller: it holds /controller and the epoch version."""
    if b.controller is None or not b.alive or not _holds_session(state, b):
        return False
    node = zkm.get(state.zk, CONTROLLER)
    epoch = zkm.get(state.zk, CONTROLLER_EPOCH)
    return (
        node is not None
        and node.ephemeral_owner == b.session
        and epoch is not None
        and epoch.version == b.controller.epoch_zk_version
    )


def _controller_write(
    state: ClusterState, c: Broker, ops: tuple[Op, ...], variant: Variant
) -> tuple[ClusterState, bool]:
    """Run a controller's write as one multi fenced by /controller_epoch's version.

    On success the ghost records each applied write with the epoch current at that moment.
    A failed epoch check means another controller was elected since: ``c`` resigns.
    """
    assert c.controller is not None
    fenced = not variant.has(Bug.SKIP_CONTROLLER_EPOCH_CHECK)
    if fenced:
        ops = (Check(CONTROLLER_EPOCH, c.controller.epoch_zk_version),) + ops
    zk_epoch = znode_data(state, CONTROLLER_EPOCH)
    zk, results = zkm.multi(state.zk, c.session, ops, variant.bugs)
    ghost = state.ghost.replace(last_multi=results)
    ok = zkm.succeeded(results)
    if ok:
        ghost = ghost.replace(
            applied_writes=ghost.applied_writes
            + tuple(
                AppliedWrite(c.id, c.controller.epoch, zk_epoch, op.path) for op in ops if not isinstance(op, Check)
            )
        )
    state = state.replace(zk=zk, ghost=ghost)
    if not ok and fenced and results[0] in (ZkCode.BAD_VERSION, ZkCode.NO_NODE):
        resigned = _resign(state, c.id)
        if isinstance(resigned, ClusterState):
            state = resigned
    return state, ok


# ---- feature versioning (KIP-584) -------------------------------------------------------------

def incompatible_features(supported: FeatureRanges, finalized: FeatureRanges) -> tuple[str, ...]:
    """Finalized features whose [min, max] levels fall outside a broker's supported range.

    KIP-584 §Broker protections: a finalized range is compatible only if the broker supports
    the feature and supported.min <= finalized.min and finalized.max <= supported.max.
    """
    have = dict(supported)
    bad = []
    for name, (fmin, fmax) in finalized:
        rng = have.get(name)
        if rng is None or not (rng[0] <= fmin and fmax <= rng[1]):
            bad.append(name)
    return tuple(bad)


def finalized_features(state: ClusterState) -> FeatureRanges:
    """Finalized features in force: those of an Enabled /features znode, else none."""
    data = znode_data(state, FEATURES)
    if data is None or data.status is not FeatureStatus.ENABLED:
        return ()
    return data.finalized


def decide_update_features(
    state: ClusterState, c: Broker, feature: str, level: FeatureLevel, allow_downgrade: bool, variant: Variant
) -> tuple[Refused | None, FeatureRanges]:
    """The ZK controller's UpdateFeatures validation (KIP-584 §Changes to Kafka Controller, reference §5.2).

    Returns the refusal (INVALID_REQUEST and why), or None with the new finalized features.
    """
    # Differs: (min, max) levels and an AllowDowngrade flag, as in the seed; Kafka >= 3.3 has one level and UpgradeType.
    assert c.controller is not None
    data = znode_data(state, FEATURES)
    if data is None or data.status is not FeatureStatus.ENABLED:
        return Refused(Errors.INVALID_REQUEST, "feature versioning is not enabled (/features is not Enabled)"), ()
    if not c.config.ibp.supports_feature_versioning:
        return Refused(Errors.INVALID_REQUEST, "the controller's IBP {} predates feature versioning",
                       (c.config.ibp.name,)), ()
    finalized = dict(data.finalized)
    current = finalized.get(feature)
    if level < 1:
        # KIP-584: a level below 1 asks for deletion, which needs AllowDowngrade.
        if not allow_downgrade:
            return Refused(Errors.INVALID_REQUEST, "deleting {} needs AllowDowngrade", (feature,)), ()
        if current is None:
            return Refused(Errors.INVALID_REQUEST, "{} is not finalized", (feature,)), ()
        if variant.has(Bug.FINALIZE_LEVEL_ZERO):
            finalized[feature] = (current[0], level)
        else:
            del finalized[feature]
        return None, tuple(sorted(finalized.items()))
    if current is not None and level == current[1]:
        return Refused(Errors.INVALID_REQUEST, "{} is already finalized at max level {}", (feature, level)), ()
    is_downgrade = current is not None and level < current[1]
    if is_downgrade and not allow_downgrade:
        return Refused(Errors.INVALID_REQUEST, "a downgrade of {} needs AllowDowngrade", (feature,)), ()
    if allow_downgrade and not is_downgrade:
        return Refused(Errors.INVALID_REQUEST, "AllowDowngrade on a request that is not a downgrade"), ()
    own = dict(c.config.supported).get(feature)
    if own is None:
        return Refused(Errors.INVALID_REQUEST, "the controller does not support {}", (feature,)), ()
    new = (current[0] if current is not None else own[0], level)
    if new[1] < new[0] or not (own[0] <= new[0] and new[1] <= own[1]):
        return Refused(Errors.INVALID_REQUEST, "levels {} are outside the controller's supported {}", (new, own)), ()
    if not variant.has(Bug.UPDATE_SKIPS_BROKER_CHECK):
        for b in c.controller.live:
            if incompatible_features(b.supported, ((feature, new),)):
                return Refused(Errors.INVALID_REQUEST, "broker {} does not support levels {} of {}",
                               (b.id, new, feature)), ()
    finalized[feature] = new
    return None, tuple(sorted(finalized.items()))


def _feature_bootstrap_ops(state: ClusterState, c: Broker, variant: Variant) -> tuple[Op, ...]:
    """KIP-584 §Feature ZK node status: the three bootstrap cases, decided by the controller's IBP."""
    node = zkm.get(state.zk, FEATURES)
    if c.config.ibp.supports_feature_versioning:
        if node is None:  # new cluster: finalize everything the controller supports
            # Differs: Kafka >= 3.3 finalizes nothing here (ZK brokers advertise no features); the seed finalizes all.
            return (Create(FEATURES, FeaturesZNode(FeatureStatus.ENABLED, c.config.supported)),)
        if node.data.status is FeatureStatus.DISABLED:  # upgrade: enable, finalize nothing yet
            enabled = FeaturesZNode(FeatureStatus.ENABLED, ())
            if variant.has(Bug.RECREATE_FEATURES_ZNODE):
                return (Delete(FEATURES, node.version), Create(FEATURES, enabled))
            return (SetData(FEATURES, enabled, node.version),)
        return ()
    if node is None:
        return (Create(FEATURES, FeaturesZNode(FeatureStatus.DISABLED, ())),)
    if node.data.status is FeatureStatus.ENABLED:  # downgrade: disable and finalize nothing
        kept = node.data.finalized if variant.has(Bug.DISABLE_KEEPS_FEATURES) else ()
        return (SetData(FEATURES, FeaturesZNode(FeatureStatus.DISABLED, kept), node.version),)
    return ()


# ---- KIP-380 decisions ------------------------------------------------------------------------

def broker_epoch_is_stale(request_epoch: BrokerEpoch, current: BrokerEpoch) -> bool:
    """KIP-380 §Broker Rejects Control Requests: reject epochs smaller than the broker's own.

    Newer epochs are accepted, as the seed and KAFKA-9839 say (the first KIP-380 code threw).
    """
    # Differs: the seed does not mention -1; shipped Kafka accepts UNKNOWN_BROKER_EPOCH (-1), and so does the model.
    return request_epoch != UNKNOWN_BROKER_EPOCH and request_epoch < current


def decide_control_request(
    b: Broker, m: LeaderAndIsr | UpdateMetadata | StopReplica, variant: Variant
) -> Refused | None:
    """Whether broker ``b`` accepts a control request (KafkaApis: broker epoch first, then controller epoch):
    its refusal, or None.

    A request from a KRaft controller carries the broker's KRaft epoch, and is compared with the
    epoch its BrokerLifecycleManager learned (reference §4).
    """
    own = b.kraft_epoch if m.kraft else b.epoch
    if broker_epoch_is_stale(m.broker_epoch, own) and not variant.has(Bug.ACCEPT_STALE_BROKER_EPOCH):
        return Refused(Errors.STALE_BROKER_EPOCH, "broker epoch {} < {}", (m.broker_epoch, own))
    if m.controller_epoch < b.controller_epoch and not variant.has(Bug.ACCEPT_STALE_CONTROLLER_EPOCH):
        return Refused(Errors.STALE_CONTROLLER_EPOCH, "controller epoch {} < {}",
                       (m.controller_epoch, b.controller_epoch))
    return None


def decide_controlled_shutdown(c: Broker, m: ControlledShutdown, variant: Variant) -> Refused | None:
    """KIP-380 §Controller Rejects ControlledShutdownRequest Sent from Former Generations: the refusal, or None."""
    if c.controller is None or not c.controller.initialized:
        # Shipped Kafka answers ControllerMovedException here, which maps to STALE_CONTROLLER_EPOCH (reference §4).
        return Refused(Errors.STALE_CONTROLLER_EPOCH, "broker {} is not an initialized controller", (c.id,))
    cached = c.controller.cached_epoch(m.broker_id)
    if cached is None:
        return Refused(Errors.BROKER_NOT_AVAILABLE, "broker {} is not live in the controller's cache", (m.broker_id,))
    if broker_epoch_is_stale(m.broker_epoch, cached) and not variant.has(Bug.SHUTDOWN_IGNORES_BROKER_EPOCH):
        return Refused(Errors.STALE_BROKER_EPOCH, "broker epoch {} < {}, the controller's cached",
                       (m.broker_epoch, cached))
    return None


def classify_broker_change(
    known: dict[BrokerId, BrokerEpoch],
    current: dict[BrokerId, BrokerEpoch],
    variant: Variant = CORRECT,
) -> tuple[frozenset[BrokerId], frozenset[BrokerId], frozenset[BrokerId]]:
    """KIP-380 §Controller Detects Bounced Broker: (new, dead, bounced) from cached and current czxids."""
    new = frozenset(current.keys() - known.keys())
    dead = frozenset(known.keys() - current.keys())
    if variant.has(Bug.BROKER_CHANGE_IGNORES_CZXID):
        bounced: frozenset[BrokerId] = frozenset()
    else:
        bounced = frozenset(b for b in current.keys() & known.keys() if current[b] > known[b])
    return new, dead, bounced


# ---- the environment --------------------------------------------------------------------------

def _zk_outage(state: ClusterState) -> Result:
    if not state.zk.available:
        return _ZK_UNAVAILABLE
    if state.budget.outages <= 0:
        return BUDGET_SPENT
    state = spend_checked(state, outages=1)
    return state.replace(zk=state.zk.replace(available=False))


def _zk_recover(state: ClusterState) -> Result:
    if state.zk.available:
        return _ZK_AVAILABLE
    return state.replace(zk=state.zk.replace(available=True))


def _zk_server_lags(state: ClusterState, controller: int) -> Result:
    """A KRaft controller's server falls behind (``model.zookeeper`` views); while ZooKeeper has no quorum
    nothing is served, so a lag starts only while it is available."""
    if not state.zk.available:
        return _ZK_UNAVAILABLE
    if state.budget.stale_reads <= 0:
        return BUDGET_SPENT
    if not any(c.id == controller for c in state.controllers):
        return _NO_SUCH_CONTROLLER
    return _server_lags(state, controller, _LAGGING, "stale_reads")


def _broker_zk_server_lags(state: ClusterState, b: BrokerId) -> Result:
    """A ZooKeeper-mode broker's server falls behind (``model.zookeeper`` views) while the broker is not the
    controller: its election reads, its registration check, its read of /controller for ControlledShutdown and
    of /features come from the view until the server catches up or the broker writes (the election's multi, a
    registration) or opens a new session. Not while it is the controller: see docs/not-modeled.md."""
    broker = state.brokers[b]
    why = _unconnected(state, broker)
    if why is not None:
        return why
    if broker.controller is not None:
        return _IS_CONTROLLER
    if state.budget.broker_stale_reads <= 0:
        return BUDGET_SPENT
    return _server_lags(state, b, _BROKER_LAGGING, "broker_stale_reads")


def _server_lags(state: ClusterState, client: int, lagging: Refused, budget: str) -> Result:
    if zkm.lagging(state.zk, client):
        return lagging
    state = spend_checked(state, **{budget: 1})
    return state.replace(zk=zkm.lag(state.zk, client))


def _zk_server_catches_up(state: ClusterState, client: int, not_lagging: Refused = _NOT_LAGGING) -> Result:
    if not zkm.lagging(state.zk, client):
        return not_lagging
    return state.replace(zk=zkm.catch_up(state.zk, client))


def _expire_session(state: ClusterState, session: SessionId, variant: Variant) -> Result:
    if not state.zk.available:
        return _ZK_UNAVAILABLE
    if state.budget.expiries <= 0:
        return BUDGET_SPENT
    if not zkm.session_alive(state.zk, session):
        return _NO_LIVE_SESSION
    state = spend_checked(state, expiries=1)
    return state.replace(zk=zkm.close_session(state.zk, session, variant.bugs))


def _redeliver(state: ClusterState, message: Message, variant: Variant) -> Result:
    """A duplicate: the message is delivered as by ``Deliver`` and a copy stays in flight."""
    if message not in state.network:
        return _NOT_IN_FLIGHT
    if state.budget.duplicates <= 0:
        return BUDGET_SPENT
    result = _deliver(state, message, variant)
    after = result if isinstance(result, ClusterState) else result.after
    if after is None:
        return result
    after = spend_checked(after, duplicates=1).replace(network=after.network | {message})
    if len(after.network) > after.budget.max_in_flight:
        return IN_FLIGHT_CAP
    return after if isinstance(result, ClusterState) else result.replace(after=after)


def _drop(state: ClusterState, message: Message) -> Result:
    if message not in state.network:
        return _NOT_IN_FLIGHT
    if state.budget.drops <= 0:
        return BUDGET_SPENT
    state = spend_checked(state, drops=1)
    return state.replace(network=state.network - {message})


# ---- broker processes -------------------------------------------------------------------------

def _crash(state: ClusterState, b: BrokerId) -> Result:
    broker = state.brokers[b]
    if not broker.alive:
        return _NOT_RUNNING
    if state.budget.crashes <= 0:
        return BUDGET_SPENT
    state = spend_checked(state, crashes=1)
    return process_dies(state, broker)


def _stop(state: ClusterState, b: BrokerId, variant: Variant) -> Result:
    broker = state.brokers[b]
    if not broker.alive:
        return _NOT_RUNNING
    if state.budget.restarts <= 0:
        return BUDGET_SPENT
    state = spend_checked(state, restarts=1)
    # Closing the session needs ZooKeeper. A broker stopped during an outage exits all the same
    # (KafkaServer.shutdown gives up on the ZooKeeper client); its session lives on until it expires.
    if _holds_session(state, broker) and state.zk.available:
        if variant.has(Bug.STOP_DELETES_CONTROLLER_EPOCH) and is_current_controller(state, broker):
            zk, results = zkm.multi(state.zk, broker.session, (Delete(CONTROLLER_EPOCH),), variant.bugs)
            state = state.replace(zk=zk, ghost=state.ghost.replace(last_multi=results))
        state = state.replace(zk=zkm.close_session(state.zk, broker.session, variant.bugs))
    return process_dies(state, broker)


def _restart(state: ClusterState, b: BrokerId) -> Result:
    broker = state.brokers[b]
    if broker.alive:
        return _RUNNING
    if broker.config.migration_enabled or broker.config.kraft_mode:
        # A process that talks to KRaft gets a new incarnation id at each start (KIP-866 §Broker Registration).
        broker = fresh_kraft_process(broker)
    return put_broker(state, broker.replace(alive=True))


def _change_ibp(state: ClusterState, b: BrokerId, ibp: Ibp) -> Result:
    broker = state.brokers[b]
    if broker.alive:
        return _EDITS_STOPPED
    if broker.config.ibp == ibp:
        return _SAME_IBP
    if state.budget.operator <= 0:
        return BUDGET_SPENT
    state = spend_checked(state, operator=1)
    return put_broker(state, broker.replace(config=broker.config.replace(ibp=ibp)))


def _open_session(state: ClusterState, b: BrokerId, variant: Variant) -> Result:
    broker = state.brokers[b]
    if not broker.alive:
        return _NOT_RUNNING
    if broker.config.kraft_mode:
        return _KRAFT_BROKER  # KIP-866 §Broker Migration
    if not state.zk.available:
        return _ZK_UNAVAILABLE
    if _holds_session(state, broker):
        return _HOLDS_SESSION
    if variant.has(Bug.RESTARTED_BROKER_KEEPS_DEAD_SESSION) and state.history.registered_epoch(b) is not None:
        return _KEEPS_DEAD_SESSION
    zk, session = zkm.open_session(state.zk, b)
    return put_broker(state.replace(zk=zk), broker.replace(session=session, registered=False))


def _register(state: ClusterState, b: BrokerId, variant: Variant) -> Result:
    """KIP-380 §Broker Registration: create the ephemeral and learn its czxid in one multi."""
    broker = state.brokers[b]
    path = broker_path(b)
    why = _unconnected(state, broker)
    if why is not None:
        return why
    if broker.registered:
        return _REGISTERED
    # Read from the broker's server: a stale read of the previous generation's znode only makes it wait.
    if zkm.get(zkm.seen_by(state.zk, b), path) is not None:
        return _NODE_EXISTS
    registration = BrokerRegistration(broker.config.ibp, broker.config.supported)
    ops = (Create(path, registration, ephemeral=True), SetData(path, registration, ZkVersion(0)))
    zk, results = zkm.multi(state.zk, broker.session, ops, variant.bugs, reader=b)
    state = state.replace(zk=zk, ghost=state.ghost.replace(last_multi=results))
    if not zkm.succeeded(results):
        return state
    epoch = BrokerEpoch(zkm.get_existing(zk, path).czxid)
    if variant.has(Bug.BROKER_KEEPS_OLD_EPOCH) and broker.epoch != UNKNOWN_BROKER_EPOCH:
        epoch = broker.epoch
    elif variant.has(Bug.BROKER_EPOCH_FROM_SESSION_ID):
        epoch = BrokerEpoch(broker.session)
    epochs = dict(state.history.registered_epochs)
    epochs[b] = epoch
    state = state.replace(history=state.history.replace(registered_epochs=tuple(sorted(epochs.items()))))
    return put_broker(state, broker.replace(registered=True, epoch=epoch, shutdown_sent=False))


def _send_controlled_shutdown(state: ClusterState, b: BrokerId) -> Result:
    broker = state.brokers[b]
    why = _unconnected(state, broker)
    if why is not None:
        return why
    if not broker.registered:
        return _NOT_REGISTERED
    if broker.shutdown_sent:
        return _SHUTDOWN_SENT
    if state.budget.shutdowns <= 0:
        return BUDGET_SPENT
    node = zkm.get(zkm.seen_by(state.zk, b), CONTROLLER)  # a stale read sends it to a deposed controller
    controller = None if node is None else node.data
    if not isinstance(controller, int):  # none, or a KRaft controller: shutdown goes by heartbeats then
        return _NO_ZK_CONTROLLER
    sent = send(spend_checked(state, shutdowns=1), [ControlledShutdown(b, broker.epoch, controller)])
    return IN_FLIGHT_CAP if sent is None else put_broker(sent, broker.replace(shutdown_sent=True))


def _refresh_feature_cache(state: ClusterState, b: BrokerId, variant: Variant) -> Result:
    """KIP-584 §Broker protections: read /features; never go back in epoch; die if incompatible."""
    broker = state.brokers[b]
    # From the broker's server: a view is at least as new as the cache, so a stale read only keeps it longer.
    node = zkm.get(zkm.seen_by(state.zk, b), FEATURES)
    why = _unconnected(state, broker)
    if why is not None:
        return why
    if node is None:
        return _NO_FEATURES
    epoch = FeatureEpoch(node.version)  # the feature epoch is /features' version (KIP-584)
    if epoch == broker.features.epoch:
        return _CACHE_CURRENT
    if epoch < broker.features.epoch:
        # FeatureCacheUpdateException; the step is taken, so that the explorer keeps the read.
        return Refused(None, "FeatureCacheUpdateException: epoch {} < the cache's {}", (epoch, broker.features.epoch),
                       state)
    data: FeaturesZNode = node.data
    if data.status is FeatureStatus.DISABLED:
        # Differs: Kafka clears its cache (and its epoch) on Disabled; the model keeps the epoch, empties the levels.
        if variant.has(Bug.BROKER_RESETS_FEATURE_EPOCH):
            epoch = FeatureEpoch(-1)
        return put_broker(state, broker.replace(features=FeatureCache(epoch, FeatureStatus.DISABLED, ())))
    if incompatible_features(broker.config.supported, data.finalized):
        # Fatal for the broker: it exits without closing its session.
        return process_dies(state, broker)
    return put_broker(state, broker.replace(features=FeatureCache(epoch, FeatureStatus.ENABLED, data.finalized)))


# ---- controller election (KIP-866 §Controller Leadership; KafkaZkClient) ------------------------

def _observe_controller_epoch(state: ClusterState, b: BrokerId) -> Result:
    broker = state.brokers[b]
    why = _unconnected(state, broker)
    if why is not None:
        return why
    if not broker.registered:
        return _NOT_REGISTERED
    if broker.controller is not None:
        return _IS_CONTROLLER
    if broker.observed_epoch is not None:
        return _OBSERVED
    seen = zkm.seen_by(state.zk, b)  # KafkaController.elect reads through the broker's server, with no sync()
    if zkm.get(seen, CONTROLLER) is not None:
        return _CONTROLLER_EXISTS
    node = zkm.get(seen, CONTROLLER_EPOCH)
    observed = (ControllerEpoch(0), ABSENT) if node is None else (node.data, node.version)
    return put_broker(state, broker.replace(observed_epoch=observed))


def _elect_controller(state: ClusterState, b: BrokerId, variant: Variant) -> Result:
    """registerControllerAndIncrementControllerEpoch: create /controller and CAS the epoch, atomically."""
    broker = state.brokers[b]
    why = _unconnected(state, broker)
    if why is not None:
        return why
    if not broker.registered:  # Kafka re-registers a broker before it runs for controller again
        return _NOT_REGISTERED
    # A stale read that misses /controller is harmless: the multi's create fails at the leader (NODEEXISTS).
    if zkm.get(zkm.seen_by(state.zk, b), CONTROLLER) is not None:
        return _CONTROLLER_EXISTS
    if broker.observed_epoch is None:
        return _NOT_OBSERVED
    if state.budget.elections <= 0:
        return BUDGET_SPENT
    seen, version = broker.observed_epoch
    epoch = seen if variant.has(Bug.ELECTION_REUSES_EPOCH) else ControllerEpoch(seen + 1)
    if version == ABSENT:
        bump: Op = Create(CONTROLLER_EPOCH, epoch)
    else:
        # A stale observed version is harmless: the set fails at the leader (BADVERSION), as KafkaZkClient's does.
        unchecked = variant.has(Bug.ELECTION_WITHOUT_EPOCH_CAS) or (
            variant.has(Bug.ELECTION_CHECKS_EPOCH_BY_READ) and _reads_as_observed(state, b, seen, version))
        bump = SetData(CONTROLLER_EPOCH, epoch, ZkVersion(-1) if unchecked else version)
    ops = (Create(CONTROLLER, b, ephemeral=True), bump)
    zk, results = zkm.multi(state.zk, broker.session, ops, variant.bugs, reader=b)
    state = state.replace(zk=zk, ghost=state.ghost.replace(last_multi=results))
    if not zkm.succeeded(results):
        return put_broker(state, broker.replace(observed_epoch=None))
    state = spend_checked(state, elections=1)
    if epoch > state.history.max_controller_epoch:
        state = state.replace(history=state.history.replace(max_controller_epoch=epoch))
    role = ControllerRole(epoch, zkm.get_existing(zk, CONTROLLER_EPOCH).version, (), False)
    return put_broker(state, broker.replace(observed_epoch=None, controller=role))


def _reads_as_observed(state: ClusterState, b: BrokerId, seen: ControllerEpoch, version: ZkVersion) -> bool:
    """The seeded bug election_checks_epoch_by_read: /controller_epoch read again, through the broker's server,
    still shows what it observed, which the bug takes for the version check: the same from an up-to-date server
    (the read and the multi are one step), not from a lagging one."""
    again = zkm.get(zkm.seen_by(state.zk, b), CONTROLLER_EPOCH)
    return again is not None and (again.data, again.version) == (seen, version)


def _resign(state: ClusterState, b: BrokerId) -> Result:
    """onControllerResignation: the controller learned (from ZooKeeper) that it lost leadership."""
    broker = state.brokers[b]
    if broker.controller is None:
        return _NOT_A_CONTROLLER
    if not state.zk.available:
        return _ZK_UNAVAILABLE
    if is_current_controller(state, broker):
        return _STILL_CONTROLLER
    return forget_notifications(put_broker(state, broker.replace(controller=None)), b)


# ---- controller work ----------------------------------------------------------------------------

def _admission(
    state: ClusterState, variant: Variant
) -> tuple[tuple[LiveBroker, ...], frozenset[tuple[BrokerId, BrokerEpoch]]]:
    """Live brokers (children of /brokers/ids) the controller admits, and those it refuses, with czxids.

    KIP-584: a broker whose supported range excludes a finalized level is not admitted.
    """
    finalized = finalized_features(state)
    admitted, refused = [], set()
    for name, node in zkm.children(state.zk, BROKER_IDS):
        broker, czxid = BrokerId(int(name)), BrokerEpoch(node.czxid)
        if finalized and incompatible_features(node.data.supported, finalized):
            if not variant.has(Bug.ADMIT_INCOMPATIBLE_BROKER):
                refused.add((broker, czxid))
                continue
        admitted.append(LiveBroker(broker, czxid, node.data.supported))
    return tuple(sorted(admitted, key=_by_id)), frozenset(refused)


def _by_id(b: LiveBroker) -> BrokerId:
    return b.id


def topic_assignment(state: ClusterState) -> Assignment:
    """The topic's replicas by partition: /brokers/topics/t exists from the start, until a KRaft controller's write
    deletes the topic an admin deleted on KRaft (scope delete-topics); () then."""
    node = zkm.get(state.zk, TOPIC)
    return () if node is None else node.data


def partition_states(state: ClusterState) -> list[tuple[PartitionId, PartitionState, ZkVersion]]:
    """Each started partition with its state znode's data and version: a partition an admin added to the
    assignment has none until the controller starts it (``ProcessPartitionModifications``)."""
    found = []
    for p in range(len(topic_assignment(state))):
        node = zkm.get(state.zk, partition_state_path(PartitionId(p)))
        if node is not None:
            found.append((PartitionId(p), node.data, node.version))
    return found


def unstarted_partitions(state: ClusterState) -> list[PartitionId]:
    """Partitions /brokers/topics/t assigns whose state znode does not exist yet."""
    return [PartitionId(p) for p in range(len(topic_assignment(state)))
            if zkm.get(state.zk, partition_state_path(PartitionId(p))) is None]


def _tell_replicas(
    c: Broker, epochs: dict[BrokerId, BrokerEpoch], replicas: tuple[BrokerId, ...], p: PartitionId, s: PartitionState,
    skip: BrokerId | None = None,
) -> list[Message]:
    """LeaderAndIsr with partition ``p``'s new state to each of its live replicas, at their cached epochs."""
    assert c.controller is not None
    return [
        LeaderAndIsr(c.id, c.controller.epoch, epochs[r], r, p, s.leader, s.leader_epoch, s.isr)
        for r in replicas
        if r in epochs and r != skip
    ]


def _startup_requests(state: ClusterState, c: Broker, brokers: list[LiveBroker]) -> list[Message]:
    """onBrokerStartup: UpdateMetadata to each, then LeaderAndIsr for the partitions it hosts."""
    assert c.controller is not None
    assignment = topic_assignment(state)
    partitions = partition_states(state)
    leaders = tuple((s.leader, s.leader_epoch) for _, s, _ in partitions)
    out: list[Message] = []
    for b in brokers:
        out.append(UpdateMetadata(c.id, c.controller.epoch, b.epoch, b.id, leaders))
        for p, s, _ in partitions:
            if b.id in assignment[p]:
                out.append(LeaderAndIsr(c.id, c.controller.epoch, b.epoch, b.id, p, s.leader, s.leader_epoch, s.isr))
    return out


def _initialize_controller(state: ClusterState, c: BrokerId, variant: Variant) -> Result:
    """onControllerFailover: feature setup first (so admission sees it), then the broker cache."""
    broker = state.brokers[c]
    if broker.controller is None:
        return _NOT_A_CONTROLLER
    if broker.controller.initialized:
        return _INITIALIZED
    why = _unconnected(state, broker)
    if why is not None:
        return why
    ops = _feature_bootstrap_ops(state, broker, variant)
    if ops:
        state, ok = _controller_write(state, broker, ops, variant)
        if not ok:
            return state
    live, refused = _admission(state, variant)
    role = broker.controller.replace(live=live, initialized=True, refused=refused)
    broker = broker.replace(controller=role)
    zk = zkm.add_watch(state.zk, broker.session, BROKER_IDS, WatchKind.CHILD)
    state = state.replace(zk=zkm.consume(zk, c, BROKER_IDS, WatchKind.CHILD))
    sent = send(state, _startup_requests(state, broker, list(live)))
    return IN_FLIGHT_CAP if sent is None else put_broker(sent, broker)


def _process_broker_change(state: ClusterState, c: BrokerId, variant: Variant) -> Result:
    """KafkaController.processBrokerChange, as KIP-380 §Controller Detects Bounced Broker specifies."""
    acting = _acting_controller(state, c)
    if acting is None:
        return _NOT_ACTING
    if not zkm.pending(state.zk, c, BROKER_IDS, WatchKind.CHILD):
        return _NO_NOTIFICATION
    broker, role = acting
    current = {BrokerId(int(n)): BrokerEpoch(z.czxid) for n, z in zkm.children(state.zk, BROKER_IDS)}
    new, dead, bounced = classify_broker_change(role.epochs(), current, variant)
    admitted, refused = _admission(state, variant)
    started = [b for b in admitted if b.id in new or b.id in bounced]
    kept = [b for b in role.live if b.id in current and b.id not in bounced]
    live = tuple(sorted(kept + started, key=_by_id))
    role = role.replace(live=live, refused=refused)
    broker = broker.replace(controller=role)
    zk = zkm.consume(state.zk, c, BROKER_IDS, WatchKind.CHILD)
    if not variant.has(Bug.BROKER_CHANGE_WATCH_NOT_REARMED):
        zk = zkm.add_watch(zk, broker.session, BROKER_IDS, WatchKind.CHILD)
    state = state.replace(zk=zk)
    failed = dead if variant.has(Bug.BOUNCE_SKIPS_BROKER_FAILURE) else dead | bounced
    state, changed = _on_broker_failure(state, broker, failed, {b.id for b in live}, variant)
    if state.brokers[c].controller is None:  # fenced: it resigned instead
        return state
    requests = _startup_requests(state, broker, started)
    epochs = role.epochs()
    assignment = topic_assignment(state)
    for p, s in changed:
        requests += _tell_replicas(broker, epochs, assignment[p], p, s)
    sent = send(state, requests)
    return IN_FLIGHT_CAP if sent is None else put_broker(sent, broker)


def _on_broker_failure(
    state: ClusterState, c: Broker, failed: frozenset[BrokerId], live: set[BrokerId], variant: Variant
) -> tuple[ClusterState, list[tuple[PartitionId, PartitionState]]]:
    """onBrokerFailure: partitions led by a failed broker get a new leader (KIP-380 step 4).

    A failed leader's partition goes to the first live ISR replica that did not fail, in
    assignment order. A bounced leader with no such replica is offline and then online again
    at once (onBrokerStartup), so it leads again, but in a new leader epoch. A dead leader with
    no candidate leaves the partition offline with NoLeader (-1), as OfflineReplica handling
    does, until ``ElectPartitionLeader`` finds a live ISR replica.
    """
    assert c.controller is not None
    if not failed:
        return state, []
    assignment = topic_assignment(state)
    writes: list[Op] = []
    changed: list[tuple[PartitionId, PartitionState]] = []
    for p, s, version in partition_states(state):
        if s.leader not in failed:
            continue
        survivors = [r for r in assignment[p] if r in s.isr and r in live and r not in failed]
        if survivors:
            isr = tuple(r for r in s.isr if r in live and r not in failed)
            new = PartitionState(survivors[0], LeaderEpoch(s.leader_epoch + 1), isr, c.controller.epoch)
        elif s.leader in live:  # bounced, and alone in the ISR among the live
            isr = tuple(r for r in s.isr if r == s.leader or (r in live and r not in failed))
            new = PartitionState(s.leader, LeaderEpoch(s.leader_epoch + 1), isr, c.controller.epoch)
        else:  # dead with no one to take over: offline, NoLeader, the ISR kept for a clean election later
            new = PartitionState(NO_LEADER, LeaderEpoch(s.leader_epoch + 1), s.isr, c.controller.epoch)
        writes.append(SetData(partition_state_path(p), new, version))
        changed.append((p, new))
    if not writes:
        return state, []
    state, ok = _controller_write(state, c, tuple(writes), variant)
    return state, changed if ok else []


def _elect_partition_leader(state: ClusterState, c: BrokerId, p: PartitionId, variant: Variant) -> Result:
    """Offline-partition election: first live replica of the ISR in assignment order."""
    acting = _acting_controller(state, c)
    if acting is None:
        return _NOT_ACTING
    broker, role = acting
    live = role.epochs()
    path = partition_state_path(p)
    node = zkm.get(state.zk, path)
    if node is None:
        return _NOT_STARTED
    current = node.data
    if current.leader in live:
        return _LEADER_LIVE
    if p >= len(topic_assignment(state)):
        # A state znode whose topic znode is gone, as the model's one topic leaves when a KRaft controller's dual
        # write creates a partition after the topic's deletion: the controller's context has partitions only from
        # the topic znodes (KafkaController's ControllerContext), so it elects no leader for it.
        return _NOT_STARTED
    assignment = topic_assignment(state)[p]
    candidates = [r for r in assignment if r in current.isr and r in live]
    if not candidates:
        return _NO_CANDIDATE
    isr = tuple(r for r in current.isr if r in live)
    new = PartitionState(candidates[0], LeaderEpoch(current.leader_epoch + 1), isr, role.epoch)
    state, ok = _controller_write(state, broker, (SetData(path, new, node.version),), variant)
    if not ok:
        return state
    sent = send(state, _tell_replicas(broker, live, assignment, p, new))
    return IN_FLIGHT_CAP if sent is None else sent


# ---- partition creation (AdminZkClient.addPartitions, KafkaController.onNewPartitionCreation) --------------

def _zk_admin_request(
    state: ClusterState, b: BrokerId, forwarded: Refused, budget: str
) -> Refused | tuple[Broker, ClusterState, ClusterState]:
    """An admin's request served by ZooKeeper-mode broker ``b`` (ZkAdminManager): the broker, ZooKeeper as its
    server shows it, and the state with the request spent (from ``budget``); why not: a KRaft broker, no session,
    or a KRaft controller owning the metadata (``forwarded``: a migrating ZK broker forwards the request to it)."""
    broker = state.brokers[b]
    if broker.config.kraft_mode:
        return _KRAFT_BROKER
    why = _unconnected(state, broker)
    if why is not None:
        return why
    seen = seen_by(state, b)
    if kraft_claim(seen) is not None:
        return forwarded
    spent = spend(state, **{budget: 1})
    if spent is None:
        return BUDGET_SPENT
    return broker, seen, spent


def _add_partitions(state: ClusterState, b: BrokerId, replicas: tuple[BrokerId, ...]) -> Result:
    """ZkAdminManager.createPartitions: AdminZkClient.addPartitions validates the manual assignment against the
    registered brokers and writes the grown assignment to /brokers/topics/t (any version, no controller epoch:
    an admin is no controller). Once a KRaft controller has claimed ZooKeeper, a migrating ZK broker forwards the
    request to it instead (``CreatePartitions``)."""
    # Read through the broker's server. Not fenced: the grown assignment is written with version -1, as
    # AdminZkClient's is, so a stale read would lose a partition another admin added since (docs/model.md).
    served = _zk_admin_request(state, b, _FORWARDED, "partition_creations")
    if isinstance(served, Refused):
        return served
    broker, seen, spent = served
    registered = {BrokerId(int(n)) for n, _ in children(seen.zk, BROKER_IDS)}
    missing = [r for r in replicas if r not in registered]
    if missing:
        return Refused(Errors.INVALID_REPLICA_ASSIGNMENT, "unknown broker {} in the assignment", (missing[0],), spent)
    zk, results = zkm.multi(spent.zk, broker.session, (SetData(TOPIC, topic_assignment(seen) + (replicas,),
                                                               ZkVersion(-1)),), reader=b)
    return spent.replace(zk=zk, ghost=spent.ghost.replace(last_multi=results))


def _process_partition_modifications(state: ClusterState, c: BrokerId, variant: Variant) -> Result:
    """processPartitionModifications, then onNewPartitionCreation: each new partition's live replicas (in
    assignment order) make its ISR, the first its leader at leader epoch 0; its state znode is created in the
    controller's fenced write; LeaderAndIsr goes to those replicas and UpdateMetadata to every live broker. One
    without a live replica stays new, as NewPartition does."""
    acting = _acting_controller(state, c)
    if acting is None:
        return _NOT_ACTING
    broker, role = acting
    # Differs: Kafka's controller finds new partitions by comparing the assignment with its context's, on the topic's
    # data watch and at failover; the model's keeps no assignment: a partition without a state znode is not started.
    new = unstarted_partitions(state)
    if not new:
        return _NO_NEW_PARTITION
    live = role.epochs()
    assignment = topic_assignment(state)
    started: list[tuple[PartitionId, PartitionState]] = []
    for p in new:
        isr = tuple(r for r in assignment[p] if r in live)
        if isr:
            started.append((p, PartitionState(isr[0], LeaderEpoch(0), isr, role.epoch)))
    if not started:
        return _NO_LIVE_REPLICA
    creates = tuple(Create(partition_state_path(p), s) for p, s in started)
    state, ok = _controller_write(state, broker, creates, variant)
    if not ok:
        return state
    requests: list[Message] = []
    for p, s in started:
        requests += _tell_replicas(broker, live, s.isr, p, s)
    leaders = tuple((s.leader, s.leader_epoch) for _, s, _ in partition_states(state))
    requests += [UpdateMetadata(c, role.epoch, b.epoch, b.id, leaders) for b in role.live]
    sent = send(state, requests)
    return IN_FLIGHT_CAP if sent is None else sent


# ---- topic deletion (AdminZkClient.deleteTopic, TopicDeletionManager) -----------------------------------------

_NOT_MARKED = Refused(None, "/admin/delete_topics holds no mark for the topic")
_DELETE_FORWARDED = Refused(None, "a KRaft controller owns the metadata: the request is forwarded to it (DeleteTopics)")


def _mark_topic_deletion(state: ClusterState, b: BrokerId) -> Result:
    """ZkAdminManager.deleteTopics: AdminZkClient.deleteTopic creates /admin/delete_topics/t (no controller epoch:
    an admin is no controller); UNKNOWN_TOPIC_OR_PARTITION when there is no such topic, and a mark already there
    is answered NONE (TopicAlreadyMarkedForDeletionException swallowed: nothing written). Once a KRaft controller
    has claimed ZooKeeper, a migrating ZK broker forwards the request to it instead (``DeleteTopics``)."""
    served = _zk_admin_request(state, b, _DELETE_FORWARDED, "topic_deletions")
    if isinstance(served, Refused):
        return served
    broker, seen, spent = served
    if zkm.get(seen.zk, TOPIC) is None:
        return Refused(Errors.UNKNOWN_TOPIC_OR_PARTITION, "no topic {}", (TOPIC_NAME,), spent)
    if zkm.get(seen.zk, pending_deletion_path(TOPIC_NAME)) is not None:  # TopicAlreadyMarkedForDeletion: NONE
        return Unchanged("topic {} is marked for deletion already", (TOPIC_NAME,), spent)
    zk, results = zkm.multi(spent.zk, broker.session, (Create(pending_deletion_path(TOPIC_NAME), ()),), reader=b)
    return spent.replace(zk=zk, ghost=spent.ghost.replace(last_multi=results))


def _topic_deletion(state: ClusterState, c: BrokerId, variant: Variant) -> Result:
    """TopicDeletionManager.onTopicDeletion for the topic marked in /admin/delete_topics: StopReplica with
    deletePartitions to each live replica of its partitions, UpdateMetadata without them to every live broker, and
    (completeDeleteTopic) its partition state znodes, topic znode and mark deleted in the controller's fenced write.

    The controller's write fails once a KRaft controller has claimed ZooKeeper: a deletion pending then is the
    migration's (KIP-866 §Topic Deletions, ``model.kraft_migration.zk_metadata``)."""
    acting = _acting_controller(state, c)
    if acting is None:
        return _NOT_ACTING
    broker, role = acting
    mark = pending_deletion_path(TOPIC_NAME)
    if zkm.get(state.zk, mark) is None or zkm.get(state.zk, TOPIC) is None:
        return _NOT_MARKED
    assignment = topic_assignment(state)
    # Differs: Kafka deletes the znodes (completeDeleteTopic) once every replica answered its StopReplica, after
    # sending StopReplica without, then with deletePartitions; the model has no responses and deletes in one step.
    deletes = tuple(Delete(partition_state_path(p)) for p, _, _ in partition_states(state))
    deletes += (Delete(TOPIC), Delete(mark))
    state, ok = _controller_write(state, broker, deletes, variant)
    if not ok:
        return state
    live = role.epochs()
    requests: list[Message] = [StopReplica(c, role.epoch, live[r], r, PartitionId(p), True)
                               for p, replicas in enumerate(assignment) for r in replicas if r in live]
    requests += [UpdateMetadata(c, role.epoch, b.epoch, b.id, ()) for b in role.live]
    sent = send(state, requests)
    return IN_FLIGHT_CAP if sent is None else sent


# ---- reassignment (KafkaController.onApiPartitionReassignment, onPartitionReassignment) --------------------

def _api_partition_reassignment(
    state: ClusterState, c: BrokerId, p: PartitionId, replicas: tuple[BrokerId, ...], variant: Variant
) -> Result:
    """The ZK controller moves partition ``p`` to ``replicas``: the new assignment in /brokers/topics/t and the
    leader epoch bumped in its state znode, in one fenced write (updateLeaderEpochAndSendRequest), then
    LeaderAndIsr to its live replicas and UpdateMetadata to every live broker.

    Kafka moves in two phases: RS=ORS+TRS (the adding replicas started), then, once every new replica has joined
    the ISR, RS=TRS. The ZK era has no ISR expansion (only the KRaft side's AlterPartition joins a replica:
    ``model.kraft_quorum._alter_partition``), so the ZK controller's move is one step to the target, and a target
    must keep the leader (moving off it needs the completion): what the checks see of a reassignment, the
    assignment ZooKeeper and the image hold and what the replicas are told, is the first phase's."""
    acting = _acting_controller(state, c)
    if acting is None:
        return _NOT_ACTING
    broker, role = acting
    node = zkm.get(state.zk, partition_state_path(p))
    if node is None:
        return _NOT_STARTED
    if node.data.leader not in replicas:
        return MOVES_LEADER
    spent = spend(state, reassignments=1)
    if spent is None:
        return BUDGET_SPENT
    live = role.epochs()
    missing = [r for r in replicas if r not in live]
    if missing:  # validateReplicas: every target replica live (or shutting down) in the controller's context
        return Refused(Errors.INVALID_REPLICA_ASSIGNMENT, "unknown broker {} in the assignment", (missing[0],), spent)
    s = node.data
    new = PartitionState(s.leader, LeaderEpoch(s.leader_epoch + 1), s.isr, role.epoch)
    assignment = list(topic_assignment(spent))
    assignment[p] = replicas
    writes = (SetData(TOPIC, tuple(assignment), ZkVersion(-1)), SetData(partition_state_path(p), new, node.version))
    state, ok = _controller_write(spent, broker, writes, variant)
    if not ok:
        return state
    leaders = tuple((ps.leader, ps.leader_epoch) for _, ps, _ in partition_states(state))
    requests = _tell_replicas(broker, live, replicas, p, new)
    requests += [UpdateMetadata(c, role.epoch, b.epoch, b.id, leaders) for b in role.live]
    sent = send(state, requests)
    return IN_FLIGHT_CAP if sent is None else sent


def _update_features(
    state: ClusterState, c: BrokerId, feature: str, level: FeatureLevel, allow: bool, variant: Variant
) -> Result:
    acting = _acting_controller(state, c)
    if acting is None:
        return _NOT_CONTROLLER
    if state.budget.operator <= 0:
        return BUDGET_SPENT
    broker, _ = acting
    state = spend_checked(state, operator=1)
    refused, finalized = decide_update_features(state, broker, feature, level, allow, variant)
    if refused is not None:
        return refused.delivered(state)
    node = zkm.get_existing(state.zk, FEATURES)  # decide_update_features refuses without it
    write = SetData(FEATURES, FeaturesZNode(FeatureStatus.ENABLED, finalized), node.version)
    state, _ = _controller_write(state, broker, (write,), variant)
    return state


# ---- the network --------------------------------------------------------------------------------

def _deliver(state: ClusterState, m: Message, variant: Variant) -> Result:
    if m not in state.network:
        return _NOT_IN_FLIGHT
    return deliver_message(state.replace(network=state.network - {m}), m, variant)


_NOT_A_KRAFT_FOLLOWER_REQUEST = Refused(None, "not a KRaft controller's LeaderAndIsr making its broker a follower")
_READS_ZOOKEEPER = Refused(None, "the broker's ZooKeeper session is live: the new partition's log is created")
_TAKEN_WHOLE = Refused(None, "kip: a broker takes a control request whole")
_NOT_TAKEN = Refused(None, "the broker would not take the request (refused, or waiting for its registration)")


def _leader_and_isr_fails(state: ClusterState, m: Message, variant: Variant) -> Result:
    """A KRaft controller's LeaderAndIsr that makes a ZK broker a follower of its partition, handled while the
    broker's ZooKeeper session is expired (or ZooKeeper down): the request also names a partition new to the broker,
    whose log it cannot create (LogManager reads the topic's config from ZooKeeper; the SessionExpiredException
    escapes, KAFKA-9769 catching only ZooKeeperClientException), and the broker answers UNKNOWN_SERVER_ERROR, which
    the KRaft controller logs and drops (MigrationPropagatorBatch). The broker has taken the new leader epoch of the
    partition and started no fetcher (``LocalReplica.no_fetcher``); a later LeaderAndIsr at that epoch is "not a new
    epoch" and starts none either. Only a request the broker would take fails so: one it refuses, or one that waits
    for its registration, is ``Deliver``'s alone. It spends ``Budget.failed_leader_and_isrs``, 0 outside scope
    failed-leader-and-isr.

    Differs: kip's broker takes a control request whole, and no ZooKeeper read fails it part-way (the seeds say
    nothing of a broker reading its topics' configs); Kafka 3.5 to 3.9's ``ReplicaManager.makeFollowers`` takes the
    partitions one by one, recording each new leader epoch before it creates the log, and the fetchers of the
    partitions handled before the one that threw are never started (docs/guide/real-kafka.md, Findings)."""
    if not (variant.profile is Profile.KAFKA_3_9 or variant.has(Bug.LEADER_AND_ISR_APPLIED_PART_WAY)):
        return _TAKEN_WHOLE
    if m not in state.network:
        return _NOT_IN_FLIGHT
    if not isinstance(m, LeaderAndIsr) or not m.kraft or m.leader == m.dest:
        return _NOT_A_KRAFT_FOLLOWER_REQUEST
    dest = state.brokers[m.dest]
    if not dest.alive or dest.config.kraft_mode:
        return _NOT_RUNNING
    if state.zk.available and _holds_session(state, dest):
        return _READS_ZOOKEEPER
    taken = deliver_message(state.replace(network=state.network - {m}), m, variant)
    if not isinstance(taken, ClusterState):
        return _NOT_TAKEN
    spent = spend(state, failed_leader_and_isrs=1)
    if spent is None:
        return BUDGET_SPENT
    spent = spent.replace(network=spent.network - {m})
    dest = taken.brokers[m.dest]
    followed = dest.replicas[m.partition]
    assert followed is not None  # deliver_message took the LeaderAndIsr: the broker hosts the partition
    return put_broker(spent, with_replica(dest, m.partition, followed.replace(no_fetcher=True)))


def deliver_message(state: ClusterState, m: Message, variant: Variant) -> Result:
    """``m``, taken off the network (or injected by a script, ``model.harness``), reaches its destination."""
    dest = state.brokers[m.dest]
    if not dest.alive or dest.config.kraft_mode:
        return state  # the connection died with the process (a KRaft broker is a new process)
    if isinstance(m, ControlledShutdown):
        return _handle_controlled_shutdown(state, dest, m, variant)
    own = dest.kraft_epoch if m.kraft else dest.epoch
    if own == UNKNOWN_BROKER_EPOCH and not variant.has(Bug.SERVE_BEFORE_REGISTERING):
        # KafkaServer.startup opens request processing only after registerBroker: until the new
        # process knows its generation the sender's request waits (KIP-380 §Motivation, KAFKA-7235).
        return _WAITS_FOR_REGISTRATION
    refused = decide_control_request(dest, m, variant)
    if refused is not None:
        return refused.delivered(state)
    dest = dest.replace(controller_epoch=max(dest.controller_epoch, m.controller_epoch))
    match m:
        case LeaderAndIsr(partition=p, leader=leader, leader_epoch=leader_epoch, replicas=replicas):
            local = dest.replicas[p] if p < len(dest.replicas) else None
            if local is not None and leader_epoch <= local.leader_epoch and not variant.has(
                Bug.ACCEPT_OLDER_LEADER_EPOCH
            ):
                # ReplicaManager.becomeLeaderOrFollower: the partition's error, the request's controller epoch kept.
                # Differs: Kafka 3.7+ (KAFKA-16120's fix, KAFKA-16121) takes an equal leader epoch from a KRaft
                # controller; the model does not, and its KRaft controller bumps the epoch of a reassignment instead.
                return Refused(Errors.STALE_CONTROLLER_EPOCH, "leader epoch {} of partition {} is not newer than {}",
                               (leader_epoch, p, local.leader_epoch), put_broker(state, dest))
            role = ReplicaRole.LEADER if leader == dest.id else ReplicaRole.FOLLOWER
            dest = with_replica(dest, p, LocalReplica(leader_epoch, role, replicas))
            if role is ReplicaRole.LEADER:
                term = (p, leader_epoch, dest.id, dest.epoch, m.controller_epoch)
                terms = state.history.leader_terms | {term}
                state = state.replace(history=state.history.replace(leader_terms=terms))
        case UpdateMetadata(partitions=partitions, kraft=kraft, live=live, incremental=incremental):
            # ZkMetadataCache.updateMetadata: an incremental request leaves the partitions it does not name cached.
            dest = dest.replace(metadata=partitions + dest.metadata[len(partitions):] if incremental else partitions)
            if kraft and variant.has(Bug.ZK_BROKER_KEEPS_REMOVED_BROKERS):
                dest = dest.replace(metadata_live=tuple(sorted(set(dest.metadata_live) | set(live))))
            elif kraft:
                dest = dest.replace(metadata_live=live)
        case StopReplica(partition=p, delete_partition=delete):
            local = dest.replicas[p] if p < len(dest.replicas) else None
            if local is not None:
                # KIP-380 §Public Interfaces (StopReplicaRequest's delete_partitions): ReplicaManager.stopReplicas
                # removes a deleted partition from the broker (it hosts it no more); otherwise it stops fetching.
                dest = with_replica(dest, p, None if delete else local.replace(role=ReplicaRole.STOPPED))
    return put_broker(state, dest)


def _handle_controlled_shutdown(state: ClusterState, c: Broker, m: ControlledShutdown, variant: Variant) -> Result:
    """KafkaController.doControlledShutdown: move leaderships away, shrink ISRs, stop follower replicas."""
    refused = decide_controlled_shutdown(c, m, variant)  # not a controller: STALE_CONTROLLER_EPOCH
    if refused is not None:
        return refused.delivered(state)
    role = c.controller
    assert role is not None  # decide_controlled_shutdown refuses a broker that is not a controller
    if not _connected(state, c):
        return Refused(None, "the controller cannot reach ZooKeeper: the request is lost", (), state)
    live = role.epochs()
    leaving = m.broker_id
    assignment = topic_assignment(state)
    writes: list[Op] = []
    changed: list[tuple[PartitionId, PartitionState]] = []
    stops: list[PartitionId] = []
    for p, s, version in partition_states(state):
        if s.leader == leaving:
            others = [r for r in assignment[p] if r in s.isr and r in live and r != leaving]
            if others:
                new = PartitionState(others[0], LeaderEpoch(s.leader_epoch + 1), _without(s.isr, leaving), role.epoch)
            elif variant.has(Bug.SHUTDOWN_SHRINKS_LEADER_OUT_OF_ISR):
                new = PartitionState(leaving, LeaderEpoch(s.leader_epoch + 1), _without(s.isr, leaving), role.epoch)
            else:
                continue
        elif leaving in s.isr:
            new = PartitionState(s.leader, LeaderEpoch(s.leader_epoch + 1), _without(s.isr, leaving), role.epoch)
            stops.append(p)
        else:
            continue
        writes.append(SetData(partition_state_path(p), new, version))
        changed.append((p, new))
    if not writes:
        return state
    state, ok = _controller_write(state, c, tuple(writes), variant)
    if not ok:
        return state
    requests: list[Message] = []
    for p, new in changed:
        requests += _tell_replicas(c, live, assignment[p], p, new, skip=leaving)
    requests += [StopReplica(c.id, role.epoch, live[leaving], leaving, p, False) for p in stops]
    sent = send(state, requests)
    return IN_FLIGHT_CAP if sent is None else sent


def _without(isr: tuple[BrokerId, ...], b: BrokerId) -> tuple[BrokerId, ...]:
    return tuple(r for r in isr if r != b)
