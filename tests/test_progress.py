"""Progress in campaigns (properties/progress.py): once a run's faults stop, its goals must be met within a bound.

Issue 17 §3 "Progress": a campaign checks liveness; once its faults stop, each run must make the
progress its runbook allows within a bound, and a run that does not is a violation, shrunk and
replayable like any other. The goals are the registry's EVENTUALLY properties, the ones the
explorer's liveness check states on the state graph (KIP-866 §Controller Migration, §Controller
Crashes; KIP-500 §Broker States; KIP-380 §Broker Registration in Zookeeper). Each goal fires on a
seeded implementation bug that stalls it (``kraftcheck mutants`` finds each: test_differential.py)
and never on the correct implementation across the default campaign's seeds.
"""

from dataclasses import replace

import pytest

from impl.bugs import IMPL_SEEDED_BUGS
from model.registry import Kind, Property
from properties.liveness import eventually_properties
from properties.plan import Plan
from properties.progress import KAFKA_3_9_ONLY_GOALS, Goal, ProgressMonitor, Stall, goal_of, progress_goals
from properties.runs import run_seed
from properties.shrink import replay_record, replay_trace, shrink_violation, signature_of, trace_for
from properties.steering import aims_for
from properties.traces import load_trace, save_trace


def _goal(name: str, bound_ms: int, when, goal) -> Goal:
    return Goal(Property(name, Kind.EVENTUALLY, "a test goal", "none", "test", goal, when), bound_ms)


def test_progress_goals_are_the_liveness_checks_eventually_properties():
    """One definition: the campaign's goals are the very Property records the explorer's liveness check reads."""
    goals = progress_goals()
    assert [g.prop for g in goals] == [p for p in eventually_properties() if p.name not in KAFKA_3_9_ONLY_GOALS]
    # a goal left out is one the implementation, which follows kip, can never open: kip takes no step that opens it
    # (tests/test_failed_leader_and_isr.py)
    assert all(g.bound_ms > 0 and goal_of(g.signature) == g.name for g in goals)


def test_monitor_counts_a_bound_from_when_the_faults_are_healed():
    """An obligation opened during the faults is not late until its bound has passed after the clock started;
    one opened later counts from its own opening; a met goal closes it."""
    g = _goal("Toy", 100, when=lambda s: s == "open", goal=lambda s: s == "done")
    m = ProgressMonitor((g,))
    assert m.observe("open", 0) is None  # opened while faults still happen: no clock yet
    assert m.observe("stuck", 5_000) is None
    m.start(5_000)
    assert m.observe("stuck", 5_099) is None
    assert m.observe("stuck", 5_100) is g  # the bound, counted from the start
    m = ProgressMonitor((g,))
    m.start(0)
    assert m.observe("open", 50) is None and m.observe("done", 140) is None  # met within the bound
    assert m.met == {"Toy": 1}
    assert m.observe("open", 200) is None and m.observe("still", 299) is None and m.observe("still", 300) is g
    assert m.stuck() is g  # nothing left to do while it is open: it stays open forever


@pytest.mark.parametrize("seeds, witnessed", [
    # Halves, so that the two workers share the 16 runs (the longest test of the run when it was one).
    (range(0, 8), {"LiveFencedBrokerEventuallyUnfenced", "ActiveDriverNeverStaysInactive"}),  # both at seed 2
    (range(8, 16), {"LiveFencedBrokerEventuallyUnfenced"}),  # at seeds 12 and 15
])
def test_correct_implementation_meets_every_goal_across_the_default_campaign(seeds, witnessed):
    """The default campaign's 16 seeds (one steered wave: faults, aims, then each run's quiet continuation): no
    stall, and goals are met in quiet continuations (the check is not vacuous)."""
    # The scenario as named: the goals its quiet continuations witness are what this pins (the drawn
    # configurations' 16 runs are clean too, but in none of them is a driver left INACTIVE by the faults).
    plan = replace(Plan(seeds=16, configs="fixed"), struck=())  # the first wave's task plan: no cell struck yet
    met = set()
    for seed in seeds:
        run = run_seed(plan, seed, aims=aims_for(plan, seed))
        assert run.disagreement is None, f"seed {seed}: {run.disagreement.summary}"
        assert run.handover is not None and len(run.record) == plan.steps
        met |= {key for kind, key in run.coverage if kind == "progress"}
    assert witnessed <= met


def test_a_run_without_faults_meets_the_goals_of_the_migration_from_its_start():
    """A run whose fault window is empty is all quiet continuation: from the cold start, the driver leaves
    WAIT_FOR_BROKERS, the migration reaches dual writes and brokers register and are unfenced, each within its
    bound (KIP-866 §Controller Migration), under both runbooks."""
    plan = Plan(steps=1000, quiet_steps=1000)
    for seed in (0, 3):  # finalize, rollback
        run = run_seed(plan, seed)
        assert run.disagreement is None and run.handover.at == 0
        met = {key for kind, key in run.coverage if kind == "progress"}
        assert {"DriverLeavesWaitForBrokersWhenReady", "MigrationReachesDualWriteWithoutFaults",
                "EveryLiveBrokerEventuallyRegistered", "LiveFencedBrokerEventuallyUnfenced"} <= met, (seed, met)


def test_quiet_continuation_is_generated_again_the_same_from_the_replayed_fault_window():
    """The continuation is a function of the cluster the fault window leaves, the seed, the runbook and the
    operator's memory: replaying the window and generating it again gives the run's own events, byte for byte."""
    plan = Plan(steps=1200)
    for seed in (1, 3):  # a finalize and a rollback run
        run = run_seed(plan, seed, coverage=False)
        assert run.disagreement is None and run.handover is not None
        bugs, variant = plan.seeded_bugs
        replayed = replay_record(plan.scope_of(seed), seed, bugs, variant, run.record, run.handover, run.runbook)
        assert replayed.disagreement is None and replayed.record == run.record


@pytest.mark.parametrize("bug", [
    "impl_ready_compares_zk_epoch",
    # Its shrink spends most of its 30 s budget (33 s of a loaded worker): the slow run's.
    pytest.param("impl_fenced_broker_heartbeats_when_caught_up", marks=pytest.mark.slow),
])
def test_a_stall_shrinks_to_a_run_that_still_heals_and_stalls_and_replays_clean_without_its_bug(bug, tmp_path):
    """A seeded bug that stalls progress: the run's stall is shrunk (its fault window only) to a trace whose
    continuation, generated again, still heals and then stalls on the same goal; without the bug the same
    trace makes progress (the regression passes once the bug is fixed)."""
    # The scenario as named: a fenced broker that waits for a record after its registration stalls only while
    # none comes, and the configuration drawn for seed 0 has an admin whose metadata.version updates write some
    # (the broker catches up, heartbeats and is unfenced: progress, rightly not a stall).
    plan = Plan(mutant=bug, configs="fixed")
    run = run_seed(plan, 0, coverage=False)
    assert isinstance(run.disagreement, Stall), run.disagreement
    signature = signature_of(run.disagreement)
    assert goal_of(signature) == next(b.invariant for b in IMPL_SEEDED_BUGS if b.name == bug)
    result = shrink_violation(plan, 0, run.record, signature, 30, run.handover)
    assert result.reproduced and result.handover is not None
    assert result.handover.at <= run.handover.at
    trace = trace_for(plan, 0, result.steps, signature, result.summary, result.original_steps, result.handover)
    save_trace(tmp_path / "stall.json", trace)
    loaded = load_trace(tmp_path / "stall.json")
    assert loaded == trace
    replayed = replay_trace(loaded)
    assert replayed.signature == signature and replayed.failed_at == len(loaded.steps) - 1
    assert replayed.record == list(loaded.steps)
    assert isinstance(replayed.disagreement, Stall) and not replayed.disagreement.stuck
    assert replay_trace(loaded, with_bugs=False).disagreement is None


def test_a_stall_that_the_shrinker_cannot_keep_is_not_reported_shrunk():
    """A candidate whose continuation no longer stalls is refused: with a bound the run cannot reach, the
    run's own stall does not reproduce, and the shrink says so instead of returning a trace that shows nothing."""
    plan = Plan(mutant="impl_ready_compares_zk_epoch")
    run = run_seed(plan, 0, coverage=False)
    short = replace(run.handover, events=5)  # too few quiet events for any bound to pass
    result = shrink_violation(plan, 0, run.record, signature_of(run.disagreement), 10, short)
    assert not result.reproduced and not result.minimal


def test_every_goal_has_an_implementation_bug_that_stalls_it():
    """Each goal's check can fire: an implementation bug stalls it without ever disagreeing with the model at a
    step (``kraftcheck mutants`` must catch each by a stall of that goal: test_differential.py)."""
    stalled = {b.invariant for b in IMPL_SEEDED_BUGS}
    assert {g.name for g in progress_goals()} <= stalled
