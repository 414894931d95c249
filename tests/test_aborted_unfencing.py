"""A failover that takes back an unfencing (issue #17 §4-5; docs/guide/real-kafka.md, Findings).

Kafka 3.6 to 3.9 (met on 3.6.2, 3.7.2, 3.8.1 and 3.9.2): a migrating ZK broker's unfencing appended inside the
migration's metadata transaction, and the controller killed before the transaction ends. The next active controller
fills its BrokerHeartbeatManager from the registrations as replayed (the unfencing included), then writes the
AbortTransactionRecord, which reverts the registrations but not the manager: the manager counts the broker unfenced,
its heartbeats write nothing, and KRaft's image keeps it fenced for good. kip aborts every effect of the transaction,
so the next heartbeat unfences it again.

Scope ``aborted-unfencing`` (one controller killed and restarted, as the real run had it); the model-independent
goal MigratingZkBrokerEventuallyUnfenced; the seeded bug ``heartbeat_manager_survives_abort`` puts Kafka's behaviour
into kip (tests/test_seeded_bugs.py finds its lasso in the whole scope). Also here: a quorum whose one election a
longer log refused is no longer left without a leader for good (``election_heals``), which had failed goals in
scopes with two voters (purgatory's MigrationReachesDualWriteWithoutFaults).
"""

from __future__ import annotations

from model.actions import (
    BrokerHeartbeat,
    CrashController,
    Fetch,
    RecoverMigrationState,
    RegisterWithKRaft,
    RequestVote,
    RestartController,
    StartElection,
)
from model.bugs import CORRECT, Variant
from model.invariants import BY_NAME
from model.kraft import AbortTransactionRecord, BrokerRegistrationChangeRecord, ControllerId
from model.kraft_invariants import committed_image
from model.kraft_quorum import append, ctrl, election_heals
from model.migration import Profile
from model.scopes import SCOPES, initial_state
from model.step import step
from model.types import BrokerId
from properties.liveness import HOLDS, VIOLATED, check_liveness, replay_lasso

B0 = BrokerId(0)
C0, C1 = ControllerId(3000), ControllerId(3001)
# the scope without its session timeout, which only kip needs to reach the bug (kip begins the migration once the
# broker is unfenced: the timeout fences it in pre-migration, so that its next unfencing falls in the transaction);
# the whole scope's graph is seven times larger under kafka-3.9 (tests/test_seeded_bugs.py searches it under kip)
SCOPE = SCOPES["aborted-unfencing"].replace(name="aborted-unfencing-without-timeouts",
                                             budget=SCOPES["aborted-unfencing"].budget.replace(timeouts=0))
GOAL = "MigratingZkBrokerEventuallyUnfenced"
KAFKA_3_9 = Variant(profile=Profile.KAFKA_3_9)
# Kafka 3.9 strands a migration whose leader died between committing it and writing /migration (model.kraft_migration,
# _wait_for_controller_quorum): the scope's crash reaches that too
STRANDED = {"MigrationReachesDualWriteWithoutFaults", "ActiveDriverNeverStaysInactive"}


def _violated(variant: Variant) -> dict:
    result = check_liveness(SCOPE, variant)
    assert result.complete
    return {v.name: v for v in result.verdicts if v.result == VIOLATED}


def test_kip_unfences_again_after_the_abort():
    """KIP-866 §Initial Data Migration: the failover aborts the transaction, every effect of it; the broker's next
    heartbeat unfences it again, so every goal holds on the complete graph."""
    result = check_liveness(SCOPE)
    assert result.complete and result.distinct_states > 1000
    assert {v.name: v.result for v in result.verdicts}[GOAL] == HOLDS
    assert not _violated(CORRECT)


def test_kafka_39_leaves_the_broker_fenced_for_good_and_the_lasso_replays():
    """kafka-3.9: the heartbeat manager keeps the unfencing the abort took back; the lasso runs a heartbeat inside the
    migration's transaction, the crash, the restart's abort, and ends with the broker heartbeating, fenced."""
    violated = _violated(KAFKA_3_9)
    assert set(violated) == STRANDED | {GOAL}
    lasso = violated[GOAL].lasso
    assert replay_lasso(SCOPE, KAFKA_3_9, lasso, BY_NAME[GOAL]).ok
    actions = list(lasso.prefix) + list(lasso.loop)
    crash = actions.index(CrashController(C0))
    assert BrokerHeartbeat(B0, C0) in actions[:crash]
    state = initial_state(SCOPE)
    for action in lasso.prefix:
        state = step(state, action, KAFKA_3_9)
    c = ctrl(state, C0)
    assert any(isinstance(e.record, AbortTransactionRecord) for e in c.log)
    assert c.stale_fencing == {B0} and committed_image(state).registration(B0).fenced
    assert step(state, BrokerHeartbeat(B0, C0), KAFKA_3_9) is None  # answered unfenced, nothing written


def test_a_registration_change_sets_the_heartbeat_manager_right():
    """Replaying the broker's next registration change registers it with the manager afresh (ClusterControlManager's
    replay): a session timeout's fencing, say, ends the stale view."""
    c = ctrl(initial_state(SCOPE), C0).replace(stale_fencing=frozenset({B0}))
    state = initial_state(SCOPE).replace(controllers=(c,))
    after = append(state, c, [BrokerRegistrationChangeRecord(B0, 3, True)], CORRECT)
    assert ctrl(after, C0).stale_fencing == frozenset()


def test_a_voter_whose_log_is_ahead_stands_for_free_once_the_candidate_lost():
    """purgatory: the leader crashes after the broker's heartbeat reached its log alone; the other voter stands (a
    free election: no leader), and the restarted controller, whose log is longer, refuses it. Raft's election
    timeout lets that voter stand next and win; the model's free election does the same, and only for it: the
    candidate that lost would pay the budget."""
    scope = SCOPES["purgatory"]
    state = initial_state(scope)
    for action in (RegisterWithKRaft(B0, C0), Fetch(C1, C0), BrokerHeartbeat(B0, C0), CrashController(C0),
                   RestartController(C0), RecoverMigrationState(C0), StartElection(C1), RequestVote(C1, C0)):
        state = step(state, action)
        assert state is not None, action
    assert ctrl(state, C1).votes == {C1} and len(ctrl(state, C0).log) > len(ctrl(state, C1).log)
    assert election_heals(state, C0) and not election_heals(state, C1)
    stood = step(state, StartElection(C0))
    assert stood is not None and stood.budget == state.budget
    result = check_liveness(scope)
    assert result.complete and all(v.result == HOLDS for v in result.verdicts)
