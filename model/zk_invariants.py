"""Properties of the ZooKeeper era: ZooKeeper's own rules, controller election and epoch fencing,
broker generations (KIP-380), partitions, feature versioning (KIP-584), their witnesses and liveness.

They register into the one registry (``model.registry``), whose rules they follow: ALWAYS
predicates read only a state's identity (never ``state.ghost``); what a step did is read from its
ghost by TRANSITION properties; every SOMETIMES witness keeps a safety property from being
vacuous. Predicates read ground truth from ZooKeeper and compare it with what nodes believe; they
never call ``step``.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator

from model import zookeeper as zkm
from model.actions import (
    Action,
    DeleteControllerZNodes,
    Deliver,
    ElectController,
    ElectPartitionLeader,
    InitializeController,
    ProcessBrokerChange,
    Redeliver,
    UpdateFeatures,
)
from model.harness import Inject
from model.registry import always, eventually, section, sometimes, transition
from model.state import (
    BROKER_IDS,
    CONTROLLER_EPOCH,
    FEATURES,
    Broker,
    ClusterState,
    ControlledShutdown,
    ControllerRole,
    PartitionState,
    StopReplica,
    znode_data,
)
from model.types import (
    NO_LEADER,
    UNKNOWN_BROKER_EPOCH,
    BrokerEpoch,
    BrokerId,
    ControllerEpoch,
    FeatureStatus,
    LeaderEpoch,
    PartitionId,
    ZkCode,
)
from model.zk_era import (
    broker_epoch_is_stale,
    finalized_features,
    incompatible_features,
    is_current_controller,
    partition_states,
)
from model.zookeeper import WatchKind, Znode

# ---- shared readings --------------------------------------------------------------------------

def _tree(state: ClusterState) -> tuple[tuple[str, ...], tuple[Znode[Hashable], ...]]:
    return state.zk.paths, state.zk.nodes


def _partitions(state: ClusterState) -> list[PartitionState]:
    return [s for _, s, _ in partition_states(state)]


def _stale_controlled_shutdown(before: ClusterState, action: Action) -> ControlledShutdown | None:
    """The ControlledShutdown the step delivers if it is older than the epoch its controller holds for the broker."""
    if not isinstance(action, Deliver) or not isinstance(action.message, ControlledShutdown):
        return None
    m = action.message
    controller = before.brokers[m.dest].controller
    cached = None if controller is None else controller.cached_epoch(m.broker_id)
    return m if cached is not None and broker_epoch_is_stale(m.broker_epoch, cached) else None


def _in_sync_controllers(state: ClusterState) -> Iterator[ControllerRole]:
    """The roles of current, initialized controllers whose /brokers/ids watch is armed with nothing pending."""
    for b in state.brokers:
        role = b.controller
        if (
            role is not None
            and role.initialized
            and is_current_controller(state, b)
            and (b.session, BROKER_IDS, WatchKind.CHILD) in state.zk.watches
            and not zkm.pending(state.zk, b.id, BROKER_IDS, WatchKind.CHILD)
        ):
            yield role


def _registered_epochs(state: ClusterState) -> dict[BrokerId, BrokerEpoch]:
    """Each registered broker's epoch as ZooKeeper has it: its /brokers/ids znode's czxid (KIP-380)."""
    return {BrokerId(int(name)): BrokerEpoch(node.czxid) for name, node in zkm.children(state.zk, BROKER_IDS)}


# ---- ZooKeeper's own rules ----------------------------------------------------------------------
section("ZooKeeper")

@transition(
    "ZxidStrictlyIncreases",
    "The zxid never goes back, every change to the tree takes a new zxid, and czxid <= mzxid <= zxid.",
    "KIP-380 §Broker Registration in Zookeeper (czxid is a generation only because zxids increase)",
    changes=("zk",),
)
def zxid_strictly_increases(before: ClusterState, action: Action, after: ClusterState) -> bool:
    if after.zk is before.zk:  # records are immutable: the same object is the same ZooKeeper
        return True
    if after.zk.zxid < before.zk.zxid:
        return False
    if _tree(after) != _tree(before) and after.zk.zxid == before.zk.zxid:
        return False
    return all(n.czxid <= n.mzxid <= after.zk.zxid for n in after.zk.nodes)


@transition(
    "CzxidFixedForNodeLife",
    "A znode keeps its czxid while it exists; a new czxid only comes with a new znode (version 0).",
    "KIP-380 §Broker Registration in Zookeeper",
    changes=("zk",),
)
def czxid_fixed_for_node_life(before: ClusterState, action: Action, after: ClusterState) -> bool:
    if after.zk.nodes is before.zk.nodes:
        return True
    for path, node in zip(after.zk.paths, after.zk.nodes):
        old = zkm.get(before.zk, path)
        if old is not None and old.czxid != node.czxid and not (node.version == 0 and node.czxid == node.mzxid):
            return False
    return True


@always(
    "EphemeralsOnlyForLiveSessions",
    "Every ephemeral znode belongs to a live session: expiry and close take a session's ephemerals.",
    "KIP-380 §Controller Detects Bounced Broker (dead brokers are those whose znode is gone)",
)
def ephemerals_only_for_live_sessions(state: ClusterState) -> bool:
    live = {s for s, _ in state.zk.sessions}
    return all(n.ephemeral_owner == 0 or n.ephemeral_owner in live for n in state.zk.nodes)


@transition(
    "MultiIsAllOrNothing",
    "A multi that reports any failed op leaves the tree exactly as it was.",
    "KIP-380 §Broker Registration in Zookeeper (multi); KIP-866 §Controller Leadership (check + write)",
    changes=("last_multi",),
)
def multi_is_all_or_nothing(before: ClusterState, action: Action, after: ClusterState) -> bool:
    results = after.ghost.last_multi
    if not results or all(r is ZkCode.OK for r in results):
        return True
    return _tree(after) == _tree(before)


# ---- controller election and epoch fencing ---------------------------------------------------------
section("Controller election and epoch fencing")

@always(
    "AtMostOneControllerPerEpoch",
    "No two brokers believe they are the controller in the same controller epoch (zombies included).",
    "KIP-866 §Controller Leadership; KIP-380 §Motivation (controller epoch fencing)",
)
def at_most_one_controller_per_epoch(state: ClusterState) -> bool:
    epochs = [b.controller.epoch for b in state.brokers if b.controller is not None]
    return len(epochs) == len(set(epochs))


@transition(
    "ControllerEpochNeverDecreases",
    "/controller_epoch, once written, is never removed and its value never decreases.",
    "KIP-866 §Controller Leadership (the monotonic epoch invariant)",
    changes=("zk",),
)
def controller_epoch_never_decreases(before: ClusterState, action: Action, after: ClusterState) -> bool:
    if after.zk.nodes is before.zk.nodes:
        return True
    if isinstance(action, DeleteControllerZNodes):
        # KIP-866 §Rollback to ZK has the operator remove it; ZkControllerEpochsIncreaseAcrossHandOver
        # then checks what the next election writes.
        return True
    old = znode_data(before, CONTROLLER_EPOCH)
    new = znode_data(after, CONTROLLER_EPOCH)
    return old is None or (new is not None and new >= old)


@transition(
    "EveryElectionBumpsControllerEpoch",
    "A broker that becomes controller does so with /controller_epoch + 1, and writes that value.",
    "KIP-866 §Controller Leadership; KafkaZkClient.registerControllerAndIncrementControllerEpoch",
    changes=("brokers",),
)
def every_election_bumps_controller_epoch(before: ClusterState, action: Action, after: ClusterState) -> bool:
    if after.brokers is before.brokers:
        return True
    for old, new in zip(before.brokers, after.brokers):
        if old.controller is None and new.controller is not None:
            prior = znode_data(before, CONTROLLER_EPOCH) or 0
            if new.controller.epoch != prior + 1 or znode_data(after, CONTROLLER_EPOCH) != new.controller.epoch:
                return False
    return True


@transition(
    "OnlyCurrentControllerWritesApply",
    "Every controller write that ZooKeeper applies is made under the controller epoch current then.",
    "KIP-866 §Controller Leadership (every controller write is a multi checking /controller_epoch)",
    changes=("applied_writes",),
)
def only_current_controller_writes_apply(before: ClusterState, action: Action, after: ClusterState) -> bool:
    applied = after.ghost.applied_writes[len(before.ghost.applied_writes):]  # this step's entries in the log
    return all(w.writer_epoch == w.zk_epoch for w in applied)


# ---- broker generations (KIP-380) ---------------------------------------------------------------
section("Broker generations (KIP-380)")

@always(
    "BrokerEpochIsRegistrationCzxid",
    "A registered broker's own epoch equals the czxid of its current /brokers/ids/<id> znode.",
    "KIP-380 §Broker Registration in Zookeeper",
)
def broker_epoch_is_registration_czxid(state: ClusterState) -> bool:
    for b in state.brokers:
        if b.alive and b.registered:
            node = zkm.get(state.zk, f"{BROKER_IDS}/{b.id}")
            if (
                node is not None
                and node.ephemeral_owner == b.session
                and zkm.session_client(state.zk, b.session) == b.id
                and b.epoch != BrokerEpoch(node.czxid)
            ):
                return False
    return True


@transition(
    "BrokerEpochGrowsWithEachRegistration",
    "Each registration of a broker id gives it an epoch greater than its previous registration's.",
    "KIP-380 §Motivation (a unique and monotonically increasing generation); §Rejected Alternatives",
    changes=("brokers",),
)
def broker_epoch_grows_with_each_registration(before: ClusterState, action: Action, after: ClusterState) -> bool:
    if after.brokers is before.brokers:
        return True
    for old, new in zip(before.brokers, after.brokers):
        if new.registered and not old.registered:
            previous = before.history.registered_epoch(new.id)
            if previous is not None and new.epoch <= previous:
                return False
    return True


@transition(
    "NoStaleControlRequestApplied",
    "A broker changes nothing on a control request for an earlier generation of itself or from an older"
    " controller epoch.",
    "KIP-380 §Broker Rejects Control Requests Applied to Former Generations",
    actions=(Deliver,),
)
def no_stale_control_request_applied(before: ClusterState, action: Action, after: ClusterState) -> bool:
    if not isinstance(action, Deliver) or isinstance(action.message, ControlledShutdown):
        return True
    m = action.message
    dest = before.brokers[m.dest]
    if not dest.alive:
        return True
    # A KRaft controller addresses the broker's KRaft generation (the offset of its registration record).
    own = dest.kraft_epoch if m.kraft else dest.epoch
    # A process that has not registered yet has no generation: every addressed request is for an earlier one.
    unborn = own == UNKNOWN_BROKER_EPOCH and m.broker_epoch != UNKNOWN_BROKER_EPOCH
    stale = unborn or broker_epoch_is_stale(m.broker_epoch, own) or m.controller_epoch < dest.controller_epoch
    return not stale or after.brokers[m.dest] == dest


@always(
    "ControllerSeesEveryBounce",
    "Once the controller has processed broker changes, its cached epochs equal the live brokers' czxids,"
    " and every live broker it does not cache is one it refused at that very czxid.",
    "KIP-380 §Controller Detects Bounced Broker",
)
def controller_sees_every_bounce(state: ClusterState) -> bool:
    for role in _in_sync_controllers(state):
        cached = role.epochs()
        seen = {**dict(role.refused), **cached}
        if seen != _registered_epochs(state) or len(seen) != len(cached) + len(role.refused):
            return False
    return True


@transition(
    "StaleControlledShutdownMovesNothing",
    "A ControlledShutdown older than the broker epoch the controller holds moves no leadership and sends nothing.",
    "KIP-380 §Controller Rejects ControlledShutdownRequest Sent from Former Generations",
)
def stale_controlled_shutdown_moves_nothing(before: ClusterState, action: Action, after: ClusterState) -> bool:
    m = _stale_controlled_shutdown(before, action)
    if m is None:
        return True
    return list(_partitions(before)) == list(_partitions(after)) and after.network == before.network - {m}


# ---- partitions ---------------------------------------------------------------------------------
section("Partitions")

@transition(
    "LeaderEpochsNeverDecrease",
    "A partition's leader epoch never decreases, in ZooKeeper or in a running broker; a running broker's "
    "replica vanishes only when a StopReplica deletes it.",
    "KIP-380 §Motivation (LeaderAndIsr ordering), §Public Interfaces (StopReplica's delete_partitions); "
    "KIP-500 §Broker States (leader epochs)",
)
def leader_epochs_never_decrease(before: ClusterState, action: Action, after: ClusterState) -> bool:
    if after.zk.nodes is not before.zk.nodes:
        for old, new in zip(_partitions(before), _partitions(after)):
            if new.leader_epoch < old.leader_epoch:
                return False
    deleted = _deleted_replica(action)
    for b_old, b_new in zip(before.brokers, after.brokers):
        if b_old is not b_new and b_old.alive and b_new.alive:
            for p, (r_old, r_new) in enumerate(zip(b_old.replicas, b_new.replicas)):
                if r_old is None:
                    continue
                # A deleted partition is gone from the broker, as the controller asked; a broker that
                # hosts it again starts from the request that re-creates it.
                if r_new is None and deleted != (b_new.id, p):
                    return False
                if r_new is not None and r_new.leader_epoch < r_old.leader_epoch:
                    return False
    return True


def _deleted_replica(action: Action) -> tuple[BrokerId, PartitionId] | None:
    """The (broker, partition) a delivered StopReplica with delete_partitions removes, if the step is one
    (from the network, or a script's request delivered at once)."""
    if isinstance(action, (Deliver, Redeliver)):
        m: object = action.message
    elif isinstance(action, Inject) and action.deliver:
        m = action.request
    else:
        return None
    return (m.dest, m.partition) if isinstance(m, StopReplica) and m.delete_partition else None


LeaderTerm = tuple[BrokerId, BrokerEpoch, ControllerEpoch]  # who led, in which generation, sent by which controller


def _terms_by_leader_epoch(state: ClusterState) -> dict[tuple[PartitionId, LeaderEpoch], list[LeaderTerm]]:
    by_epoch: dict[tuple[PartitionId, LeaderEpoch], list[LeaderTerm]] = {}
    for p, e, broker, broker_epoch, controller_epoch in state.history.leader_terms:
        by_epoch.setdefault((p, e), []).append((broker, broker_epoch, controller_epoch))
    return by_epoch


@always(
    "OneLeaderPerLeaderEpoch",
    "One broker leads a partition in a given leader epoch, and under one controller a bounced broker never leads"
    " again in a leader epoch its earlier generation led in.",
    "KIP-380 §Controller Detects Bounced Broker (onBrokerFailure before onBrokerStartup)",
)
def one_leader_per_leader_epoch(state: ClusterState) -> bool:
    for terms in _terms_by_leader_epoch(state).values():
        if len({broker for broker, _, _ in terms}) > 1:
            return False
        per_controller: dict[ControllerEpoch, set[BrokerEpoch]] = {}
        for _, broker_epoch, controller_epoch in terms:
            per_controller.setdefault(controller_epoch, set()).add(broker_epoch)
        if any(len(epochs) > 1 for epochs in per_controller.values()):
            return False
    return True


@always(
    "LeaderIsInIsr",
    "Every partition's leader, when it has one, is in its ISR.",
    "KIP-380 §Motivation (controlled shutdown moves leaders within the ISR)",
)
def leader_is_in_isr(state: ClusterState) -> bool:
    return all(s.leader == NO_LEADER or s.leader in s.isr for s in _partitions(state))


# ---- feature versioning (KIP-584) --------------------------------------------------------------------
section("Feature versioning (KIP-584)")

@always(
    "FinalizedFeaturesWellFormed",
    "Every finalized feature has 1 <= min_version_level <= max_version_level.",
    "KIP-584 §Feature ZK node (min_version_level >= 1, max >= 1, min <= max)",
)
def finalized_features_well_formed(state: ClusterState) -> bool:
    data = znode_data(state, FEATURES)
    return data is None or all(1 <= lo <= hi for _, (lo, hi) in data.finalized)


@always(
    "AdmittedBrokersSupportFinalizedFeatures",
    "Every broker the current controller admits supports every finalized feature level.",
    "KIP-584 §Broker protections against race conditions; §Changes to Kafka Controller (UpdateFeatures validation)",
)
def admitted_brokers_support_finalized_features(state: ClusterState) -> bool:
    finalized = finalized_features(state)
    if not finalized:
        return True
    for c in state.brokers:
        if c.controller is not None and c.controller.initialized and is_current_controller(state, c):
            for b in c.controller.live:
                if incompatible_features(state.brokers[b.id].config.supported, finalized):
                    return False
    return True


@transition(
    "FeatureEpochNeverDecreases",
    "/features is never re-created and its version, the feature epoch, never decreases.",
    "KIP-584 §Feature ZK node (the epoch is monotonically increasing)",
    changes=("zk",),
)
def feature_epoch_never_decreases(before: ClusterState, action: Action, after: ClusterState) -> bool:
    if after.zk.nodes is before.zk.nodes:
        return True
    old = zkm.get(before.zk, FEATURES)
    new = zkm.get(after.zk, FEATURES)
    return old is None or (new is not None and new.czxid == old.czxid and new.version >= old.version)


@always(
    "DisabledFeaturesFinalizeNothing",
    "A Disabled /features znode finalizes no feature.",
    "KIP-584 §Feature ZK node status (Disabled: finalized features are not relevant)",
)
def disabled_features_finalize_nothing(state: ClusterState) -> bool:
    data = znode_data(state, FEATURES)
    return data is None or data.status is FeatureStatus.ENABLED or not data.finalized


@transition(
    "BrokerFeatureCacheNeverGoesBack",
    "A running broker's finalized-feature cache never goes back in epoch.",
    "KIP-584 §Broker protections against race conditions (epoch check on cache update)",
)
def broker_feature_cache_never_goes_back(before: ClusterState, action: Action, after: ClusterState) -> bool:
    return all(
        new.features.epoch >= old.features.epoch
        for old, new in zip(before.brokers, after.brokers)
        if old.alive and new.alive
    )


# ---- witnesses -------------------------------------------------------------------------------------
section("Witnesses")

_CONTROLLER_WRITES = (InitializeController, ElectPartitionLeader, UpdateFeatures)


@sometimes(
    "ZombieControllerAttemptsWrite",
    "A controller that lost its leadership, but does not know it yet, tries to write to ZooKeeper.",
    "KIP-866 §Controller Leadership (in-flight writes from the previous controller epoch)",
    changes=("last_multi",),
)
def zombie_controller_attempts_write(before: ClusterState, action: Action, after: ClusterState) -> bool:
    if isinstance(action, _CONTROLLER_WRITES):
        writer = action.controller
    elif isinstance(action, Deliver) and isinstance(action.message, ControlledShutdown):
        writer = action.message.dest
    else:
        return False
    b = before.brokers[writer]
    return b.controller is not None and not is_current_controller(before, b) and bool(after.ghost.last_multi)


@sometimes(
    "StaleElectionRefusedAtLeader",
    "A broker that read /controller_epoch through a lagging ZooKeeper server runs for controller, and the"
    " election's multi refuses it at the leader.",
    "KIP-866 §Controller Leadership; KIP-380 §Motivation (controller epoch fencing)",
    actions=(ElectController,),
)
def stale_election_refused_at_leader(before: ClusterState, action: Action, after: ClusterState) -> bool:
    return (isinstance(action, ElectController) and zkm.lagging(before.zk, action.broker)
            and after.brokers[action.broker].controller is None
            and any(r is not ZkCode.OK and r is not ZkCode.RUNTIME_INCONSISTENCY for r in after.ghost.last_multi))


@sometimes(
    "BouncedBrokerGetsOldGenerationRequest",
    "A broker receives a control request addressed to an earlier generation of itself.",
    "KIP-380 §Motivation (a bounced broker processing its earlier generation's StopReplica)",
    actions=(Deliver,),
)
def bounced_broker_gets_old_generation_request(before: ClusterState, action: Action, after: ClusterState) -> bool:
    if not isinstance(action, Deliver) or isinstance(action.message, ControlledShutdown):
        return False
    dest = before.brokers[action.message.dest]
    return dest.alive and broker_epoch_is_stale(action.message.broker_epoch, dest.epoch)


@sometimes(
    "BrokerRefusedForFeatures",
    "The controller leaves a registered broker out because its supported range excludes a finalized level.",
    "KIP-584 §Broker protections against race conditions",
    actions=(ProcessBrokerChange, InitializeController),
)
def broker_refused_for_features(before: ClusterState, action: Action, after: ClusterState) -> bool:
    if not isinstance(action, (ProcessBrokerChange, InitializeController)):
        return False
    c = after.brokers[action.controller].controller
    if c is None:
        return False
    cached = c.epochs()
    return any(int(name) not in cached for name, _ in zkm.children(after.zk, BROKER_IDS))


@sometimes(
    "FastBounceDetected",
    "The controller sees a broker id it knew come back with a higher czxid and treats it as bounced.",
    "KIP-380 §Controller Detects Bounced Broker",
    actions=(ProcessBrokerChange,),
)
def fast_bounce_detected(before: ClusterState, action: Action, after: ClusterState) -> bool:
    if not isinstance(action, ProcessBrokerChange):
        return False
    old, new = before.brokers[action.controller].controller, after.brokers[action.controller].controller
    if old is None or new is None:
        return False
    known = old.epochs()
    return any(b.id in known and b.epoch > known[b.id] for b in new.live)


@sometimes(
    "StaleControlledShutdownArrives",
    "A ControlledShutdown from an earlier generation reaches the controller that knows the newer one.",
    "KIP-380 §Controller Rejects ControlledShutdownRequest Sent from Former Generations",
)
def stale_controlled_shutdown_arrives(before: ClusterState, action: Action, after: ClusterState) -> bool:
    return _stale_controlled_shutdown(before, action) is not None


@sometimes(
    "LeaderEpochReusedAcrossControllerFailover",
    "Finding: a restarted broker leads again in the leader epoch its earlier generation led in, because a new"
    " controller, which has no cached epochs, cannot tell that it bounced.",
    "KIP-380 §Controller Detects Bounced Broker (detection compares with the controller's own cache)",
)
def leader_epoch_reused_across_controller_failover(before: ClusterState, action: Action, after: ClusterState) -> bool:
    return any(
        len({broker_epoch for _, broker_epoch, _ in terms}) > 1 for terms in _terms_by_leader_epoch(after).values()
    )


@sometimes(
    "ControllerFailover",
    "A second controller is elected after the first lost its session.",
    "KIP-866 §Controller Leadership",
)
def controller_failover(before: ClusterState, action: Action, after: ClusterState) -> bool:
    return any(
        old.controller is None and new.controller is not None and new.controller.epoch >= 2
        for old, new in zip(before.brokers, after.brokers)
    )


@sometimes(
    "MultiFails",
    "A multi fails part-way and ZooKeeper applies none of it.",
    "KIP-866 §Controller Leadership (conditional multi-writes)",
    changes=("last_multi",),
)
def multi_fails(before: ClusterState, action: Action, after: ClusterState) -> bool:
    return any(r is not ZkCode.OK for r in after.ghost.last_multi)


# ---- liveness (leads-to under weak fairness of the non-perturbations) ------------------------------
section("Liveness")


def _holds_registration(state: ClusterState, b: Broker) -> bool:
    """The broker's process holds /brokers/ids/<id>, created in its own live session."""
    node = zkm.get(state.zk, f"{BROKER_IDS}/{b.id}")
    return (
        b.registered
        and node is not None
        and node.ephemeral_owner == b.session
        and zkm.session_client(state.zk, b.session) == b.id
    )


def _every_live_zk_broker_registered(state: ClusterState) -> bool:
    return all(_holds_registration(state, b) for b in state.brokers if b.alive and not b.config.kraft_mode)


@eventually(
    "EveryLiveBrokerEventuallyRegistered",
    "Whenever a running ZooKeeper broker is not registered, eventually every running one holds its"
    " /brokers/ids/<id> in its own session.",
    "KIP-380 §Broker Registration in Zookeeper (a broker that (re)-joins creates its ephemeral znode)",
    when=lambda state: not _every_live_zk_broker_registered(state),
)
def every_live_broker_eventually_registered(state: ClusterState) -> bool:
    return _every_live_zk_broker_registered(state)


def _controller_caught_up(state: ClusterState) -> bool:
    """Every current, initialized controller's cached epochs and refusals are /brokers/ids's czxids."""
    registered = _registered_epochs(state)
    for c in state.brokers:
        if c.controller is not None and c.controller.initialized and is_current_controller(state, c):
            if {**dict(c.controller.refused), **c.controller.epochs()} != registered:
                return False
    return True


@eventually(
    "ControllerEventuallySeesEveryBroker",
    "Whenever the current controller's view of the registered brokers differs from /brokers/ids, it"
    " eventually matches it again: no new, dead or bounced broker goes unprocessed.",
    "KIP-380 §Motivation (assumption 4: the controller has processed the BrokerChange once a bounce ends);"
    " §Controller Detects Bounced Broker",
    when=lambda state: not _controller_caught_up(state),
)
def controller_eventually_sees_every_broker(state: ClusterState) -> bool:
    return _controller_caught_up(state)
