"""Properties of the KRaft quorum and of brokers on KRaft (KIP-500; KIP-866 §Broker Registration).

They register into the one registry (``model.registry``), after the ZooKeeper era's and before the
migration's (``model.invariants`` imports ``model.zk_invariants``, this module, then
``model.migration_invariants``: the catalogue's order), with the same rules: ALWAYS predicates
read only a state's identity (``history`` included, never ``ghost``); what a step did is read from
its ghost by TRANSITION properties. The witnesses and liveness properties of the KRaft side
(``SplitVote``, ``FollowerTruncates``, ``LiveFencedBrokerEventuallyUnfenced``) are registered with
the migration's, in ``model.migration_invariants``, where the catalogue has always listed them.

What "committed" means: ``history.committed``, the longest prefix any high watermark has
covered (Raft's committed log); ``committed_image`` is what that prefix replays to.
"""

from __future__ import annotations

from model.actions import Action, BrokerHeartbeat, DeliverHeartbeat, HeartbeatResponseLost, RegisterWithKRaft
from model.kraft import (
    Incarnation,
    Log,
    MetadataImage,
    PartitionChangeRecord,
    RegisterBrokerRecord,
    image_of,
    majority,
    replay,
)
from model.kraft_quorum import ctrl, is_active, own_image
from model.record import remembers_last
from model.registry import always, section, sometimes, transition
from model.state import TOPIC, BrokerHeartbeatRequest, ClusterState, znode_data
from model.types import UNKNOWN_BROKER_EPOCH, BrokerEpoch, BrokerId


# Read by three ALWAYS properties of each new state in turn: computed once (looking the image up hashes the log).
@remembers_last
def committed_image(state: ClusterState) -> MetadataImage:
    return image_of(state.history.committed)


# ---- the KRaft quorum --------------------------------------------------------------------------

section("KRaft quorum (KIP-500)")


@always(
    "AtMostOneKRaftLeaderPerEpoch",
    "No two controllers ever lead the quorum in the same epoch.",
    "KIP-500 §Controller Quorum (Raft election safety); RaftEventSimulationTest SingleLeader",
)
def at_most_one_kraft_leader_per_epoch(state: ClusterState) -> bool:
    epochs = [e for e, _ in state.history.kraft_terms]
    return len(epochs) == len(set(epochs))


@transition(
    "KRaftEpochNeverDecreases",
    "A controller's persisted epoch never goes down, across crashes and restarts too.",
    "KIP-500 §Controller Quorum; RaftEventSimulationTest MonotonicEpoch",
    changes=("controllers",),
)
def kraft_epoch_never_decreases(before: ClusterState, action: Action, after: ClusterState) -> bool:
    if after.controllers is before.controllers:
        return True
    return all(a.epoch >= b.epoch for b, a in zip(before.controllers, after.controllers))


@transition(
    "CommittedRecordsNeverChange",
    "Once committed, a record stays at its offset: the committed log only ever grows.",
    "KIP-500 §Controller Quorum; RaftEventSimulationTest ConsistentCommittedData",
    changes=("committed",),
)
def committed_records_never_change(before: ClusterState, action: Action, after: ClusterState) -> bool:
    old, new = before.history.committed, after.history.committed
    return new is old or new[: len(old)] == old


@always(
    "CommittedRecordsOnMajority",
    "Every committed record sits, at its offset, in the logs of a majority of the voters.",
    "KIP-500 §Controller Quorum; RaftEventSimulationTest MajorityReachedHighWatermark",
)
def committed_records_on_majority(state: ClusterState) -> bool:
    committed = state.history.committed
    if not committed:
        return True
    need = majority(len(state.controllers))
    n = len(committed)
    holders = sum(1 for c in state.controllers if len(c.log) >= n and c.log[n - 1] == committed[-1])
    return holders >= need


@transition(
    "HighWatermarkNeverDecreases",
    "A running controller's high watermark never moves back (it is soft state: a restart starts it over).",
    "KIP-500 §Controller Quorum; RaftEventSimulationTest MonotonicHighWatermark",
    changes=("controllers",),
)
def high_watermark_never_decreases(before: ClusterState, action: Action, after: ClusterState) -> bool:
    if after.controllers is before.controllers:
        return True
    return all(
        a.high_watermark >= b.high_watermark
        for b, a in zip(before.controllers, after.controllers)
        if b.alive and a.alive
    )


# ---- brokers on KRaft ----------------------------------------------------------------------------

section("Brokers on KRaft (KIP-500 §Broker States)")


@always(
    "FencedBrokersNeverServed",
    "A KRaft broker's metadata for clients lists only brokers its image has unfenced.",
    "KIP-500 §Broker States (Fenced: omitted from the metadata sent to clients)",
)
def fenced_brokers_never_served(state: ClusterState) -> bool:
    for b in state.brokers:
        if b.alive and b.config.kraft_mode:
            unfenced = set(b.image.unfenced())
            if any(x not in unfenced for x in b.metadata_live):
                return False
    return True


@transition(
    "UnfencedOnlyWhenCaughtUp",
    "A KRaft broker is unfenced only once it has replayed the metadata up to its own registration: by its own "
    "heartbeat, answered or with its answer lost, or by a held one delivered late, each judged by the offset it "
    "carried.",
    "KIP-500 §Broker States (Fenced while it fetches the newest metadata); reference §3.2",
    actions=(BrokerHeartbeat, HeartbeatResponseLost, DeliverHeartbeat),
)
def unfenced_only_when_caught_up(before: ClusterState, action: Action, after: ClusterState) -> bool:
    match action:
        case BrokerHeartbeat(broker=bid, controller=c) | HeartbeatResponseLost(broker=bid, controller=c):
            offset: int | None = before.brokers[bid].image.offset  # the heartbeat carries what the broker replayed
        case DeliverHeartbeat(request=request):
            bid, c, offset = request.broker, request.controller, request.metadata_offset
        case _:
            return True
    if not before.brokers[bid].config.kraft_mode or offset is None:
        return True
    was = own_image(ctrl(before, c)).registration(bid)
    now = own_image(ctrl(after, c)).registration(bid)
    if was is None or now is None or not was.fenced or now.fenced:
        return True
    return offset > was.epoch


@always(
    "BrokerEpochIsRegistrationOffset",
    "Every committed registration's broker epoch is the offset where its records begin (the controller's next "
    "write offset): its RegisterBrokerRecord's own, as the model writes no record before it.",
    "KIP-500 §Broker Registration; reference §3.1 (newBrokerEpoch = nextWriteOffset; Kafka may write records "
    "cleaning up an unclean incarnation first: docs/guide/real-kafka.md, Findings)",
)
def broker_epoch_is_registration_offset(state: ClusterState) -> bool:
    committed = state.history.committed
    for i, entry in enumerate(committed):
        if isinstance(entry.record, RegisterBrokerRecord) and entry.record.epoch != i:
            return False
    return True


@always(
    "ZkBrokersAdmittedAtMetadataVersion",
    "Every migrating ZK broker KRaft admitted runs an IBP equal to the quorum's metadata.version.",
    "KIP-866 §Broker Registration",
)
def zk_brokers_admitted_at_metadata_version(state: ClusterState) -> bool:
    image = committed_image(state)
    return all(r.ibp == image.metadata_version for r in image.brokers if r.is_migrating_zk_broker)


@transition(
    "NoKRaftBrokerTakesALiveZkBrokersId",
    "A KRaft broker is never registered under the id of a ZK broker whose registration is still live: unfenced, its "
    "session not lapsed at the deciding controller.",
    "KIP-866 §Broker Registration (a KRaft broker with an existing ZK broker's id is rejected); "
    "ClusterControlManager.registerBroker (BrokerHeartbeatManager.hasValidSession)",
    actions=(RegisterWithKRaft,),
)
def no_kraft_broker_takes_live_zk_id(before: ClusterState, action: Action, after: ClusterState) -> bool:
    if not isinstance(action, RegisterWithKRaft) or not before.brokers[action.broker].config.kraft_mode:
        return True
    c_before, c_after = ctrl(before, action.controller), ctrl(after, action.controller)
    if len(c_after.log) == len(c_before.log):
        return True
    old = own_image(c_before).registration(action.broker)
    return old is None or old.fenced or action.broker in c_before.lapsed or not old.is_migrating_zk_broker


# ---- responses lost after their requests took effect --------------------------------------------

section("Lost responses and retries (KIP-500 §Broker Metadata Management)")


@always(
    "OneBrokerEpochPerIncarnation",
    "Every committed registration of one broker incarnation carries the same broker epoch: a registration retried "
    "after its response was lost is the same registration, never a second one.",
    "KIP-500 §Broker Metadata Management (brokers register with the controller quorum); reference §3.1 "
    "(registerBroker: the same incarnation keeps its epoch)",
)
def one_broker_epoch_per_incarnation(state: ClusterState) -> bool:
    epochs: dict[tuple[int, int], int] = {}
    for entry in state.history.committed:
        rec = entry.record
        if isinstance(rec, RegisterBrokerRecord) and epochs.setdefault((rec.broker, rec.incarnation), rec.epoch) \
                != rec.epoch:
            return False
    return True


@transition(
    "BrokerEpochGivenByController",
    "A broker takes on only a broker epoch a controller gave its incarnation: when a running broker's KRaft epoch "
    "changes to a known one, a controller's log holds that incarnation's RegisterBrokerRecord with that epoch.",
    "KIP-866 §Broker Registration; KIP-500 §Broker Metadata Management (a broker whose registration response was "
    "lost has no epoch until a retry answers it)",
    changes=("brokers",),
)
def broker_epoch_given_by_controller(before: ClusterState, action: Action, after: ClusterState) -> bool:
    if after.brokers is before.brokers:
        return True
    for was, b in zip(before.brokers, after.brokers):
        if b is was or not b.alive or b.kraft_epoch == was.kraft_epoch or b.kraft_epoch == UNKNOWN_BROKER_EPOCH:
            continue
        if not any(_gave(c.log, b.id, b.incarnation, b.kraft_epoch) for c in after.controllers):
            return False
    return True


def _gave(log: Log, broker: BrokerId, incarnation: Incarnation, epoch: BrokerEpoch) -> bool:
    """``log`` holds ``incarnation``'s RegisterBrokerRecord with ``epoch`` (where: BrokerEpochIsRegistrationOffset)."""
    return any(isinstance(rec := e.record, RegisterBrokerRecord)
               and (rec.broker, rec.incarnation, rec.epoch) == (broker, incarnation, epoch) for e in log)


# ---- reassignments ------------------------------------------------------------------------------

section("Reassignments (KIP-866 §ZK Broker RPCs)")


@transition(
    "ReassignmentCompletesWithTargetInIsr",
    "A record that ends a partition's reassignment (its adding and removing replicas cleared) leaves every replica"
    " of the partition in its ISR, and one that moves a partition without a reassignment in progress after it"
    " (a move done at once) adds no replica outside the ISR: a replica joins an assignment for good only once it"
    " has caught up.",
    "KIP-866 §ZK Broker RPCs (\"following reassignments ... StopReplicas\": a reassignment ends only once its new"
    " replicas serve); Kafka's PartitionReassignmentReplicas.maybeCompleteReassignment",
    changes=("controllers",),
)
def reassignment_completes_with_target_in_isr(before: ClusterState, action: Action, after: ClusterState) -> bool:
    if after.controllers is before.controllers:
        return True
    for was, c in zip(before.controllers, after.controllers):
        if c.log is was.log or len(c.log) <= len(was.log) or c.log[: len(was.log)] != was.log:
            continue
        image = own_image(was)
        for entry in c.log[len(was.log):]:
            rec = entry.record
            if not isinstance(rec, PartitionChangeRecord) or rec.partition >= len(image.partitions):
                image = replay(image, rec)
                continue
            prev = image.partitions[rec.partition]
            image = replay(image, rec)
            part = image.partitions[rec.partition]
            if part.reassigning:
                continue
            # a partition copied from ZooKeeper and never moved has its replicas in /brokers/topics/t only
            assignment = znode_data(before, TOPIC) or ()
            known = prev.replicas or (assignment[rec.partition] if rec.partition < len(assignment) else ())
            joined = set(part.replicas) if prev.reassigning else set(part.replicas) - set(known)
            if not joined <= set(part.isr):
                return False
    return True


# ---- heartbeats held in the network ------------------------------------------------------------

section("Heartbeats delivered late (KIP-380 generations on KRaft)")

_FORMER_GENERATIONS = ("KIP-380 §Controller Rejects ControlledShutdownRequest Sent from Former Generations (on KRaft "
                       "a heartbeat carries WantShutDown: reference §3.2, checkBrokerEpoch)")


@transition(
    "StaleHeartbeatWritesNothing",
    "A heartbeat from an earlier generation of a broker (a broker epoch older than its registration's in the "
    "active controller's log) that reaches the controller late writes nothing to the log.",
    _FORMER_GENERATIONS,
)
def stale_heartbeat_writes_nothing(before: ClusterState, action: Action, after: ClusterState) -> bool:
    r = _stale_heartbeat(before, action)
    return r is None or ctrl(after, r.controller).log == ctrl(before, r.controller).log


@sometimes(
    "StaleHeartbeatArrives",
    "A heartbeat from an earlier generation of a broker reaches the active controller that holds a newer "
    "registration of it.",
    _FORMER_GENERATIONS,
)
def stale_heartbeat_arrives(before: ClusterState, action: Action, after: ClusterState) -> bool:
    return _stale_heartbeat(before, action) is not None


def _stale_heartbeat(before: ClusterState, action: Action) -> BrokerHeartbeatRequest | None:
    """The held heartbeat ``action`` delivers, when its broker epoch is older than the broker's registration in
    the log of the active controller it reaches."""
    if not isinstance(action, DeliverHeartbeat):
        return None
    r = action.request
    c = ctrl(before, r.controller)
    if not is_active(c):
        return None
    reg = own_image(c).registration(r.broker)
    return r if reg is not None and r.broker_epoch < reg.epoch else None
