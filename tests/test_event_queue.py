"""The migration driver's event queue: MetadataChangeEvents that run later, maybe stale (scope ``event-queue``).

KRaftMigrationDriver runs every event on one thread, from a queue. A MetadataChangeEvent is queued when the metadata
publisher hands the driver a committed image, carrying that image and the leader and epoch Raft had last reported
(KAFKA-16667, Kafka 3.8); it may run only after Raft has moved on to another leadership. Kafka 3.8+ then drops it
(MetadataChangeEvent.run compares the event's LeaderAndEpoch with the current one); run anyway, it would take
ZooKeeper back to its older image (KIP-866 §Migration State ZNode: /migration says how far ZooKeeper has caught up).
In the model: ``PublishMetadataChange`` and ``RunMetadataChange``, spending ``Budget.queued_events`` (0 in every other
scope); in the implementation: the driver's ``queue``, filled only by the fault mix ``queue``.
"""

from __future__ import annotations

import pytest

from impl.bugs import ImplBug
from impl.sim.faults import parse
from model import zookeeper as zkm
from model.actions import PublishMetadataChange, RunMetadataChange
from model.bugs import Bug, Variant
from model.invariants import violations, witnessed
from model.kraft import ControllerId
from model.migration import MIGRATION, Profile, QueuedEvent
from model.scopes import SCOPES, initial_state
from model.step import candidate_actions, step
from properties.differential import Differential, Disagreement
from properties.regressions import STALE_EVENT
from tests.conftest import run, walked_kinds

A = ControllerId(3000)
SCOPE = "event-queue"
STALE = STALE_EVENT[:-1]  # the event queued under A's leadership, A deposed, the event at the head of the queue
BUG = Variant(frozenset({Bug.STALE_EVENT_RUNS}))


def migration_offset(state) -> int:
    return zkm.get_existing(state.zk, MIGRATION).data.kraft_metadata_offset


def test_scopes_without_the_budget_queue_no_event():
    """Existing scopes' pinned counts do not move: without ``queued_events`` no event is queued or run."""
    for name, scope in SCOPES.items():
        if name != SCOPE:
            assert scope.budget.queued_events == 0
    for name in ("dual-write", "lost-responses", "stale-reads"):
        state = initial_state(SCOPES[name])
        assert not any(isinstance(a, PublishMetadataChange | RunMetadataChange)
                       for a in candidate_actions(state, SCOPES[name]))


def test_queued_event_carries_the_committed_image_and_raft_leadership_and_runs_as_a_dual_write():
    """A MetadataChangeEvent queued in DUAL_WRITE holds the committed image's offset and (epoch, leading); run in the
    same leadership it writes that image to ZooKeeper, /migration to its offset."""
    state = run(initial_state(SCOPES[SCOPE]), *STALE_EVENT[:3])
    c = state.controllers[0]
    assert c.driver.queue == (QueuedEvent(c.high_watermark, c.epoch, True),)
    assert state.budget.queued_events == SCOPES[SCOPE].budget.queued_events - 1
    ran = run(state, RunMetadataChange(A))
    assert ran.controllers[0].driver.queue == () and migration_offset(ran) == c.high_watermark


def test_queued_event_older_than_zookeeper_is_dropped_in_its_own_leadership():
    """Kafka's offset check: an event whose image ZooKeeper already has (a later dual write wrote a newer one) is
    dropped without a write, even though its leadership is current."""
    state = run(initial_state(SCOPES[SCOPE]), *STALE_EVENT[:6])
    after = run(state, RunMetadataChange(A))
    assert after.controllers[0].driver.queue == () and after.zk == state.zk


@pytest.mark.parametrize("profile", list(Profile))
def test_stale_event_is_dropped_under_both_profiles(profile):
    """KAFKA-16667: the event was queued under A's leadership; Raft now reports B's. A's driver has not handled the
    change (still DUAL_WRITE, believing it leads), and the event does nothing: ZooKeeper stays as it was."""
    variant = Variant(profile=profile)
    state = run(initial_state(SCOPES[SCOPE]), *STALE, variant=variant)
    assert state.controllers[0].driver.leader and state.controllers[0].epoch > state.controllers[0].driver.kraft_epoch
    after = step(state, RunMetadataChange(A), variant)
    assert after is not None and after.zk == state.zk and after.controllers[0].driver.queue == ()
    assert violations(state, RunMetadataChange(A), after) == []
    assert "StaleMetadataChangeEventDropped" in witnessed(state, RunMetadataChange(A), after)


def test_stale_event_that_runs_takes_zookeeper_back():
    """The seeded bug stale_event_runs: the stale event dual-writes its older image under A's claim; /migration's
    offset goes back and MigrationOffsetNeverGoesBack breaks. Harmless while the event is current (no election)."""
    state = run(initial_state(SCOPES[SCOPE]), *STALE, variant=BUG)
    after = step(state, RunMetadataChange(A), BUG)
    assert after is not None and migration_offset(after) < migration_offset(state)
    assert "MigrationOffsetNeverGoesBack" in violations(state, RunMetadataChange(A), after)
    current = run(initial_state(SCOPES[SCOPE]), *STALE_EVENT[:6], variant=BUG)
    after = step(current, RunMetadataChange(A), BUG)
    assert after is not None and violations(current, RunMetadataChange(A), after) == []


def test_the_budget_and_the_bound_limit_the_queue():
    """Queueing spends the budget; the same event is not queued twice; an empty queue runs nothing."""
    state = run(initial_state(SCOPES[SCOPE]), *STALE_EVENT[:3])
    assert step(state, RunMetadataChange(A)) is not None
    assert step(run(state, RunMetadataChange(A)), RunMetadataChange(A)) is None
    spent = state.replace(budget=state.budget.replace(queued_events=0))
    assert step(run(spent, *STALE_EVENT[3:5]), PublishMetadataChange(A)) is None


# ---- the implementation -------------------------------------------------------------------------------------


def test_impl_stale_event_is_dropped_and_the_model_agrees():
    """The script through the differential checker: the implementation's driver queues, is deposed and drops the
    stale event, step for step with the model."""
    diff = Differential(SCOPES[SCOPE])
    for action in STALE_EVENT:
        assert diff.apply(action) == [action]
    assert diff.cluster.controllers[A].driver.queue == []


def test_impl_seeded_bug_runs_the_stale_event_and_is_caught():
    """impl_stale_event_runs: the implementation writes the old image; the abstraction differs from the model and
    MigrationOffsetNeverGoesBack breaks on the implementation's own state."""
    diff = Differential(SCOPES[SCOPE], bugs=frozenset({ImplBug.STALE_EVENT_RUNS}))
    for action in STALE:
        diff.apply(action)
    with pytest.raises(Disagreement) as caught:
        diff.apply(STALE_EVENT[-1])
    assert "MigrationOffsetNeverGoesBack" in caught.value.broken


def test_differential_walks_with_queued_events_agree():
    """Seeded walks of the scope, plain and swarm: the implementation stays the model's, and events are queued and
    run."""
    assert {PublishMetadataChange, RunMetadataChange} <= walked_kinds(SCOPE, 16, 60)


def test_fault_mix_queue_is_named_and_off_elsewhere():
    """``all+queue`` queues every drawn DualWrite's event (when none waits); ``all`` and swarm's reweighing leave it
    off, so the other mixes' runs stay as they were."""
    assert parse("all+queue").queue_event == 1.0
    assert parse("all").queue_event == 0.0 and parse("swarm").queue_event == 0.0


def test_queued_events_let_a_campaign_catch_the_stale_event_that_runs():
    """A queued MetadataChangeEvent held back past a leadership change (scope event-queue's seeded bug, in the
    implementation): seed 22 of ``sim-migration`` under ``all+queue`` catches it (the first seed that does; its drawn
    world, ``held``, joins the mix: seed 68 was the first before that world was drawn): the stale event's run writes
    /migration where the model's driver, which drops it, writes nothing; the same seed with no event queued does not,
    and the correct implementation agrees with the model there."""
    from properties.campaign.options import make_plan
    from properties.runs import run_seed

    mutant = ImplBug.STALE_EVENT_RUNS.value
    caught = run_seed(make_plan(seeds=23, faults="all+queue", mutant=mutant, out="unused"), 22, coverage=False)
    assert caught.disagreement is not None and "after RunMetadataChange" in str(caught.disagreement)
    assert "zk[/migration]" in str(caught.disagreement)
    unqueued = make_plan(seeds=23, faults="all+queue,queue_event=0", mutant=mutant, out="unused")
    assert run_seed(unqueued, 22, coverage=False).disagreement is None
    correct = make_plan(seeds=23, faults="all+queue", out="unused")
    assert run_seed(correct, 22, coverage=False).disagreement is None

