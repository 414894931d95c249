"""The simulator is deterministic, and its fault mixes are read strictly.

A seed is the whole of a run: the simulator owns the only ``random.Random``, the nodes are
sans-IO, and the embedded ZooKeeper store has no clock and no threads (STYLE: "the same seed
gives the same trace, byte for byte"). So a failing seed found by a campaign replays anywhere:
in a second ``Simulation`` of the same process, in another process whose string hashing is
salted differently (set and dict orders of strings change), and with or without the
differential check watching. The runs use the ``all`` fault mix, which draws every kind of
random choice (delays, drops, duplicates, partitions, crashes, stops, pauses, a driver's late leader
events, restarts, expiries, outages).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from impl.cluster import SESSION_TIMEOUT_MS
from impl.sim.faults import MIXES, NONE, FaultMix, parse
from impl.sim.scenarios import MIGRATION, scenario
from impl.sim.simulator import LEADER_EVENT_LAG_MS, Simulation
from model.actions import ExpireSession, KRaftLeaderChange
from model.bugs import Bug, Variant
from properties.differential import Differential, checked_simulation

EVENTS = 2_500
MIX = "all"
SEED = 9  # with ``all``, reaches dual writes and the operator's broker roll, through crashes and expiries
ROOT = Path(__file__).resolve().parent.parent


def _run(seed: int, events: int = EVENTS, check: bool = False) -> Simulation:
    sim = checked_simulation(MIGRATION, seed, parse(MIX)) if check else Simulation(MIGRATION, seed, parse(MIX))
    sim.run(events)
    return sim


def _trace(seed: int, events: int = EVENTS) -> str:
    sim = _run(seed, events)
    assert sim.events == events, f"seed {seed} stopped after {sim.events} events: nothing left to do"
    return sim.trace_text()


# The same run in a fresh interpreter, which prints its trace's digest.
_CHILD = """
import hashlib, sys
from impl.sim.faults import parse
from impl.sim.scenarios import MIGRATION
from impl.sim.simulator import Simulation
sim = Simulation(MIGRATION, int(sys.argv[1]), parse(sys.argv[2]))
sim.run(int(sys.argv[3]))
print(hashlib.sha256(sim.trace_text().encode()).hexdigest())
"""


def test_simulation_same_seed_same_trace_twice():
    """A pinned regression seed replays: two Simulations of one seed write byte-identical traces."""
    first = _trace(SEED)
    assert first == _trace(SEED)
    assert len(first.splitlines()) == EVENTS


def test_simulation_same_seed_same_trace_in_another_process():
    """A seed replays on another machine: a process with another PYTHONHASHSEED writes the same trace.

    String hashing decides the iteration order of sets and dicts of strings; a node that let such
    an order reach a decision would pass the in-process test and fail here.
    """
    here = os.environ.get("PYTHONHASHSEED", "")
    other = str(int(here) + 1) if here.isdigit() else "1"
    env = {**os.environ, "PYTHONHASHSEED": other}
    child = subprocess.run([sys.executable, "-c", _CHILD, str(SEED), MIX, str(EVENTS)], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stderr[-2000:]
    assert child.stdout.strip() == hashlib.sha256(_trace(SEED).encode()).hexdigest()


def test_simulation_different_seeds_different_traces():
    """The seed is used: four seeds give four different runs (else a campaign explores one run N times)."""
    traces = {_trace(seed, events=300) for seed in range(4)}
    assert len(traces) == 4


def test_simulation_check_does_not_change_the_run():
    """The differential check only watches: with it on, a seed takes the same steps as with it off.

    So a seed found by a fast unchecked campaign replays under the check to explain it. (A checked
    run stops at a disagreement with the model: its trace is then a prefix of the unchecked one.)
    """
    checked = _run(SEED, events=1_000, check=True).trace_text()
    assert checked.strip() and _trace(SEED, events=1_000).startswith(checked)


def test_simulation_handed_a_checker_runs_the_checkers_cluster_step_for_step():
    """Campaigns and the shrinker hand a simulation its checker (a Differential, of the correct model or a
    model mutant), which built the cluster and ran the scope's warm-up: the run is that cluster's, event for
    event the same as a Simulation that built it, and the checker sees every event."""
    plain = _run(SEED, events=1_000)
    checker = Differential(MIGRATION, seed=SEED, bounded=False, strict=False)
    checked = Simulation(MIGRATION, SEED, parse(MIX), checker=checker)
    assert checked.cluster is checker.cluster
    outcome = checked.run(300)
    assert outcome.ok, outcome.disagreement
    assert plain.trace_text().startswith(checked.trace_text())
    assert len(checker.steps) - len(Differential(MIGRATION, seed=SEED).steps) == outcome.events

    mutant = Variant(frozenset({next(iter(Bug))}))
    checked_by_a_mutant = checked_simulation(MIGRATION, SEED, parse(MIX), variant=mutant)
    assert checked_by_a_mutant.checker.variant == mutant


# Runs pinned by the digest of their trace and record (the first 16 hex digits of sha256 over the
# trace text and each event's time and cuts), as the simulator wrote them before its options were
# kept between events (bench.sim's speed work): every seed found by a campaign, and every pinned
# regression, must replay the same after such work. (scope, seed, fault mix, runbook, check, digest)
# The migration runs were re-pinned when a new KRaft leader came to activate only once its
# LeaderChange committed (a node that acts differently).
# The runs whose mix holds ``process`` (so ``all``) were re-pinned when the pause fault joined it:
# its draw each event changes their random stream; the none, network and zookeeper runs did not change.
# They were re-pinned again when the driver's late leader event (``leader_event_lag``) joined ``process``: its
# draw, each time a controller's KRaftLeaderChange becomes due, changes their random stream (the cluster run,
# whose 1,500 events see no such chance, and the none, network and zookeeper runs did not change).
# The ``all`` runs were re-pinned once more when ``all`` came to lose a response now and then and to let a ZooKeeper
# server lag (``lose_response``, ``stale_read``): the draws for them change their random stream.
PINNED = [
    ("sim-migration", 100, "all", "finalize", False, "c2037a435854c39c"),
    ("sim-migration", 107, "all", "rollback", True, "27b9ab1ce93d57dd"),
    ("sim-migration", 114, "all", "none", False, "e92f9acfebd1711a"),
    ("sim-migration", 121, "none", "finalize", False, "fc787d369168cfc4"),
    ("sim-migration", 149, "network", "rollback", False, "af66deff200ab228"),
    ("sim-migration", 170, "process", "rollback", False, "93195761e0d33bd5"),
    ("sim-migration", 184, "zookeeper", "finalize", False, "ae153e6e8aad0311"),
    ("sim-migration", 205, "all,partition=0.1", "finalize", False, "8a68cd9253f19a6f"),
    ("sim-migration", 240, "network+process,drop=0.2,duplicate=0.2", "none", False, "b1a93f9d3a0730bb"),
    ("sim-migration", 268, "all,partition=0.3,restart=2", "finalize", False, "67e9e5db94e2fb23"),
    ("sim-migration", 275, "all,partition=0.3,restart=2", "rollback", True, "e48580198e608afb"),
    ("cluster", 5, "all", "none", False, "413adab23ca40442"),
]


@pytest.mark.parametrize("scope,seed,mix,runbook,check,digest", PINNED)
def test_simulation_pinned_runs_replay_byte_for_byte(scope, seed, mix, runbook, check, digest):
    """A seed is a run for good: 1,500 events of each fault mix and runbook, checked or not, write the
    trace and record they wrote when pinned (``random.choices`` draws from the same options, in the
    same order, with the same weights).

    A change that means to change runs (a new fault, a node that acts differently) re-pins these:
    the failure prints the new digest."""
    if check:
        sim = checked_simulation(scenario(scope), seed, parse(mix), runbook=runbook)
    else:
        sim = Simulation(scenario(scope), seed, parse(mix), runbook=runbook)
    sim.run(1_500)
    text = sim.trace_text() + "".join(f"{step.now} {step.cuts}\n" for step in sim.record)
    assert hashlib.sha256(text.encode()).hexdigest()[:16] == digest


# ---- fault mixes -----------------------------------------------------------------------------------

@pytest.mark.parametrize("spec,expected", [
    ("none", NONE),
    ("network", MIXES["network"]),
    ("network+process,drop=0.2", FaultMix(**{**vars(MIXES["network"]), "crash": 0.01, "stop": 0.01, "pause": 0.002,
                                                                      "leader_event_lag": 0.5, "drop": 0.2})),
    ("drop=0.1", FaultMix(**{**vars(NONE), "drop": 0.1})),
    ("zookeeper, delay_ms = 30 ", FaultMix(**{**vars(MIXES["zookeeper"]), "recover": 1.0, "delay_ms": 30})),
    ("swarm", FaultMix(**{**vars(MIXES["all"]), "swarm": True})),
    ("swarm+network", FaultMix(**{**vars(MIXES["network"]), "swarm": True})),
    ("network+swarm,expire=0.2", FaultMix(**{**vars(MIXES["network"]), "swarm": True, "expire": 0.2})),
])
def test_faults_parse_names_and_overrides(spec, expected):
    """The command line's mix: names joined with '+' (each weight the largest), then key=weight overrides."""
    assert parse(spec) == expected


@pytest.mark.parametrize("spec,named", [
    ("", "empty"),
    ("bogus", "'bogus'"),
    ("network+bogus", "'bogus'"),
    ("network+", "''"),
    ("network,bogus=1", "'bogus=1'"),
    ("network,drop", "'drop'"),
    ("drop=-0.5", "not negative"),
    ("delay_ms=-1", "not negative"),
    ("drop=abc", "'abc' is not a number"),
    ("drop=", "'' is not a number"),
    ("delay_ms=1.5", "'1.5'"),
    ("drop=nan", "'nan'"),
    ("drop=inf", "'inf'"),
    ("swarm=1", "'swarm=1'"),
    ("swarmy", "'swarmy'"),
])
def test_faults_parse_bad_mix_one_line_error(spec, named):
    """A typo on the command line is one line naming the bad part, not a traceback or a silent default."""
    with pytest.raises(ValueError) as caught:
        parse(spec)
    message = str(caught.value)
    assert "\n" not in message and named in message, message


# ---- swarm testing -----------------------------------------------------------------------------------

BREAKING = ("delay_ms", "drop", "duplicate", "partition", "crash", "stop", "expire", "outage", "pause",
            "leader_event_lag")


def test_swarm_each_run_draws_its_own_mix_from_the_seed():
    """Under ``swarm`` a run's mix is drawn from its seed: the same seed draws the same mix and the
    same trace; across seeds, every breaking fault is sometimes left out and sometimes kept."""
    mixes = [Simulation(MIGRATION, seed, parse("swarm")).faults for seed in range(40)]
    assert all(not mix.swarm for mix in mixes)
    assert Simulation(MIGRATION, 7, parse("swarm")).faults == mixes[7]
    base = MIXES["all"]
    for name in BREAKING:
        weights = [getattr(mix, name) for mix in mixes]
        assert 0 in weights and any(weights), f"{name} is never left out or never kept: {weights}"
        kept = [w for w in weights if w]
        assert all(getattr(base, name) / 2 - 1e-9 <= w <= 8 * getattr(base, name) + 1e-9 for w in kept), name
    for name in ("restart", "recover", "expire_dead"):  # healing keeps its weight: every fault can heal
        assert {getattr(mix, name) for mix in mixes} == {getattr(base, name)}


def test_swarm_over_a_mix_leaves_the_other_faults_out():
    mixes = [Simulation(MIGRATION, seed, parse("swarm+network")).faults for seed in range(20)]
    assert all(mix.crash == mix.stop == mix.pause == mix.leader_event_lag == mix.expire == mix.outage == 0
               for mix in mixes)
    assert any(mix.drop for mix in mixes)


def test_swarm_runs_replay_byte_for_byte():
    first = Simulation(MIGRATION, 3, parse("swarm"))
    first.run(800)
    second = Simulation(MIGRATION, 3, parse("swarm"))
    second.run(800)
    assert first.trace_text() == second.trace_text() and first.faults.describe() == second.faults.describe()


# ---- pauses ------------------------------------------------------------------------------------------

def _actor(action) -> int | None:
    return getattr(action, "broker", getattr(action, "controller", None))


def _controller(sim: Simulation) -> int | None:
    return next((b for b in sorted(sim.cluster.brokers) if sim.cluster.brokers[b].controller is not None), None)


def test_paused_node_takes_no_step_its_session_expires_and_it_resumes_stale():
    """A GC pause (KIP-380 §Motivation, the zombie controller): the paused ZooKeeper controller offers
    nothing and takes no step; the server expires its session after the timeout and another broker
    takes over; it resumes still holding the controller role it had, and acts again."""
    sim = checked_simulation(scenario("fencing"), 1, parse("none"))
    while _controller(sim) is None or not sim.cluster.brokers[_controller(sim)].controller.initialized:
        assert sim.step() is not None
    zombie = _controller(sim)
    session = sim.cluster.brokers[zombie].session
    paused_at = sim.cluster.now
    resume = paused_at + 4 * SESSION_TIMEOUT_MS
    sim.pause_node(zombie, resume)
    expired_at = None
    while zombie in sim.paused:
        assert sim.step() is not None
        if zombie in sim.paused:
            assert sim.offered[zombie] == []
            assert all(_actor(a) != zombie for a in sim._traces[-1]), sim.lines[-1]
        if expired_at is None and not sim.cluster.port.session_alive(session):
            assert isinstance(sim.record[-1].action, ExpireSession)
            expired_at = sim.cluster.now
    assert expired_at is not None and expired_at >= paused_at + SESSION_TIMEOUT_MS
    assert any(node.controller is not None for b, node in sim.cluster.brokers.items() if b != zombie)  # a successor
    assert sim.cluster.brokers[zombie].controller is not None  # the zombie still believes it leads
    sim.run(50)
    assert any(_actor(a) == zombie for traces in sim._traces[-50:] for a in traces)


def test_pause_lets_a_short_campaign_catch_the_zombie_controller_write():
    """The zombie's write that skips the /controller_epoch check (KAFKA-6082) is applied: the
    campaign's differential check catches it within a few seeds of ``all``; without pauses 200
    seeds never did."""
    from properties.campaign.options import make_plan
    from properties.runs import run_seed

    plan = make_plan(seeds=10, scope="fencing", faults="all", mutant="impl_controller_write_without_epoch_check",
                     out="unused")
    assert any(run_seed(plan, seed, coverage=False).disagreement is not None for seed in range(10))


# ---- a driver's late leader event ----------------------------------------------------------------------

def test_lagging_driver_is_offered_no_leader_change_until_its_lag_ends_and_its_other_steps_go_on():
    """A controller's KRaftLeaderChange, due after a leadership change, is held back while its drawn lag
    lasts (the driver's KRaftLeaderEvent waits in its queue), while the node keeps offering its other
    steps; once the lag is over it is offered again."""
    sim = checked_simulation(MIGRATION, 0, parse("none,leader_event_lag=1"))
    while not sim.lagging:
        assert sim.step() is not None
    (node, until), = sim.lagging.items()
    assert until - sim.cluster.now >= LEADER_EVENT_LAG_MS[0]
    change = KRaftLeaderChange(node)
    assert change in sim.cluster.node(node).offers(sim.cluster.now)  # due, and held back
    others_offered = 0
    while (action := sim.step()) != change:
        assert action is not None
        options = [a for _, a in sim.choices()]
        if sim.cluster.now < until:
            assert change not in sim.offered[node] and change not in options, sim.lines[-1]
            others_offered += bool(sim.offered[node])
        else:  # the lag is over: offered again
            assert node not in sim.lagging and change in options
    assert sim.cluster.now >= until and others_offered


def test_leader_event_lag_lets_a_campaign_catch_the_driver_regaining_leadership_unhandled():
    """A driver that finds its node leading again before it handled the loss (a lag held its KRaftLeaderEvent
    while the node lost and regained the leadership) must go INACTIVE first: seed 10 of ``migration`` under
    ``all`` catches the mutant that skips it; the same seed without the lag does not."""
    from properties.campaign.options import make_plan
    from properties.runs import run_seed

    mutant = "impl_migration_event_in_wrong_driver_state"
    caught = make_plan(seeds=11, scope="migration", faults="all", mutant=mutant, out="unused")
    assert run_seed(caught, 10, coverage=False).disagreement is not None
    unlagged = make_plan(seeds=11, scope="migration", faults="all,leader_event_lag=0", mutant=mutant, out="unused")
    assert run_seed(unlagged, 10, coverage=False).disagreement is None


# ---- ZooKeeper servers that lag ----------------------------------------------------------------------

def test_stale_reads_let_a_campaign_catch_the_claim_that_trusts_them():
    """A KRaft controller whose ZooKeeper server lagged through another's claim claims from what it read
    (scope stale-reads' seeded bug, in the implementation): seed 12 of ``sim-migration`` under ``all+lagging``
    catches the claim without versions (the first seed that does; its drawn worlds, ``zk-lagging`` and
    ``reply-loss``, join the mix); the same seed with no lagging server does not."""
    from properties.campaign.options import make_plan
    from properties.runs import run_seed

    mutant = "impl_claim_trusts_stale_read"
    caught = make_plan(seeds=13, faults="all+lagging", mutant=mutant, out="unused")
    assert run_seed(caught, 12, coverage=False).disagreement is not None
    unlagged = make_plan(seeds=13, faults="all+lagging,stale_read=0", mutant=mutant, out="unused")
    assert run_seed(unlagged, 12, coverage=False).disagreement is None
