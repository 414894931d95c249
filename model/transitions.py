"""The state changes every part of the model shares: a broker put back, a budget spent, messages sent, a process gone.

Rules: each returns a new state (nothing is mutated); ``spend`` and ``send`` return None when the
scope's budget or in-flight cap does not allow the change, which makes the calling action not
enabled (``spend_checked`` is for a handler that checks its budget among its enabling conditions,
and never returns None). The handler modules (``model.zk_era``, ``model.kraft_quorum``, ``model.kraft_migration``)
import these by their public names, so none reaches into another's private helpers.
"""

from __future__ import annotations

from model import zookeeper as zkm
from model.state import Broker, ClusterState, Message, nothing_in_memory
from model.types import BrokerId


def put_broker(state: ClusterState, broker: Broker) -> ClusterState:
    brokers = list(state.brokers)
    brokers[broker.id] = broker
    return state.replace(brokers=tuple(brokers))


def spend(state: ClusterState, **spent: int) -> ClusterState | None:
    """Take ``spent`` from the budget, or None when the budget has not that much left."""
    budget = state.budget
    if any(getattr(budget, k) < v for k, v in spent.items()):
        return None
    return state.replace(budget=budget.replace(**{k: getattr(budget, k) - v for k, v in spent.items()}))


def spend_checked(state: ClusterState, **spent: int) -> ClusterState:
    """``spend`` for a handler whose enabling conditions have already found the budget allows it.

    Fails loudly when it does not: the handler is missing its budget check, which is a bug."""
    after = spend(state, **spent)
    if after is None:
        raise AssertionError(f"the budget {state.budget} does not allow {spent}: the handler checks it first")
    return after


def send(state: ClusterState, messages: list[Message]) -> ClusterState | None:
    """Put ``messages`` in flight, or None when that would exceed the scope's cap.

    The ghost keeps the order they were queued in (a channel to one broker is a queue in Kafka).
    """
    network = state.network.union(messages)
    if len(network) > state.budget.max_in_flight:
        return None
    return state.replace(network=network, ghost=state.ghost.replace(sent=state.ghost.sent + tuple(messages)))


def fresh_process(b: Broker) -> Broker:
    """What survives a process restart: identity, configuration and meta.properties, nothing in memory."""
    return b.replace(**nothing_in_memory(len(b.replicas)))


def process_dies(state: ClusterState, broker: Broker) -> ClusterState:
    """The broker's process is gone, and with it everything it held in memory and its event queue, and its
    connection to a ZooKeeper server: a new process reads through a new session (``zookeeper.open_session``)."""
    if zkm.lagging(state.zk, broker.id):
        state = state.replace(zk=zkm.catch_up(state.zk, broker.id))
    return forget_notifications(put_broker(state, fresh_process(broker).replace(alive=False)), broker.id)


def forget_notifications(state: ClusterState, b: BrokerId) -> ClusterState:
    zk = state.zk
    stale = [n for n in zk.notifications if n[0] == b]
    if not stale:
        return state
    return state.replace(zk=zk.replace(notifications=zk.notifications.difference(stale)))
