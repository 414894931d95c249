"""Model-independent properties: what must hold however the protocol is written, over what a user can see.

Every other property of the registry restates part of the design (the driver's table, the ghosts the
rules record); when the design itself is wrong, the model and the implementation share the mistake,
agree with each other, and those properties agree with both. These do not read the rules:

- They read only what someone outside the processes could see: ZooKeeper's znodes (with the stamps
  Kafka writes into them: /controller's claimant, /migration's writer and offset), the controllers'
  metadata logs and high watermarks (the committed log and its image), the brokers' metadata caches
  and what they serve, the messages sent and in flight, and what ``model.observations`` has observed
  (``ghost.observed``). None imports ``model.zk_era``, ``model.kraft_quorum`` or
  ``model.kraft_migration``, or calls ``step``.
- Each is registered ``independent``, which the invariant catalogue shows. ALWAYS ones read a
  state's identity only; the ones that need the past are TRANSITIONs reading ``ghost.observed``.
- Differential testing (``properties.differential``) evaluates them on the implementation's own
  state: its abstraction (``impl.refinement``) maps the values read here from the implementation's
  processes (znodes, Raft logs and high watermarks, broker caches, messages, none of them a model
  decision), and it keeps the implementation's own observations, with its clock where the model
  has none.
- Each has a seeded bug put into the model (``model.bugs``) and into the implementation
  (``impl.bugs``) alike, which nothing but the property catches.

They register last (``model.invariants`` imports this module after the others), so the registry's
earlier order, and everything pinned on it, stays.
"""

from __future__ import annotations

from collections.abc import Callable

from model import zookeeper as zkm
from model.actions import Action, BrokerHeartbeat, Deliver, RegisterWithKRaft
from model.kraft import (
    TOPIC_NAME,
    BrokerState,
    FeatureLevelRecord,
    MetadataImage,
    QuorumRole,
    RegisterBrokerRecord,
    decided_view,
    image_of,
)
from model.migration import CONFIG, MIGRATION, pending_deletion_path
from model.record import remembers_last
from model.registry import always, section, sometimes, transition
from model.state import (
    CONTROLLER_EPOCH,
    Broker,
    ClusterState,
    KRaftController,
    LeaderAndIsr,
    LocalReplica,
    StopReplica,
    UpdateMetadata,
    kraft_claim,
    zk_partitions,
    znode_data,
)
from model.types import UNKNOWN_BROKER_EPOCH, BrokerId, LeaderEpoch, PartitionId, metadata_changed_between

# Znodes holding the cluster's metadata (topics, partition states, configs, pending deletions), as
# opposed to the controllers' own (/controller, /controller_epoch, /migration) and the brokers'.
METADATA_ZNODES = ("/brokers/topics", "/config", "/admin")


def _newest_leader(state: ClusterState) -> KRaftController | None:
    """The running, activated leader of the highest epoch any controller has reached, if there is one.

    Raft's leader completeness: its log holds every committed record (a deposed leader that has not
    heard of the newer epoch may not)."""
    if not state.controllers:
        return None
    top = max(c.epoch for c in state.controllers)
    for c in state.controllers:
        if c.epoch == top and c.alive and c.role is QuorumRole.LEADER and c.active:
            return c
    return None


def _zk_partitions(state: ClusterState) -> tuple[tuple[BrokerId, LeaderEpoch], ...]:
    """(leader, leader epoch) of each partition, as ZooKeeper's state znodes hold them."""
    return tuple((s.leader, s.leader_epoch) for s in zk_partitions(state))


def _zk_metadata(state: ClusterState) -> tuple[tuple[str, zkm.Znode[object]], ...]:
    return tuple((p, n) for p, n in zip(state.zk.paths, state.zk.nodes) if p.startswith(METADATA_ZNODES))


def _leaders(image: MetadataImage) -> tuple[tuple[BrokerId, LeaderEpoch], ...]:
    return tuple((p.leader, p.leader_epoch) for p in image.partitions)


def _zk_view(state: ClusterState) -> tuple[object, ...]:
    """ZooKeeper's metadata as an image shows it: each partition's leader, ISR and leader epoch; the config."""
    return tuple((s.leader, s.isr, s.leader_epoch) for s in zk_partitions(state)), znode_data(state, CONFIG)


def _image_view(image: MetadataImage) -> tuple[object, ...]:
    return tuple((p.leader, p.isr, p.leader_epoch) for p in image.partitions), image.config


def _may_change_metadata_version(was: KRaftController, now: KRaftController) -> bool:
    """Whether the controller's committed metadata.version may differ between ``was`` and ``now``: it cannot
    when its committed log only grew, by no FeatureLevelRecord (a cheap test before replaying images)."""
    kept = was.high_watermark
    # a high watermark past the log is a broken quorum's (seeded bug commit_without_majority): replay, do not index
    if now.high_watermark < kept or min(len(now.log), len(was.log)) < kept or (
            kept and now.log[kept - 1] != was.log[kept - 1]):
        return True
    return any(isinstance(e.record, FeatureLevelRecord) for e in now.log[kept:now.high_watermark])


def _activated(c: KRaftController) -> bool:
    return c.alive and c.role is QuorumRole.LEADER and c.active


# ---- end to end ----------------------------------------------------------------------------------

section("End to end (model-independent)")


@transition(
    "ZkHoldsWhatZkBrokersAreTold",
    "Whenever a KRaft controller's RPCs go out to ZK brokers, ZooKeeper already holds every partition"
    " state they carry: nothing a broker is told is lost by going back to ZooKeeper.",
    "KIP-866 §Dual Metadata Writes (at any time the operator can revert to ZK mode: ZK is up to date),"
    " §ZK Broker RPCs",
    independent=True,
)
def zk_holds_what_zk_brokers_are_told(before: ClusterState, action: Action, after: ClusterState) -> bool:
    held: tuple[tuple[BrokerId, LeaderEpoch], ...] | None = None
    for m in after.ghost.sent:
        if not isinstance(m, (LeaderAndIsr, UpdateMetadata)) or not m.kraft:
            continue
        if held is None:
            held = _zk_partitions(after)
        if isinstance(m, UpdateMetadata):
            if m.partitions != held:
                return False
        elif m.partition >= len(held) or held[m.partition] != (m.leader, m.leader_epoch):
            return False
    return True


# Read by four properties of every step on its ``after`` (three TRANSITIONs and a witness): computed once.
@remembers_last
def zk_brokers_at_quiescence(state: ClusterState) -> tuple[MetadataImage, tuple[BrokerId, ...]] | None:
    """The committed image and the ZK brokers that must cache it now, when the cluster has quiesced.

    Quiesced: the newest leader has claimed ZooKeeper and written it everything it has committed
    (/migration is stamped by it, at its high watermark). A ZK broker must then cache that image if it
    is running, is registered in it (unfenced, with the epoch it holds), has heard from the claimant
    (its controller epoch is /controller_epoch's), and nothing is in flight to it, and the last
    UpdateMetadata it was sent was the last delivered to it (``ghost.observed.settled``: a lost or
    overtaken one leaves it behind without any rule being broken)."""
    c = _newest_leader(state)
    claim = kraft_claim(state)
    if c is None or claim is None or (claim.controller, claim.kraft_epoch) != (c.id, c.epoch):
        return None
    node = znode_data(state, MIGRATION)
    if node is None or (node.kraft_controller_id, node.kraft_controller_epoch, node.kraft_metadata_offset) != (
        c.id, c.epoch, c.high_watermark
    ):
        return None
    image = image_of(c.log, c.high_watermark)
    zk_epoch = znode_data(state, CONTROLLER_EPOCH)
    settled = state.ghost.observed.settled
    busy = {m.dest for m in state.network}
    due = []
    for b in state.brokers:
        if b.id not in settled or b.id in busy or not b.alive or b.config.kraft_mode or b.controller_epoch != zk_epoch:
            continue
        reg = image.registration(b.id)
        if reg is not None and not reg.fenced and reg.is_migrating_zk_broker and reg.epoch == b.kraft_epoch:
            due.append(b.id)
    return image, tuple(due)


@transition(
    "ZkBrokersConvergeToCommittedImage",
    "Once the cluster quiesces (ZooKeeper caught up with the newest leader, nothing in flight), every"
    " ZK broker registered with KRaft caches exactly the committed image's live brokers and partition"
    " leaders: deletions (fenced brokers) included; and each partition it hosts, it hosts with the image's"
    " replicas (a reassignment's new replicas included).",
    "KIP-866 §ZK Broker RPCs (UpdateMetadata keeps the ZK brokers' metadata up to date, LeaderAndIsr their"
    " replicas); KIP-500 §Fenced (a fenced broker is left out of the metadata)",
    independent=True,
)
def zk_brokers_converge_to_committed_image(before: ClusterState, action: Action, after: ClusterState) -> bool:
    quiet = zk_brokers_at_quiescence(after)
    if quiet is None:
        return True
    image, due = quiet
    live, leaders = image.unfenced(), _leaders(image)
    lost = {(b, p) for b, p, _ in after.ghost.observed.lost}
    return all(after.brokers[b].metadata_live == live and after.brokers[b].metadata == leaders
               and _hosts_image_replicas(b, after.brokers[b].replicas, image, lost) for b in due)


def _hosts_image_replicas(
    b: BrokerId, hosted: tuple[LocalReplica | None, ...], image: MetadataImage, lost: set[tuple[BrokerId, PartitionId]]
) -> bool:
    """Each partition a ZK broker hosts carries the replica set the image gives it (KAFKA-16120: a leader that
    ignored its reassignment's LeaderAndIsr never learns the new replicas, which then never join the ISR). A
    LeaderAndIsr lost on the way (``ghost.observed.lost``) leaves its partition behind without any rule broken: a
    change is resent only with the next one. A partition it hosts outside the image's replicas is
    ZkBrokersDropReassignedReplicas's."""
    return all(local is None or p >= len(image.partitions) or (b, p) in lost or _outside_replicas(b, image, p)
               or local.replicas == image.partitions[p].replicas for p, local in enumerate(hosted))


STOP_REPLICAS = (
    "KIP-866 §ZK Broker RPCs (\"following reassignments and topic deletions, we will need to send StopReplicas to"
    " ZK brokers for them to stop managing certain replicas\"); KIP-380 §Public Interfaces (StopReplica's"
    " delete_partitions)"
)


@transition(
    "ZkBrokersDropDeletedTopic",
    "Once the cluster quiesces (ZooKeeper caught up with the newest leader, nothing in flight), no ZK broker"
    " registered with KRaft hosts a partition of a topic the committed image has deleted.",
    STOP_REPLICAS,
    independent=True,
)
def zk_brokers_drop_deleted_topic(before: ClusterState, action: Action, after: ClusterState) -> bool:
    quiet = zk_brokers_at_quiescence(after)
    if quiet is None or TOPIC_NAME not in quiet[0].removed_topics:
        return True
    return _hosts_none_but_strays(after, *quiet, lambda b, image, p: p >= len(image.partitions))


def _hosts_none_but_strays(
    after: ClusterState, image: MetadataImage, due: tuple[BrokerId, ...],
    unwanted: Callable[[BrokerId, MetadataImage, int], bool],
) -> bool:
    """No ZK broker ``due`` hosts a partition ``unwanted`` says it should not, but the strays observed
    (``ghost.observed.strays``: no StopReplica reached it, and none will)."""
    strays = after.ghost.observed.strays
    return all(local is None or (b, p) in strays or not unwanted(b, image, p)
               for b in due for p, local in enumerate(after.brokers[b].replicas))


@always(
    "PendingDeletionNeverLiveInKRaft",
    "While a KRaft controller owns ZooKeeper, no topic ZooKeeper marks for deletion (/admin/delete_topics) is live in"
    " a KRaft controller's committed metadata: a deletion the admin asked for in ZooKeeper mode is never undone by"
    " the migration.",
    "KIP-866 §Topic Deletions (\"If the KRaft controller takes over before a deletion has occurred, we will need to"
    " complete the deletion as part of the ZK to KRaft state migration\"); KAFKA-15605",
    independent=True,
)
def pending_deletion_never_live_in_kraft(state: ClusterState) -> bool:
    if kraft_claim(state) is None or zkm.get(state.zk, pending_deletion_path(TOPIC_NAME)) is None:
        return True
    return not any(image_of(c.log, c.high_watermark).partitions for c in state.controllers)


@transition(
    "HeartbeatingBrokerNeverFenced",
    "The active controller fences a running broker's registration only once its heartbeats have gone"
    " unheard for a session timeout (or it asked to shut down).",
    "KIP-500 §Broker Metadata Management (removed if it has not sent a heartbeat in a long enough time),"
    " §Fenced",
    independent=True,
    changes=("controllers",),
)
def heartbeating_broker_never_fenced(before: ClusterState, action: Action, after: ClusterState) -> bool:
    if after.controllers is before.controllers:
        return True
    silenced = after.ghost.observed.silenced
    for was, now in zip(before.controllers, after.controllers):
        if now.log is was.log or not (_activated(was) and _activated(now)):
            continue
        old, new = decided_view(image_of(was.log)), decided_view(image_of(now.log))
        for b in after.brokers:
            r0, r1 = old.registration(b.id), new.registration(b.id)
            if r0 is None or r1 is None or r0.fenced or not r1.fenced or r0.epoch != r1.epoch:
                continue
            running = b.alive and b.incarnation == r1.incarnation and b.kraft_epoch == r1.epoch
            if running and not b.want_shutdown and b.id not in silenced:
                return False
    return True


@transition(
    "MetadataVersionGoesDownOnlyWhenForced",
    "A controller's committed metadata.version goes down across a level that changed metadata (losing some)"
    " only to a level an operator forced an unsafe downgrade to.",
    "KIP-584 §Changes to Kafka Controller (a downgrade deemed unsafe is refused);"
    " KIP-866 §MetadataVersion (IBP)",
    independent=True,
    changes=("controllers",),
)
def metadata_version_goes_down_only_when_forced(before: ClusterState, action: Action, after: ClusterState) -> bool:
    if after.controllers is before.controllers:
        return True
    forced = after.ghost.observed.unsafe_downgrades
    for was, now in zip(before.controllers, after.controllers):
        if not (was.alive and now.alive) or (now.log is was.log and now.high_watermark == was.high_watermark):
            continue
        if not _may_change_metadata_version(was, now):
            continue
        old = image_of(was.log, was.high_watermark).metadata_version
        new = image_of(now.log, now.high_watermark).metadata_version
        if old is not None and new is not None and new < old and metadata_changed_between(new, old) and (
            new not in forced
        ):
            return False
    return True


@transition(
    "OneZkWriterAfterClaim",
    "After a KRaft controller claimed ZooKeeper, its metadata changes only in a write that moves"
    " /migration, stamped by the controller /controller names: one writer.",
    "KIP-866 §Controller Leadership, §Dual Metadata Writes (a conditional update of /migration with each"
    " multi), §Migration State ZNode",
    independent=True,
    changes=("zk",),
)
def one_zk_writer_after_claim(before: ClusterState, action: Action, after: ClusterState) -> bool:
    if after.zk is before.zk or kraft_claim(before) is None:
        return True
    if _zk_metadata(before) == _zk_metadata(after):
        return True
    was, now, claim = zkm.get(before.zk, MIGRATION), zkm.get(after.zk, MIGRATION), kraft_claim(after)
    if was is None or now is None or claim is None or now.mzxid == was.mzxid:
        return False
    return (now.data.kraft_controller_id, now.data.kraft_controller_epoch) == (claim.controller, claim.kraft_epoch)


@always(
    "ServedMetadataSurvivesFailover",
    "Everything a KRaft broker replayed, and everything ZooKeeper was written from, is in the newest"
    " leader's log: a record served as committed survives every failover.",
    "KIP-500 §The Controller Quorum, §Broker Metadata Management; KIP-866 §Dual Metadata Writes"
    " (any metadata seen in ZK has also been committed to KRaft)",
    independent=True,
)
def served_metadata_survives_failover(state: ClusterState) -> bool:
    c = _newest_leader(state)
    if c is None:
        return True
    for b in state.brokers:
        n = b.image.offset
        if b.alive and b.config.kraft_mode and n > 0 and (n > len(c.log) or image_of(c.log, n) != b.image):
            return False
    node = znode_data(state, MIGRATION)
    if kraft_claim(state) is None or node is None or node.kraft_metadata_offset <= 0:
        return True
    n = node.kraft_metadata_offset
    return n <= len(c.log) and _zk_view(state) == _image_view(image_of(c.log, n))


@transition(
    "BrokerTakesOnlyCommittedRegistration",
    "A broker takes on a KRaft broker epoch only once a controller's committed log holds the registration that"
    " carries it: a failover cannot truncate a registration a broker acts on.",
    "KIP-500 §The Broker State Machine (brokers register with the controller quorum), §The Controller Quorum"
    " (a majority must be running); KIP-866 §Broker Registration",
    independent=True,
)
def broker_takes_only_committed_registration(before: ClusterState, action: Action, after: ClusterState) -> bool:
    # Where the model answers a registration at once (no Budget.answer_at_commit: the Differs at
    # model.kraft_quorum), brokers act on uncommitted registrations by design; it is checked where answers wait.
    return not after.budget.answer_at_commit or _acts_only_on_commits(before, after, _took_epoch, _commits_registration)


def _acts_only_on_commits(before: ClusterState, after: ClusterState, acts: Callable[[Broker, Broker], bool],
                          commits: Callable[[KRaftController, Broker], bool]) -> bool:
    """Every broker whose step ``acts`` (from ``was`` to ``now``) is backed by some controller's committed log."""
    return after.brokers is before.brokers or all(
        any(commits(c, now) for c in after.controllers)
        for was, now in zip(before.brokers, after.brokers) if acts(was, now))


def _took_epoch(was: Broker, now: Broker) -> bool:
    epoch = now.kraft_epoch
    return epoch != UNKNOWN_BROKER_EPOCH and (epoch != was.kraft_epoch or now.incarnation != was.incarnation)


def _commits_registration(c: KRaftController, now: Broker) -> bool:
    return any(
        isinstance(r := e.record, RegisterBrokerRecord) and (r.broker, r.incarnation, r.epoch) == (now.id,
                                                                                                   now.incarnation,
                                                                                                   now.kraft_epoch)
        for e in c.log[: c.high_watermark]
    )


@transition(
    "BrokerOnlineOnlyOnceUnfencingCommitted",
    "A KRaft broker goes Online (serves) only once a controller's committed image, as brokers apply it (an open"
    " transaction's records not yet), has its registration unfenced: a failover cannot truncate the unfencing a"
    " broker acts on.",
    "KIP-500 §Broker States (Fenced: a broker leaves it when the controller unfences it), §The Controller Quorum"
    " (a majority must be running)",
    independent=True,
)
def broker_online_only_once_unfencing_committed(before: ClusterState, action: Action, after: ClusterState) -> bool:
    # Where the model answers a heartbeat at once (no Budget.heartbeats_at_commit: the Differs at
    # model.kraft_quorum), brokers act on uncommitted unfencings by design; it is checked where answers wait.
    return not after.budget.heartbeats_at_commit or _acts_only_on_commits(before, after, _went_online,
                                                                           _unfenced_in_committed_image)


def _went_online(was: Broker, now: Broker) -> bool:
    return now.lifecycle is BrokerState.ONLINE and (was.lifecycle is not BrokerState.ONLINE
                                                    or was.incarnation != now.incarnation)


def _unfenced_in_committed_image(c: KRaftController, now: Broker) -> bool:
    reg = image_of(c.log, c.high_watermark).registration(now.id)
    return reg is not None and reg.epoch == now.kraft_epoch and not reg.fenced


# What each property reads. On the implementation every item is the implementation's own (its ZooKeeper
# store, its Raft logs and high watermarks, its brokers' caches, its messages, its run's observations),
# mapped by ``impl.refinement.abstract`` without any model decision; the invariant catalogue lists it.
READS: dict[str, str] = {
    "ZkHoldsWhatZkBrokersAreTold": "the LeaderAndIsr and UpdateMetadata requests the step sent (the cluster's"
    " own list of sent messages); ZooKeeper's partition-state znodes after it",
    "ZkBrokersConvergeToCommittedImage": "the controllers' Raft logs, high watermarks, roles and epochs;"
    " /controller, /controller_epoch and /migration; each ZK broker's metadata cache, the replicas it hosts,"
    " controller epoch and registration epoch; the messages in flight; which UpdateMetadata was sent and"
    " delivered last and which LeaderAndIsr were lost (its run's observations)",
    "ZkBrokersDropDeletedTopic": "the controllers' Raft logs, high watermarks, roles and epochs; /controller,"
    " /controller_epoch and /migration; the replicas each ZK broker hosts, its controller epoch and registration"
    " epoch; the messages in flight; which UpdateMetadata was sent and delivered last and which StopReplica were"
    " lost or refused (its run's observations)",
    "DeletedTopicStoppedOnZkBroker": "the message the step delivered; the replicas the broker it went to hosts"
    " before and after",
    "ZkBrokersDropReassignedReplicas": "as ZkBrokersDropDeletedTopic, and the replicas of each KRaft LeaderAndIsr"
    " a step sent and who it sent KRaft requests to (its run's observations)",
    "ReassignedReplicaStoppedOnZkBroker": "the message the step delivered; the replicas the broker it went to hosts"
    " before and after; the controllers' Raft logs and high watermarks",
    "PendingDeletionNeverLiveInKRaft": "/controller and /admin/delete_topics; the controllers' Raft logs and high"
    " watermarks",
    "HeartbeatingBrokerNeverFenced": "the active controllers' logs before and after the step; each broker's"
    " process (alive, incarnation, epoch); whose heartbeats went unheard for a session timeout (in a"
    " simulation, the heartbeats its controllers answered and its clock)",
    "MetadataVersionGoesDownOnlyWhenForced": "each running controller's committed log (its log up to its"
    " high watermark) before and after the step; the operator's requests (the step's actions); which"
    " metadata.version levels changed metadata (Kafka's MetadataVersion table, data, not a rule)",
    "OneZkWriterAfterClaim": "ZooKeeper's znodes before and after the step: the metadata ones, and the"
    " stamps /controller and /migration carry",
    "ServedMetadataSurvivesFailover": "the controllers' Raft logs, roles and epochs; each KRaft broker's"
    " replayed image; ZooKeeper's metadata znodes and /migration",
    "BrokerTakesOnlyCommittedRegistration": "each broker process's KRaft epoch and incarnation before and after"
    " the step; the controllers' Raft logs and high watermarks after it",
    "ZkBrokerCheckedAtQuiescence": "as ZkBrokersConvergeToCommittedImage",
    "RegistrationAnsweredAtCommit": "as BrokerTakesOnlyCommittedRegistration, and the step's action",
    "BrokerOnlineOnlyOnceUnfencingCommitted": "each broker process's state (Online or not), incarnation and KRaft"
    " epoch before and after the step; the controllers' Raft logs and high watermarks after it",
    "UnfencingAnsweredAtCommit": "as BrokerOnlineOnlyOnceUnfencingCommitted, and the step's action",
}


# ---- witnesses ------------------------------------------------------------------------------------

@sometimes(
    "ZkBrokerCheckedAtQuiescence",
    "The cluster quiesces with a ZK broker that must cache the committed image (ZkBrokersConvergeToCommittedImage"
    " is not vacuous).",
    "KIP-866 §ZK Broker RPCs",
    independent=True,
)
def zk_broker_checked_at_quiescence(before: ClusterState, action: Action, after: ClusterState) -> bool:
    quiet = zk_brokers_at_quiescence(after)
    return quiet is not None and bool(quiet[1])


@sometimes(
    "DeletedTopicStoppedOnZkBroker",
    "A ZK broker hosting a partition of a topic deleted on KRaft takes the KRaft controller's StopReplica and hosts"
    " it no more.",
    "KIP-866 §ZK Broker RPCs",
    independent=True,
    actions=(Deliver,),
)
def deleted_topic_stopped_on_zk_broker(before: ClusterState, action: Action, after: ClusterState) -> bool:
    if not isinstance(action, Deliver) or not isinstance(action.message, StopReplica) or not action.message.kraft:
        return False
    m = action.message
    hosted = before.brokers[m.dest].replicas
    return m.partition < len(hosted) and hosted[m.partition] is not None and after.brokers[m.dest].replicas[
        m.partition] is None


@sometimes(
    "RegistrationAnsweredAtCommit",
    "A broker takes its KRaft epoch in a step other than its own registration: the answer waited for the record"
    " to commit (BrokerTakesOnlyCommittedRegistration is not vacuous).",
    "KIP-500 §The Broker State Machine",
    independent=True,
)
def registration_answered_at_commit(before: ClusterState, action: Action, after: ClusterState) -> bool:
    return _answered_later(before, action, after, RegisterWithKRaft,
                           lambda was, now: was.kraft_epoch == UNKNOWN_BROKER_EPOCH != now.kraft_epoch)


def _answered_later(before: ClusterState, action: Action, after: ClusterState, request: type,
                    answered: Callable[[Broker, Broker], bool]) -> bool:
    """A live broker takes an answer (``answered``) in a step other than its own ``request``."""
    return after.brokers is not before.brokers and not isinstance(action, request) and any(
        answered(was, now) and now.alive for was, now in zip(before.brokers, after.brokers))


@sometimes(
    "UnfencingAnsweredAtCommit",
    "A KRaft broker goes Online in a step other than its own heartbeat: the answer that unfenced it waited for the"
    " record to commit (BrokerOnlineOnlyOnceUnfencingCommitted is not vacuous).",
    "KIP-500 §Broker States",
    independent=True,
)
def unfencing_answered_at_commit(before: ClusterState, action: Action, after: ClusterState) -> bool:
    return _answered_later(before, action, after, BrokerHeartbeat,
                           lambda was, now: _went_online(was, now) and was.incarnation == now.incarnation)


@transition(
    "ZkBrokersDropReassignedReplicas",
    "Once the cluster quiesces (ZooKeeper caught up with the newest leader, nothing in flight), no ZK broker"
    " registered with KRaft hosts a partition whose committed replicas leave it out: a reassignment that removed its"
    " replica had it deleted.",
    STOP_REPLICAS,
    independent=True,
)
def zk_brokers_drop_reassigned_replicas(before: ClusterState, action: Action, after: ClusterState) -> bool:
    quiet = zk_brokers_at_quiescence(after)
    return quiet is None or _hosts_none_but_strays(after, *quiet, _outside_replicas)


def _outside_replicas(b: BrokerId, image: MetadataImage, p: int) -> bool:
    """The image assigns partition ``p`` replicas (it was created or moved on KRaft) and ``b`` is none of them."""
    return p < len(image.partitions) and bool(image.partitions[p].replicas) and b not in image.partitions[p].replicas


@sometimes(
    "ReassignedReplicaStoppedOnZkBroker",
    "A ZK broker hosting a partition a reassignment on KRaft moved off it takes the KRaft controller's StopReplica and"
    " hosts it no more (ZkBrokersDropReassignedReplicas is not vacuous).",
    "KIP-866 §ZK Broker RPCs",
    independent=True,
    actions=(Deliver,),
)
def reassigned_replica_stopped_on_zk_broker(before: ClusterState, action: Action, after: ClusterState) -> bool:
    if not deleted_topic_stopped_on_zk_broker(before, action, after):
        return False
    assert isinstance(action, Deliver) and isinstance(action.message, StopReplica)
    m = action.message
    return any(_outside_replicas(m.dest, image_of(c.log, c.high_watermark), m.partition) for c in after.controllers)
