"""The runner: a whole cluster of sans-IO nodes, its ZooKeeper port and its network, driven step by step.

Rules:
- ``Cluster.run(node, event)`` is the only place a node's effects happen: ZooKeeper calls go to
  the port (errors are thrown back into the node's generator), messages go on the network, RPCs
  run the peer's handler inside the caller's step, traces are collected. After every ZooKeeper
  call the fired watches are handed to the nodes whose sessions set them.
- ``Cluster.perform(action)`` drives the implementation with one model action: the acting node
  gets ``Perform(action)``, or the environment does it (deliver or drop a message, a ZooKeeper
  outage, a session expiry, a crash, a restart, an operator's reconfiguration or znode
  deletion). It returns the model actions the implementation says it took: usually
  ``[action]``, ``[]`` for a refusal, or something else when the world decided otherwise (a
  clean stop whose session could not be closed is a crash). A response lost after its request took effect
  (``RegistrationResponseLost``, ``HeartbeatResponseLost``) is the broker's request performed with its
  answer withheld: the controller's handler runs, the broker sees a timeout (``Unreachable(timed_out=True)``);
  the step is named so when the controller's log grew, and is no step otherwise (nothing the model counts
  happened). A heartbeat held in the network (``HoldHeartbeat``) is the broker's heartbeat step whose RPC the
  cluster keeps (``held``) instead of running the controller's handler: the broker sees a timeout, as above;
  ``DeliverHeartbeat`` runs the controller's handler on the kept request later, with the broker epoch it was
  sent with, and drops the answer (the broker's connection timed out long ago). A request the test harness injects
  (``model.harness.Inject``, a control request or controlled shutdown with any epochs) is
  delivered by ``deliver``, as any message is, or put in flight (``inject``).
- Time and randomness come from outside: ``now`` is set by the simulator, incarnation ids are
  drawn from the cluster's ``random.Random(seed)``, message delays and partitions are hooks the
  simulator sets (``delay``, ``reachable``). Driven by the differential tests, time stands still,
  every message can be delivered at once and nothing is partitioned.
- ``Cluster.from_scope(scope)`` builds the implementation of a model scope's cold start
  (``model.scopes.cold_state``): the same znodes (written as Kafka's JSON under real parents),
  one process per broker and per KRaft controller with the same configuration, as Kafka
  properties.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, assert_never

from impl.bugs import ImplBug
from impl.codec import IBP_NAMES, PERSISTENT_PATHS, encode
from impl.kraft import rpc as kraft_rpc
from impl.kraft.driver import MIGRATION_BATCH_SIZE
from impl.protocol import (
    DEFER,
    Crash,
    Effect,
    Event,
    Node,
    Perform,
    Receive,
    Reconfigure,
    Rpc,
    RpcRequest,
    Send,
    Start,
    Stop,
    Trace,
    Unreachable,
)
from impl.refinement import View
from impl.zk.port import (
    CloseSession,
    CreateSession,
    Exists,
    GetChildren,
    GetData,
    Multi,
    ZkError,
    ZkPort,
    ZkRequest,
    execute,
    parent_of,
)
from model.actions import (
    Action,
    BrokerHeartbeat,
    BrokerZkServerCatchesUp,
    BrokerZkServerLags,
    ChangeIbp,
    CrashBroker,
    CrashController,
    DeleteControllerZNodes,
    Deliver,
    DeliverHeartbeat,
    Drop,
    ExpireSession,
    HeartbeatResponseLost,
    HoldHeartbeat,
    MigrateBrokerToKRaft,
    ReconfigureController,
    Redeliver,
    RegisterWithKRaft,
    RegistrationResponseLost,
    RestartBroker,
    RestartController,
    RollbackBrokerToZk,
    SessionTimeout,
    ShutdownController,
    StopBroker,
    ZkOutage,
    ZkRecover,
    ZkServerCatchesUp,
    ZkServerLags,
)
from model.harness import Inject
from model.kraft import DEFAULT_MIGRATION_BATCH_SIZE, FIRST_CONTROLLER_ID, ControllerId
from model.state import CONTROLLER, CONTROLLER_EPOCH, BrokerHeartbeatRequest, BrokerRegistrationRequest, Message
from model.types import BrokerEpoch, BrokerId

SESSION_TIMEOUT_MS = 6_000  # zookeeper.session.timeout.ms (Kafka's default is 18 s; shorter to keep runs short)
ZOOKEEPER_CONNECT = "zookeeper:2181"


# The requests whose response a ``RegistrationResponseLost`` or ``HeartbeatResponseLost`` loses.
ANSWERED_REQUESTS = (kraft_rpc.BrokerRegistrationRequest, kraft_rpc.BrokerHeartbeatRequest)

# The action types ``Cluster.perform`` hands to a node as ``Perform``, as its match found them (the
# case is decided by the type alone: the patterns only bind fields).
_NODE_STEPS: set[type] = set()


@dataclass
class HeldHeartbeat:
    """A broker's heartbeat RPC the network holds (``HoldHeartbeat``): to controller ``dest``, deliverable from
    ``deliver_at`` (the simulator's ``hold_delay``)."""

    dest: int
    request: RpcRequest
    deliver_at: int


@dataclass
class InFlight:
    seq: int
    message: Message
    deliver_at: int


def voters_config(controllers: int) -> str:
    """controller.quorum.voters for ``controllers`` KRaft controllers with ids from 3000."""
    ids = [FIRST_CONTROLLER_ID + i for i in range(max(controllers, 1))]
    return ",".join(f"{c}@controller-{c}:9093" for c in ids)


def broker_properties(broker_id: int, config, voters: str) -> dict[str, str]:
    """A broker's server.properties, from the model's BrokerConfig."""
    props = {
        "broker.id": str(broker_id),
        "inter.broker.protocol.version": IBP_NAMES[config.ibp],
        "zookeeper.connect": ZOOKEEPER_CONNECT,
        "zookeeper.metadata.migration.enable": "true" if config.migration_enabled else "false",
    }
    if config.controller_configs:
        props["controller.quorum.voters"] = voters
        props["controller.listener.names"] = "CONTROLLER"
    if config.kraft_mode:
        props["process.roles"] = "broker"
        props["node.id"] = str(broker_id)
    return props


def controller_properties(controller_id: int, config, voters: str) -> dict[str, str]:
    """A KRaft controller's server.properties, from the model's ControllerConfig."""
    props = {
        "node.id": str(controller_id),
        "process.roles": "controller",
        "controller.quorum.voters": voters,
        "controller.listener.names": "CONTROLLER",
        "zookeeper.metadata.migration.enable": "true" if config.migration_enabled else "false",
    }
    if config.zk_configured:
        props["zookeeper.connect"] = ZOOKEEPER_CONNECT
    if config.migration_batch_size != DEFAULT_MIGRATION_BATCH_SIZE:
        props[MIGRATION_BATCH_SIZE] = str(config.migration_batch_size)
    return props


class Cluster:
    def __init__(self, port: ZkPort, view: View, seed: int = 0) -> None:
        self.port = port
        self.view = view
        self.rng = random.Random(seed)
        self.brokers: dict[int, Node] = {}
        self.controllers: dict[int, Node] = {}
        self.network: list[InFlight] = []
        self.session_owner: dict[int, int] = {}  # ZooKeeper session -> the node that opened it
        self.operator_session = 0  # the admin tool's session (bootstrap, rollback's znode deletion)
        self.zk_available = True
        self.now = 0
        self.trace_log: list[tuple[int, Action]] = []  # (stimulus id, action), the whole run
        self.sent: list[Message] = []  # messages sent by the current ``perform``, in order
        self.touched: set[int] = set()  # nodes that handled an event or got a notification (offers may change)
        self._stimulus = 0
        self._seq = 0
        # hooks the simulator sets
        self.delay: Callable[[Message], int] = lambda message: 0
        self.reachable: Callable[[int, int], bool] = lambda source, dest: True
        self.on_deliver_copy: Callable[[Message], None] = lambda message: None
        self.hold_delay: Callable[[], int] = lambda: 0  # how long a held heartbeat waits (``HoldHeartbeat``)
        # ... and the checks: every round trip, as (time, caller, callee, request, response), the way an
        # observer of the wire would see it (properties.differential's clock for the model-independent checks).
        self.on_rpc: Callable[[int, int, int, Any, Any], None] | None = None
        # A response to lose (``_lose_response``), and whether the request it answered took effect.
        self._losing = self._lost = False
        # Heartbeats held in the network (``HoldHeartbeat``), oldest first; and whether the current step's heartbeat
        # is to be held, and was.
        self.held: list[HeldHeartbeat] = []
        self._holding = self._held = False

    # ---- construction ---------------------------------------------------------------------------

    @classmethod
    def from_scope(cls, scope, bugs: frozenset[ImplBug] = frozenset(), port: ZkPort | None = None,
                   seed: int = 0) -> Cluster:
        from model.scopes import cold_state

        cold = cold_state(scope)
        if port is None:
            from impl.zk.embedded import EmbeddedZk

            port = EmbeddedZk()
        cluster = cls(port, View(partitions=len(scope.partitions)), seed)
        cluster.operator_session = port.open_session(SESSION_TIMEOUT_MS)
        created: dict[int, int] = {}
        for path in PERSISTENT_PATHS:
            cluster._ensure(path)
        for path, node in zip(cold.zk.paths, cold.zk.nodes):
            cluster._ensure(parent_of(path))
            stat = port.create(cluster.operator_session, path, encode(path, node.data))
            created[stat.czxid] = node.czxid
        voters = voters_config(len(cold.controllers))
        if cold.brokers:
            from impl.broker import BrokerNode

            for b in cold.brokers:
                cluster.brokers[b.id] = BrokerNode(b.id, broker_properties(b.id, b.config, voters), b.config.supported,
                                                   bugs)
                cluster.brokers[b.id].feature_updates = scope.feature_updates
                cluster.brokers[b.id].created_replicas = scope.created_replicas
                cluster.brokers[b.id].creates_partitions = bool(scope.created_replicas)
                cluster.brokers[b.id].reassignment = scope.reassignment
                cluster.brokers[b.id].joins_isr = scope.reassignment is not None
                cluster.brokers[b.id].deletes_topic = cluster.brokers[b.id].topic_deletions = \
                    scope.budget.topic_deletions > 0
        if cold.controllers:
            from impl.kraft_controller import ControllerNode

            for c in cold.controllers:
                node = ControllerNode(c.id, controller_properties(c.id, c.config, voters), c.config.metadata_version,
                                      scope.budget.max_lag, bugs, scope.budget.answer_at_commit,
                                      scope.budget.heartbeats_at_commit)
                node.metadata_version_updates = scope.metadata_version_choices
                node.created_replicas = scope.created_replicas
                node.reassignment = scope.reassignment
                node.deletes_topic = scope.budget.topic_deletions > 0
                node.zk_session = port.open_session(SESSION_TIMEOUT_MS)
                cluster.session_owner[node.zk_session] = c.id
                cluster.controllers[c.id] = node
        cluster.view.booted(port.last_zxid(), cold.zk.zxid, created)
        port.drain_watch_events()
        return cluster

    def _ensure(self, path: str) -> None:
        if path == "/" or self.port.exists(self.operator_session, path) is not None:
            return
        self._ensure(parent_of(path))
        self.port.create(self.operator_session, path, b"")

    # ---- running a node's handler ----------------------------------------------------------------

    def node(self, node_id: int) -> Node:
        return self.brokers[node_id] if node_id in self.brokers else self.controllers[node_id]

    def event_fields(self) -> dict[str, int]:
        self._stimulus += 1
        return {"now": self.now, "stimulus_id": self._stimulus}

    def run(self, node: Node, event: Event, traces: list[Action] | None = None) -> tuple[Any, list[Action]]:
        """Run ``node``'s handler for ``event`` to its end; returns its result and the traces of the step."""
        traces = [] if traces is None else traces
        self.touched.add(node.node_id)
        handler = node.handle(event)
        value: Any = None
        error: ZkError | None = None
        effect: Effect
        while True:
            try:
                effect = handler.throw(error) if error is not None else handler.send(value)
            except StopIteration as stop:
                return stop.value, traces
            value, error = None, None
            match effect:
                case GetData() | Exists() | Multi() | GetChildren() | CreateSession() | CloseSession():
                    try:
                        value = self._zk(node, effect)
                    except ZkError as e:
                        error = e
                case Send(message=message):
                    self.send(message)
                case Rpc():
                    value = self._rpc(node, effect, event, traces)
                case Trace(action=action):
                    traces.append(action)
                    self.trace_log.append((event.stimulus_id, action))
                case _:
                    assert_never(effect)

    def _zk(self, node: Node, request: ZkRequest) -> Any:
        try:
            result = execute(self.port, request)
        finally:
            self._route_watch_events()
        match request:
            case CreateSession():
                self.session_owner[result] = node.node_id
                if node.node_id in self.brokers:
                    self.view.session_opened(result)
            case CloseSession(session=session):
                self.view.session_closed(session)
        return result

    def _route_watch_events(self) -> None:
        for event in self.port.drain_watch_events():
            owner = self.session_owner.get(event.session)
            if owner is None:
                continue
            self.node(owner).notifications.add(event.path, "child" if event.kind == "child" else "data")
            self.touched.add(owner)

    def _rpc(self, node: Node, rpc: Rpc, event: Event, traces: list[Action]) -> Any:
        dest = self.brokers.get(rpc.dest) or self.controllers.get(rpc.dest)
        # A deferred request's answer goes back on the request's connection (kraft_rpc.BrokerRegistrationAnswer).
        answer = isinstance(rpc.request, (kraft_rpc.BrokerRegistrationAnswer, kraft_rpc.BrokerHeartbeatAnswer))
        if dest is None or not dest.alive or not (answer or self.reachable(node.node_id, rpc.dest)):
            return Unreachable(rpc.dest)
        request = RpcRequest(event.now, event.stimulus_id, node.node_id, rpc.request)
        if self._holding and isinstance(rpc.request, kraft_rpc.BrokerHeartbeatRequest):
            self._holding = False  # one heartbeat held, the step's first
            entry = HeldHeartbeat(rpc.dest, request, 0)
            # Differs: a heartbeat identical to one held already (same epoch, offset and intent) is not held twice,
            # as ``send`` queues no duplicate: the model's held heartbeats are a set. The broker still timed out.
            if self.held_request(entry) not in self.held_requests():
                self._held = True
                entry.deliver_at = self.now + self.hold_delay()
                self.held.append(entry)
            return Unreachable(rpc.dest, timed_out=True)
        losing = self._losing and isinstance(rpc.request, ANSWERED_REQUESTS)
        if losing:
            self._losing, log_end = False, len(dest.raft.log)  # one response lost, the step's first
        response, _ = self.run(dest, request, traces)
        if self.on_rpc is not None:
            self.on_rpc(event.now, node.node_id, rpc.dest, rpc.request, response)
        if losing:
            self._lost = len(dest.raft.log) > log_end
            dest.forget_answer(rpc.request)
            return Unreachable(rpc.dest, timed_out=True)
        return response

    # ---- the network ----------------------------------------------------------------------------

    def send(self, message: Message) -> None:
        self.sent.append(message)
        # Differs: a request identical to one still in flight (same destination, epochs and content)
        # is not queued twice: the model's network is a set, and the duplicate would be
        # indistinguishable on arrival. Duplicated delivery is a fault of its own (Redeliver).
        if any(entry.message == message for entry in self.network):
            return
        self._seq += 1
        self.network.append(InFlight(self._seq, message, self.now + self.delay(message)))

    def in_flight_messages(self) -> list[Message]:
        return [entry.message for entry in self.network]

    def _take(self, message: Message) -> InFlight | None:
        """The in-flight copy of ``message``, which is written as the model writes it (``View.message``)."""
        for entry in self.network:
            if self.view.message(entry.message) == message:
                return entry
        return None

    def deliver(self, entry: InFlight, keep: bool = False, label: Action | None = None) -> list[Action]:
        """Hand ``entry`` to its destination; ``keep``: a duplicate, the original stays in flight;
        ``label``: the model action it is (an injected request's ``Inject``), when not a delivery's own."""
        message = entry.message
        label = label or (Redeliver if keep else Deliver)(self.view.message(message))
        node = self.brokers.get(message.dest)
        if node is None or not node.alive:
            if not keep:
                self.network.remove(entry)
            return [label]
        traces: list[Action] = [label]
        result, _ = self.run(node, Receive(message=message, **self.event_fields()), traces)
        if result is DEFER:
            if len(traces) > 1:
                raise AssertionError(f"node {node.node_id} deferred {message} after acting on it: {traces[1:]}")
            return []
        if not keep:
            self.network.remove(entry)
        self.trace_log.append((self._stimulus, traces[0]))
        return traces

    # ---- one model action -----------------------------------------------------------------------

    def perform(self, action: Action) -> list[Action]:
        self.sent = []
        if type(action) in _NODE_STEPS:  # the common case, without trying every environment case below
            return self._node_step(action)
        match action:
            case Deliver(message=m):
                entry = self._take(m)
                return [] if entry is None else self.deliver(entry)
            case Redeliver(message=m):
                entry = self._take(m)
                return [] if entry is None else self.deliver(entry, keep=True)
            case Drop(message=m):
                entry = self._take(m)
                if entry is None:
                    return []
                self.network.remove(entry)
                return self._env(action)
            case ZkOutage():
                if not self.zk_available:
                    return []
                self.zk_available = False
                self.port.set_available(False)
                return self._env(action)
            case ZkRecover():
                if self.zk_available:
                    return []
                self.zk_available = True
                self.port.set_available(True)
                return self._env(action)
            case ZkServerLags(controller=cid) | ZkServerCatchesUp(controller=cid):
                return self._lagging_server(action, cid)
            case BrokerZkServerLags(broker=b) | BrokerZkServerCatchesUp(broker=b):
                return self._broker_lagging_server(action, b)
            case ExpireSession(session=s):
                session = self.view.impl_session(s)
                if session is None or not self.zk_available or not self.port.session_alive(session):
                    return []
                self.port.expire_session(session)
                self.view.session_closed(session)
                self._route_watch_events()
                return self._env(action)
            case DeleteControllerZNodes():
                return self._delete_controller_znodes(action)
            case RegistrationResponseLost(broker=b, controller=c):
                return self._lose_response(action, RegisterWithKRaft(b, c))
            case HeartbeatResponseLost(broker=b, controller=c):
                return self._lose_response(action, BrokerHeartbeat(b, c))
            case HoldHeartbeat(broker=b, controller=c):
                return self._hold_heartbeat(action, BrokerHeartbeat(b, c))
            case DeliverHeartbeat(request=r):
                return self._deliver_heartbeat(action, r)
            case Inject():
                return self.inject(action)
            case CrashBroker(broker=n) | CrashController(controller=n):
                return self._lifecycle(n, Crash(**self.event_fields()))
            case StopBroker(broker=n) | ShutdownController(controller=n):
                return self._lifecycle(n, Stop(**self.event_fields()))
            case RestartBroker(broker=n) | RestartController(controller=n):
                return self._lifecycle(n, Start(incarnation=self.rng.getrandbits(62) | 1, **self.event_fields()))
            case ChangeIbp(broker=b, ibp=ibp):
                return self._reconfigure(b, {"inter.broker.protocol.version": IBP_NAMES[ibp]})
            case MigrateBrokerToKRaft(broker=b):
                return self._reconfigure(b, {"process.roles": "broker", "node.id": str(b)})
            case RollbackBrokerToZk(broker=b):
                return self._reconfigure(b, {"process.roles": ""})
            case ReconfigureController(controller=c, migration_enabled=enabled):
                return self._reconfigure(c, {"zookeeper.metadata.migration.enable": "true" if enabled else "false"})
            case _:
                _NODE_STEPS.add(type(action))
                return self._node_step(action)

    def _lagging_server(self, action: ZkServerLags | ZkServerCatchesUp, cid: int) -> list[Action]:
        """A controller's ZooKeeper server falls behind or catches up: what the embedded store's ``lag`` and
        ``catch_up`` do (model.zookeeper views). A real server lags on its own: nothing to do."""
        node = self.controllers.get(cid)
        if node is None:
            return []
        return self._lag_or_catch_up(action, node.zk_session, isinstance(action, ZkServerLags), lambda: True)

    def _broker_lagging_server(self, action: BrokerZkServerLags | BrokerZkServerCatchesUp, b: int) -> list[Action]:
        """A ZooKeeper-mode broker's server falls behind, while the broker is not the controller, or catches up
        (model.zk_era: a controller's reads set watches, which a lagging server would deliver late)."""
        node = self.brokers.get(b)
        if node is None or node.session is None or not node.alive:
            return []
        session = node.session
        return self._lag_or_catch_up(action, session, isinstance(action, BrokerZkServerLags),
                                     lambda: node.controller is None and self.port.session_alive(session))

    def _lag_or_catch_up(self, action: Action, session: int, lags: bool, may_lag: Callable[[], bool]) -> list[Action]:
        lag = getattr(self.port, "lag", None)
        if lag is None:
            return []
        if lags:
            if not self.zk_available or self.port.lagging(session) or not may_lag():
                return []
            lag(session)
        else:
            if not self.port.lagging(session):
                return []
            self.port.catch_up(session)
        return self._env(action)

    def inject(self, action: Inject) -> list[Action]:
        """A request the test harness sends (``model.harness``), written as the model writes it: delivered
        as any in-flight message is (an equal one in flight stays), or put in flight."""
        request = action.request
        if isinstance(request, BrokerRegistrationRequest | BrokerHeartbeatRequest):
            raise NotImplementedError("the implementation takes no injected request to a KRaft controller")
        message = self.view.impl_message(request)
        if request.dest not in self.brokers:
            return []
        if not action.deliver:
            if any(entry.message == message for entry in self.network):
                return []
            self._seq += 1
            self.network.append(InFlight(self._seq, message, self.now))
            return self._env(action)
        return self.deliver(InFlight(0, message, self.now), keep=True, label=action)

    def _lose_response(self, action: Action, request: Action) -> list[Action]:
        """The broker takes step ``request`` and the response to its RPC is lost: ``action`` when the controller's
        log grew, else nothing the model counts (the broker saw a timeout, as for a request never delivered)."""
        self._losing, self._lost = True, False
        try:
            traces = self._node_step(request)
        finally:
            self._losing = False
        return traces + self._env(action) if self._lost else traces

    def _hold_heartbeat(self, action: Action, heartbeat: Action) -> list[Action]:
        """The broker takes step ``heartbeat`` and its RPC is held in the network: ``action`` when a heartbeat went
        out and was held (the broker saw a timeout), else nothing the model counts (it sent none, or one the network
        holds already)."""
        self._holding, self._held = True, False
        try:
            traces = self._node_step(heartbeat)
        finally:
            self._holding = False
        return traces + self._env(action) if self._held else traces

    def held_requests(self) -> list[BrokerHeartbeatRequest]:
        """The held heartbeats as the model writes them (``model.state.BrokerHeartbeatRequest``)."""
        return [self.held_request(entry) for entry in self.held]

    @staticmethod
    def held_request(entry: HeldHeartbeat) -> BrokerHeartbeatRequest:
        """A held heartbeat as the model writes it (a ZK broker's offset: None, ``model.kraft_quorum``)."""
        r = entry.request.request
        offset = None if r.is_migrating_zk_broker else r.current_metadata_offset
        return BrokerHeartbeatRequest(BrokerId(r.broker_id), ControllerId(entry.dest), BrokerEpoch(r.broker_epoch),
                                      r.want_shut_down, offset)

    def _deliver_heartbeat(self, action: Action, request: BrokerHeartbeatRequest) -> list[Action]:
        """A held heartbeat reaches its controller, which serves it if it is running (a dead one's connection is
        refused); the answer goes nowhere. Always a step: the request leaves the network either way."""
        held = self.held_requests()
        if request not in held:
            return []
        entry = self.held.pop(held.index(request))
        dest, sent = self.controllers.get(entry.dest), entry.request
        traces: list[Action] = []
        if dest is not None and dest.alive:
            kept = list(dest.purgatory)
            event = RpcRequest(source=sent.source, request=sent.request, **self.event_fields())
            response, _ = self.run(dest, event, traces)
            if self.on_rpc is not None:
                self.on_rpc(self.now, sent.source, entry.dest, sent.request, response)
            # an answer it deferred goes nowhere; the current process's own deferred answers stay
            dest.purgatory = [p for p in dest.purgatory if any(p is q for q in kept)]
        return traces + self._env(action)

    def _node_step(self, action: Action) -> list[Action]:
        _, traces = self.run(self.node(self.actor(action)), Perform(action=action, **self.event_fields()))
        return traces

    @staticmethod
    def actor(action: Action) -> int:
        """The node that takes ``action``: the broker, except for the controller's own SessionTimeout."""
        if hasattr(action, "broker") and not isinstance(action, SessionTimeout):
            return action.broker
        return action.controller

    def _env(self, action: Action) -> list[Action]:
        self.trace_log.append((self.event_fields()["stimulus_id"], action))
        return [action]

    def _lifecycle(self, node_id: int, event: Event) -> list[Action]:
        _, traces = self.run(self.node(node_id), event)
        return traces

    def _reconfigure(self, node_id: int, changes: dict[str, str]) -> list[Action]:
        event = Reconfigure(changes=tuple(sorted(changes.items())), **self.event_fields())
        _, traces = self.run(self.node(node_id), event)
        return traces

    def _delete_controller_znodes(self, action: Action) -> list[Action]:
        """KIP-866 §Rollback to ZK, last step: the operator deletes /controller and /controller_epoch
        (the seed's procedure) once every KRaft controller is down."""
        from impl.codec import decode
        from impl.zk.port import DeleteOp
        from model.migration import KRaftControllerZNode

        if not self.zk_available or any(c.alive for c in self.controllers.values()):
            return []
        try:
            data, _ = self.port.get_data(self.operator_session, CONTROLLER)
        except ZkError:
            return []
        if not isinstance(decode(CONTROLLER, data), KRaftControllerZNode):
            return []
        self.port.multi(self.operator_session, [DeleteOp(CONTROLLER), DeleteOp(CONTROLLER_EPOCH)])
        self._route_watch_events()
        return self._env(action)
