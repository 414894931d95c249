"""The ZooKeeper-era controller (Kafka's ``KafkaController``): the role a ZK broker takes when it wins /controller.

Rules:
- The role is a component the broker process owns (``BrokerNode.controller``); it exists from
  the won election (``register_controller_and_increment_controller_epoch``) until it resigns
  (``onControllerResignation``) or the process dies. Its handlers are generators in the
  ``impl.protocol`` shape, run inside the owning broker's event, with the broker's ZooKeeper
  session; each returns whether it committed (the caller yields the ``Trace``).
- Every write goes through ``_write``: one multi that starts with a check of /controller_epoch's
  version (KIP-380 / KAFKA-6082, KIP-866 §Controller Leadership). A failed check means another
  controller was elected since (``controller_moved``): the role resigns at once (the owner drops it).
- Each rule's decision is a named pure function (``decide_*``, ``controller_moved``,
  ``elect_offline_leader``) of what the role read or holds; the handlers carry it out.
- What the role knows is what it read: the broker cache (``live``) holds each admitted broker's
  epoch (the czxid of /brokers/ids/<id>) and supported features, read at failover and at every
  broker change; ``refused`` keeps the registrations it left out for their features (KIP-584).
- Reads are free and may be repeated; every write the model attempts is attempted here, in the
  same multi, so ZooKeeper hands out the same zxids.

Seeds: KIP-380 (§Controller Detects Bounced Broker, §Controller Rejects ControlledShutdownRequest),
KIP-584 (§Feature ZK node status, §Changes to Kafka Controller, §Broker protections), KIP-866 §Controller
Leadership.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from impl.bugs import ImplBug
from impl.codec import decode, encode
from impl.decisions import decision
from impl.protocol import Handler, Send
from impl.zk.port import (
    ANY_VERSION,
    CheckOp,
    CreateOp,
    DeleteOp,
    GetChildren,
    GetData,
    Multi,
    NoNode,
    Op,
    OpResult,
    SetDataOp,
    ZkCode,
    tree_deletion,
)
from model.kraft import TOPIC_NAME
from model.migration import pending_deletion_path
from model.state import (
    BROKER_IDS,
    CONTROLLER,
    CONTROLLER_EPOCH,
    FEATURES,
    TOPIC,
    FeaturesZNode,
    LeaderAndIsr,
    PartitionState,
    StopReplica,
    UpdateMetadata,
    partition_state_path,
)
from model.types import (
    NO_LEADER,
    UNKNOWN_BROKER_EPOCH,
    BrokerEpoch,
    BrokerId,
    ControllerEpoch,
    Errors,
    FeatureLevel,
    FeatureStatus,
    Ibp,
    LeaderEpoch,
    PartitionId,
)

if TYPE_CHECKING:
    from model.state import FeatureRanges

# /controller_epoch read as absent: the election creates it instead of setting it (the model's ABSENT).
ABSENT = -2


# ---- reads shared by the broker and its controller role -----------------------------------------

def read_features(session: int) -> Handler:
    """(/features data, version), or None when the znode is absent."""
    try:
        data, stat = yield GetData(session, FEATURES)
    except NoNode:
        return None
    return decode(FEATURES, data), stat.version


def finalized_features(features: tuple[FeaturesZNode, int] | None) -> FeatureRanges:
    """The finalized features in force: those of an Enabled /features znode, else none."""
    if features is None or features[0].status is not FeatureStatus.ENABLED:
        return ()
    return features[0].finalized


def incompatible_features(supported: FeatureRanges, finalized: FeatureRanges) -> list[str]:
    """KIP-584 §Broker protections (BrokerFeatures.incompatibleFeatures): finalized ranges a broker cannot run."""
    ranges = dict(supported)
    # SupportedVersionRange.isIncompatibleWith: the finalized levels reach outside what the software supports
    return [name for name, (min_level, max_level) in finalized
            if name not in ranges or min_level < ranges[name][0] or max_level > ranges[name][1]]


def read_registered_brokers(session: int, watch: bool = False) -> Handler:
    """The children of /brokers/ids as {id: (czxid, supported)}; ``watch`` arms the child watch."""
    names = yield GetChildren(session, BROKER_IDS, watch=watch)
    found: dict[int, tuple[int, FeatureRanges]] = {}
    for name in names:
        path = f"{BROKER_IDS}/{name}"
        try:
            data, stat = yield GetData(session, path)
        except NoNode:  # pragma: no cover - nothing changes inside one event
            continue
        found[int(name)] = (stat.czxid, decode(path, data).supported)
    return found


def read_partition_states(session: int) -> Handler:
    """(assignment, [(partition, PartitionState, version)]) for topic "t"; ((), []) once it is deleted."""
    try:
        data, _ = yield GetData(session, TOPIC)
    except NoNode:
        return (), []
    assignment = decode(TOPIC, data)
    states = []
    for p in range(len(assignment)):
        path = partition_state_path(PartitionId(p))
        try:
            sdata, stat = yield GetData(session, path)
        except NoNode:
            continue  # an admin added it and no controller has started it yet (no state znode)
        states.append((PartitionId(p), decode(path, sdata), stat.version))
    return assignment, states


def read_controller_epoch(session: int) -> Handler:
    """(epoch, version) of /controller_epoch; (0, ABSENT) when it is absent (KafkaZkClient.getControllerEpoch)."""
    try:
        data, stat = yield GetData(session, CONTROLLER_EPOCH)
    except NoNode:
        return ControllerEpoch(0), ABSENT
    return decode(CONTROLLER_EPOCH, data), stat.version


def register_controller_and_increment_controller_epoch(
    broker_id: int, session: int, observed: tuple[int, int], bugs: frozenset[ImplBug], now: int
) -> Handler:
    """KafkaZkClient.registerControllerAndIncrementControllerEpoch: /controller and the epoch CAS in one multi.

    Returns the new role, or None when the multi failed (someone else won, or the epoch moved).
    """
    seen, version = observed
    epoch = ControllerEpoch(seen + 1)
    if version == ABSENT:
        bump = CreateOp(CONTROLLER_EPOCH, encode(CONTROLLER_EPOCH, epoch, now))
    else:
        cas = -1 if ImplBug.ELECTION_SETS_EPOCH_WITHOUT_VERSION in bugs else version
        # (the mistake: a read that still shows what was observed taken for the version check)
        if ImplBug.ELECTION_CHECKS_EPOCH_BY_READ in bugs and (yield from read_controller_epoch(session)) == observed:
            cas = -1
        bump = SetDataOp(CONTROLLER_EPOCH, encode(CONTROLLER_EPOCH, epoch, now), cas)
    ops = (CreateOp(CONTROLLER, encode(CONTROLLER, BrokerId(broker_id), now), ephemeral=True), bump)
    results = yield Multi(session, ops)
    if any(r.code is not ZkCode.OK for r in results):
        return None
    new_version = 0 if version == ABSENT else results[1].stat.version
    return KafkaController(broker_id, epoch, new_version, bugs)


# ---- decisions ---------------------------------------------------------------------------------

@decision("yes", "no")
def controller_moved(results: list[OpResult]) -> bool:
    """A controller's checked multi failed on its first op, the /controller_epoch version check (BADVERSION,
    or NONODE when the znode is gone): another controller was elected since, and KafkaController resigns
    on the ControllerMovedException (KIP-380 / KAFKA-6082; KIP-866 §Controller Leadership)."""
    return results[0].code in (ZkCode.BAD_VERSION, ZkCode.NO_NODE)


@decision("elected", "none", label=lambda r: "none" if r is None else "elected")
def elect_offline_leader(replicas: tuple[int, ...], current: PartitionState, live: dict[int, int],
                         controller_epoch: ControllerEpoch) -> PartitionState | None:
    """OfflinePartitionLeaderElectionStrategy, clean: the first live ISR replica in assignment order leads in
    a new leader epoch, the ISR shrunk to its live members (KIP-380 §Controller Detects Bounced Broker's
    election). None: refused, the leader is live or no ISR replica is."""
    if current.leader in live:
        return None
    candidates = [r for r in replicas if r in current.isr and r in live]
    if not candidates:
        return None
    isr = tuple(r for r in current.isr if r in live)
    return PartitionState(candidates[0], LeaderEpoch(current.leader_epoch + 1), isr, controller_epoch)


# ---- the role ---------------------------------------------------------------------------------

@dataclass
class CachedBroker:
    """The controller's view of an admitted live broker (ControllerContext's liveBrokerEpochs)."""

    epoch: int  # czxid of its registration
    supported: FeatureRanges


@dataclass
class KafkaController:
    broker_id: int
    epoch: ControllerEpoch
    epoch_zk_version: int  # the /controller_epoch version every write of this controller checks
    bugs: frozenset[ImplBug] = frozenset()
    live: dict[int, CachedBroker] = field(default_factory=dict)
    initialized: bool = False  # onControllerFailover ran
    refused: set[tuple[int, int]] = field(default_factory=set)  # (broker, czxid) left out for features
    resigned: bool = False  # a fenced write told it it moved: the owner drops the role
    partitions: int = 0  # partitions of the topic at its last read (for the offline-partition election it offers)
    # partition -> (replicas, leader, ISR) as it last read or wrote them (ControllerContext's partition states)
    known: dict[int, tuple[tuple[int, ...], int, tuple[int, ...]]] = field(default_factory=dict)

    def epochs(self) -> dict[int, int]:
        return {b: c.epoch for b, c in self.live.items()}

    def _read_partitions(self, session: int) -> Handler:
        """read_partition_states, remembered (what the offline-partition election it offers goes by)."""
        assignment, states = yield from read_partition_states(session)
        self.known = {p: (tuple(assignment[p]), s.leader, tuple(s.isr)) for p, s, _ in states}
        return assignment, states

    def _remember(self, p: int, state: PartitionState) -> None:
        if p in self.known:
            self.known[p] = (self.known[p][0], state.leader, tuple(state.isr))

    def may_elect(self, p: int) -> bool:
        """Its last read says partition ``p`` is offline with a live ISR replica to lead (or it never read it)."""
        if p not in self.known:
            return True
        replicas, leader, isr = self.known[p]
        return leader not in self.live and any(r in isr and r in self.live for r in replicas)

    # ---- writes ---------------------------------------------------------------------------------

    def _write(self, session: int, ops: list[Op]) -> Handler:
        """One multi fenced by /controller_epoch's version; True when it applied.

        A failed epoch check (BADVERSION, or NONODE when /controller_epoch is gone) marks the role
        resigned: ZooKeeper says another controller was elected since.
        """
        fenced = ImplBug.CONTROLLER_WRITE_WITHOUT_EPOCH_CHECK not in self.bugs
        head = (CheckOp(CONTROLLER_EPOCH, self.epoch_zk_version),) if fenced else ()
        results = yield Multi(session, (*head, *ops))
        ok = all(r.code is ZkCode.OK for r in results)
        if not ok and fenced and controller_moved(results):
            self.resigned = True
        return ok

    # ---- onControllerFailover ---------------------------------------------------------------------

    def feature_bootstrap_ops(self, ibp: Ibp, supported: FeatureRanges, features, now: int) -> list[Op]:
        """KIP-584 §Feature ZK node status: the three bootstrap cases, decided by the controller's IBP."""
        if ibp.supports_feature_versioning:
            if features is None:  # a new cluster: finalize everything this controller supports
                return [CreateOp(FEATURES, encode(FEATURES, FeaturesZNode(FeatureStatus.ENABLED, supported), now))]
            data, version = features
            if data.status is FeatureStatus.DISABLED:  # an upgrade: enable, finalize nothing yet
                enabled = FeaturesZNode(FeatureStatus.ENABLED, ())
                return [SetDataOp(FEATURES, encode(FEATURES, enabled, now), version)]
            return []
        if features is None:
            return [CreateOp(FEATURES, encode(FEATURES, FeaturesZNode(FeatureStatus.DISABLED, ()), now))]
        data, version = features
        if data.status is FeatureStatus.ENABLED:  # a downgrade: disable and finalize nothing
            return [SetDataOp(FEATURES, encode(FEATURES, FeaturesZNode(FeatureStatus.DISABLED, ()), now), version)]
        return []

    def _admission(self, session: int, watch: bool) -> Handler:
        """The registered brokers, split into admitted {id: CachedBroker} and refused {(id, czxid)}."""
        features = yield from read_features(session)
        finalized = finalized_features(features)
        registered = yield from read_registered_brokers(session, watch=watch)
        admitted, refused = {}, set()
        for b, (czxid, supported) in sorted(registered.items()):
            if finalized and incompatible_features(supported, finalized):
                refused.add((b, czxid))
                continue
            admitted[b] = CachedBroker(czxid, supported)
        return registered, admitted, refused

    def on_controller_failover(self, session: int, ibp: Ibp, supported: FeatureRanges, now: int) -> Handler:
        """Feature setup first (so admission sees it), then the broker cache, the watch and start-up requests.

        The caller has read ZooKeeper once already (its connectivity probe); returns True (committed).
        """
        features = yield from read_features(session)
        ops = self.feature_bootstrap_ops(ibp, supported, features, now)
        if ops:
            ok = yield from self._write(session, ops)
            if not ok:
                return True
        _, admitted, refused = yield from self._admission(session, watch=True)
        self.live, self.refused, self.initialized = admitted, refused, True
        assignment, _ = yield from self._read_partitions(session)
        self.partitions = len(assignment)
        yield from self._send_all((yield from self._startup_requests(session, sorted(admitted))))
        return True

    def _startup_requests(self, session: int, brokers: list[int]) -> Handler:
        """onBrokerStartup: UpdateMetadata to each, then LeaderAndIsr for the partitions it hosts."""
        if not brokers:
            return []
        assignment, states = yield from self._read_partitions(session)
        leaders = tuple((s.leader, s.leader_epoch) for _, s, _ in states)
        out = []
        for b in brokers:
            epoch = BrokerEpoch(self.live[b].epoch)
            out.append(UpdateMetadata(BrokerId(self.broker_id), self.epoch, epoch, BrokerId(b), leaders))
            for p, s, _ in states:
                if b in assignment[p]:
                    out.append(LeaderAndIsr(BrokerId(self.broker_id), self.epoch, epoch, BrokerId(b), p, s.leader,
                                            s.leader_epoch, s.isr))
        return out

    def _tell_replicas(self, epochs: dict[int, int], replicas, p: PartitionId, s: PartitionState,
                       skip: int | None = None) -> list:
        """LeaderAndIsr with partition ``p``'s new state to each of its live replicas, at their cached epochs."""
        return [
            LeaderAndIsr(BrokerId(self.broker_id), self.epoch, BrokerEpoch(epochs[r]), r, p, s.leader,
                         s.leader_epoch, s.isr)
            for r in replicas
            if r in epochs and r != skip
        ]

    @staticmethod
    def _send_all(messages: list) -> Handler:
        """Send one step's requests as one batch (ControllerBrokerRequestBatch): a request twice in it goes once."""
        sent = set()
        for m in messages:
            if m not in sent:
                sent.add(m)
                yield Send(m)

    # ---- the /brokers/ids child watch (KIP-380 §Controller Detects Bounced Broker) ------------------

    def process_broker_change(self, session: int) -> Handler:
        """KafkaController.processBrokerChange: new, dead and bounced brokers by id and czxid."""
        # Re-arm the watch with the read that sees the change (one-shot watches; the next change fires it).
        registered, admitted, refused = yield from self._admission(session, watch=True)
        current = {b: czxid for b, (czxid, _) in registered.items()}
        known = self.epochs()
        new = current.keys() - known.keys()
        dead = known.keys() - current.keys()
        bounced = {b for b in current.keys() & known.keys() if current[b] > known[b]}
        started = [b for b in admitted if b in new or b in bounced]
        live = {b: c for b, c in self.live.items() if b in current and b not in bounced}
        live.update({b: admitted[b] for b in started})
        self.live = dict(sorted(live.items()))
        self.refused = refused
        changed = yield from self._on_broker_failure(session, dead | bounced, set(self.live))
        if self.resigned:
            return True
        requests = yield from self._startup_requests(session, sorted(started))
        if changed:
            assignment, _ = yield from self._read_partitions(session)
            epochs = self.epochs()
            for p, s in changed:
                requests += self._tell_replicas(epochs, assignment[p], p, s)
        yield from self._send_all(requests)
        return True

    def _on_broker_failure(self, session: int, failed: set[int], live: set[int]) -> Handler:
        """onBrokerFailure: partitions led by a failed broker get a new leader (KIP-380 step 4).

        The first live ISR replica that did not fail, in assignment order; a bounced leader alone
        in the ISR leads again in a new leader epoch; a dead leader with no candidate leaves the
        partition offline (NoLeader) with its ISR kept for a clean election later.
        """
        if not failed:
            return []
        assignment, states = yield from self._read_partitions(session)
        writes, changed = [], []
        for p, s, version in states:
            if s.leader not in failed:
                continue
            survivors = [r for r in assignment[p] if r in s.isr and r in live and r not in failed]
            epoch = LeaderEpoch(s.leader_epoch + 1)
            if survivors:
                isr = tuple(r for r in s.isr if r in live and r not in failed)
                new = PartitionState(survivors[0], epoch, isr, self.epoch)
            elif s.leader in live:
                isr = tuple(r for r in s.isr if r == s.leader or (r in live and r not in failed))
                new = PartitionState(s.leader, epoch, isr, self.epoch)
            else:
                new = PartitionState(NO_LEADER, epoch, s.isr, self.epoch)
            path = partition_state_path(p)
            writes.append(SetDataOp(path, encode(path, new), version))
            changed.append((p, new))
        if not writes:
            return []
        ok = yield from self._write(session, writes)
        if not ok:
            return []
        for p, new in changed:
            self._remember(p, new)
        return changed

    # ---- offline partitions -------------------------------------------------------------------------

    def elect_offline_partition(self, session: int, p: PartitionId) -> Handler:
        """OfflinePartitionLeaderElectionStrategy: the first live ISR replica in assignment order.

        Returns False (refused) when the leader is live or no ISR replica is.
        """
        live = self.epochs()
        assignment, states = yield from self._read_partitions(session)
        found = [(current, version) for q, current, version in states if q == p]
        if not found:
            return False  # not started yet: no state znode
        current, version = found[0]
        new = elect_offline_leader(assignment[p], current, live, self.epoch)
        if new is None:
            return False
        path = partition_state_path(p)
        ok = yield from self._write(session, [SetDataOp(path, encode(path, new), version)])
        if ok:
            self._remember(p, new)
            yield from self._send_all(self._tell_replicas(live, assignment[p], p, new))
        return True

    # ---- new partitions (processPartitionModifications, onNewPartitionCreation) ----------------------------

    def process_partition_modifications(self, session: int) -> Handler:
        """The partitions the assignment holds with no state znode: each one's live replicas its ISR, the first its
        leader at leader epoch 0, its znodes created in one fenced multi; LeaderAndIsr to those replicas and
        UpdateMetadata to every live broker. False (refused) when there is none, or none with a live replica."""
        live = self.epochs()
        assignment, states = yield from self._read_partitions(session)
        self.partitions = len(assignment)
        started_ids = {p for p, _, _ in states}
        started: list[tuple[PartitionId, PartitionState]] = []
        for p in range(len(assignment)):
            isr = tuple(BrokerId(r) for r in assignment[p] if r in live)
            if p not in started_ids and isr:
                started.append((PartitionId(p), PartitionState(isr[0], LeaderEpoch(0), isr, self.epoch)))
        if not started:
            return False
        ops: list[Op] = []
        for p, new in started:
            path = partition_state_path(p)
            ops += [CreateOp(path.rsplit("/", 1)[0], b""), CreateOp(path, encode(path, new))]
        if not (yield from self._write(session, ops)):
            return True
        requests: list = []
        for p, new in started:
            requests += self._tell_replicas(live, new.isr, p, new)
        yield from self._send_with_update_metadata(session, live, requests)
        return True

    def _send_with_update_metadata(self, session: int, live: dict[int, int], requests: list) -> Handler:
        """``requests`` (LeaderAndIsr), then UpdateMetadata with every partition's leader as ZooKeeper now holds it
        to every live broker, in one batch."""
        _, states = yield from self._read_partitions(session)
        leaders = tuple((s.leader, s.leader_epoch) for _, s, _ in states)
        requests = requests + [UpdateMetadata(BrokerId(self.broker_id), self.epoch, BrokerEpoch(e), BrokerId(b),
                                              leaders) for b, e in sorted(live.items())]
        yield from self._send_all(requests)

    # ---- topic deletion (TopicDeletionManager) -------------------------------------------------------------

    def delete_topic(self, session: int) -> Handler:
        """The topic marked in /admin/delete_topics deleted (onTopicDeletion, then completeDeleteTopic, in one step as
        the model has it: it has no StopReplica responses to wait for): its znodes and the mark in one fenced multi;
        StopReplica with deletePartitions to each live replica, UpdateMetadata without its partitions to every live
        broker. False (refused) when nothing is marked or the topic is gone; True once its write was tried."""
        mark = pending_deletion_path(TOPIC_NAME)
        try:
            yield GetData(session, mark)
        except NoNode:
            return False
        live = self.epochs()
        assignment, _ = yield from read_partition_states(session)
        ops = yield from tree_deletion(session, TOPIC)
        if not ops:
            return False
        if not (yield from self._write(session, [*ops, DeleteOp(mark, ANY_VERSION)])):
            return True
        self.known, self.partitions = {}, 0
        stops = [StopReplica(BrokerId(self.broker_id), self.epoch, BrokerEpoch(live[r]), BrokerId(r), PartitionId(p),
                             True) for p, replicas in enumerate(assignment) for r in replicas if r in live]
        yield from self._send_with_update_metadata(session, live, stops)
        return True

    # ---- reassignment (onApiPartitionReassignment, onPartitionReassignment) -------------------------------

    def reassign_partition(self, session: int, p: PartitionId, replicas: tuple[BrokerId, ...]) -> Handler:
        """Partition ``p`` moved to ``replicas`` in one step (model.zk_era says why): the new assignment and the
        leader epoch bumped, in one fenced multi; LeaderAndIsr to its live replicas, UpdateMetadata to every live
        broker. None (refused, nothing answered) when ``p`` is not started or the target leaves out its leader;
        True once answered: INVALID_REPLICA_ASSIGNMENT when a target replica is not live, or done."""
        live = self.epochs()
        assignment, states = yield from self._read_partitions(session)
        found = [(current, version) for q, current, version in states if q == p]
        if not found or found[0][0].leader not in replicas:
            return None
        if any(r not in live for r in replicas):
            return True
        current, version = found[0]
        new = PartitionState(current.leader, LeaderEpoch(current.leader_epoch + 1), current.isr, self.epoch)
        moved = [tuple(r) for r in assignment]
        moved[p] = tuple(replicas)
        path = partition_state_path(p)
        ops: list[Op] = [SetDataOp(TOPIC, encode(TOPIC, tuple(moved)), ANY_VERSION),
                         SetDataOp(path, encode(path, new), version)]
        if not (yield from self._write(session, ops)):
            return True
        self._remember(p, new)
        yield from self._send_with_update_metadata(session, live, self._tell_replicas(live, replicas, p, new))
        return True

    # ---- UpdateFeatures (KIP-584 §Changes to Kafka Controller) -----------------------------------------

    @decision("NONE", "INVALID_REQUEST")
    def decide_update_features(self, features, ibp: Ibp, supported: FeatureRanges, feature: str,
                               level: FeatureLevel, allow_downgrade: bool) -> tuple[Errors, FeatureRanges]:
        """The validation of KafkaController.processFeatureUpdates: the error, or NONE with the new levels."""
        if features is None or features[0].status is not FeatureStatus.ENABLED \
                or not ibp.supports_feature_versioning:
            return Errors.INVALID_REQUEST, ()
        finalized = dict(features[0].finalized)
        current = finalized.get(feature)
        if level < 1:  # a deletion: needs AllowDowngrade and something to delete
            if not allow_downgrade or current is None:
                return Errors.INVALID_REQUEST, ()
            if ImplBug.FINALIZE_LEVEL_ZERO in self.bugs:  # (the mistake: the level is finalized, not deleted)
                finalized[feature] = (current[0], level)
                return Errors.NONE, tuple(sorted(finalized.items()))
            del finalized[feature]
            return Errors.NONE, tuple(sorted(finalized.items()))
        if current is not None and level == current[1]:
            return Errors.INVALID_REQUEST, ()
        is_downgrade = current is not None and level < current[1]
        if is_downgrade != allow_downgrade:
            return Errors.INVALID_REQUEST, ()
        own = dict(supported).get(feature)
        if own is None:
            return Errors.INVALID_REQUEST, ()
        new = (current[0] if current is not None else own[0], level)
        if new[1] < new[0] or not (own[0] <= new[0] and new[1] <= own[1]):
            return Errors.INVALID_REQUEST, ()
        for b in self.live.values():
            if incompatible_features(b.supported, ((feature, new),)):
                return Errors.INVALID_REQUEST, ()
        finalized[feature] = new
        return Errors.NONE, tuple(sorted(finalized.items()))

    def update_features(self, session: int, features, ibp: Ibp, supported: FeatureRanges, feature: str,
                        level: FeatureLevel, allow_downgrade: bool, now: int) -> Handler:
        error, finalized = self.decide_update_features(features, ibp, supported, feature, level, allow_downgrade)
        if error is not Errors.NONE:
            return error
        data = encode(FEATURES, FeaturesZNode(FeatureStatus.ENABLED, finalized), now)
        ok = yield from self._write(session, [SetDataOp(FEATURES, data, features[1])])
        return Errors.NONE if ok else Errors.FEATURE_UPDATE_FAILED

    # ---- ControlledShutdown (KIP-380 §Controller Rejects ControlledShutdownRequest) ---------------

    @decision("NONE", "BROKER_NOT_AVAILABLE", "STALE_BROKER_EPOCH", "STALE_CONTROLLER_EPOCH")
    def decide_controlled_shutdown(self, broker: int, broker_epoch: int) -> Errors:
        if not self.initialized:
            return Errors.STALE_CONTROLLER_EPOCH  # ControllerMovedException
        cached = self.live.get(broker)
        if cached is None:
            return Errors.BROKER_NOT_AVAILABLE
        if broker_epoch != UNKNOWN_BROKER_EPOCH and broker_epoch < cached.epoch:
            return Errors.STALE_BROKER_EPOCH
        return Errors.NONE

    def process_controlled_shutdown(self, session: int, broker: int, broker_epoch: int) -> Handler:
        """doControlledShutdown: move leaderships away, shrink ISRs, stop the follower replicas."""
        assignment, states = yield from self._read_partitions(session)  # first: the connectivity probe
        if self.decide_controlled_shutdown(broker, broker_epoch) is not Errors.NONE:
            return
        live = self.epochs()
        writes, changed, stops = [], [], []
        for p, s, version in states:
            without = tuple(r for r in s.isr if r != broker)
            if s.leader == broker:
                others = [r for r in assignment[p] if r in s.isr and r in live and r != broker]
                if not others:
                    continue
                new = PartitionState(others[0], LeaderEpoch(s.leader_epoch + 1), without, self.epoch)
            elif broker in s.isr:
                new = PartitionState(s.leader, LeaderEpoch(s.leader_epoch + 1), without, self.epoch)
                stops.append(p)
            else:
                continue
            path = partition_state_path(p)
            writes.append(SetDataOp(path, encode(path, new), version))
            changed.append((p, new))
        if not writes:
            return
        ok = yield from self._write(session, writes)
        if not ok:
            return
        for p, new in changed:
            self._remember(p, new)
        requests = []
        for p, new in changed:
            requests += self._tell_replicas(live, assignment[p], p, new, skip=broker)
        requests += [StopReplica(BrokerId(self.broker_id), self.epoch, BrokerEpoch(live[broker]), BrokerId(broker), p,
                                 False) for p in stops]
        yield from self._send_all(requests)
