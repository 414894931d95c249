"""Symmetry reduction: KRaft controllers with the same configuration are interchangeable.

Renaming such controllers everywhere their ids occur maps a reachable state to a reachable
state with the same verdicts (no property names a particular controller id), so an exhaustive
search needs to visit only one state of each class. ``canonical(state)`` picks that
representative: the permutation of interchangeable controllers whose renamed state has the
smallest ``repr``. Ids occur in the controllers themselves (position, id, vote, leader, votes
granted, the leader's per-voter fetch offsets), in LeaderChange and RegisterControllerRecord records, in
the history (terms won, crashed controllers), in /controller and /migration, and in the controller id of
requests a KRaft controller sent to ZK brokers.

Brokers are not permuted: every scope gives them distinct roles (partition assignment order,
supported ranges, IBPs), so renaming them would change the scope.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from functools import lru_cache
from itertools import permutations

from model.kraft import (
    FIRST_CONTROLLER_ID,
    ControllerConfig,
    ControllerId,
    LeaderChangeMessage,
    LogEntry,
    RegisterControllerRecord,
)
from model.migration import KRaftControllerZNode, MigrationZNode
from model.state import ClusterState, KRaftController, LeaderAndIsr, Message, StopReplica, UpdateMetadata
from model.types import BrokerId
from model.zookeeper import Znode


def interchangeable_groups(state: ClusterState) -> list[list[int]]:
    """Indexes of controllers that share a configuration (only those may be renamed into each other)."""
    groups: dict[ControllerConfig, list[int]] = {}
    for i, c in enumerate(state.controllers):
        groups.setdefault(c.config, []).append(i)
    return [g for g in groups.values() if len(g) > 1]


@lru_cache(maxsize=64)
def _renamings(groups: tuple[tuple[int, ...], ...], n: int) -> tuple[tuple[int, ...], ...]:
    """Every renaming of indexes 0..n-1 that permutes within the groups (identity first)."""
    result = [tuple(range(n))]
    for group in groups:
        extended = []
        for base in result:
            for order in permutations(group):
                mapping = list(base)
                for src, dst in zip(group, order):
                    mapping[src] = dst
                extended.append(tuple(mapping))
        result = extended
    seen, unique = set(), []
    for m in result:
        if m not in seen:
            seen.add(m)
            unique.append(m)
    return tuple(unique)


def canonical(state: ClusterState) -> ClusterState:
    """The representative of ``state``'s symmetry class."""
    groups = interchangeable_groups(state)
    if not groups:
        return state
    best, best_key = state, _order_key(state)
    for mapping in _renamings(tuple(tuple(g) for g in groups), len(state.controllers))[1:]:
        renamed = rename_controllers(state, mapping)
        key = _order_key(renamed)
        if key < best_key:
            best, best_key = renamed, key
    return best


def _order_key(state: ClusterState) -> tuple[object, ...]:
    """A total order on the parts a renaming changes, independent of hash seeds.

    (A frozenset's repr follows its iteration order, which for strings and enums changes from
    one process to the next: comparing whole-state reprs would make the representative, and so
    the pinned state counts, depend on PYTHONHASHSEED.)
    """
    return (
        repr(state.controllers),
        tuple(sorted(state.history.kraft_terms)),
        tuple(sorted(state.history.crashed_controllers)),
        repr(state.history.committed),
        repr(state.zk.nodes),
        tuple(sorted(repr(m) for m in state.network)),
        tuple(sorted(repr(r) for r in state.held)),
    )


def rename_controllers(state: ClusterState, mapping: tuple[int, ...]) -> ClusterState:
    """``state`` with controller index i renamed to index mapping[i], everywhere."""
    ids = {FIRST_CONTROLLER_ID + i: FIRST_CONTROLLER_ID + j for i, j in enumerate(mapping)}

    def cid(x: ControllerId) -> ControllerId:
        return ControllerId(ids.get(x, x))

    def maybe_cid(x: ControllerId | None) -> ControllerId | None:
        return None if x is None else cid(x)

    def entry(e: LogEntry) -> LogEntry:
        if isinstance(e.record, LeaderChangeMessage):
            return e.replace(record=LeaderChangeMessage(cid(e.record.leader)))
        if isinstance(e.record, RegisterControllerRecord):
            return e.replace(record=e.record.replace(controller=cid(e.record.controller)))
        return e

    controllers: list[KRaftController | None] = [None] * len(state.controllers)
    for i, c in enumerate(state.controllers):
        fetched = c.fetched
        if fetched:
            moved = [0] * len(fetched)
            for k, value in enumerate(fetched):
                moved[mapping[k]] = value
            fetched = tuple(moved)
        controllers[mapping[i]] = c.replace(
            id=cid(c.id),
            voted_for=maybe_cid(c.voted_for),
            leader=maybe_cid(c.leader),
            votes=frozenset(cid(v) for v in c.votes),
            fetched=fetched,
            log=tuple(entry(e) for e in c.log),
        )
    history = state.history.replace(
        kraft_terms=frozenset((e, cid(c)) for e, c in state.history.kraft_terms),
        crashed_controllers=frozenset(cid(c) for c in state.history.crashed_controllers),
        committed=tuple(entry(e) for e in state.history.committed),
    )
    nodes = tuple(_rename_data(n, cid) for n in state.zk.nodes)
    network = frozenset(_rename_message(m, ids) for m in state.network)
    held = frozenset(r.replace(controller=cid(r.controller)) for r in state.held)
    return state.replace(
        controllers=tuple(controllers), history=history, zk=state.zk.replace(nodes=nodes), network=network,
        held=held,
    )


def _rename_data(node: Znode[Hashable], cid: Callable[[ControllerId], ControllerId]) -> Znode[Hashable]:
    data = node.data
    if isinstance(data, KRaftControllerZNode):
        return node.replace(data=data.replace(controller=cid(data.controller)))
    if isinstance(data, MigrationZNode) and data.kraft_controller_id >= FIRST_CONTROLLER_ID:
        return node.replace(data=data.replace(kraft_controller_id=cid(data.kraft_controller_id)))
    return node


def _rename_message(m: Message, ids: dict[int, int]) -> Message:
    if isinstance(m, (LeaderAndIsr, UpdateMetadata, StopReplica)) and m.kraft:
        return m.replace(controller_id=BrokerId(ids.get(m.controller_id, m.controller_id)))
    return m
