"""The parallel engine gives the serial engine's answers: counts, verdicts, witnesses, the same traces.

``properties.parallel`` spreads the breadth-first search over forked workers, level by level, each
owning the states whose hash falls to it. The serial engine (``properties.explore.search``) is the
reference: every test here runs both and compares everything but the time, so a worker that loses
a state, counts a step twice, or keeps a later parent than the serial loop would fails here.
"""

from __future__ import annotations

import json

import pytest

from model import Variant
from model.actions import BrokerHeartbeat, CrashBroker, RegisterWithKRaft, StopBroker
from model.bugs import Bug
from model.migration import Profile
from model.types import BrokerId
from properties import cli
from properties.explore import ExploreResult, explore, scope_spec, search
from properties.parallel import parallel_search
from tests.test_engine import counter_spec


def answers(result: ExploreResult) -> dict:
    """Everything a search answers, but the time and the number of processes."""
    return {
        "distinct_states": result.distinct_states,
        "generated": result.generated,
        "depth": result.depth,
        "frontier": result.frontier,
        "complete": result.complete,
        "action_counts": result.action_counts,
        "violations": {name: trace.actions for name, trace in result.violations.items()},
        "witnesses": {name: trace.actions for name, trace in result.witnesses.items()},
    }


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_parallel_search_counts_a_toy_model_as_the_serial_one(workers):
    """The counter model from test_engine: 7 values, the stutter checked, a bad value at 5."""
    serial = search(counter_spec(7, bad=5, flag_stutters=True))
    parallel = parallel_search(counter_spec(7, bad=5, flag_stutters=True), workers)
    assert answers(parallel) == answers(serial)
    assert (parallel.distinct_states, parallel.generated, parallel.depth) == (7, 21, 4)
    assert len(parallel.violations["NeverBad"]) == 3 and parallel.workers == workers


def test_parallel_search_sees_a_violation_of_the_initial_state():
    spec = counter_spec(4, bad=0)
    assert parallel_search(spec, 2).violations["NeverBad"].actions == []


@pytest.mark.parametrize(
    ("scope", "bugs", "depth", "symmetry"),
    [
        ("handover", (), None, False),  # complete: the search runs out of states
        ("election", (), 6, False),
        ("bounce", (Bug.ACCEPT_STALE_BROKER_EPOCH,), 6, False),  # a violation at depth 5
        ("kraft-quorum", (Bug.VOTE_TWICE_IN_EPOCH,), 7, True),  # a violation at depth 6, under symmetry
    ],
)
def test_parallel_explore_of_a_scope_answers_as_the_serial_one(scope, bugs, depth, symmetry):
    """Same counts per action type, and for every property the very trace the serial engine keeps."""
    variant = Variant(frozenset(bugs))
    serial = explore(scope, variant, max_depth=depth, symmetry=symmetry)
    parallel = explore(scope, variant, max_depth=depth, symmetry=symmetry, workers=2)
    assert answers(parallel) == answers(serial)
    assert bool(serial.violations) == bool(bugs)


def test_parallel_explore_stops_at_a_property_with_the_serial_trace():
    """``stop_at`` ends the search at the level's end: same trace, same depth, the counts may be larger."""
    variant = Variant(frozenset({Bug.VOTE_TWICE_IN_EPOCH}))
    name = "AtMostOneKRaftLeaderPerEpoch"
    serial = explore("kraft-quorum", variant, max_depth=9, stop_at=name)
    parallel = explore("kraft-quorum", variant, max_depth=9, stop_at=name, workers=2)
    assert parallel.violations[name].actions == serial.violations[name].actions
    assert parallel.depth == serial.depth and not parallel.complete
    assert parallel.distinct_states >= serial.distinct_states


def test_parallel_search_reports_a_failing_model_as_an_error():
    """A worker's exception reaches the caller with its traceback, and no worker is left running."""
    spec = counter_spec(20)

    def failing(state):
        if state.value == 3:
            raise RuntimeError("the model broke")
        return spec.successors(state)

    broken = type(spec)("failing", spec.initial, failing, spec.broken_always)
    with pytest.raises(RuntimeError, match="the model broke"):
        parallel_search(broken, 2)


def test_explore_cli_with_workers_prints_the_serial_answer(capsys):
    """`kraftcheck explore --workers 2` and `--workers 1` print the same JSON but for time and workers."""
    printed = []
    for workers in ("1", "2"):
        code = cli.main(["explore", "--scope", "bounce", "--bug", "accept_stale_broker_epoch", "--depth", "6",
                         "--workers", workers, "--json"])
        assert code == 1
        out = json.loads(capsys.readouterr().out)
        assert out.pop("workers") == int(workers)
        out.pop("seconds")
        chance = out.pop("collision_chance")
        assert chance is None if workers == "1" else 0 < chance < 1e-9  # exact states, or 64-bit fingerprints
        printed.append(out)
    assert printed[0] == printed[1]


@pytest.mark.parametrize(
    ("scope", "profile", "depth"),
    [("migration", Profile.KIP, 10), ("dual-write", Profile.KIP, 9), ("rollback", Profile.KAFKA_3_9, 6),
     ("finalize-failover", Profile.KAFKA_3_9, 9), ("pre-migration", Profile.KAFKA_3_9, 6)],
)
def test_state_hashes_are_fingerprints_on_migration_scopes(scope, profile, depth):
    """The parallel engine keeps ``hash(state)`` for a state: no two states of these scopes share one. The
    scopes hold ZooKeeper versions (-1 any, -2 absent), which CPython hashes alike: this is where a
    field holding both would show, and records of classes with equal fields (which dataclass alone
    hashes alike)."""
    spec = scope_spec(scope, Variant(profile=profile))
    states, frontier = {spec.initial}, [spec.initial]
    for _ in range(depth):
        level = []
        for state in frontier:
            for _, nxt in spec.successors(state):
                if nxt not in states:
                    states.add(nxt)
                    level.append(nxt)
        frontier = level
    assert len(states) > 1000
    assert len({hash(state) for state in states}) == len(states)


def test_a_record_hash_tells_classes_with_equal_fields_apart():
    """``A(1)`` and ``B(1)``, and sets of them: dataclass's own hash would give each pair one value."""
    assert hash(BrokerHeartbeat(BrokerId(0), 3000)) != hash(RegisterWithKRaft(BrokerId(0), 3000))
    assert hash(frozenset({CrashBroker(BrokerId(1))})) != hash(frozenset({StopBroker(BrokerId(1))}))


def test_arriving_states_share_their_records_but_keep_their_own_ghost():
    """States another worker ships are unpickled with their records interned, so the model's caches find them by
    identity; a whole state is not interned (equality ignores its ghost, which must stay the state's own)."""
    import pickle

    from model.state import ClusterState
    from properties.explore import scope_spec
    from properties.parallel import _Interning

    spec = scope_spec("migration")
    [(_, state), *_] = spec.successors(spec.initial)
    blob = pickle.dumps([state], 5)
    interned: dict = {}
    [first] = _Interning(blob, interned).load()
    [again] = _Interning(blob, interned).load()
    assert first == state == again and first is not again
    assert first.ghost == state.ghost and again.ghost == state.ghost
    assert first.brokers[0] is again.brokers[0] and first.controllers[0] is again.controllers[0]
    assert not any(isinstance(record, ClusterState) for record in interned)
