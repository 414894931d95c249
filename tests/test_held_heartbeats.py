"""A broker's heartbeat held in the network and delivered late (issue #17 §1).

A BrokerHeartbeat can wait in the network while its sender moves on: the broker's request times out, it heartbeats
again, its process exits and starts again and registers with a new broker epoch, and only then does the held
request reach the controller, with the old epoch. In the model that is two steps (``HoldHeartbeat``, spending
``Budget.held_requests``, 0 in every other scope, and ``DeliverHeartbeat``); in the implementation the cluster keeps
the broker's RPC (the broker sees a timeout) and runs the controller's handler on it later. What must hold: a
heartbeat of an earlier generation is STALE_BROKER_EPOCH and writes nothing (KIP-380 §Controller Rejects
ControlledShutdownRequest Sent from Former Generations; checkBrokerEpoch, reference §3.2).
"""

from __future__ import annotations

import pytest

from impl.bugs import ImplBug
from impl.protocol import Unreachable
from model.actions import (
    BeginControlledShutdown,
    BrokerHeartbeat,
    DeliverHeartbeat,
    DualWrite,
    FetchMetadata,
    HoldHeartbeat,
    RegisterWithKRaft,
    RestartBroker,
)
from model.bugs import Bug, Variant
from model.invariants import violations, witnessed
from model.kraft import BrokerRegistrationChangeRecord, ControllerId
from model.kraft_quorum import ctrl, own_image
from model.migration import Profile
from model.outcome import Verdict
from model.scopes import SCOPES, initial_state
from model.step import outcome, step
from model.symmetry import rename_controllers
from model.types import BrokerId, Errors
from properties.differential import Differential, Disagreement
from tests.conftest import appended, run

B0, C0 = BrokerId(0), ControllerId(3000)
SCOPE = "held-heartbeats"
# The broker begins a controlled shutdown and is moved out of leadership; a heartbeat asking to shut down (its
# epoch, WantShutDown) is held; the next is answered SHUTDOWN_NOW and the process exits; it starts again, registers
# with a new epoch, catches up and is unfenced. (A dual write keeps ZooKeeper's write-behind lag under its bound.)
HELD = (BeginControlledShutdown(B0), BrokerHeartbeat(B0, C0), HoldHeartbeat(B0, C0), BrokerHeartbeat(B0, C0))
REBORN = (RestartBroker(B0), DualWrite(C0), RegisterWithKRaft(B0, C0), FetchMetadata(B0, C0), BrokerHeartbeat(B0, C0))


def reborn():
    return run(initial_state(SCOPES[SCOPE]), *HELD, *REBORN)


def test_held_heartbeat_leaves_the_broker_as_it_was_and_is_in_flight():
    """The broker's request timed out: it learned nothing (its next heartbeat is the one answered); the request
    stays in the network with the epoch and WantShutDown it was sent with, and the budget is spent."""
    state = run(initial_state(SCOPES[SCOPE]), *HELD[:2])
    held = run(state, HoldHeartbeat(B0, C0))
    assert held.brokers == state.brokers and held.controllers == state.controllers
    (request,) = held.held
    assert (request.broker_epoch, request.want_shutdown) == (state.brokers[0].kraft_epoch, True)
    assert held.budget.held_requests == 0 and step(held, HoldHeartbeat(B0, C0)) is None


def test_heartbeat_of_an_earlier_generation_delivered_after_the_new_registration_is_stale():
    """KIP-380's former generations on KRaft: the old process's WantShutDown reaches the controller after the new
    incarnation registered and was unfenced; it is STALE_BROKER_EPOCH, writes nothing, and leaves the network."""
    state = reborn()
    (request,) = state.held
    reg = own_image(ctrl(state, C0)).registration(B0)
    assert request.broker_epoch < reg.epoch and not reg.fenced
    out = outcome(state, DeliverHeartbeat(request))
    assert (out.verdict, out.error) == (Verdict.DELIVERED_REFUSED, Errors.STALE_BROKER_EPOCH)
    assert appended(state, out.state, C0) == [] and out.state.held == frozenset()
    assert violations(state, DeliverHeartbeat(request), out.state) == []
    assert "StaleHeartbeatArrives" in witnessed(state, DeliverHeartbeat(request), out.state)


def test_heartbeat_of_the_current_generation_delivered_late_is_served_and_its_answer_dropped():
    """A held heartbeat whose epoch is still the registration's is an ordinary heartbeat, only late: here the
    controlled shutdown's second step (fence, shut down) is written; the broker, whose own request was answered
    already, is not told."""
    state = run(initial_state(SCOPES[SCOPE]), BeginControlledShutdown(B0), BrokerHeartbeat(B0, C0),
                HoldHeartbeat(B0, C0), DualWrite(C0))
    (request,) = state.held
    after = run(state, DeliverHeartbeat(request))
    assert appended(state, after, C0)[0] == BrokerRegistrationChangeRecord(B0, request.broker_epoch, True)
    assert after.brokers == state.brokers and after.held == frozenset()


def test_a_heartbeat_is_held_only_with_the_budget_and_delivered_only_once():
    assert all(s.budget.held_requests == 0 for name, s in SCOPES.items() if name != SCOPE)
    state = reborn()
    (request,) = state.held
    after = run(state, DeliverHeartbeat(request))
    assert step(after, DeliverHeartbeat(request)) is None


def test_model_seeded_bug_serves_the_stale_heartbeat_and_breaks_its_property():
    """With the controller serving an older epoch, the old process's WantShutDown fences the new incarnation."""
    state = reborn()
    (request,) = state.held
    variant = Variant(frozenset({Bug.HEARTBEAT_ACCEPTS_OLDER_BROKER_EPOCH}))
    after = step(state, DeliverHeartbeat(request), variant)
    assert after is not None and appended(state, after, C0)
    assert {"StaleHeartbeatWritesNothing", "HeartbeatingBrokerNeverFenced"} <= set(
        violations(state, DeliverHeartbeat(request), after))


def test_held_heartbeats_are_renamed_with_their_controller():
    """Symmetry reduction renames a held heartbeat's controller as it renames the controllers themselves."""
    state = reborn()
    renamed = rename_controllers(state.replace(controllers=()), (1, 0))
    assert {r.controller for r in renamed.held} == {ControllerId(3001)}


# ---- the implementation -------------------------------------------------------------------------------------


def differential(bugs: frozenset[ImplBug] = frozenset()) -> Differential:
    diff = Differential(SCOPES[SCOPE], bugs)
    for action in HELD + REBORN:
        assert diff.apply(action) == [action]
    return diff


def test_impl_held_heartbeat_is_a_timeout_to_the_broker_and_waits_in_the_cluster():
    diff = Differential(SCOPES[SCOPE])
    for action in HELD[:2]:
        diff.apply(action)
    seen = []
    kraft = diff.cluster.brokers[0].kraft
    original = kraft._unanswered
    kraft._unanswered = lambda kind, c, now, response=None: (seen.append(response), original(kind, c, now, response))
    assert diff.apply(HoldHeartbeat(B0, C0)) == [HoldHeartbeat(B0, C0)]
    assert seen == [Unreachable(C0, timed_out=True)]
    assert diff.cluster.held_requests() == list(diff.model.held)


def test_impl_late_heartbeat_of_an_earlier_generation_is_refused_and_the_buggy_controller_serves_it():
    """The correct controller answers STALE_BROKER_EPOCH and writes nothing (the model agrees); the seeded bug
    impl_heartbeat_accepts_older_broker_epoch serves it, and the differential run catches it there."""
    diff = differential()
    answers = []
    diff.cluster.on_rpc = lambda now, src, dest, request, response: answers.append(response)
    (request,) = diff.model.held
    assert diff.apply(DeliverHeartbeat(request)) == [DeliverHeartbeat(request)]
    assert [a.error.name for a in answers] == ["STALE_BROKER_EPOCH"]
    buggy = differential(frozenset({ImplBug.HEARTBEAT_ACCEPTS_OLDER_BROKER_EPOCH}))
    with pytest.raises(Disagreement, match="StaleHeartbeatWritesNothing"):
        buggy.apply(DeliverHeartbeat(request))


# ---- the simulator and the campaign -------------------------------------------------------------------------

HELD_MIX = "all+held"
CAUGHT_SEED = 4  # the first of Plan(faults=HELD_MIX, mutant=...)'s seeds to catch the impl bug


def test_fault_mix_held_holds_heartbeats_and_is_a_world_of_the_default_campaign():
    from impl.sim.faults import parse
    from impl.sim.scenarios import WORLDS

    assert parse("held").hold_heartbeat > 0 and parse(HELD_MIX).crash > 0 and "held" in WORLDS
    assert all(parse(name).hold_heartbeat == 0 for name in ("none", "network", "process", "zookeeper", "all",
                                                             "responses"))
    assert parse("swarm+held").hold_heartbeat == parse("held").hold_heartbeat


def test_simulation_with_held_heartbeats_replays_byte_for_byte():
    """A seed whose heartbeats are held and delivered late writes the same trace twice, checked against the model
    all along (each late delivery is the model's DeliverHeartbeat, with the epoch it was sent with)."""
    from impl.sim.faults import parse
    from impl.sim.scenarios import MIGRATION
    from properties.differential import checked_simulation

    def trace() -> tuple[str, dict[str, int]]:
        sim = checked_simulation(MIGRATION, CAUGHT_SEED, parse(HELD_MIX))
        outcome = sim.run(800)
        assert outcome.ok, outcome
        return sim.trace_text(), sim.counts

    first, counts = trace()
    assert counts.get("HoldHeartbeat", 0) > 0 and counts.get("DeliverHeartbeat", 0) > 0
    assert first == trace()[0]


def test_campaign_with_held_heartbeats_catches_the_impl_bug_where_the_correct_one_agrees():
    """The seeded bug impl_heartbeat_accepts_older_broker_epoch, which synchronous heartbeats never showed a
    campaign: a held heartbeat of an earlier generation reaches the controller and is served."""
    from properties.plan import Plan
    from properties.runs import run_seed

    bug = "impl_heartbeat_accepts_older_broker_epoch"
    run = run_seed(Plan(faults=HELD_MIX, mutant=bug), CAUGHT_SEED, coverage=False)
    assert run.disagreement is not None and "DeliverHeartbeat" in str(run.disagreement)
    assert run_seed(Plan(faults=HELD_MIX), CAUGHT_SEED, coverage=False).disagreement is None


@pytest.mark.slow  # the whole graph of the scope under each profile, twice (about 40 s)
@pytest.mark.parametrize("profile", list(Profile))
def test_no_liveness_verdict_rests_on_a_held_heartbeat_arriving(profile):
    """A held heartbeat is never lost for good in the model (``DeliverHeartbeat`` is fair), where a network may lose
    it. Checked with its delivery unfair, as a lost one would be, every eventually-property of the scope's complete
    graph has the verdict it has with it fair (docs/not-modeled.md, "Responses in flight")."""
    from properties.liveness import check_eventually, eventually_properties, explore_graph, fair_step

    graph = explore_graph(SCOPES["held-heartbeats"], Variant(profile=profile))
    assert graph.complete
    def lost(state, action) -> bool:
        return fair_step(state, action) and not isinstance(action, DeliverHeartbeat)

    for prop in eventually_properties():
        assert check_eventually(graph, prop, lost).result == check_eventually(graph, prop).result, prop.name
