"""A node's offers are what it would do next: never missing a step it takes, few it would refuse.

The simulator chooses only among the nodes' offers (``Node.offers(now)``), while the differential
walks are driven by the model and never look at them. So the walks here check, before each step
a node takes, that the step was among the acting node's offers once time is no object (every
timer of impl.pacing run out): a node that forgets to offer a step would silently never take it
in a simulation. Then situations of the timers themselves (KIP-500 §Broker States: heartbeats and
the session timeout; KIP-595's election timeout; KIP-866 §Controller Migration: the driver's next
event), and the simulator's efficiency.

Seeds: KIP-500 §Controller Quorum, §Broker States; KIP-380 §Broker Registration; KIP-866
§Controller Migration (the driver's states).
"""

from __future__ import annotations

import random

import pytest

from impl.cluster import Cluster
from impl.pacing import BROKER_HEARTBEAT_INTERVAL_MS, BROKER_SESSION_TIMEOUT_MS, Gates
from impl.sim.faults import parse
from impl.sim.scenarios import MIGRATION
from impl.sim.simulator import LOST_RESPONSE, Simulation
from model.actions import (
    BrokerHeartbeat,
    BrokerZkServerCatchesUp,
    BrokerZkServerLags,
    ChangeIbp,
    CrashBroker,
    CrashController,
    DeleteControllerZNodes,
    Deliver,
    DeliverHeartbeat,
    Drop,
    DualWrite,
    DualWriteReplyLost,
    DualWriteSessionExpired,
    ExpireSession,
    HoldHeartbeat,
    KRaftLeaderChange,
    MigrateBrokerToKRaft,
    OpenSession,
    PublishMetadataChange,
    ReconfigureController,
    Redeliver,
    RestartBroker,
    RestartController,
    RollbackBrokerToZk,
    SessionTimeout,
    ShutdownController,
    StartElection,
    StopBroker,
    UpdateFeatures,
    UpdateMetadataVersion,
    ZkOutage,
    ZkRecover,
    ZkServerCatchesUp,
    ZkServerLags,
)
from model.scopes import SCOPES
from model.step import enabled_actions
from properties.differential import Differential, checked_simulation
from properties.regressions import SCRIPTS, A, B, dual_write_scope
from tests.conftest import EXCLUDED, OFFLINE, TWO_PARTITIONS

LATE = 10**12  # a time by which every timer of every node has run out
# What the runner does itself (the network, ZooKeeper, the operator, process lifecycles): no node offers it.
# (PublishMetadataChange: the runner queues a drawn DualWrite's event instead of running it, FaultMix.queue_event;
# DualWriteSessionExpired: the runner fails a drawn DualWrite, FaultMix.fail_write; DualWriteReplyLost: the runner
# loses a drawn DualWrite's reply, FaultMix.lose_reply.)
ENVIRONMENT = (Deliver, Redeliver, Drop, ZkOutage, ZkRecover, ZkServerLags, ZkServerCatchesUp, BrokerZkServerLags,
               BrokerZkServerCatchesUp, PublishMetadataChange, DualWriteSessionExpired, DualWriteReplyLost,
               ExpireSession, DeleteControllerZNodes, CrashBroker, CrashController, StopBroker, ShutdownController,
               RestartBroker, RestartController, ChangeIbp, MigrateBrokerToKRaft, RollbackBrokerToZk,
               ReconfigureController, DeliverHeartbeat)
# An administrator's requests, with arguments the scope picks: the client's choice, not the node's.
CLIENT_REQUESTS = (UpdateFeatures, UpdateMetadataVersion)
ALL_SCOPES = {**SCOPES, TWO_PARTITIONS.name: TWO_PARTITIONS, OFFLINE.name: OFFLINE, EXCLUDED.name: EXCLUDED}
WALK_SEEDS = 12
WALK_STEPS = 60


def _unoffered(diff: Differential, action) -> str | None:
    """Apply ``action``; if a node took it without having offered it (at LATE), say so. A lost response is its
    request, offered by the broker, whose answer the runner withholds; a held heartbeat the broker's heartbeat, which
    the runner keeps (its late delivery is the runner's)."""
    offered = None
    # A session lapsing alone is the controller's clock, read when a new incarnation's registration arrives
    # (ControllerNode._lapse_on_registration): no node offers it, the registration it precedes is offered.
    lapse = isinstance(action, SessionTimeout) and not action.fence
    if not isinstance(action, ENVIRONMENT + CLIENT_REQUESTS) and not lapse:
        offered = diff.cluster.node(Cluster.actor(action)).offers(LATE)
    request = next((kind(action.broker, action.controller) for kind, lost in LOST_RESPONSE.items()
                    if isinstance(action, lost)), action)
    if isinstance(action, HoldHeartbeat):  # a held heartbeat is the broker's heartbeat, kept in the network
        request = BrokerHeartbeat(action.broker, action.controller)
    traces = diff.apply(action)
    if offered is not None and action in traces and request not in offered:
        return f"{action} was taken but not offered; offers: {offered}"
    return None


def _walk(scope, seed: int, steps: int) -> None:
    rng = random.Random(seed)
    diff = Differential(scope, seed=seed)
    for _ in range(steps):
        actions = enabled_actions(diff.model, scope)
        if not actions:
            return
        missing = _unoffered(diff, rng.choice(actions))
        if missing:
            pytest.fail(f"{scope.name} seed {seed}, step {len(diff.steps)}: {missing}\nsteps: {diff.steps[-12:]}")


@pytest.mark.parametrize("name", sorted(ALL_SCOPES))
def test_offers_hold_every_step_a_node_takes_on_walks(name):
    """The simulator can reach every step the model allows: a node offers all it would take."""
    for seed in range(WALK_SEEDS):
        _walk(ALL_SCOPES[name], seed, WALK_STEPS)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ALL_SCOPES))
def test_offers_hold_every_step_a_node_takes_on_many_walks(name):
    for seed in range(WALK_SEEDS, 200):
        _walk(ALL_SCOPES[name], seed, WALK_STEPS)


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_offers_hold_every_step_of_the_scripted_races(name):
    """The races only scripts reach (a deposed leader's dual write, ...) are offered too."""
    make_scope, script = SCRIPTS[name]
    diff = Differential(make_scope())
    for action in script:
        assert _unoffered(diff, action) is None


def test_gates_open_at_their_time_and_report_the_earliest_closed():
    gates = Gates()
    gates.close("a", 100)
    gates.close("b", 50)
    gates.begin()
    assert not gates.open("a", 10) and not gates.open("b", 10) and gates.open("c", 10)
    assert gates.deadline() == 50
    gates.begin()
    assert gates.open("b", 50) and not gates.open("a", 50) and gates.deadline() == 100


# ---- the timers -------------------------------------------------------------------------------

def test_zk_broker_offers_a_new_session_only_when_it_has_none_or_its_ping_is_due():
    """KIP-380 §Broker Registration: a broker with a live session does not open another at every step;
    the ZooKeeper client's ping (a third of the session timeout) is when it would notice an expiry."""
    diff = Differential(SCOPES["election"])
    broker = diff.cluster.brokers[1]
    assert OpenSession(1) in broker.offers(LATE)
    assert OpenSession(1) not in broker.offers(0)  # it opened its session during the warm-up, at time 0
    assert OpenSession(1) in broker.offers(2_000)


def test_kraft_broker_heartbeats_once_per_interval():
    """KIP-500 §Broker States: a registered broker heartbeats every broker.heartbeat.interval.ms."""
    diff = Differential(dual_write_scope())
    client = diff.cluster.brokers[0].kraft
    assert any(isinstance(a, BrokerHeartbeat) for a in client.offers(diff.cluster.brokers[0], LATE))
    diff.cluster.now = 10_000
    diff.apply(BrokerHeartbeat(0, A))  # answered (nothing changed: a stutter), so the next one waits
    offers = client.offers(diff.cluster.brokers[0], 10_000 + BROKER_HEARTBEAT_INTERVAL_MS - 1)
    assert not any(isinstance(a, BrokerHeartbeat) for a in offers)
    offers = client.offers(diff.cluster.brokers[0], 10_000 + BROKER_HEARTBEAT_INTERVAL_MS)
    assert BrokerHeartbeat(0, A) in offers and BrokerHeartbeat(0, B) not in offers  # A answered: it is active


def test_controller_offers_session_timeout_only_after_the_broker_went_quiet():
    """KIP-500 §Broker States: the active controller fences a broker broker.session.timeout.ms after
    its last heartbeat, not before."""
    diff = Differential(dual_write_scope())
    controller = diff.cluster.controllers[A]
    diff.cluster.now = 50_000
    diff.apply(BrokerHeartbeat(0, A))
    assert SessionTimeout(0, A) not in controller.offers(50_000 + BROKER_SESSION_TIMEOUT_MS - 1)
    assert SessionTimeout(0, A) in controller.offers(50_000 + BROKER_SESSION_TIMEOUT_MS)


def test_follower_offers_an_election_only_after_the_fetch_timeout():
    """KIP-595: a follower that hears from its leader does not start elections; after the fetch
    timeout (plus its fixed jitter) without hearing from it, it does."""
    diff = Differential(dual_write_scope())
    follower = diff.cluster.controllers[B]
    assert StartElection(B) not in follower.offers(0)
    deadline = follower.next_deadline()
    assert deadline is not None and StartElection(B) in follower.offers(LATE)
    assert StartElection(B) not in diff.cluster.controllers[A].offers(LATE)  # a leader never does


def test_driver_offers_only_the_event_its_state_runs():
    """KIP-866 §Controller Migration: the dual-writing driver offers a dual write only once there is a
    committed record ZooKeeper lacks; a deposed leader's driver offers its KRaftLeaderEvent, and
    until it has run it, it still believes it leads and may dual-write (the epoch check fences it)."""
    diff = Differential(dual_write_scope())
    leader = diff.cluster.controllers[A]
    assert DualWrite(A) not in leader.offers(LATE)
    from model.actions import AlterConfigs, Fetch, RequestVote

    diff.apply(AlterConfigs(A))
    diff.apply(Fetch(B, A))
    assert DualWrite(A) in leader.offers(LATE)
    for action in (StartElection(B), RequestVote(B, A)):
        diff.apply(action)
    offers = leader.offers(LATE)
    assert KRaftLeaderChange(A) in offers and DualWrite(A) in offers


# ---- the simulator ---------------------------------------------------------------------------------

def test_simulation_finalizes_the_migration_without_faults():
    """With offers that say what each node would do, a quiet run migrates and finalizes quickly."""
    sim = Simulation(MIGRATION, 0, parse("none"))
    outcome = sim.run(2_500)
    assert outcome.progress == "finalized"


def test_simulation_quiet_cluster_waits_for_its_timers():
    """A finalized cluster with nothing due jumps the clock to the next timer instead of stopping."""
    sim = Simulation(MIGRATION, 0, parse("none"))
    sim.run(3_000)
    assert sim.events == 3_000
    assert sim.cluster.now > 3_000 * 20 / 2  # faster than the ticks alone


def test_simulation_holds_a_step_a_partition_would_split_until_it_heals():
    """The model has no partitions: a Fetch that may commit a new leader's LeaderChange, and so activate it
    (its activation asks every voter: KIP-866 §Finalizing the Migration), or a SessionTimeout that tells
    the broker, waits for a cut to heal."""
    from model.actions import BecomeLeader, Fetch, RequestVote, StartElection

    sim = Simulation(MIGRATION, 0, parse("none"))
    for action in (StartElection(3000), RequestVote(3000, 3002), BecomeLeader(3000)):
        assert sim.cluster.perform(action) == [action]
    assert sim.cluster.controllers[3000].awaiting_activation()
    sim.cuts[frozenset((3000, 3001))] = 10**9
    assert not sim._whole(Fetch(3002, 3000)) and not sim._whole(Fetch(3001, 3000))
    assert sim._whole(Fetch(3000, 3002)) and sim._whole(SessionTimeout(1, 3001))  # 3002 does not lead
    sim.cuts[frozenset((3001, 1))] = 10**9
    assert not sim._whole(SessionTimeout(1, 3001)) and sim._whole(SessionTimeout(2, 3001))
    sim.cluster.now = 10**9  # healed
    assert sim._whole(Fetch(3002, 3000)) and sim._whole(SessionTimeout(1, 3001))
    assert sim.cluster.perform(Fetch(3002, 3000)) == [Fetch(3002, 3000)]
    assert sim.cluster.controllers[3000].is_active() and sim._whole(Fetch(3001, 3000))  # active: nothing to ask


def test_simulation_seed_1003_finalizes_through_a_partition_in_agreement():
    """Pinned (bench.sim --check, faults all): a leader cut from a voter activated while the model,
    which has no partitions, saw every voter finalizing; the step now waits for the heal."""
    sim = checked_simulation(MIGRATION, 1003, parse("all"))
    outcome = sim.run(700)
    assert outcome.ok, outcome.disagreement
