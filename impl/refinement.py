"""The refinement map: the implementation's state, seen as a state of the model.

Rules:
- ``abstract(cluster, aux)`` builds a ``model.state.ClusterState`` from the ZooKeeper store, the
  messages in flight and each node's ``abstract(view)``. Budget, history and ghost are the
  model's bookkeeping, not anything a process holds: they are taken from ``aux`` (the model
  state the comparison is made against), so two states compare on what the cluster holds.
- The model numbers some things its own way; ``View`` renames them consistently over a run:
  ZooKeeper session ids (the model reuses the smallest free id), zxids (the model's cold start
  creates its znodes one per zxid, with no parents; the implementation's bootstrap creates
  parents and opens the KRaft controllers' sessions too) and incarnation ids (random in the
  implementation, counted in the model).
- Only the znodes the model knows are mapped (``impl.codec.kind_of`` is not ``ZNode.PARENT``), and only
  the sessions of brokers: the KRaft controllers' ZooKeeper sessions are infrastructure the
  model leaves out (it writes for them with no session).
- ``differences(a, b)`` names every field where two model states differ, for a readable report.
"""

from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING, Any

from impl.codec import ZNode, decode, kind_of
from model.kraft import Incarnation
from model.state import ClusterState
from model.types import NO_SESSION, SessionId, Zxid
from model.zookeeper import WatchKind, ZkState, ZkView, Znode

if TYPE_CHECKING:
    from impl.cluster import Cluster


class View:
    """The renamings between the implementation's identifiers and the model's, kept over a run."""

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self._sessions: dict[int, SessionId] = {}  # every broker session seen, alive or not
        self._live: set[SessionId] = set()
        self._boot_zxids: dict[int, Zxid] = {}
        self._boot_impl = 0
        self._boot_model = 0
        self._incarnations: dict[int, dict[int, Incarnation]] = {}

    # ---- sessions
    def session_opened(self, session: int) -> SessionId:
        """The model hands out the smallest session id not in use (model.zookeeper.open_session)."""
        model_id = SessionId(1)
        while model_id in self._live:
            model_id = SessionId(model_id + 1)
        self._sessions[session] = model_id
        self._live.add(model_id)
        return model_id

    def session_closed(self, session: int) -> None:
        model_id = self._sessions.get(session)
        if model_id is not None:
            self._live.discard(model_id)

    def session(self, session: int | None) -> SessionId:
        if not session:
            return NO_SESSION
        return self._sessions[session]

    def impl_session(self, model_id: SessionId) -> int | None:
        """The live implementation session the model calls ``model_id``."""
        if model_id not in self._live:
            return None
        # the newest implementation session that got this model id is the live one
        return [impl_id for impl_id, m in self._sessions.items() if m == model_id][-1]

    def knows_session(self, session: int) -> bool:
        return session in self._sessions

    # ---- zxids
    def booted(self, impl_zxid: int, model_zxid: int, created: dict[int, int]) -> None:
        """The bootstrap ended at ``impl_zxid`` where the model's cold start ends at ``model_zxid``."""
        self._boot_impl, self._boot_model = impl_zxid, model_zxid
        self._boot_zxids = {i: Zxid(m) for i, m in created.items()}

    def zxid(self, impl_zxid: int) -> Zxid:
        if impl_zxid > self._boot_impl:
            return Zxid(impl_zxid - self._boot_impl + self._boot_model)
        if impl_zxid == self._boot_impl:
            return Zxid(self._boot_model)
        return self._boot_zxids[impl_zxid]

    def impl_zxid(self, model_zxid: int) -> int:
        """The implementation's zxid the model calls ``model_zxid`` (``zxid``'s inverse): any after the bootstrap,
        one the bootstrap created, else ValueError."""
        if model_zxid > self._boot_model:
            return model_zxid - self._boot_model + self._boot_impl
        if model_zxid == self._boot_model:
            return self._boot_impl
        for impl_zxid, m in self._boot_zxids.items():
            if m == model_zxid:
                return impl_zxid
        raise ValueError(f"no implementation zxid is the model's {model_zxid}")

    # ---- messages
    def message(self, m):
        """A message as the model writes it: a ZooKeeper-era broker epoch is a czxid, renamed like every zxid."""
        epoch = m.broker_epoch
        if epoch <= 0 or getattr(m, "kraft", False):
            return m
        return m.replace(broker_epoch=self.zxid(epoch))

    def impl_message(self, m):
        """A message the model writes, as the implementation writes it (``message``'s inverse)."""
        epoch = m.broker_epoch
        if epoch <= 0 or getattr(m, "kraft", False):
            return m
        return m.replace(broker_epoch=self.impl_zxid(epoch))

    # ---- incarnations
    def incarnation(self, node: int, value: int) -> Incarnation:
        """The n-th distinct incarnation id of ``node`` is the model's Incarnation(n); 0 stays 0."""
        if value == 0:
            return Incarnation(0)
        seen = self._incarnations.setdefault(node, {})
        if value not in seen:
            seen[value] = Incarnation(len(seen) + 1)
        return seen[value]


_WATCH_KINDS = {"data": WatchKind.DATA, "exists": WatchKind.DATA, "child": WatchKind.CHILD}


def armed_watches(port) -> list[tuple[int, str, str]]:
    """(session, path, "data" | "child") for every watch set and not fired yet: the embedded store knows them."""
    inspect = getattr(port, "armed_watches", None)
    if inspect is None:
        raise TypeError(
            f"the refinement map needs the armed watches, which {type(port).__name__} does not list; "
            "check against impl.zk.embedded.EmbeddedZk (run a real server with no checker)"
        )
    return inspect()


def _tree(cluster: Cluster, snapshot: dict) -> tuple[tuple[str, ...], tuple[Znode, ...]]:
    """The model's paths and znodes of a port's ``snapshot()`` (parents left out, ids renamed)."""
    view = cluster.view
    paths, nodes = [], []
    for path, (data, stat) in sorted(snapshot.items()):
        if kind_of(path) is ZNode.PARENT:
            continue
        owner = view.session(stat.ephemeral_owner) if stat.ephemeral_owner else NO_SESSION
        paths.append(path)
        nodes.append(Znode(decode(path, data), stat.version, view.zxid(stat.czxid), view.zxid(stat.mzxid), owner))
    return tuple(paths), tuple(nodes)


def _views(cluster: Cluster) -> tuple[tuple[int, ZkView], ...]:
    """Each running ZooKeeper-mode broker and each KRaft controller whose session reads from a lagging server,
    with that server's tree. A broker's view is its current session's: a process that died, or opened a new
    session, reads through none of its earlier ones (the model drops its view then)."""
    port = cluster.port
    lagging = getattr(port, "lagging", None)
    if lagging is None:
        return ()
    sessions = [(b, node.session) for b, node in sorted(cluster.brokers.items())
                if node.alive and node.session is not None]
    sessions += [(cid, cluster.controllers[cid].zk_session) for cid in sorted(cluster.controllers)]
    out = []
    for client, session in sessions:
        if lagging(session):
            zxid, snapshot = port.view_snapshot(session)
            out.append((client, ZkView(cluster.view.zxid(zxid), *_tree(cluster, snapshot))))
    return tuple(out)


def abstract_zk(cluster: Cluster) -> ZkState:
    port, view = cluster.port, cluster.view
    paths, nodes = _tree(cluster, port.snapshot())
    brokers = cluster.brokers
    sessions = tuple(sorted(
        (view.session(s), owner) for s, owner in cluster.session_owner.items()
        if owner in brokers and port.session_alive(s)
    ))
    watches = frozenset(
        (view.session(s), path, _WATCH_KINDS[kind]) for s, path, kind in armed_watches(port)
        if cluster.session_owner.get(s) in brokers
    )
    notifications = frozenset(
        (b, path, _WATCH_KINDS[kind]) for b, node in brokers.items() for path, kind in node.notifications.pending
    )
    return ZkState(view.zxid(port.last_zxid()), paths, nodes, sessions, watches, notifications,
                   cluster.zk_available, _views(cluster))


def abstract(cluster: Cluster, aux: ClusterState) -> ClusterState:
    """The model state the implementation is in; budget, history and ghost come from ``aux``."""
    view = cluster.view
    return ClusterState(
        zk=abstract_zk(cluster),
        brokers=tuple(cluster.brokers[b].abstract(view) for b in sorted(cluster.brokers)),
        network=frozenset(view.message(m) for m in cluster.in_flight_messages()),
        budget=aux.budget,
        controllers=tuple(cluster.controllers[c].abstract(view) for c in sorted(cluster.controllers)),
        history=aux.history,
        held=frozenset(cluster.held_requests()),
        ghost=aux.ghost,
    )


# ---- reporting ------------------------------------------------------------------------------

COMPARED = ("zk", "brokers", "network", "controllers", "held")


def same(a: ClusterState, b: ClusterState) -> bool:
    return all(getattr(a, f) == getattr(b, f) for f in COMPARED)


def differences(impl: ClusterState, model: ClusterState, limit: int = 12) -> list[str]:
    """Readable lines naming each differing field: ``brokers[1].epoch: impl 7, model 9``."""
    out: list[str] = []
    for name in COMPARED:
        _diff(name, getattr(impl, name), getattr(model, name), out)
    return out[:limit] + ([f"... and {len(out) - limit} more"] if len(out) > limit else [])


def _diff(where: str, a: Any, b: Any, out: list[str]) -> None:
    if a == b:
        return
    if isinstance(a, ZkState) and isinstance(b, ZkState):
        pa, pb = dict(zip(a.paths, a.nodes)), dict(zip(b.paths, b.nodes))
        for path in sorted(set(pa) | set(pb)):
            _diff(f"zk[{path}]", pa.get(path), pb.get(path), out)
        for f in ("zxid", "sessions", "watches", "notifications", "available", "views"):
            _diff(f"zk.{f}", getattr(a, f), getattr(b, f), out)
        return
    if isinstance(a, frozenset) and isinstance(b, frozenset):
        for extra in sorted(map(repr, a - b)):
            out.append(f"{where}: only in impl: {extra}")
        for missing in sorted(map(repr, b - a)):
            out.append(f"{where}: only in model: {missing}")
        return
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b) and a and hasattr(a[0], "__slots__"):
        for i, (x, y) in enumerate(zip(a, b)):
            _diff(f"{where}[{i}]", x, y, out)
        return
    if type(a) is type(b) and hasattr(a, "__dataclass_fields__") and not isinstance(a, Znode | ZkState):
        for f in fields(a):
            _diff(f"{where}.{f.name}", getattr(a, f.name), getattr(b, f.name), out)
        return
    out.append(f"{where}: impl {a!r}, model {b!r}")

