"""A broker's KRaft-facing part: BrokerLifecycleManager and the metadata fetcher, sans-IO.

Who owns what: ``impl.broker.BrokerNode`` (a broker process, ZooKeeper mode or KRaft mode) holds
one ``KRaftBrokerClient`` as ``self.kraft`` and hands it the KRaft actions; this module never
touches ZooKeeper and never sends the ZooKeeper-era control messages.

The interface with ``BrokerNode`` (both sides code against this list):

What the client reads (and the two fields it writes) on the broker node it is given:
- ``node.alive: bool``: the process runs.
- ``node.config: dict[str, str]``: server.properties, Kafka's keys. ``process.roles`` is
  ``"broker"`` for a KRaft broker (absent or anything else: a ZooKeeper broker);
  ``zookeeper.metadata.migration.enable`` (``"true"``: the flag); ``controller.quorum.voters``
  and ``controller.listener.names`` (both present: the controller configs, KIP-866 §Migration
  Trigger 3); ``inter.broker.protocol.version`` (a name of ``impl.codec.IBP_NAMES``; kept after
  MigrateBrokerToKRaft: the model's registration carries it).
- ``node.registered: bool``: the model's ``Broker.registered`` (its /brokers/ids znode was
  created in its current session); a ZK broker registers with KRaft only then.
- ``node.meta_properties: int``: read, and set to 1 when a KRaft broker replays POST_MIGRATION
  (KIP-866 §Meta.Properties). ``BrokerNode`` owns and abstracts it.
- ``node.metadata_live: tuple[int, ...]``: set by FetchMetadata (the unfenced brokers of the
  replayed image). ``BrokerNode`` owns and abstracts it (ZK brokers set it from UpdateMetadata).
- ``node.exit_process()``: called when a heartbeat answers ShouldShutDown: the process exits
  at once, without closing its ZooKeeper session, as the model's ``_process_dies`` (it must
  also call ``self.kraft.process_stopped()``).

What ``BrokerNode`` calls:
- ``KRaftBrokerClient(broker_id, incarnation, kraft_mode)`` when a process that talks to KRaft
  starts (the model's ``fresh_kraft_process``: ``zookeeper.metadata.migration.enable`` or a
  KRaft broker; ``incarnation`` is ``Start.incarnation``). The cold cluster's brokers are built
  with ``incarnation=0, kraft_mode=False``. A process with neither keeps its old client.
- ``process_stopped()`` when the process dies or stops (crash, stop, fatal error, exit): the
  model's ``_fresh_process``: KRaft epoch, lifecycle, image and shutdown wish are forgotten,
  the incarnation stays.
- ``offers(node, now)``: the KRaft actions it may try (``RegisterWithKRaft``, ``BrokerHeartbeat``,
  ``FetchMetadata`` towards every voter, ``BeginControlledShutdown``).
- ``perform(node, event)``: a generator (``yield from`` it) for ``Perform`` of those four actions;
  it yields ``Rpc(controller_id, request)`` round trips and the ``Trace``, or nothing (refused).
- ``handle_request(node, event)``: a generator for an ``RpcRequest`` whose request is one of
  ``impl.kraft.rpc.BROKER_REQUESTS`` (the controller's ``BrokerSessionTimedOut``, and the
  ``BrokerRegistrationAnswer`` to a registration it deferred until its record committed); it returns
  the response. ``BrokerNode.handle`` forwards those requests here.
- ``kraft_epoch: int``: the broker epoch KRaft gave this process (-1 before): a ZK broker
  compares the BrokerEpoch of a control request marked IsKRaftController with it (reference §4).
- ``abstract_fields(view)``: the model ``Broker`` fields this client owns: ``incarnation``,
  ``kraft_epoch``, ``lifecycle``, ``image``, ``want_shutdown``.
"""

from __future__ import annotations

import functools
from typing import Any

from impl.bugs import ImplBug
from impl.codec import IBP_BY_NAME
from impl.decisions import decision
from impl.kraft.image import BrokerImage
from impl.kraft.rpc import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    ApiError,
    BrokerHeartbeatAnswer,
    BrokerHeartbeatAnswerResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationAnswer,
    BrokerRegistrationAnswerResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    BrokerSessionTimedOut,
    BrokerSessionTimedOutResponse,
    MetadataFetchRequest,
    MetadataFetchResponse,
)
from impl.pacing import (
    BROKER_HEARTBEAT_INTERVAL_MS,
    BROKER_SESSION_TIMEOUT_MS,
    FETCH_WAIT_MS,
    POLL_MS,
    Gates,
)
from impl.protocol import Handler, Perform, Rpc, RpcRequest, Trace, Unreachable
from model.actions import (
    Action,
    AlterPartition,
    BeginControlledShutdown,
    BrokerHeartbeat,
    FetchMetadata,
    RegisterWithKRaft,
)
from model.kraft import BrokerState, ControllerId, ZkMigrationState
from model.types import BrokerId, Ibp, PartitionId, ReplicaRole

UNKNOWN_BROKER_EPOCH = -1


def kraft_mode(config: dict[str, str]) -> bool:
    """process.roles=broker: a KRaft broker."""
    return "broker" in [r.strip() for r in config.get("process.roles", "").split(",")]


def migration_enabled(config: dict[str, str]) -> bool:
    return config.get("zookeeper.metadata.migration.enable", "false") == "true"


def has_controller_configs(config: dict[str, str]) -> bool:
    return "controller.quorum.voters" in config and "controller.listener.names" in config


def voter_ids(config: dict[str, str]) -> list[int]:
    """The ids of ``controller.quorum.voters`` ("3000@controller-3000:9093,...")."""
    return list(_voter_ids(config.get("controller.quorum.voters", "")))


@functools.lru_cache(maxsize=64)
def _voter_ids(voters: str) -> tuple[int, ...]:
    return tuple(sorted(int(v.split("@", 1)[0]) for v in voters.split(",") if v.strip()))


def ibp_of(config: dict[str, str]) -> Ibp:
    return IBP_BY_NAME[config["inter.broker.protocol.version"]]


@decision("yes", "no")
def zk_broker_may_register(config: dict[str, str], registered: bool) -> bool:
    """KIP-866 §Migration Trigger 1-3: a ZK broker registers with KRaft only with the migration flag, the
    controller configs and the bridge release's IBP (3.4-IV0 or later), once it is registered in ZooKeeper."""
    return migration_enabled(config) and has_controller_configs(config) and ibp_of(config) >= Ibp.IBP_3_4_IV0 \
        and registered


class KRaftBrokerClient:
    """The KRaft side of one broker process: its registration, heartbeats and replayed metadata."""

    def __init__(self, broker_id: int, incarnation: int, kraft_mode: bool) -> None:
        self.broker_id = broker_id
        self.incarnation = incarnation
        self.kraft_epoch = UNKNOWN_BROKER_EPOCH
        self.lifecycle = BrokerState.FENCED if kraft_mode else BrokerState.OFFLINE
        self.metadata = BrokerImage()  # the committed log it replayed, and its image
        self.want_shutdown = False
        self._pacing_reset()

    def _pacing_reset(self) -> None:
        # When it sends each request (BrokerLifecycleManager's schedule; impl.pacing), and the
        # controller that last answered (the active one, as far as it knows).
        self.gates = Gates()
        self.active_hint: int | None = None
        self.awaiting: int | None = None  # the controller holding its registration until the record commits
        self.awaiting_heartbeat: int | None = None  # the controller holding its heartbeat until the log is stable

    def process_stopped(self) -> None:
        self.kraft_epoch = UNKNOWN_BROKER_EPOCH
        self.lifecycle = BrokerState.OFFLINE
        self.metadata = BrokerImage()
        self.want_shutdown = False
        self._pacing_reset()

    # ---- what it offers -----------------------------------------------------------------------

    def offers(self, node: Any, now: int) -> list[Action]:
        """Registration until it has an epoch, then a heartbeat every broker.heartbeat.interval.ms, and
        (a KRaft broker) metadata fetches; each to the controller that last answered, or to every
        voter once that one stopped answering (or it has been quiet for a session timeout)."""
        if not node.alive:
            return []
        g = self.gates
        g.begin()
        b = BrokerId(self.broker_id)
        kraft = kraft_mode(node.config)
        voters = voter_ids(node.config)
        out: list[Action] = []
        if self.kraft_epoch == UNKNOWN_BROKER_EPOCH:
            if self.awaiting is None and (kraft or zk_broker_may_register(node.config, node.registered)):
                out += [RegisterWithKRaft(b, ControllerId(c)) for c in voters
                        if self._towards(RegisterWithKRaft, c, now)]
        elif g.open(BrokerHeartbeat, now) and self.awaiting_heartbeat is None \
                and not self._waits_to_catch_up(node, kraft):
            out += [BrokerHeartbeat(b, ControllerId(c)) for c in voters if self._towards(BrokerHeartbeat, c, now)]
        if not kraft and node.joins_isr:
            # a ZK broker leading a partition asks for the ISR join of each other replica it was told of (the
            # controller takes only an adding replica of a reassignment; a refusal backs off), where a reassignment
            # may be made (elsewhere its requests would only be refused)
            out += [AlterPartition(b, ControllerId(c), PartitionId(p), BrokerId(r))
                    for p, (_, role, replicas) in sorted(node.replicas.items()) if role is ReplicaRole.LEADER
                    for r in replicas if r != b
                    for c in voters if self._towards((AlterPartition, p, r), c, now)]
        if kraft:
            out += [FetchMetadata(b, ControllerId(c)) for c in voters if self._towards(FetchMetadata, c, now)]
            if not self.want_shutdown and self.lifecycle is BrokerState.ONLINE:
                out.append(BeginControlledShutdown(b))
        return out

    def _waits_to_catch_up(self, node: Any, kraft: bool) -> bool:
        """The mistake of ``FENCED_BROKER_HEARTBEATS_WHEN_CAUGHT_UP``: a fenced KRaft broker keeps its heartbeats
        until it has replayed past the record after its registration (a record that may never come); and of
        ``ZK_BROKER_HEARTBEATS_WHEN_CAUGHT_UP``: a ZK broker keeps them until it has replayed past its registration,
        which it never does (it replays no log)."""
        if not kraft:
            return ImplBug.ZK_BROKER_HEARTBEATS_WHEN_CAUGHT_UP in node.bugs and self.metadata.offset <= self.kraft_epoch
        return ImplBug.FENCED_BROKER_HEARTBEATS_WHEN_CAUGHT_UP in node.bugs \
            and self.lifecycle is BrokerState.FENCED and self.metadata.offset <= self.kraft_epoch + 1

    def _towards(self, kind: type, controller: int, now: int) -> bool:
        g = self.gates
        if not g.open((kind, controller), now):
            return False
        return self.active_hint in (None, controller) or g.open("hint", now)

    def _answered(self, kind: type, controller: int, now: int, empty: bool = False) -> None:
        """``controller`` answered as the active controller: the others wait (for a session timeout).
        ``empty``: a fetch with nothing new, after which the next one waits longer (a long poll)."""
        self.active_hint = controller
        self.gates.close("hint", now + BROKER_SESSION_TIMEOUT_MS)
        if empty:
            self.gates.fail((kind, controller), now, FETCH_WAIT_MS, POLL_MS)
        else:
            self.gates.succeed((kind, controller))

    def _unanswered(self, kind: type, controller: int, now: int, response: Any = None) -> None:
        """Refused: try it again after a growing backoff. No answer or NOT_CONTROLLER: if that was the
        controller it knew, look for another one (an error from the active controller, such as a
        throttled write, is an answer)."""
        error = getattr(response, "error", ApiError.NOT_CONTROLLER)
        if error not in (ApiError.NOT_CONTROLLER, ApiError.NOT_LEADER_OR_FOLLOWER):
            self.active_hint = controller
            self.gates.close("hint", now + BROKER_SESSION_TIMEOUT_MS)
        elif self.active_hint == controller:
            self.active_hint = None
            self.gates.clear("hint")
        self.gates.fail((kind, controller), now)

    @staticmethod
    def _heartbeat_interval(node: Any) -> int:
        return int(node.config.get("broker.heartbeat.interval.ms", BROKER_HEARTBEAT_INTERVAL_MS))

    # ---- the actions --------------------------------------------------------------------------

    def perform(self, node: Any, event: Perform) -> Handler:
        match event.action:
            case RegisterWithKRaft(controller=c):
                return (yield from self._register(node, event.action, c, event.now))
            case BrokerHeartbeat(controller=c):
                return (yield from self._heartbeat(node, event.action, c, event.now))
            case FetchMetadata(controller=c):
                return (yield from self._fetch_metadata(node, event.action, c, event.now))
            case BeginControlledShutdown():
                return (yield from self._begin_controlled_shutdown(node, event.action))
            case AlterPartition(controller=c):
                return (yield from self._alter_partition(node, event.action, c, event.now))
        raise TypeError(f"not a KRaft broker action: {event.action!r}")

    def _register(self, node: Any, action: RegisterWithKRaft, controller: int, now: int) -> Handler:
        """BrokerLifecycleManager's registration (KIP-866 §Broker Registration; reference §3.1)."""
        if not node.alive or self.kraft_epoch != UNKNOWN_BROKER_EPOCH or self.awaiting is not None:
            return
        config = node.config
        kraft = kraft_mode(config)
        if not kraft and not zk_broker_may_register(config, node.registered):
            return
        request = BrokerRegistrationRequest(self.broker_id, self.incarnation, not kraft, int(ibp_of(config)))
        response = yield Rpc(controller, request)
        if isinstance(response, Unreachable) and response.timed_out \
                and ImplBug.LOST_REGISTRATION_GUESSES_EPOCH in node.bugs:
            # the mistake: with no answer, it takes the offset it has replayed to as the epoch it was given
            self.kraft_epoch = self.metadata.offset
            if kraft:
                self.lifecycle = BrokerState.FENCED
        if not isinstance(response, BrokerRegistrationResponse) or response.error is not ApiError.NONE:
            # No answer (a timeout too: the registration may have taken effect): the same request again later,
            # with the same incarnation, as BrokerLifecycleManager does.
            self._unanswered(RegisterWithKRaft, controller, now, response)
            return  # Differs (as the model): a refused broker retries instead of terminating
        self._answered(RegisterWithKRaft, controller, now)
        if response.deferred:
            self.awaiting = controller  # the answer comes once the record commits (BrokerRegistrationAnswer)
        else:
            self._take_epoch(response.broker_epoch, kraft)
        yield Trace(action)

    def _alter_partition(self, node: Any, action: AlterPartition, controller: int, now: int) -> Handler:
        """A ZK broker leading the partition asks the KRaft controller to add ``action.replica`` to its ISR (the
        replica has caught up: no data is replicated here, so a leader may ask at any time; the controller decides).
        """
        local = node.replicas.get(action.partition)
        if kraft_mode(node.config) or local is None or local[1] is not ReplicaRole.LEADER:
            return
        key = (AlterPartition, action.partition, action.replica)
        request = AlterPartitionRequest(self.broker_id, action.partition, local[0], action.replica)
        response = yield Rpc(controller, request)
        if not isinstance(response, AlterPartitionResponse) or not response.appended:
            self._unanswered(key, controller, now, response)
            return
        self._answered(key, controller, now)
        yield Trace(action)

    def _take_epoch(self, epoch: int, kraft: bool) -> None:
        self.gates.clear(BrokerHeartbeat)  # the first heartbeat goes at once
        self.kraft_epoch = epoch
        if kraft:
            self.lifecycle = BrokerState.FENCED

    def _heartbeat(self, node: Any, action: BrokerHeartbeat, controller: int, now: int) -> Handler:
        """BrokerLifecycleManager's heartbeat and what its answer does to the broker (KIP-500 §Broker States)."""
        if not node.alive or self.kraft_epoch == UNKNOWN_BROKER_EPOCH or self.awaiting_heartbeat is not None:
            return
        kraft = kraft_mode(node.config)
        request = BrokerHeartbeatRequest(
            self.broker_id, self.kraft_epoch, self.metadata.offset, self.want_shutdown, not kraft
        )
        response = yield Rpc(controller, request)
        if not isinstance(response, BrokerHeartbeatResponse) or response.error not in (ApiError.NONE,
                                                                                         ApiError.STALE_BROKER_EPOCH):
            self._unanswered(BrokerHeartbeat, controller, now, response)
            return
        self._answered(BrokerHeartbeat, controller, now)
        self.gates.close(BrokerHeartbeat, now + self._heartbeat_interval(node))
        if response.deferred:
            self.awaiting_heartbeat = controller  # the answer comes once the log is stable (BrokerHeartbeatAnswer)
            yield Trace(action)
            return
        if response.error is ApiError.STALE_BROKER_EPOCH:
            self.kraft_epoch = UNKNOWN_BROKER_EPOCH  # register again
            if kraft:
                self.lifecycle = BrokerState.FENCED
            yield Trace(action)
            return
        if not self._take_heartbeat_answer(node, response) and not response.appended:
            return  # nothing changed: the model refuses the step
        yield Trace(action)

    def _take_heartbeat_answer(self, node: Any, response: BrokerHeartbeatResponse) -> bool:
        """What a heartbeat's answer does to the broker (BrokerLifecycleManager: RECOVERY -> RUNNING once not
        fenced; ShouldShutDown: the process exits). Whether it changed the broker."""
        if response.should_shut_down:
            node.exit_process()  # SHUTDOWN_NOW: the process exits, Offline
            return True
        kraft = kraft_mode(node.config)
        online = response.unfenced or (not response.is_fenced and not response.in_controlled_shutdown
                                       and not self.want_shutdown)
        if not kraft or not online or self.lifecycle is BrokerState.ONLINE:
            return False
        self.lifecycle = BrokerState.ONLINE
        return True

    def _fetch_metadata(self, node: Any, action: FetchMetadata, controller: int, now: int) -> Handler:
        """The broker's metadata fetcher: committed entries from the leader, replayed in order."""
        if not node.alive or not kraft_mode(node.config):
            return
        replayed = self.metadata
        first = True
        while True:
            request = MetadataFetchRequest(self.broker_id, replayed.offset, replayed.last_epoch)
            response = yield Rpc(controller, request)
            if not isinstance(response, MetadataFetchResponse) or response.error is not ApiError.NONE:
                self._unanswered(FetchMetadata, controller, now, response)
                return
            empty = first and response.high_watermark <= self.metadata.offset
            self._answered(FetchMetadata, controller, now, empty)
            if empty:
                return  # nothing newer committed than what it replayed
            first = False
            if response.diverging_epoch < 0:
                break
            # Only reachable when committed entries changed under the broker (a broken quorum): start over
            # from the common prefix, as a broker loading a snapshot does.
            replayed = replayed.truncated(response.diverging_epoch, response.diverging_end_offset)
        replayed = replayed.extended(response.records)
        self.metadata = replayed
        if replayed.image.migration_state is ZkMigrationState.POST_MIGRATION:
            node.meta_properties = 1  # KIP-866 §Meta.Properties: the v1 file once the migration is final
        node.metadata_live = replayed.image.unfenced()
        if self.lifecycle is BrokerState.FENCED and self.kraft_epoch != UNKNOWN_BROKER_EPOCH \
                and replayed.offset > self.kraft_epoch:
            self.gates.clear(BrokerHeartbeat)  # caught up: setReadyToUnfence heartbeats at once
        yield Trace(action)

    def _begin_controlled_shutdown(self, node: Any, action: BeginControlledShutdown) -> Handler:
        """SIGINT on a running KRaft broker: Stopping; its heartbeats now ask to shut down."""
        if not node.alive or not kraft_mode(node.config) or self.want_shutdown:
            return
        if self.lifecycle is not BrokerState.ONLINE:
            return
        self.want_shutdown = True
        self.lifecycle = BrokerState.STOPPING
        self.gates.clear(BrokerHeartbeat)  # the heartbeat asking to shut down goes at once
        yield Trace(action)

    # ---- requests from the controller ---------------------------------------------------------

    def handle_request(self, node: Any, event: RpcRequest) -> Handler:
        request = event.request
        if isinstance(request, BrokerSessionTimedOut):
            same = (
                node.alive
                and request.incarnation_id == self.incarnation
                and request.broker_epoch == self.kraft_epoch
            )
            if same and kraft_mode(node.config):
                self.lifecycle = BrokerState.FENCED
            return BrokerSessionTimedOutResponse(same)
        if isinstance(request, BrokerRegistrationAnswer):
            if not node.alive or request.incarnation_id != self.incarnation or self.awaiting != event.source:
                return BrokerRegistrationAnswerResponse(False)  # another process asked: the answer goes nowhere
            self.awaiting = None
            if request.error is not ApiError.NONE:  # NOT_CONTROLLER: it asks again, as BrokerLifecycleManager does
                self._unanswered(RegisterWithKRaft, event.source, event.now, request)
                return BrokerRegistrationAnswerResponse(False)
            self._answered(RegisterWithKRaft, event.source, event.now)
            self._take_epoch(request.broker_epoch, kraft_mode(node.config))
            return BrokerRegistrationAnswerResponse(True)
        if isinstance(request, BrokerHeartbeatAnswer):
            if not node.alive or request.incarnation_id != self.incarnation or self.awaiting_heartbeat != event.source:
                return BrokerHeartbeatAnswerResponse(False)  # another process asked: the answer goes nowhere
            self.awaiting_heartbeat = None
            if request.error is not ApiError.NONE or request.response is None:  # NOT_CONTROLLER: it heartbeats again
                self._unanswered(BrokerHeartbeat, event.source, event.now, request)
                return BrokerHeartbeatAnswerResponse(False)
            self._take_heartbeat_answer(node, request.response)
            return BrokerHeartbeatAnswerResponse(True)
        raise TypeError(f"not a request a broker serves: {request!r}")
        yield  # pragma: no cover - makes this a generator

    # ---- the refinement map -------------------------------------------------------------------

    def abstract_fields(self, view: Any) -> dict[str, Any]:
        from model.kraft import Incarnation
        from model.types import BrokerEpoch

        return {
            "incarnation": Incarnation(view.incarnation(self.broker_id, self.incarnation)),
            "kraft_epoch": BrokerEpoch(self.kraft_epoch),
            "lifecycle": self.lifecycle,
            "image": self.metadata.image.to_model(lambda b, i: view.incarnation(b, i)),
            "want_shutdown": self.want_shutdown,
        }
