"""The breadth-first search of ``properties.explore`` on Spark: level by level, the states partitioned by fingerprint.

Rules:
- Same answers as the serial engine (``properties.explore.search``), which stays the reference:
  the same distinct and generated counts, depth, verdicts and witnesses, and for every property the
  very trace the serial engine keeps. It reuses the parallel engine's naming of steps
  (``properties.parallel``: a state's rank is its place in the serial frontier, a step's key is
  (parent rank, action index)), so the owner of a state keeps the step the serial loop reaches it by
  first. Cut short (``stop_at``, ``max_states``) it stops at the end of a level, as the parallel
  engine does, so the counts can be larger than the serial engine's; the traces are the same.
- Executors never receive a ``Spec`` (it holds closures): they get a ``SpecRef`` (scope, profile,
  seeded bugs, symmetry) and build the ``Spec`` from it, once per Python worker process.
- The seen-set holds fingerprints, not states (``properties.fingerprint``): 128-bit BLAKE2b Merkle
  digests of what equality reads, the same in the driver and in every executor whatever their
  ``PYTHONHASHSEED`` and addresses. This is TLC's kind of search: two distinct states whose
  fingerprints collide count as one, with probability at most n(n-1)/2 / 2**128 over n states
  (under 1.5e-21 for a billion). ``hash()`` is not used across processes at all: PySpark pins
  ``PYTHONHASHSEED`` for its Python workers but not for the driver, and on Python 3.11
  ``hash(None)`` is an address. A state's owner is the first 8 bytes of its fingerprint modulo the
  number of partitions, computed the same way by the driver (for the initial state) and by
  PySpark's shuffle (``_owner``). Inside one task the successors are first deduplicated by
  equality, so a fingerprint is computed once per distinct successor a task makes.
- Nothing stays in executor memory between levels: each level is written to the run directory,
  one seen-set file (a sorted array of fingerprints, 16 bytes a state) and one frontier file
  (states by key) per partition, and the next level's tasks read them back. A task holds one
  partition at a time, so more partitions make smaller tasks; the successors travel in Spark's
  shuffle, which spills to disk by itself (``spark.python.worker.memory`` on the Python side,
  Spark's shuffle files on the JVM side). The driver holds one level's keys (8 bytes a state) while
  it ranks them, and writes them to ``keys.npy``; traces are rebuilt from those files, memory-mapped.
- The run directory must be one path that the driver and every executor see (on a cluster spanning
  hosts: a shared filesystem, as Spark's own checkpoint directory must be).
- A level is finished when its ``done.json`` is written: the files of a level are written to a
  temporary name and renamed, and ``done.json`` last, by the driver, after every task of the level
  succeeded. A retried task writes the same files again (its output does not depend on the order
  the shuffle delivers in). The previous level's seen-set and frontier are deleted only after that.
  So a run killed at any point resumes from its last finished level (``resume``), and gives the
  counts an uninterrupted run gives.

How a level runs (one Spark job, one shuffle):
- expand, one task per partition: read the partition's frontier and the level's sorted keys (the
  ranks are positions in them), run ``successors``, check TRANSITION properties and SOMETIMES
  witnesses (smallest key per property), and emit each distinct successor once, with its smallest
  key, under its fingerprint; plus one record of counts, keyed by the partition's number.
- merge, one task per owner: drop the fingerprints in the owner's seen-set, keep the smallest key
  per fingerprint, check ALWAYS properties on the new states, write the new seen-set and frontier,
  and hand the new keys and the counts it was sent to the driver.
- The driver sorts the keys into ranks (``keys.npy``) and writes ``done.json``.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import time
import uuid
from collections import Counter
from collections import _count_elements as count_elements  # type: ignore[attr-defined]
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial
from operator import itemgetter
from pathlib import Path

import numpy as np

from properties.explore import ExploreResult, Spec, scope_spec
from properties.fingerprint import SIZE, Fingerprinter
from properties.parallel import ACTION_BITS, ACTION_MASK, _keep_first, _trace, collision_chance

LOG = "spark.log"  # the JVM's output, which the command line sends to the run directory
FORMAT = 1  # of the run directory; a directory of another format is refused
PROTOCOL = 5
FINGERPRINT = f"S{SIZE}"
first = itemgetter(0)


class CheckpointError(ValueError):
    """A run directory that cannot be used for this search (one line)."""


@dataclass(frozen=True)
class SpecRef:
    """What an executor needs to build the ``Spec``: a scope of the Kafka model and how it is explored."""

    scope: str
    profile: str = "kip"
    bugs: tuple[str, ...] = ()
    symmetry: bool = False

    def build(self) -> Spec:
        from model import SEEDED_BUGS_BY_NAME, Variant
        from model.migration import Profile

        variant = Variant(frozenset(SEEDED_BUGS_BY_NAME[b].bug for b in self.bugs), Profile(self.profile))
        return scope_spec(self.scope, variant, self.symmetry)


_SPECS: dict[SpecRef, Spec] = {}  # per Python worker process: a Spec is built once


def _spec(ref: SpecRef) -> Spec:
    spec = _SPECS.get(ref)
    if spec is None:
        spec = _SPECS[ref] = ref.build()
    return spec


def _owner(key: bytes | int) -> int:
    """The partition function of the shuffle (PySpark takes it modulo the partitions): a fingerprint's
    first 8 bytes, or a partition's number for its record of counts."""
    return key if type(key) is int else int.from_bytes(key[:8], "big")


# ---- the run directory -----------------------------------------------------------------------------


def _level_dir(run: Path, level: int) -> Path:
    return run / f"level-{level:06d}"


def _write(path: Path, data: bytes) -> None:
    """``data`` at ``path``, all or nothing: written to a temporary name in the same directory, then renamed."""
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    with open(temporary, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)


def _write_array(path: Path, array: np.ndarray) -> None:
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    with open(temporary, "wb") as f:
        np.save(f, array, allow_pickle=False)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)


def _seen_file(run: Path, level: int, part: int) -> Path:
    return _level_dir(run, level) / f"seen-{part:05d}.npy"


def _frontier_file(run: Path, level: int, part: int) -> Path:
    return _level_dir(run, level) / f"frontier-{part:05d}.pkl"


def finished_level(run: Path) -> int | None:
    """The deepest level of ``run`` whose ``done.json`` is written, or None."""
    levels = [int(p.name.removeprefix("level-")) for p in run.glob("level-*") if (p / "done.json").is_file()]
    return max(levels, default=None)


def open_run(run: Path, ref: SpecRef, partitions: int, create: bool = True) -> tuple[int, int | None]:
    """(partitions, last finished level or None) of the run directory ``run``, made if new (and ``create``).

    A directory holding another search (scope, profile, bugs, symmetry) or something else is a
    ``CheckpointError``; a resumed run keeps the partitions it was started with."""
    description = {"format": FORMAT, "spec": asdict(ref)}
    meta = run / "run.json"
    if run.exists() and not run.is_dir():
        raise CheckpointError(f"{run} is a file, not a directory")
    if meta.is_file():
        try:
            held = json.loads(meta.read_text())
            stored = {"format": held["format"], "spec": {**held["spec"], "bugs": tuple(held["spec"]["bugs"])}}
            partitions = int(held["partitions"])
        except (ValueError, KeyError, TypeError) as e:
            raise CheckpointError(f"{meta} is damaged ({e}); use a new directory") from None
        if stored != description:
            theirs = held["spec"]
            raise CheckpointError(
                f"{run} holds another search (scope {theirs['scope']}, profile {theirs['profile']}, bugs "
                f"{','.join(theirs['bugs']) or 'none'}, symmetry {theirs['symmetry']}, format {held['format']}); "
                "resume it with the same options or use a new directory")
        return partitions, finished_level(run)
    if run.is_dir() and any(p.name != LOG for p in run.iterdir()):
        raise CheckpointError(f"{run} is not empty and holds no kraftcheck explore run (no run.json)")
    if not create:
        return partitions, None
    try:
        run.mkdir(parents=True, exist_ok=True)
        _write(meta, json.dumps({**description, "partitions": partitions}, indent=2).encode())
    except OSError as e:
        raise CheckpointError(f"cannot write {run}: {e.strerror or e}") from None
    return partitions, None


# ---- the tasks (run on the executors) ---------------------------------------------------------------


def _expand(ref: SpecRef, run: str, level: int, part: int, _items) -> object:
    spec = _spec(ref)
    root = Path(run)
    with open(_frontier_file(root, level, part), "rb") as f:
        keys, states = pickle.load(f)
    ranks = np.searchsorted(np.load(_level_dir(root, level) / "keys.npy", mmap_mode="r"), keys).tolist()
    next_states, canonical = spec.successors, spec.canonical
    by_step, witnessed_by = spec.broken_transitions, spec.witnessed
    out: dict = {}  # representative -> (key, state): the first reach only, as keys ascend
    violations: dict[str, int] = {}
    witnesses: dict[str, int] = {}
    counts: Counter[type] = Counter()
    generated = 0
    for rank, state in zip(ranks, states):
        steps = next_states(state)
        if len(steps) > ACTION_MASK:
            raise ValueError(f"{len(steps)} successors of one state: at most {ACTION_MASK}")
        generated += len(steps)
        count_elements(counts, map(type, map(first, steps)))
        base = rank << ACTION_BITS
        for index, (action, nxt) in enumerate(steps):
            if by_step is not None:
                for name in by_step(state, action, nxt):
                    violations.setdefault(name, base | index)
            if witnessed_by is not None:
                for name in witnessed_by(state, action, nxt):
                    witnesses.setdefault(name, base | index)
            if nxt is state:
                continue
            representative = canonical(nxt) if canonical is not None else nxt
            if representative not in out:
                out[representative] = (base | index, nxt)
    yield part, {"generated": generated, "counts": {kind.__name__: n for kind, n in counts.items()},
                 "violations": violations, "witnesses": witnesses}
    fingerprint = Fingerprinter()
    for representative, found in out.items():
        yield fingerprint(representative), found


def _merge(ref: SpecRef, run: str, level: int, part: int, items) -> object:
    spec = _spec(ref)
    root = Path(run)
    best: dict[bytes, tuple[int, object]] = {}
    reports = []
    for key, value in items:
        if type(key) is int:
            reports.append(value)
            continue
        held = best.get(key)
        if held is None or value[0] < held[0]:
            best[key] = value
    seen = np.load(_seen_file(root, level, part))
    fingerprints = list(best)
    candidates = np.array(fingerprints, dtype=FINGERPRINT) if best else np.empty(0, FINGERPRINT)
    if len(seen) and len(candidates):
        at = np.minimum(np.searchsorted(seen, candidates), len(seen) - 1)
        unseen = np.flatnonzero(seen[at] != candidates)
    else:
        unseen = np.arange(len(candidates))
    fresh = candidates[unseen]
    # by index, not by ``fresh.tolist()``: numpy drops a fixed-width bytes value's trailing NULs
    new = sorted((best[fingerprints[i]] for i in unseen.tolist()), key=first)
    violations: dict[str, int] = {}
    broken_always = spec.broken_always
    for key, state in new:
        for name in broken_always(state):
            violations.setdefault(name, key)
    target = _level_dir(root, level + 1)
    target.mkdir(exist_ok=True)
    keys = np.fromiter((key for key, _ in new), dtype=np.int64, count=len(new))
    _write_array(_seen_file(root, level + 1, part), np.sort(np.concatenate([seen, fresh])))
    _write(_frontier_file(root, level + 1, part), pickle.dumps((keys, [state for _, state in new]), PROTOCOL))
    yield {"part": part, "keys": keys.tobytes(), "violations": violations, "reports": reports}


# ---- the driver ------------------------------------------------------------------------------------


def spark_search(
    spark,
    ref: SpecRef,
    run: Path,
    max_depth: int | None = None,
    stop_at: str | None = None,
    max_states: int | None = None,
    progress: Callable[[ExploreResult], None] | None = None,
    partitions: int | None = None,
) -> ExploreResult:
    """``properties.explore.search`` of ``ref`` on the Spark session ``spark``, its levels kept in ``run``.

    A ``run`` holding finished levels of the same search is resumed from the last of them; the
    partitions (default: twice the session's default parallelism) are those it was started with."""
    start = time.perf_counter()
    sc = spark.sparkContext
    spec = _spec(ref)
    run = Path(run).resolve()
    partitions, level = open_run(run, ref, partitions or 2 * sc.defaultParallelism)
    if level is None:
        level = 0
        _start(spec, run, partitions)
    for stray in run.glob("level-*"):  # what a killed run left of the level it did not finish
        if int(stray.name.removeprefix("level-")) > level:
            shutil.rmtree(stray)
    done = json.loads((_level_dir(run, level) / "done.json").read_text())
    result = ExploreResult(spec.name, workers=sc.defaultParallelism)
    counts = Counter(done["action_counts"])
    found = {name: tuple(where) for name, where in done["found"].items()}
    witnessed = {name: tuple(where) for name, where in done["witnessed"].items()}
    distinct, generated, depth, frontier = done["distinct"], done["generated"], done["depth"], done["frontier"]
    while frontier and (max_depth is None or depth < max_depth):
        if stop_at is not None and stop_at in found:
            break
        tasks = sc.parallelize(range(partitions), partitions)
        candidates = tasks.mapPartitionsWithIndex(partial(_expand, ref, str(run), depth))
        merged = candidates.partitionBy(partitions, _owner).mapPartitionsWithIndex(
            partial(_merge, ref, str(run), depth))
        replies = merged.collect()
        if sorted(r["part"] for r in replies) != list(range(partitions)):
            raise RuntimeError(f"level {depth + 1}: merge replies from {sorted(r['part'] for r in replies)}")
        keys = []
        for reply in sorted(replies, key=itemgetter("part")):
            for report in reply["reports"]:
                generated += report["generated"]
                counts.update(report["counts"])
                _keep_first(found, report["violations"], depth)
                _keep_first(witnessed, report["witnesses"], depth)
            _keep_first(found, reply["violations"], depth)
            keys.append(np.frombuffer(reply["keys"], dtype=np.int64))
        everything = np.sort(np.concatenate(keys)) if keys else np.empty(0, np.int64)
        depth += 1
        frontier = len(everything)
        distinct += frontier
        _write_array(_level_dir(run, depth) / "keys.npy", everything)
        _finish_level(run, depth, distinct, generated, frontier, counts, found, witnessed)
        for part in range(partitions):  # the level before is not needed any more, but its keys for traces
            for old in (_seen_file(run, depth - 1, part), _frontier_file(run, depth - 1, part)):
                old.unlink(missing_ok=True)
        result.depth, result.frontier = depth, frontier
        result.distinct_states, result.generated, result.action_counts = distinct, generated, dict(counts)
        if progress is not None:
            progress(result)
        if max_states is not None and distinct >= max_states:
            break
    levels = [np.load(_level_dir(run, d) / "keys.npy", mmap_mode="r") for d in range(1, depth + 1)]
    result.depth, result.frontier, result.complete = depth, frontier, not frontier
    result.distinct_states, result.generated, result.action_counts = distinct, generated, dict(counts)
    result.violations = {name: _trace(spec, levels, *where) for name, where in found.items()}
    result.witnesses = {name: _trace(spec, levels, *where) for name, where in witnessed.items()}
    result.collision_chance = collision_chance(result.distinct_states, 8 * SIZE)
    result.seconds = time.perf_counter() - start
    return result


def _start(spec: Spec, run: Path, partitions: int) -> None:
    """Level 0: the initial state, in the partition that owns its fingerprint."""
    initial = spec.initial
    fingerprint = Fingerprinter()(spec.canonical(initial) if spec.canonical is not None else initial)
    owner = _owner(fingerprint) % partitions
    _level_dir(run, 0).mkdir(exist_ok=True)
    for part in range(partitions):
        mine = part == owner
        seen = np.array([fingerprint] if mine else [], dtype=FINGERPRINT)
        _write_array(_seen_file(run, 0, part), seen)
        held = (np.zeros(1 if mine else 0, np.int64), [initial] if mine else [])
        _write(_frontier_file(run, 0, part), pickle.dumps(held, PROTOCOL))
    _write_array(_level_dir(run, 0) / "keys.npy", np.zeros(1, np.int64))
    found = {name: (-1, 0) for name in spec.broken_always(initial)}  # the initial state: the empty trace
    _finish_level(run, 0, 1, 0, 1, Counter(), found, {})


def _finish_level(run: Path, level: int, distinct: int, generated: int, frontier: int, counts: Counter,
                  found: dict, witnessed: dict) -> None:
    done = {"depth": level, "distinct": distinct, "generated": generated, "frontier": frontier,
            "action_counts": dict(counts), "found": found, "witnessed": witnessed}
    _write(_level_dir(run, level) / "done.json", json.dumps(done, indent=1, sort_keys=True).encode())
