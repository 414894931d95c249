"""The breadth-first search of ``properties.explore`` spread over worker processes, level by level,
with fingerprints in the seen-sets.

Rules:
- Same answers as the serial engine (``search``), which stays the reference: the same distinct
  and generated counts, depth, verdicts and witnesses, and the same shortest trace for every
  property, not just one as short. When the search is cut short (``stop_at``, ``max_states``) the
  serial engine stops inside a level and this one at the level's end: the verdicts and traces
  found are the same, the counts may be larger.
- The seen-sets hold fingerprints, as TLC's do: a state's ``hash()``, 64 bits. Two states with the
  same fingerprint count as one, so a collision would lose a state (and what only it leads to):
  the answers are the serial engine's unless two of the states collide. For n distinct states
  of uniformly spread fingerprints that chance is about n^2 / 2^65 (1.7e-7 for a million states),
  reported as ``ExploreResult.collision_chance``. What makes ``hash()`` a fingerprint here:
  records mix their class into their hash (``model.record``), so records of two classes with equal
  fields differ; the workers are forked, so strings hash alike in all of them. What it does not
  cover: CPython hashes -1 and -2 alike, so two states that differ only by -1 against -2 in one
  place collide; no field of the model holds both (a version -2 means absent, -1 means any, and
  they are different fields' values), and ``tests/test_parallel_explore.py`` counts every pinned
  scope with both engines.
- Safety only: liveness (``properties.liveness``) needs the whole graph and runs serially.
- Workers are forked (``fork`` start method): a ``Spec`` holds closures and partials, which
  travel to a forked child as they are, and the children share the parent's string-hash secret.

How it works, one level at a time (level-synchronous BFS, so depths and traces are as serial):
- Every state of a level has a rank: its position in the order the serial engine would have
  appended it to its frontier. A step is named by its key, (parent's rank, index of the action
  in ``successors(parent)``); keys order steps as the serial loop runs them.
- A state's owner is the worker its fingerprint falls to (``fingerprint % workers``); the owner
  keeps the fingerprint in its seen-set and expands the state.
- ``expand``: each worker runs ``successors`` on each state of its level, checks every step
  (``transition`` properties and ``sometimes`` witnesses, keeping the smallest key per property),
  and keeps each successor it reached first, by fingerprint, with its key. What it sends each
  owner is (fingerprint, key) pairs, 16 bytes a successor, not states.
- ``merge``: each owner keeps, per fingerprint it has not seen, the smallest key any worker sent,
  which is the step the serial engine would have reached it by; adds the fingerprint to its
  seen-set; and answers which worker's successor won.
- ``ship``: each worker sends the winning states it holds to their owners, pickled (protocol 5)
  in one batch per owner; a state it owns itself is not pickled. So a state travels once, when
  it is new, where sending every successor to its owner would pickle each duplicate too (about
  60 us a state on the migration scope, a third of what the state cost to make).
- ``arrive``: each owner takes the states sent to it and checks the ``always`` properties on each
  (once a state: each is new), in key order. It unpickles them with their records interned
  (``_Interning``), so that they share records with the states before them as a serial search's
  do, and the model's caches, which compare keys, find them by identity.
- Rank: the driver sorts the new states' keys (8 bytes each) into the next level's ranks, sent
  to their owners with ``arrive``, and keeps them, one int per state: (parent rank,
  action index) by rank, per level. That is all the driver keeps. A trace is rebuilt by walking
  those back to the root and replaying the action indices through ``successors`` from the initial
  state, which is why successor order must not depend on hashing (``Spec``). States of older
  levels are kept nowhere: a worker holds its fingerprints, its level's states and the successors
  it made, so memory grows by 8 bytes and a set slot a state, not by the state.
- The driver picks, per property, the smallest key any worker reported: the serial engine's
  first violation.
"""

from __future__ import annotations

import gc
import io
import multiprocessing
import os
import pickle
import time
import traceback
from collections import Counter
from collections import _count_elements as count_elements  # type: ignore[attr-defined]
from collections.abc import Callable, Hashable
from dataclasses import fields
from operator import itemgetter

import numpy as np

from model.record import Record
from properties.explore import ExploreResult, Spec, Trace

first = itemgetter(0)
ACTION_BITS = 20  # a key packs (rank, action index) in one int64: at most 2**20 successors a state
ACTION_MASK = (1 << ACTION_BITS) - 1
PROTOCOL = 5
FINGERPRINT_BITS = 64


def default_workers() -> int:
    return os.cpu_count() or 1


def collision_chance(states: int, bits: int = FINGERPRINT_BITS) -> float:
    """The chance that two of ``states`` uniformly spread fingerprints of ``bits`` bits are equal (birthday bound)."""
    return min(1.0, states * (states - 1) / 2 ** (bits + 1))


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
    levels: list[np.ndarray] = []  # per level d >= 1: the keys of its states, by rank
    counts: Counter[str] = Counter()
    for name in spec.broken_always(spec.initial):
        found.setdefault(name, (-1, 0))  # the initial state itself: the empty trace
    pool = _Pool(spec, workers)
    try:
        distinct, generated, depth, frontier = 1, 0, 0, 1
        pool.start(spec.initial, spec.canonical)
        while frontier and (max_depth is None or depth < max_depth):
            if stop_at is not None and stop_at in found:
                break
            decided = frozenset(found), frozenset(witnessed)  # the workers need not check these again
            replies = pool.ask_each([("expand", *decided)] * workers)
            for reply in replies:
                generated += reply["generated"]
                counts.update(reply["counts"])
                _keep_first(found, reply["violations"], depth)
                _keep_first(witnessed, reply["witnesses"], depth)
            merged = pool.ask_each([("merge", [reply["out"][owner] for reply in replies]) for owner in range(workers)])
            keys = [np.frombuffer(reply["keys"], dtype=np.int64) for reply in merged]
            everything = np.concatenate(keys) if keys else np.empty(0, np.int64)
            order = np.argsort(everything, kind="stable")
            ranks = np.empty_like(order)
            ranks[order] = np.arange(len(order))
            levels.append(everything[order])
            split = np.cumsum([len(k) for k in keys])[:-1]
            shipped = pool.ask_each([("ship", [reply["won"][sender] for reply in merged]) for sender in range(workers)])
            arrived = pool.ask_each([("arrive", part.tobytes(), [reply["out"][owner] for reply in shipped])
                                     for owner, part in enumerate(np.split(ranks, split))])
            for reply in arrived:
                _keep_first(found, reply["always"], depth)
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
    result.collision_chance = collision_chance(distinct)
    result.seconds = time.perf_counter() - start
    return result


def _keep_first(table: dict[str, tuple[int, int]], reported: dict[str, int], level: int) -> None:
    """Keep, per property, the earliest step: an earlier level, else the smaller key."""
    for name, key in reported.items():
        if name not in table or (level, key) < table[name]:
            table[name] = (level, key)


def _trace(spec: Spec, levels: list[np.ndarray], level: int, key: int) -> Trace:
    """The step ``key`` taken from a state of ``level``, with the path to that state, replayed
    (level -1: the initial state itself, the empty trace)."""
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


_PAIR = np.dtype([("fingerprint", np.int64), ("key", np.int64)])


class _Worker:
    """One partition: the fingerprints it owns, the states it expands, the successors it made."""

    def __init__(self, spec: Spec, me: int, workers: int) -> None:
        self.spec, self.me, self.workers = spec, me, workers
        self.seen: set[int] = set()  # fingerprints of the states this worker owns
        self.frontier: list = []  # (key, state) of this level's states, by key once ranked
        self.made: dict[int, tuple[int, Hashable]] = {}  # this level's successors: fingerprint -> (key, state)
        self.interned: dict[Record, Record] = {}  # records that arrived from other workers, one of each value

    def start(self, initial) -> dict:
        if initial is not None:
            canonical = self.spec.canonical
            self.seen.add(hash(canonical(initial) if canonical is not None else initial))
            self.frontier = [(0, initial)]
        return {}

    def expand(self, decided_broken: frozenset[str], decided_witnessed: frozenset[str]) -> dict:
        """Expand this level's states. A property named in ``decided_*`` has its first step at an earlier
        level, so it is not checked; nor is one this worker found earlier in this level (states go in rank
        order, so its first find here is its smallest key here)."""
        spec, workers = self.spec, self.workers
        next_states, canonical = spec.successors, spec.canonical
        by_step, witnessed_by = spec.broken_transitions, spec.witnessed
        made: dict[int, tuple[int, Hashable]] = {}
        violations: dict[str, int] = {}
        witnesses: dict[str, int] = {}
        counts: Counter[type] = Counter()
        generated = 0
        for rank, state in self.frontier:
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
                fingerprint = hash(canonical(nxt) if canonical is not None else nxt)
                if fingerprint not in made:
                    made[fingerprint] = (base | index, nxt)
            if len(steps) > ACTION_MASK:
                raise ValueError(f"{len(steps)} successors of one state: at most {ACTION_MASK}")
        self.frontier, self.made = [], made
        pairs = np.fromiter(((fp, key) for fp, (key, _) in made.items()), dtype=_PAIR, count=len(made))
        owners = pairs["fingerprint"] % workers
        return {
            "generated": generated,
            "counts": {kind.__name__: n for kind, n in counts.items()},
            "violations": violations,
            "witnesses": witnesses,
            "out": [pairs[owners == owner].tobytes() for owner in range(workers)],
        }

    def merge(self, batches: list[bytes]) -> dict:
        """Keep, per fingerprint not seen, the smallest key sent; say which sender's successor won."""
        seen = self.seen
        best: dict[int, tuple[int, int]] = {}  # fingerprint -> (key, sender)
        for sender, batch in enumerate(batches):
            for fingerprint, key in np.frombuffer(batch, dtype=_PAIR).tolist():
                if fingerprint in seen:
                    continue
                held = best.get(fingerprint)
                if held is None or key < held[0]:
                    best[fingerprint] = (key, sender)
        seen.update(best)
        won: list[list[int]] = [[] for _ in range(self.workers)]
        for fingerprint, (_, sender) in best.items():
            won[sender].append(fingerprint)
        keys = np.fromiter((key for key, _ in best.values()), dtype=np.int64, count=len(best))
        return {"keys": np.sort(keys).tobytes(), "won": [np.array(w, dtype=np.int64).tobytes() for w in won]}

    def ship(self, won: list[bytes]) -> dict:
        """The winning successors this worker made, to their owners: (key, state), pickled once per owner."""
        made, self.made = self.made, {}
        out: list[bytes | list | None] = []
        for owner, fingerprints in enumerate(won):
            batch = [made[fp] for fp in np.frombuffer(fingerprints, dtype=np.int64).tolist()]
            if owner == self.me:
                self.frontier = batch  # kept as they are, never pickled
                out.append(None)
            else:
                out.append(pickle.dumps(batch, PROTOCOL) if batch else None)
        return {"out": out}

    def arrive(self, ranks: bytes, arriving: list[bytes | None]) -> dict:
        """The next level's states this worker owns, from every sender, in key order with their ranks;
        their ``always`` checks (once a state: it is new)."""
        states = list(self.frontier)
        for sender, batch in enumerate(arriving):
            if sender != self.me and batch is not None:
                states.extend(_Interning(batch, self.interned).load())
        states.sort(key=first)
        broken_always = self.spec.broken_always
        always: dict[str, int] = {}
        for key, state in states:
            for name in broken_always(state):
                always.setdefault(name, key)
        self.frontier = list(zip(np.frombuffer(ranks, dtype=np.int64).tolist(), (s for _, s in states), strict=True))
        gc.freeze()  # this level's states stay until it is expanded: no collection need scan them
        return {"always": always}


INTERNED_RECORDS = 1 << 20  # the table is emptied when it holds more (it only saves time; any size is correct)


class _Interning(pickle.Unpickler):
    """Unpickles states that arrive from another worker, sharing their records with those that came before.

    Why: the model caches by value (``model.kraft``'s images by log, ``lru_cache``s of ``model.step``), and a
    cache hit compares the key it is asked with the one it keeps; records a state shares with older states
    compare by identity at once, while a state unpickled as a fresh tree compares field by field all the way
    down. Measured on the migration scope with 2 workers, a state's successors took 2.3 times as long as with 1
    worker, which ships nothing. Records are built bottom-up, so each is looked up with its fields already
    shared: one hash (of cached hashes) and a comparison of identical fields. Correct whatever the table holds:
    an interned record is equal to the one unpickled, and records are immutable."""

    def __init__(self, batch: bytes, interned: dict[Record, Record]) -> None:
        super().__init__(io.BytesIO(batch))
        self.interned = interned
        if len(interned) > INTERNED_RECORDS:
            interned.clear()

    def find_class(self, module: str, name: str):
        cls = super().find_class(module, name)
        if not (isinstance(cls, type) and issubclass(cls, Record) and "__reduce__" in cls.__dict__):
            return cls  # not a record pickled as a call of its class (``model.record``): built as pickle builds it
        if not all(f.compare for f in fields(cls)):
            # A record with fields equality ignores (ClusterState's ghost): an equal one may differ in them. A
            # whole state is new where it arrives, so it would never be found, only kept from being freed.
            return cls
        table = self.interned

        def interned(*fields):
            made = cls(*fields)
            return table.setdefault(made, made)

        return interned
