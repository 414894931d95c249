"""Heartbeats answered once the log up to them is stable, as Kafka's controller purgatory does (issue #17 §1).

QuorumController.processBrokerHeartbeat is a write event: its future completes once the offset of its last record
(or, with none, the purgatory's highest pending offset) is stable; ``deferredEventQueue.completeUpTo`` runs with
OffsetControlManager.lastStableOffset, which stops at the start of an open transaction. A heartbeat run in
pre-migration (it has RUNS_IN_PREMIGRATION) goes to the unstable queue instead, completed at the Raft commit
(KAFKA-15441, Kafka 3.6+). Both queues fail with NOT_CONTROLLER when the controller renounces.

Scopes ``heartbeat-commit`` (a KRaft broker unfenced by a heartbeat; the leader may crash first) and
``heartbeat-transaction`` (a ZK broker heartbeating while the migration's transaction is open: kip holds it until
the transaction ends, kafka-3.9 answers it at the commit). Model-independent property:
BrokerOnlineOnlyOnceUnfencingCommitted; shared seeded bug ``heartbeat_answered_before_commit``.
"""

from __future__ import annotations

import pytest

from impl.bugs import ImplBug
from model.actions import (
    BecomeZkController,
    BrokerHeartbeat,
    CompleteMigration,
    CrashController,
    DualWrite,
    Fetch,
    FetchMetadata,
    MigrateBrokerToKRaft,
    MigrateMetadata,
    RegisterWithKRaft,
    RequestVote,
    RestartBroker,
    SessionTimeout,
    StartElection,
    StopBroker,
    WaitForControllerQuorum,
    WaitForZkBrokers,
)
from model.bugs import CORRECT, Bug, Variant
from model.invariants import violations, witnessed
from model.kraft import BrokerState, ControllerId, image_of
from model.kraft_quorum import awaits_answer, ctrl, stable_end
from model.migration import Profile
from model.outcome import Verdict
from model.scopes import SCOPES, Scope, initial_state
from model.state import HeartbeatAnswer, PendingAnswer
from model.step import enabled_actions, outcome, step
from model.types import BrokerId
from properties.differential import Differential, Disagreement
from tests.conftest import walked_kinds, with_budget

B0 = BrokerId(0)
C0, C1 = ControllerId(3000), ControllerId(3001)
SCOPE = SCOPES["heartbeat-commit"]
TRANSACTION = SCOPES["heartbeat-transaction"]
BEFORE_COMMIT = Variant(frozenset({Bug.HEARTBEAT_ANSWERED_BEFORE_COMMIT}))
KAFKA_3_9 = Variant(profile=Profile.KAFKA_3_9)
UNFENCED = HeartbeatAnswer(False, False, False)


def drive(state, *actions, variant: Variant = CORRECT):
    """Apply ``actions`` in order; each must be enabled and break nothing."""
    for action in actions:
        after = step(state, action, variant)
        assert after is not None, f"not enabled: {action}"
        assert violations(state, action, after) == [], f"{action} broke {violations(state, action, after)}"
        state = after
    return state


# The ZK broker stops, its session times out, it restarts as a KRaft broker and registers (answered once its
# registration commits) and replays past it: its next heartbeat unfences it (once the dual write has kept
# ZooKeeper's lag within its bound). The shortest path the search finds to the seeded bug.
RESTARTED = (StopBroker(B0), SessionTimeout(B0, C0), MigrateBrokerToKRaft(B0), RestartBroker(B0),
             RegisterWithKRaft(B0, C0), Fetch(C1, C0), DualWrite(C0), FetchMetadata(B0, C0))


def unfencing_sent(variant: Variant = CORRECT, scope: Scope = SCOPE):
    before = drive(initial_state(scope), *RESTARTED, variant=variant)
    assert before.brokers[0].lifecycle is BrokerState.FENCED
    return before, step(before, BrokerHeartbeat(B0, C0), variant)


def test_unfencing_heartbeat_waits_for_its_record_and_the_fetch_that_commits_it_brings_the_broker_online():
    """KIP-500 §Broker States: the controller unfences a caught-up broker; the broker acts on it (Online) only in
    the step whose Fetch commits the BrokerRegistrationChangeRecord, and sends no heartbeat meanwhile."""
    before, state = unfencing_sent()
    leader = ctrl(state, C0)
    b = state.brokers[0]
    assert leader.pending == (PendingAnswer(B0, b.incarnation, b.kraft_epoch, len(leader.log), UNFENCED),)
    assert leader.high_watermark < len(leader.log) and b.lifecycle is BrokerState.FENCED
    assert BrokerHeartbeat(B0, C0) not in enabled_actions(state, SCOPE)  # its heartbeat is in flight
    committed = drive(state, Fetch(C1, C0))
    assert ctrl(committed, C0).pending == () and committed.brokers[0].lifecycle is BrokerState.ONLINE
    assert "UnfencingAnsweredAtCommit" in witnessed(state, Fetch(C1, C0), committed)


def test_leader_crash_fails_the_waiting_heartbeat_with_not_controller_and_the_broker_heartbeats_again():
    """QuorumController.renounce: deferredEventQueue.failAll(NOT_CONTROLLER). The broker stays Fenced and sends its
    heartbeat again once a leader is back (BrokerLifecycleManager retries)."""
    _, state = unfencing_sent(scope=with_budget("heartbeat-commit", controller_crashes=1))
    crashed = drive(state, CrashController(C0))
    assert ctrl(crashed, C0).pending == () and crashed.brokers[0].lifecycle is BrokerState.FENCED
    assert not awaits_answer(crashed, crashed.brokers[0])  # free to heartbeat again, to whoever leads next


def test_answering_before_commit_breaks_the_property_at_once():
    """The seeded bug (the model's behaviour outside this scope): Online on an unfencing no quorum has."""
    before, after = unfencing_sent(BEFORE_COMMIT)
    assert after.brokers[0].lifecycle is BrokerState.ONLINE
    assert image_of(ctrl(after, C0).log, ctrl(after, C0).high_watermark).registration(B0).fenced
    assert "BrokerOnlineOnlyOnceUnfencingCommitted" in violations(before, BrokerHeartbeat(B0, C0), after)


def test_only_the_new_scopes_answer_heartbeats_at_commit():
    """Every other scope answers heartbeats at once, as before (the Differs at model.kraft_quorum): pins stay."""
    waiting = [name for name, s in SCOPES.items() if s.budget.heartbeats_at_commit]
    assert waiting == ["heartbeat-commit", "heartbeat-transaction", "aborted-unfencing"]


# ---- the migration's open transaction -------------------------------------------------------------

TO_FIRST_BATCH = (WaitForControllerQuorum(C0), WaitForZkBrokers(C0), BecomeZkController(C0), BecomeZkController(C0),
                  MigrateMetadata(C0), Fetch(C1, C0))


def first_batch_committed(variant: Variant):
    """``heartbeat-transaction``: the ZK broker registers and is unfenced, the migration's first batch commits."""
    state = initial_state(TRANSACTION, variant.profile)
    state = drive(state, RegisterWithKRaft(B0, C0), Fetch(C1, C0), BrokerHeartbeat(B0, C0), variant=variant)
    assert ctrl(state, C0).pending != ()  # the unfencing waits for its record
    state = drive(state, Fetch(C1, C0), *TO_FIRST_BATCH, variant=variant)
    leader = ctrl(state, C0)
    assert leader.pending == () and leader.high_watermark == len(leader.log)
    assert image_of(leader.log).open_transaction is not None and stable_end(leader) < leader.high_watermark
    return state


def test_kip_holds_a_heartbeat_while_the_migration_transaction_is_open():
    """kip (the deferred event queue's rule: the last stable offset): the heartbeat the broker sends between two
    batches is committed by Raft at once but waits until the transaction ends; its next batch, the end and
    their commit answer it."""
    state = first_batch_committed(CORRECT)
    held = drive(state, BrokerHeartbeat(B0, C0))
    (p,) = ctrl(held, C0).pending
    assert p.heartbeat is not None and p.offset <= ctrl(held, C0).high_watermark
    assert "HeartbeatHeldByOpenTransaction" in witnessed(state, BrokerHeartbeat(B0, C0), held)
    state = drive(held, MigrateMetadata(C0), Fetch(C1, C0), CompleteMigration(C0))
    assert ctrl(state, C0).pending == (p,)  # the end is appended, not committed
    answered = drive(state, Fetch(C1, C0))
    assert ctrl(answered, C0).pending == () and image_of(ctrl(answered, C0).log).open_transaction is None


def test_kafka_3_9_answers_a_heartbeat_in_pre_migration_at_the_raft_commit():
    """KAFKA-15441: a RUNS_IN_PREMIGRATION event run in pre-migration completes at the committed offset, open
    transaction or not (deferredUnstableEventQueue), so the same heartbeat is answered at once."""
    state = first_batch_committed(KAFKA_3_9)
    answered = outcome(state, BrokerHeartbeat(B0, C0), KAFKA_3_9)
    assert answered.verdict is Verdict.UNCHANGED and answered.reason == "unfenced"  # answered at once


def test_failover_between_batches_fails_the_held_heartbeat():
    """A leader change between two batches: the held heartbeat fails with NOT_CONTROLLER once its controller learns
    of the newer epoch (no longer active); the broker may heartbeat again."""
    held = drive(first_batch_committed(CORRECT), BrokerHeartbeat(B0, C0))
    deposed = drive(held, StartElection(C1), RequestVote(C1, C0))
    assert ctrl(deposed, C0).pending == () and not awaits_answer(deposed, deposed.brokers[0])


def test_the_explorer_finds_the_shared_bug_in_the_scope():
    """The search (its clean runs are the manifest's: tests/test_model_clean.py) finds only this property broken,
    at the unfencing heartbeat of the shortest path above."""
    from properties.explore import explore

    found = explore("heartbeat-commit", BEFORE_COMMIT, max_depth=SCOPE.max_depth).violations
    assert set(found) == {"BrokerOnlineOnlyOnceUnfencingCommitted"}
    # The shortest path lets the old session lapse and registers before any fencing record (issue 17 §1), so no
    # dual write of one is needed.
    lapsed_restart = [StopBroker(B0), SessionTimeout(B0, C0, fence=False), MigrateBrokerToKRaft(B0), RestartBroker(B0),
                      RegisterWithKRaft(B0, C0), Fetch(C1, C0), FetchMetadata(B0, C0)]
    assert found["BrokerOnlineOnlyOnceUnfencingCommitted"].actions == [*lapsed_restart, BrokerHeartbeat(B0, C0)]


# ---- the implementation -----------------------------------------------------------------------------

def test_impl_heartbeat_waits_in_the_purgatory_and_is_answered_at_commit():
    diff = Differential(SCOPE)
    for action in (*RESTARTED, BrokerHeartbeat(B0, C0)):
        diff.apply(action)
    assert diff.cluster.controllers[C0].purgatory and diff.cluster.brokers[0].kraft.awaiting_heartbeat == C0
    diff.apply(Fetch(C1, C0))
    assert not diff.cluster.controllers[C0].purgatory
    assert diff.cluster.brokers[0].kraft.lifecycle is BrokerState.ONLINE


def test_impl_holds_a_heartbeat_while_the_migration_transaction_is_open():
    diff = Differential(TRANSACTION)
    for action in (RegisterWithKRaft(B0, C0), Fetch(C1, C0), BrokerHeartbeat(B0, C0), Fetch(C1, C0), *TO_FIRST_BATCH,
                   BrokerHeartbeat(B0, C0)):
        diff.apply(action)
    assert diff.cluster.controllers[C0].purgatory and diff.cluster.brokers[0].kraft.awaiting_heartbeat == C0
    for action in (MigrateMetadata(C0), Fetch(C1, C0), CompleteMigration(C0), Fetch(C1, C0)):
        diff.apply(action)
    assert not diff.cluster.controllers[C0].purgatory and diff.cluster.brokers[0].kraft.awaiting_heartbeat is None


@pytest.mark.parametrize("name", ["heartbeat-commit", "heartbeat-transaction"])
def test_differential_walks_agree(name):
    """Seeded walks, plain and swarm: the implementation's purgatory stays the model's pending answers."""
    assert BrokerHeartbeat in walked_kinds(name, 8, 40)


def test_impl_shared_bug_is_caught_on_the_implementations_state():
    """The design mistake made by both layers: the implementation's broker goes Online on an uncommitted
    unfencing, which BrokerOnlineOnlyOnceUnfencingCommitted sees on the implementation's own state."""
    diff = Differential(SCOPE, bugs=frozenset({ImplBug.HEARTBEAT_ANSWERED_BEFORE_COMMIT}), variant=BEFORE_COMMIT)
    for action in RESTARTED:
        diff.apply(action)
    with pytest.raises(Disagreement, match="the implementation broke BrokerOnlineOnlyOnceUnfencingCommitted"):
        diff.apply(BrokerHeartbeat(B0, C0))


def test_campaign_mix_heartbeat_commit_runs_sim_heartbeat_commit_and_its_seed_0_catches_the_shared_bug():
    """``all+heartbeat-commit`` runs each seed's drawn cluster as ``sim-heartbeat-commit``; the shared bug is caught
    by BrokerOnlineOnlyOnceUnfencingCommitted on the implementation's state at seed 0 (of seeds 0-7: 0, 2, 3, 5
    and 6; the others draw a quorum of 1, where the record commits as it is appended), and the same seed agrees
    without it."""
    from properties.campaign.options import make_plan
    from properties.runs import run_seed

    plan = make_plan(seeds=1, faults="all+heartbeat-commit", mutant="shared_heartbeat_answered_before_commit",
                     out="unused")
    assert plan.scope_of(0).startswith("sim-heartbeat-commit@")
    found = run_seed(plan, 0, coverage=False).disagreement
    assert found is not None and found.broken == ["BrokerOnlineOnlyOnceUnfencingCommitted"]
    assert run_seed(make_plan(seeds=1, faults="all+heartbeat-commit", out="unused"), 0,
                    coverage=False).disagreement is None
