"""The implementation on a real ZooKeeper 3.8 server: the embedded store is not where it differs.

The differential tests check the implementation against the model with the embedded store in
ZooKeeper's place; that proves something about Kafka only if the store behaves as ZooKeeper. The
port's conformance suite (tests/test_zk_port.py) checks it request by request; here whole runs
are checked:
- the same simulator seed, once with ``EmbeddedZk`` and once with ``KazooPort`` on a real server,
  takes the same steps (byte-identical traces) and leaves the same control-plane znodes: paths,
  data bytes, versions, owners, and czxid/mzxid in the same relative order (a real server's
  absolute zxids differ: the adapter's own inspection session takes one). The kazoo run is not
  checked against the model (no checker): the refinement map reads the embedded store's
  armed watches, which a real server does not list;
- ``EmbeddedZk.armed_watches`` (what the refinement map reads as the model's watches) lists
  exactly the watches a real server would fire.

Each migration run gets a server of its own: the traces carry zxids (a ZooKeeper-era broker epoch
is the broker znode's czxid, renamed from the end of the bootstrap on), so a transaction from
anyone else during the run would shift them. The migration runs use the first seed of ``SEEDS``
whose embedded run reaches dual writes and injects the mix's faults, so the test keeps its point
while the nodes change; the seed is named in every failure. A run goes on until the migration is
finalized (and a little after), or for 4,000 events.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from impl.codec import kind_of
from impl.refinement import armed_watches
from impl.sim.faults import parse
from impl.sim.scenarios import MIGRATION
from impl.sim.simulator import PROGRESS, Simulation
from impl.zk import CheckOp, CreateOp, DeleteOp, EmbeddedZk, SetDataOp, ZkError, ZkPort
from impl.zk.server import ZkServer
from tests.zk_server import serve

SEEDS = range(12)
CHUNK = 25  # events per Simulation.run call: progress is looked at between chunks
DUAL_WRITE = PROGRESS.index("dual-write")
EXTRA_CHUNKS = 8  # events after finalizing, so that the finalized controllers' writes reach ZooKeeper
MAX_CHUNKS = 160  # 4,000 events: a run goes as far as the migration gets, and must reach dual write
TIMEOUT_MS = 10_000
_roots = itertools.count()


@pytest.fixture
def own_server() -> Iterator[ZkServer]:
    """A real server for one test alone (started in about 0.5 s)."""
    yield from serve()


# ---- whole migrations ------------------------------------------------------------------------------

def _drive(sim: Simulation, chunks: int | None = None) -> int:
    """Run ``chunks`` chunks, or (None) until finalized plus EXTRA_CHUNKS or MAX_CHUNKS; returns the chunks run."""
    done, reached = 0, None
    while done < (MAX_CHUNKS if chunks is None else chunks):
        outcome = sim.run(CHUNK)
        done += 1
        if chunks is None:
            if reached is None and outcome.progress == PROGRESS[-1]:
                reached = done
            if reached is not None and done >= reached + EXTRA_CHUNKS:
                break
    return done


def _taken(sim: Simulation, kind: str) -> int:
    """How many ``kind`` events the implementation took as chosen (trace lines without ``->``)."""
    return sum(1 for line in sim.lines if line.split(" ", 1)[1].startswith(kind + "(") and " -> " not in line)


def _embedded_run(mix: str, faults: tuple[str, ...]) -> tuple[Simulation, int]:
    """The first seed whose embedded run reaches dual write and takes each of ``faults``."""
    tried = []
    for seed in SEEDS:
        sim = Simulation(MIGRATION, seed, parse(mix))
        chunks = _drive(sim)
        if PROGRESS.index(sim.run(0).progress) >= DUAL_WRITE and all(_taken(sim, kind) for kind in faults):
            return sim, chunks
        tried.append(f"{seed}: {sim.run(0).progress} after {sim.events} events, "
                     + ", ".join(f"{kind} x{_taken(sim, kind)}" for kind in faults))
    pytest.fail(f"no seed of {SEEDS} reaches dual-write with {mix!r} and takes {faults}: " + "; ".join(tried))


def _first_difference(embedded: Simulation, real: Simulation) -> str:
    for n, (a, b) in enumerate(zip(embedded.lines, real.lines), 1):
        if a != b:
            return f"event {n} differs:\n  embedded: {a}\n  real:     {b}"
    return f"the embedded run has {len(embedded.lines)} events, the real one {len(real.lines)}"


def _control_plane(sim: Simulation) -> dict[str, tuple[Any, ...]]:
    """The znodes the control plane uses: data, version, owning node, ranks of czxid and mzxid."""
    tree = sim.cluster.port.snapshot()
    used = {path: znode for path, znode in tree.items() if kind_of(path) != "parent"}
    rank = {z: i for i, z in enumerate(sorted({z for _, st in used.values() for z in (st.czxid, st.mzxid)}))}
    owner = sim.cluster.session_owner
    return {
        path: (data, st.version, owner.get(st.ephemeral_owner, "?") if st.ephemeral_owner else None,
               rank[st.czxid], rank[st.mzxid])
        for path, (data, st) in used.items()
    }


def _parents(sim: Simulation) -> dict[str, tuple[int, int, int]]:
    """Every other znode (but ``/``, whose cversion counts ZooKeeper's built-ins): version and children."""
    return {path: (st.version, st.cversion, st.num_children)
            for path, (_, st) in sim.cluster.port.snapshot().items() if path != "/" and kind_of(path) == "parent"}


@pytest.mark.parametrize("mix,faults", [
    ("network+process", ("StopBroker", "Drop")),
    ("zookeeper", ("ExpireSession",)),
], ids=["network+process", "zookeeper"])
def test_real_zk_migration_same_run_as_embedded(own_server: ZkServer, mix: str, faults: tuple[str, ...]) -> None:
    """KIP-866 from a cold start (to dual writes at least) on a real ZooKeeper: the same steps and znodes as in memory.

    A divergence means the embedded store, the kazoo adapter or the runner lets something the
    real server does differently (watch event order, a zxid, a session id) reach a decision.
    """
    from impl.zk.kazoo_port import KazooPort

    embedded, chunks = _embedded_run(mix, faults)
    embedded_base = 0  # EmbeddedZk starts at zxid 0; the bootstrap's transactions are compared too
    with KazooPort(own_server.hosts) as port:
        real_base = port.last_zxid()
        real = Simulation(MIGRATION, embedded.seed, parse(mix), port=port)
        _drive(real, chunks)
        where = f"seed {embedded.seed}, {mix!r}, {embedded.events} events"
        assert real.trace_text() == embedded.trace_text(), f"{where}: {_first_difference(embedded, real)}"
        assert real.run(0).progress == embedded.run(0).progress, where
        assert _control_plane(real) == _control_plane(embedded), where
        assert _parents(real) == _parents(embedded), where
        # Every transaction, failed writes and session ends included, happened on both.
        assert port.last_zxid() - real_base == embedded.cluster.port.last_zxid() - embedded_base, where
    compared = set(_control_plane(embedded))
    assert {"/controller", "/controller_epoch", "/migration", "/brokers/topics/t", "/config/cluster",
            "/features"} <= compared, where
    # A finalized migration leaves no ZooKeeper broker registered (every broker runs in KRaft mode).
    assert embedded.run(0).progress == "finalized" or any(path.startswith("/brokers/ids/") for path in compared), where


# ---- armed watches ---------------------------------------------------------------------------------

def test_embedded_armed_watches_listed_until_they_fire() -> None:
    """The refinement map's view of the server's WatchManagers: set, listed in order, gone once fired or dead."""
    zk = EmbeddedZk()
    s = zk.open_session(TIMEOUT_MS)
    w = zk.open_session(TIMEOUT_MS)
    zk.create(s, "/a", b"")
    assert armed_watches(zk) == []
    zk.get_children(w, "/a", watch=True)
    zk.exists(w, "/b", watch=True)  # an exists watch on an absent path is armed
    zk.get_data(s, "/a", watch=True)
    zk.get_data(w, "/a", watch=True)
    zk.get_data(w, "/a", watch=True)  # one watch per (session, path, kind), however often it is set
    with pytest.raises(ZkError):
        zk.get_data(w, "/c", watch=True)  # a failed getData sets none
    assert armed_watches(zk) == [(s, "/a", "data"), (w, "/a", "child"), (w, "/a", "data"), (w, "/b", "data")]
    zk.set_data(s, "/a", b"1")  # fires both data watches on /a, not the child watch
    assert armed_watches(zk) == [(w, "/a", "child"), (w, "/b", "data")]
    zk.get_data(s, "/a", watch=True)
    zk.close_session(s)  # a session's watches die with it
    assert armed_watches(zk) == [(w, "/a", "child"), (w, "/b", "data")]
    zk.delete(w, "/a")
    zk.create(w, "/b", b"")
    assert armed_watches(zk) == []


def test_refinement_armed_watches_needs_a_port_that_lists_them() -> None:
    """A port that cannot list its watches is refused with a clear error, not read through private tables."""
    with pytest.raises(TypeError, match="armed watches.*with no checker"):
        armed_watches(object())


class _Pair:
    """One script on the embedded store and on a real server, in lockstep (results and watch events)."""

    def __init__(self, hosts: str) -> None:
        from impl.zk.kazoo_port import KazooPort

        self.ports: list[ZkPort] = [EmbeddedZk(), KazooPort(hosts)]
        self.ids: list[list[int]] = [[], []]  # per adapter: session index -> session id
        self.log: list[str] = []

    def close(self) -> None:
        for port in self.ports:
            port.close()

    def step(self, label: str, call: Callable[[ZkPort, list[int]], Any]) -> list[tuple[int, str, str]]:
        """``call`` on both: the same outcome (ok or which error) and watch events; returns the events."""
        seen = []
        for port, ids in zip(self.ports, self.ids):
            try:
                call(port, ids)
                outcome = "ok"
            except ZkError as exc:
                outcome = type(exc).__name__
            seen.append((outcome, [(ids.index(e.session), e.path, e.kind) for e in port.drain_watch_events()]))
        self.log.append(f"{label}: {seen[0]}")
        assert seen[0] == seen[1], "\n".join(self.log[-12:] + [f"real server: {seen[1]}"])
        return seen[0][1]

    def open(self) -> int:
        self.step("open", lambda port, ids: ids.append(port.open_session(TIMEOUT_MS)))
        return len(self.ids[0]) - 1


@pytest.fixture
def pair(real_zk: str) -> Iterator[_Pair]:
    both = _Pair(real_zk)
    try:
        yield both
    finally:
        both.close()


@pytest.mark.parametrize("seed", [2, 3, 7])
def test_embedded_armed_watches_are_what_a_real_server_fires(pair: _Pair, seed: int) -> None:
    """After a random script, every watch ``armed_watches`` lists fires on the real server, and no other.

    The probe fires each kind of watch apart: a new child under every persistent znode (child
    watches), a setData on every znode (data watches), deleting the ephemerals (their child
    watches: NodeDeleted), creating every absent path (exists watches: NodeCreated).
    """
    rng = random.Random(seed)
    root = f"/armed-{seed}-{next(_roots)}"
    paths = [f"{root}/{p}" for p in ("a", "b", "a/x", "a/y", "b/x", "c")]
    alive = [pair.open()]
    pair.step("root", lambda port, ids: port.create(ids[0], root, b""))
    for n in range(150):
        action = rng.choices(["open", "end", "create", "set", "delete", "multi", "get", "exists", "children"],
                             weights=[3, 3, 14, 6, 8, 4, 12, 12, 12])[0]
        s = rng.choice(alive)
        path = rng.choice(paths + [root])
        if action == "open":
            if len(alive) < 4:
                alive.append(pair.open())
        elif action == "end":
            if s == 0:  # the script's first session lives on
                continue
            end = rng.choice(["close_session", "expire_session"])
            pair.step(f"{n} {end} s{s}", lambda port, ids: getattr(port, end)(ids[s]))
            alive.remove(s)
        elif action == "create":
            ephemeral = rng.random() < 0.3
            pair.step(f"{n} create s{s} {path}", lambda port, ids: port.create(ids[s], path, b"", ephemeral))
        elif action == "set":
            pair.step(f"{n} set s{s} {path}", lambda port, ids: port.set_data(ids[s], path, b"x"))
        elif action == "delete":
            pair.step(f"{n} delete s{s} {path}", lambda port, ids: port.delete(ids[s], path))
        elif action == "multi":
            other = rng.choice(paths)
            ops = [CheckOp(path, rng.choice([-1, 0])), rng.choice([CreateOp(other, b""), DeleteOp(other),
                                                                   SetDataOp(other, b"m")])]
            pair.step(f"{n} multi s{s} {ops}", lambda port, ids: port.multi(ids[s], ops))
        else:
            method = {"get": "get_data", "exists": "exists", "children": "get_children"}[action]
            pair.step(f"{n} {method} s{s} {path}", lambda port, ids: getattr(port, method)(ids[s], path, True))

    embedded = pair.ports[0]
    index = pair.ids[0].index
    expected = sorted((index(s), path, kind) for s, path, kind in armed_watches(embedded))
    assert {kind for _, _, kind in expected} == {"data", "child"}, "the script armed too little to test"
    fired: list[tuple[int, str, str]] = []
    probe = pair.open()

    def fire(label: str, call: Callable[[ZkPort, list[int]], Any], event: str, watch: str) -> None:
        events = pair.step(label, call)
        assert all(kind == event for _, _, kind in events), f"{label} fired {events}, expected only {event!r}"
        fired.extend((s, p, watch) for s, p, _ in events)

    tree = embedded.snapshot(root)
    for path, (_, st) in tree.items():
        if not st.ephemeral_owner:
            fire(f"probe {path} children", lambda port, ids: port.create(ids[probe], path + "/probe", b""),
                 "child", "child")
    for path in tree:
        fire(f"probe {path} data", lambda port, ids: port.set_data(ids[probe], path, b"probe"), "changed", "data")
    for path, (_, st) in tree.items():
        if st.ephemeral_owner:  # an ephemeral has no children: only its deletion fires a child watch on it
            fire(f"probe {path} deleted", lambda port, ids: port.delete(ids[probe], path), "deleted", "child")
    for path in sorted(paths, key=lambda p: p.count("/")):
        if embedded.exists(pair.ids[0][probe], path) is None:
            fire(f"probe {path} created", lambda port, ids: port.create(ids[probe], path, b""), "created", "data")
    assert sorted(fired) == expected
    assert armed_watches(embedded) == []
