"""The breadth-first search of ``properties.explore`` spread over worker processes, level by level.

Rules:
- Same answers as the serial engine (``search``), which stays the reference: the same distinct
  and generated counts, depth, verdicts and witnesses, and the same shortest trace for every
  property, not just one as short. When the search is cut short (``stop_at``, ``max_states``) the
  serial engine stops inside a level and this one at the level's end: the verdicts and traces
  found are the same, the counts may be larger.
- Safety only: liveness (``properties.liveness``) needs the whole graph and runs serially.
- Workers are forked (``fork`` start method): a ``Spec`` holds closures and partials, which
  travel to a forked child as they are, and the children share the parent's string-hash secret,
  so ``hash(state)`` is the same number in every worker. That hash only decides which worker
  owns a state; the seen-sets compare whole states, so a hash collision costs a comparison,
  never a state.

How it works, one level at a time (level-synchronous BFS, so depths and traces are as serial):
- Every state of a level has a rank: its position in the order the serial engine would have
  appended it to its frontier. A step is named by its key, (parent's rank, index of the action
  in ``successors(parent)``); keys order steps as the serial loop runs them.
- Expand: each worker runs ``successors`` on the states it owns, checks every step (TRANSITION
  properties and SOMETIMES witnesses, keeping the smallest key per property), and sends each
  successor to the worker owning ``hash(state) % workers``. A worker sends a state at most once
  a level, with the first key it reached it by; the batches are pickled (protocol 5) once per
  destination, so successors of one parent share their unchanged parts on the wire too.
- Merge: each owner keeps, per state it has not seen, the candidate with the smallest key, which
  is the step the serial engine would have reached it by; checks the ALWAYS properties on it;
  adds it to its seen-set and its next frontier.
- Rank: the driver sorts the new states' keys (8 bytes each) into the next level's ranks, sent
  to their owners with the next ``expand`` (two round trips a level), and keeps them, one int
  per state: (parent rank, action index) by rank, per level. That is all the driver keeps. A
  trace is rebuilt by walking those back to the root and replaying the action indices through
  ``successors`` from the initial state, which is why successor order must not depend on hashing
  (``Spec``).
- The driver picks, per property, the smallest key any worker reported: the serial engine's
  first violation.

Why the seen-sets hold states, not fingerprints: a digest of ``pickle.dumps(state)`` is not a
fingerprint of the state. A frozenset pickles in iteration order, which depends on the hash
secret and on how the set was built; the pickler shares equal sub-records by identity, so equal
states can give different bytes; and ``ClusterState.ghost`` (left out of equality) is pickled.
``hash()`` is type-blind (``A(1)`` and ``B(1)`` hash alike, so ``{A(1)}`` and ``{B(1)}``
collide) and 64 bits. A canonical Merkle digest over the records does work, but costs about
190 us a state in Python, more than the step that made it (37 us a step, 180 us a state's
successors): see docs/design.md §6.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import pickle
import time
import traceback
from collections import Counter
from collections import _count_elements as count_elements  # type: ignore[attr-defined]
from collections.abc import Callable, Hashable
from operator import itemgetter

import numpy as np

from properties.explore import ExploreResult, Spec, Trace

first = itemgetter(0)
ACTION_BITS = 20  # a key packs (rank, action index) in one int64: at most 2**20 successors a state
ACTION_MASK = (1 << ACTION_BITS) - 1
PROTOCOL = 5


def default_workers() -> int:
    return os.cpu_count() or 1


def parallel_search(
    spec: Spec,
    workers: int | None = None,
    max_depth: int | None = None,
    stop_at: str | None = None,
    max_states: int | None = None,
    progress: Callable[[ExploreResult], None] | None = None,
) -> ExploreResult:
    """``properties.explore.search`` over ``workers`` processes (all cores when None)."""
    workers = workers or default_workers()
    start = time.perf_counter()
    result = ExploreResult(spec.name, workers=workers)
    found: dict[str, tuple[int, int]] = {}  # property -> (level of the step's parent, key)
    witnessed: dict[str, tuple[int, int]] = {}
    for name in spec.broken_always(spec.initial):
        found.setdefault(name, (-1, 0))  # the initial state itself: the empty trace
    levels: list[np.ndarray] = []  # per level d >= 1: the keys of its states, by rank
    counts: Counter[str] = Counter()
    pool = _Pool(spec, workers)
    try:
        distinct, generated, depth, frontier = 1, 0, 0, 1
        pool.start(spec.initial, spec.canonical)
        ranked: list[bytes | None] = [None] * workers  # per worker, the ranks of its new states, sent with ``expand``
        while frontier and (max_depth is None or depth < max_depth):
            if stop_at is not None and stop_at in found:
                break
            decided = frozenset(found), frozenset(witnessed)  # the workers need not check these again
            replies = pool.ask_each([("expand", part, *decided) for part in ranked])
            buckets = [[reply["out"][owner] for reply in replies] for owner in range(workers)]
            for reply in replies:
                generated += reply["generated"]
                counts.update(reply["counts"])
                _keep_first(found, reply["violations"], depth)
                _keep_first(witnessed, reply["witnesses"], depth)
            merged = pool.ask_each([("merge", batch) for batch in buckets])
            for reply in merged:
                _keep_first(found, reply["violations"], depth)
            keys = [np.frombuffer(reply["keys"], dtype=np.int64) for reply in merged]
            everything = np.concatenate(keys) if keys else np.empty(0, np.int64)
            order = np.argsort(everything, kind="stable")
            ranks = np.empty_like(order)
            ranks[order] = np.arange(len(order))
            levels.append(everything[order])
            split = np.cumsum([len(k) for k in keys])[:-1]
            ranked = [part.tobytes() for part in np.split(ranks, split)]
            frontier = len(everything)
            distinct += frontier
            depth += 1
            result.depth, result.frontier = depth, frontier
            result.distinct_states, result.generated = distinct, generated
            result.action_counts = dict(counts)
            if progress is not None:
                progress(result)
            if max_states is not None and distinct >= max_states:
                break
    finally:
        pool.close()
    result.complete = not frontier
    result.distinct_states, result.generated, result.action_counts = distinct, generated, dict(counts)
    result.violations = {name: _trace(spec, levels, *where) for name, where in found.items()}
    result.witnesses = {name: _trace(spec, levels, *where) for name, where in witnessed.items()}
    result.seconds = time.perf_counter() - start
    return result


def _keep_first(table: dict[str, tuple[int, int]], reported: dict[str, int], level: int) -> None:
    """Keep, per property, the earliest step: an earlier level, else the smaller key."""
    for name, key in reported.items():
        if name not in table or (level, key) < table[name]:
            table[name] = (level, key)


def _trace(spec: Spec, levels: list[np.ndarray], level: int, key: int) -> Trace:
    """The step ``key`` taken from a state of ``level``, with the path to that state, replayed."""
    if level < 0:
        return Trace([])
    indices = [key & ACTION_MASK]
    rank = key >> ACTION_BITS
    for d in range(level - 1, -1, -1):  # levels[d] holds the states of level d + 1
        parent_key = int(levels[d][rank])
        indices.append(parent_key & ACTION_MASK)
        rank = parent_key >> ACTION_BITS
    state, actions = spec.initial, []
    for index in reversed(indices):
        action, state = spec.successors(state)[index]
        actions.append(action)
    return Trace(actions)


class Hashed:
    """A state with its hash, which travels with it: a record keeps its hash (``model.record``), but
    not through pickling, and an unpickled state's would walk the whole state again (about 9 us on
    the migration scope); the hash also names the owner. For states that are not records (a toy
    model's tuples) it is the only place the hash is kept."""

    __slots__ = ("hash", "state")

    def __init__(self, state: Hashable, hashed: int | None = None) -> None:
        self.state = state
        self.hash = hash(state) if hashed is None else hashed

    def __hash__(self) -> int:
        return self.hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Hashed) and self.hash == other.hash and self.state == other.state


# ---- the workers ---------------------------------------------------------------------------------


class _Pool:
    """Forked workers driven in lockstep: every request is answered before the next is sent."""

    def __init__(self, spec: Spec, workers: int) -> None:
        context = multiprocessing.get_context("fork")
        self.conns, self.processes = [], []
        for me in range(workers):
            ours, theirs = context.Pipe()
            process = context.Process(target=_serve, args=(spec, me, workers, theirs), daemon=True)
            process.start()
            theirs.close()
            self.conns.append(ours)
            self.processes.append(process)

    def start(self, initial: Hashable, canonical: Callable | None) -> None:
        owner = hash(canonical(initial) if canonical is not None else initial) % len(self.conns)
        self.ask_each([("start", initial if me == owner else None) for me in range(len(self.conns))])

    def ask_each(self, messages: list[tuple]) -> list[dict]:
        for conn, message in zip(self.conns, messages, strict=True):
            conn.send_bytes(pickle.dumps(message, PROTOCOL))
        replies = []
        for me, conn in enumerate(self.conns):
            try:
                reply = pickle.loads(conn.recv_bytes())
            except EOFError:
                raise RuntimeError(f"explore worker {me} died") from None
            if "error" in reply:
                raise RuntimeError(f"explore worker {me} failed:\n{reply['error']}")
            replies.append(reply)
        return replies

    def close(self) -> None:
        for conn in self.conns:
            try:
                conn.send_bytes(pickle.dumps(("stop",), PROTOCOL))
            except OSError:
                pass
            conn.close()
        for process in self.processes:
            process.join(timeout=5)
            if process.is_alive():
                process.terminate()
                process.join()


def _serve(spec: Spec, me: int, workers: int, conn) -> None:
    worker = _Worker(spec, me, workers)
    gc.freeze()  # what the fork copied stays out of the collector's reach, as the serial engine does
    while True:
        message = pickle.loads(conn.recv_bytes())
        if message[0] == "stop":
            break
        try:
            reply = getattr(worker, message[0])(*message[1:])
        except BaseException:  # noqa: BLE001 - handed to the driver, which raises it
            reply = {"error": traceback.format_exc()}
        conn.send_bytes(pickle.dumps(reply, PROTOCOL))
    conn.close()


class _Worker:
    """One partition: the states whose hash it owns, seen and to expand."""

    def __init__(self, spec: Spec, me: int, workers: int) -> None:
        self.spec, self.me, self.workers = spec, me, workers
        self.seen: set[Hashed] = set()
        self.frontier: list = []  # states of this level, by rank
        self.ranks: list[int] = []
        self.pending: list = []  # new states of the next level, by key, waiting for their ranks
        self.local: list = []  # this level's successors this worker owns itself: (key, state)

    def start(self, initial) -> dict:
        if initial is not None:
            canonical = self.spec.canonical
            self.seen.add(Hashed(canonical(initial) if canonical is not None else initial))
            self.frontier, self.ranks = [initial], [0]
        return {}

    def expand(self, ranks: bytes | None, decided_broken: frozenset[str], decided_witnessed: frozenset[str]) -> dict:
        """Expand this level's states. A property named in ``decided_*`` has its first step at an earlier
        level, so it is not checked; nor is one this worker found earlier in this level (states go in rank
        order, so its first find here is its smallest key here)."""
        if ranks is not None:  # the ranks of the states ``merge`` kept: they become this level's frontier
            self.ranks = np.frombuffer(ranks, dtype=np.int64).tolist()
            self.frontier, self.pending = self.pending, []
        spec, workers = self.spec, self.workers
        next_states, canonical = spec.successors, spec.canonical
        by_step, witnessed_by = spec.broken_transitions, spec.witnessed
        sent: list[dict] = [{} for _ in range(workers)]  # per owner: state -> key, first reach only
        violations: dict[str, int] = {}
        witnesses: dict[str, int] = {}
        counts: Counter[type] = Counter()
        generated = 0
        for rank, state in zip(self.ranks, self.frontier):
            steps = next_states(state)
            generated += len(steps)
            count_elements(counts, map(type, map(first, steps)))
            base = rank << ACTION_BITS
            for index, (action, nxt) in enumerate(steps):
                if by_step is not None:
                    broken = by_step(state, action, nxt, skip=decided_broken)
                    if broken:
                        for name in broken:
                            violations.setdefault(name, base | index)  # ranks ascend: the first is the least
                        decided_broken = decided_broken.union(violations)
                if witnessed_by is not None:
                    seen_now = witnessed_by(state, action, nxt, skip=decided_witnessed)
                    if seen_now:
                        for name in seen_now:
                            witnesses.setdefault(name, base | index)
                        decided_witnessed = decided_witnessed.union(witnesses)
                if nxt is state:
                    continue
                representative = canonical(nxt) if canonical is not None else nxt
                identity = Hashed(representative)
                out = sent[identity.hash % workers]
                if identity not in out:  # the representative travels only when it is not the state
                    shipped = None if representative is nxt else representative
                    out[identity] = (identity.hash, base | index, nxt, shipped)
            if len(steps) > ACTION_MASK:
                raise ValueError(f"{len(steps)} successors of one state: at most {ACTION_MASK}")
        self.frontier, self.ranks = [], []
        self.local = list(sent[self.me].values())  # this worker's own share is never pickled
        sent[self.me] = {}
        return {
            "generated": generated,
            "counts": {kind.__name__: n for kind, n in counts.items()},
            "violations": violations,
            "witnesses": witnesses,
            "out": [pickle.dumps(list(out.values()), PROTOCOL) if out else None for out in sent],
        }

    def merge(self, batches: list[bytes]) -> dict:
        broken_always = self.spec.broken_always
        seen = self.seen
        best: dict = {}
        local, self.local = self.local, []
        for batch in [local, *(pickle.loads(b) for b in batches if b is not None)]:
            for hashed, key, nxt, representative in batch:
                identity = Hashed(nxt if representative is None else representative, hashed)
                if identity in seen:
                    continue
                held = best.get(identity)
                if held is None or key < held[0]:
                    best[identity] = (key, nxt)
        violations: dict[str, int] = {}
        new = sorted(best.values(), key=first)
        for key, nxt in new:
            for name in broken_always(nxt):
                violations.setdefault(name, key)
        seen.update(best)
        self.pending = [nxt for _, nxt in new]
        keys = np.fromiter((key for key, _ in new), dtype=np.int64, count=len(new))
        gc.freeze()  # the seen-set's states stay for good, as in the serial engine
        return {"keys": keys.tobytes(), "violations": violations}
