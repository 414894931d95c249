"""Registrations answered once their records commit, as Kafka's controller purgatory does (issue #17).

QuorumController completes a write's future only when the log up to its records commits
(``deferredEventQueue.completeUpTo(highWatermark)``) and fails every waiting one with NOT_CONTROLLER when it
resigns or stops; the broker's BrokerLifecycleManager acts on the answer only then, and asks again after a
NOT_CONTROLLER. With ``Budget.answer_at_commit`` (scope ``purgatory``; fault mix ``purgatory`` in campaigns) the
model keeps the waiting registrations on the active controller (``KRaftController.pending``), settled by the step
that commits them or deposes the controller; the implementation keeps them in the controller's purgatory. What
must hold however it is written: a broker acts only on a committed registration
(``BrokerTakesOnlyCommittedRegistration``, KIP-500 §The Broker State Machine, §The Controller Quorum).
"""

from __future__ import annotations

import pytest

from impl.bugs import ImplBug
from model.actions import (
    BecomeLeader,
    CrashController,
    Fetch,
    RegisterWithKRaft,
    RegistrationResponseLost,
    RequestVote,
    RestartController,
    StartElection,
)
from model.bugs import Bug, Variant
from model.invariants import violations, witnessed
from model.kraft import ControllerId, RegisterBrokerRecord
from model.kraft_quorum import ctrl
from model.scopes import MIGRATING, SCOPES, initial_state
from model.state import PendingAnswer
from model.step import enabled_actions, step
from model.types import UNKNOWN_BROKER_EPOCH, BrokerId
from properties.differential import Differential, Disagreement, walk
from tests.conftest import run, walked_kinds

B0 = BrokerId(0)
C0, C1, C2 = ControllerId(3000), ControllerId(3001), ControllerId(3002)
SCOPE = SCOPES["purgatory"]
BEFORE_COMMIT = Variant(frozenset({Bug.REGISTRATION_ANSWERED_BEFORE_COMMIT}))


def registered_on_the_leader(scope=SCOPE, variant: Variant = Variant()):
    """The ZK broker (migration configs set) registers with the leader of the warm quorum."""
    return run(initial_state(scope), RegisterWithKRaft(B0, C0), variant=variant)


def test_registration_waits_for_its_record_to_commit_and_is_answered_by_the_fetch_that_commits_it():
    """QuorumController's deferred event queue: the record is appended, the broker learns nothing; the follower's
    Fetch advances the high watermark past it and the broker takes its epoch in that step."""
    state = registered_on_the_leader()
    leader = ctrl(state, C0)
    (rec,) = [e.record for e in leader.log[leader.high_watermark:] if isinstance(e.record, RegisterBrokerRecord)]
    assert leader.pending == (PendingAnswer(B0, state.brokers[0].incarnation, rec.epoch, len(leader.log)),)
    assert state.brokers[0].kraft_epoch == UNKNOWN_BROKER_EPOCH
    assert RegisterWithKRaft(B0, C0) not in enabled_actions(state, SCOPE)  # its request is in flight
    committed = step(state, Fetch(C1, C0))
    assert committed is not None and ctrl(committed, C0).pending == ()
    assert committed.brokers[0].kraft_epoch == rec.epoch
    assert "RegistrationAnsweredAtCommit" in witnessed(state, Fetch(C1, C0), committed)


def test_leader_crash_fails_the_waiting_registration_and_the_broker_asks_the_next_leader():
    """failAll(NOT_CONTROLLER) on the way out: the answer never comes, the broker holds no epoch and registers
    again with whoever leads next (here the same controller, restarted: with 2 voters it must win, and its new
    epoch's commit commits the registration too, so the retry, the same incarnation, gets that epoch at once)."""
    first = registered_on_the_leader()
    epoch = ctrl(first, C0).pending[0].epoch
    state = run(first, CrashController(C0))
    assert all(c.pending == () for c in state.controllers) and state.brokers[0].kraft_epoch == UNKNOWN_BROKER_EPOCH
    state = run(state, RestartController(C0), StartElection(C0), RequestVote(C0, C1), BecomeLeader(C0), Fetch(C1, C0))
    again = run(state, RegisterWithKRaft(B0, C0))
    assert ctrl(again, C0).pending == () and again.brokers[0].kraft_epoch == epoch


def test_only_the_scope_purgatory_waits():
    """Every other scope answers at once, as before (the Differs in model.kraft_quorum): pinned counts stay
    (heartbeat-commit answers heartbeats at commit too, tests/test_heartbeat_commit.py)."""
    assert [name for name, s in SCOPES.items() if s.budget.answer_at_commit] == ["purgatory", "heartbeat-commit"]


def test_answering_before_commit_breaks_the_property_at_once():
    """The seeded bug (today's behaviour): the broker takes an epoch whose registration is not committed."""
    before = initial_state(SCOPE)
    after = step(before, RegisterWithKRaft(B0, C0), BEFORE_COMMIT)
    assert after is not None and after.brokers[0].kraft_epoch != UNKNOWN_BROKER_EPOCH
    assert "BrokerTakesOnlyCommittedRegistration" in violations(before, RegisterWithKRaft(B0, C0), after)


def test_answered_before_commit_a_failover_truncates_the_registration_the_broker_acts_on():
    """KIP-500 §The Controller Quorum with 3 voters: the leader crashes with the registration uncommitted, the
    other two elect a leader without it, and the old leader truncates it when it comes back. Answered before
    commit, the broker holds an epoch no log has; answered at commit, it holds none and registers again."""
    three = SCOPE.replace(name="purgatory-3", controllers=(MIGRATING,) * 3)
    failover = (CrashController(C0), StartElection(C1), RequestVote(C1, C2), BecomeLeader(C1), Fetch(C2, C1),
                RestartController(C0), Fetch(C0, C1))
    prefix = (RegisterWithKRaft(B0, C0),)
    buggy = run(initial_state(three), *prefix, *failover, variant=BEFORE_COMMIT)
    epoch = buggy.brokers[0].kraft_epoch
    assert epoch != UNKNOWN_BROKER_EPOCH
    assert not any(isinstance(e.record, RegisterBrokerRecord) and e.record.epoch == epoch
                   for c in buggy.controllers for e in c.log)
    correct = run(initial_state(three), *prefix, *failover)
    assert correct.brokers[0].kraft_epoch == UNKNOWN_BROKER_EPOCH and all(c.pending == () for c in correct.controllers)


def test_a_lost_registration_response_leaves_nothing_waiting():
    """A response lost (its connection gone) is not answered later: the retry is a new request that waits."""
    state = run(initial_state(SCOPE.replace(budget=SCOPE.budget.replace(lost_responses=1))),
                RegistrationResponseLost(B0, C0))
    assert ctrl(state, C0).pending == () and state.brokers[0].kraft_epoch == UNKNOWN_BROKER_EPOCH
    retried = run(state, RegisterWithKRaft(B0, C0))
    assert len(ctrl(retried, C0).pending) == 1 and retried.brokers[0].kraft_epoch == UNKNOWN_BROKER_EPOCH


# ---- the implementation -------------------------------------------------------------------------------------


def test_impl_registration_waits_in_the_controllers_purgatory_and_is_answered_at_commit():
    diff = Differential(SCOPE)
    diff.apply(RegisterWithKRaft(B0, C0))
    assert diff.cluster.controllers[C0].purgatory and diff.cluster.brokers[0].kraft.awaiting == C0
    diff.apply(Fetch(C1, C0))
    assert not diff.cluster.controllers[C0].purgatory and diff.cluster.brokers[0].kraft.kraft_epoch != -1


def test_impl_leader_crash_answers_not_controller_and_the_broker_may_ask_again():
    diff = Differential(SCOPE)
    for action in (RegisterWithKRaft(B0, C0), CrashController(C0)):
        diff.apply(action)
    assert diff.cluster.brokers[0].kraft.awaiting is None and diff.cluster.brokers[0].kraft.kraft_epoch == -1


def test_differential_walks_of_the_purgatory_scope_agree():
    """Seeded walks, plain and swarm: the implementation's purgatory stays the model's pending answers."""
    assert RegisterWithKRaft in walked_kinds(SCOPE, 16, 40)


def test_impl_bug_answering_before_commit_is_caught_by_a_walk():
    with pytest.raises(Disagreement, match="BrokerTakesOnlyCommittedRegistration"):
        walk(SCOPE, 0, 40, bugs=frozenset({ImplBug.REGISTRATION_ANSWERED_BEFORE_COMMIT}))


def test_campaign_mix_purgatory_runs_sim_purgatory_and_its_seed_0_catches_the_shared_bug():
    """``all+purgatory`` runs each seed's drawn cluster as ``sim-purgatory`` (controllers answering at commit); the
    design mistake made by both layers (answered before commit) is caught by BrokerTakesOnlyCommittedRegistration
    on the implementation's own state at seed 0 (of seeds 0-7: 0, 2, 3, 5 and 6; the others draw a quorum of 1,
    where the record commits as it is appended), and the same seed agrees without it."""
    from properties.campaign.options import make_plan
    from properties.runs import run_seed

    plan = make_plan(seeds=1, faults="all+purgatory", mutant="shared_registration_answered_before_commit", out="unused")
    assert plan.scope_of(0).startswith("sim-purgatory@")
    found = run_seed(plan, 0, coverage=False).disagreement
    assert found is not None and found.broken == ["BrokerTakesOnlyCommittedRegistration"]
    assert run_seed(make_plan(seeds=1, faults="all+purgatory", out="unused"), 0, coverage=False).disagreement is None

