"""The contract between sans-IO nodes and whatever runs them (the simulator, the differential machine).

Rules (after dask's worker state machine and etcd's raft):
- A node never does I/O. ``Node.handle(event)`` is a generator: it *yields* effects, each a
  frozen value (``Effect``): a ZooKeeper request (``impl.zk.port.ZkRequest``: ``GetData``,
  ``Exists``, ``GetChildren``, ``Multi`` of typed ops, ``CreateSession``, ``CloseSession``),
  ``Send``, ``Rpc`` or ``Trace``; the runner sends each effect's result back in (the port's
  return value, an ``Rpc``'s response); a ZooKeeper error is thrown into the generator as the
  port's exception, so node code reads like ordinary client code:
  ``try: data, stat = yield GetData(session, path) except NoNode: ...``. The runner dispatches
  on the effect's type with ``match`` (``impl.cluster.Cluster.run``, ``impl.zk.port.execute``).
- No clock and no randomness inside: ``now`` (simulated milliseconds) and every random choice
  arrive in the event. The simulator owns the only ``random.Random``.
- One event is one atomic step of the node, run to the end before anything else happens; its
  ZooKeeper calls and RPC round trips happen inside it (Kafka's controller event thread blocks
  on ZooKeeper the same way). That is what lets one step of a node be one step of the model.
- A node names what it did with ``Trace(action)``, a ``model.actions`` action, yielded at the
  point where the transition commits. Refusals (guards that do not hold) yield no trace: the
  event was a stutter. Every event carries a ``stimulus_id``, copied onto its traces.
- ``Node.offers(now)`` lists the model actions the node is ready to try, from what it knows
  (its memory and its pending notifications, never a ZooKeeper read): the simulator and the
  differential machine choose among them, and ``handle(Perform(action))`` may still refuse.
- ``Node.abstract(view)`` is the node's part of the refinement map ``impl.refinement``: its
  state as the model's ``Broker`` or ``KRaftController`` record.

What ``impl/`` may take from ``model/``: values (ids, enums, records of znode data, messages and
metadata records, the migration's tables). Never behaviour: no ``step``, ``decide_*``,
``replay``, ``image_of`` or invariants (``tests/test_impl_structure.py`` checks the imports), so
that differential testing compares two independent implementations of the same design.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

from impl.zk.port import ZkRequest
from model.actions import Action
from model.state import Message

# ---- events: what happens to a node ---------------------------------------------------------


@dataclass(frozen=True)
class Event:
    now: int  # simulated milliseconds
    stimulus_id: int


@dataclass(frozen=True)
class Perform(Event):
    """Try the protocol step ``action`` (one of the node's ``offers``); it may be refused."""

    action: Action


@dataclass(frozen=True)
class Receive(Event):
    """A one-way message arrives from the network (ZooKeeper-era control requests, ControlledShutdown)."""

    message: Message


@dataclass(frozen=True)
class RpcRequest(Event):
    """Another node's request in a round trip (Vote, Fetch, BrokerRegistration, BrokerHeartbeat, ...).

    The handler's generator *returns* the response.
    """

    source: int
    request: Any


@dataclass(frozen=True)
class Crash(Event):
    """The process dies: memory, pending work and open files' unsynced state are gone."""


@dataclass(frozen=True)
class Stop(Event):
    """SIGTERM: the process shuts down cleanly (closes its ZooKeeper session) and exits."""


@dataclass(frozen=True)
class Start(Event):
    """The process starts (again) from its configuration and what it persisted."""

    incarnation: int = 0  # a fresh id for processes that register with KRaft (drawn by the simulator)


@dataclass(frozen=True)
class Reconfigure(Event):
    """The operator edits the stopped node's configuration (server.properties keys, Kafka's names)."""

    changes: tuple[tuple[str, str], ...]


# ---- effects: what a node asks of the world ---------------------------------------------------


@dataclass(frozen=True)
class Send:
    """Put a one-way message on the network, to ``message.dest``."""

    message: Message


@dataclass(frozen=True)
class Rpc:
    """A request/response round trip to node ``dest``; the result is the response or ``Unreachable``."""

    dest: int
    request: Any


@dataclass(frozen=True)
class Unreachable:
    """The RPC got no answer: the peer is down, partitioned away, or the request or response was lost.

    ``timed_out``: the request went out and no answer came within the request timeout (NetworkClient's
    request timeout, as against a disconnection), which is all a sender sees of a response lost after
    its request took effect."""

    dest: int
    timed_out: bool = False


@dataclass(frozen=True)
class Trace:
    """The node committed the model step ``action``."""

    action: Action


Effect = ZkRequest | Send | Rpc | Trace
Handler = Generator[Effect, Any, Any]


# ---- the node contract ------------------------------------------------------------------------


@dataclass
class Notifications:
    """Fired ZooKeeper watches a node has not processed yet (its controller event queue's watch events).

    The simulator adds to it when a write fires one of the node's watches; the node removes an
    entry when it handles the event. A crash empties it.
    """

    pending: list[tuple[str, str]] = field(default_factory=list)  # (path, kind): "data" | "child"

    def add(self, path: str, kind: str) -> None:
        if (path, kind) not in self.pending:
            self.pending.append((path, kind))

    def has(self, path: str, kind: str) -> bool:
        return (path, kind) in self.pending

    def take(self, path: str, kind: str) -> bool:
        if (path, kind) in self.pending:
            self.pending.remove((path, kind))
            return True
        return False

    def clear(self) -> None:
        self.pending.clear()


class Node(ABC):
    """A sans-IO process of the control plane."""

    node_id: int
    notifications: Notifications

    @abstractmethod
    def offers(self, now: int) -> list[Action]:
        """Model actions this node is ready to try, in a fixed order (no I/O, no randomness)."""

    @abstractmethod
    def handle(self, event: Event) -> Handler:
        """Process one event; a generator of effects (see the module docstring)."""

    @abstractmethod
    def abstract(self, view: Any) -> Any:
        """This node's state as the model's record (``impl.refinement.View`` gives the renamings)."""

    @property
    @abstractmethod
    def alive(self) -> bool:
        """The process runs."""


class _Defer:
    """What a ``Receive`` handler returns when the message must stay in flight (the model's Deliver is not enabled)."""

    def __repr__(self) -> str:
        return "DEFER"


DEFER = _Defer()


def nothing() -> Handler:
    """A handler that does nothing: a refused event is a stutter."""
    return
    yield  # pragma: no cover - makes this a generator
