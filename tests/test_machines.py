"""The model under Hypothesis's stateful testing (properties/machines.py).

Two kinds of situations: the correct model runs through the machine in each named scope with
every invariant checked after every step and breaks nothing, reaching the witnesses that show
those invariants were exercised; and a model with one seeded bug makes the machine fail with
the invariant the bug targets, leaving a trace file that replays to the same violation.

The number of examples comes from the Hypothesis profile (tests/conftest.py: ``ci`` unless
``--hypothesis-profile`` says otherwise). Seeded-bug runs take at least 1,000 examples, since
Hypothesis stops at the first failure anyway and a random profile must not miss the bug.
"""

import random

import pytest
from hypothesis import settings

from model import SCOPES, SEEDED_BUGS_BY_NAME, Variant, initial_state, successors
from model.actions import (
    ACTION_TYPES,
    OpenSession,
    ProcessBrokerChange,
    RegisterBroker,
    RestartBroker,
    StopBroker,
    UpdateFeatures,
)
from model.migration import Profile
from properties import traces
from properties.machines import (
    SWITCHABLE_KINDS,
    InvariantViolation,
    Options,
    StepStrategy,
    machine_class,
    rule_name,
    run_machine,
)


def raised_violations(error: BaseException) -> list[InvariantViolation]:
    """The InvariantViolations Hypothesis raised: one, or several distinct ones in a group."""
    if isinstance(error, BaseExceptionGroup):
        return [v for e in error.exceptions for v in raised_violations(e)]
    return [error] if isinstance(error, InvariantViolation) else []


def run_clean(scope: str, witnesses: set[str], variant: Variant = Variant()):
    """Run the correct model's machine in ``scope``: nothing may break, ``witnesses`` must be reached."""
    machine = machine_class(scope, variant)
    run_machine(machine)
    coverage = machine.coverage
    wanted = settings.default.max_examples
    print(
        f"{scope}: {coverage.examples} examples, {coverage.steps} model steps, deepest {coverage.deepest}, "
        f"witnesses {dict(coverage.witnesses)}"
    )
    # Hypothesis's own per-example rule switching is turned off in ModelMachine because it left
    # no rule to run in most examples (3.3 examples started per example run, measured). A few
    # examples are always discarded (up to 17% in cluster under the dev profile, overruns);
    # were that switching back after a Hypothesis upgrade, this count would jump.
    assert coverage.examples <= 1.5 * wanted, f"{coverage.examples - wanted} examples discarded"
    assert coverage.deepest >= 15, "no example got past the first few steps"
    missing = witnesses - set(coverage.witnesses)
    assert not missing, f"witnesses never reached in {scope}: {sorted(missing)}"
    return coverage


# ---- the correct model breaks nothing ------------------------------------------------------------


def test_machine_fencing_correct_model_survives_session_expiry_and_failover():
    """A controller's session expires and another wins; zombie writes are fenced (KIP-866 §Controller Leadership)."""
    run_clean("fencing", {"ControllerFailover"})


def test_machine_bounce_correct_model_fences_requests_to_earlier_generations():
    """A broker bounces around a ControlledShutdown; requests for its old generation are refused (KIP-380)."""
    run_clean("bounce", {"BouncedBrokerGetsOldGenerationRequest"})


def test_machine_leader_bounce_correct_model_gives_a_bounced_leader_a_new_leader_epoch():
    """The partition leader, not the controller, bounces (KIP-380 §Controller Detects Bounced Broker)."""
    run_clean("leader-bounce", {"BouncedBrokerGetsOldGenerationRequest"})


def test_machine_features_correct_model_keeps_admitted_brokers_compatible():
    """UpdateFeatures and a broker restart with unequal supported ranges (KIP-584's broker protections)."""
    run_clean("features", set())


def test_machine_cluster_correct_model_survives_every_perturbation():
    """Three brokers, two partitions, every kind of perturbation, several times over."""
    run_clean("cluster", {"ControllerFailover", "LeaderEpochReusedAcrossControllerFailover"})


@pytest.mark.parametrize("profile", list(Profile), ids=lambda p: p.value)
def test_machine_lifecycle_correct_model_finalizes_some_migrations_and_rolls_back_others(profile):
    """From dual write, examples finalize (POST_MIGRATION) or roll back to a ZK controller (KIP-866
    §Finalizing the Migration, §Rollback to ZK), with every invariant checked after every step.
    The statistics (``--hypothesis-show-statistics``) count the examples that reach each one."""
    coverage = run_clean("lifecycle", {"MigrationFinalized", "RollbackCompletes"}, Variant(profile=profile))
    assert coverage.witnesses["MigrationFinalized"] >= 5 and coverage.witnesses["RollbackCompletes"] >= 5


@pytest.mark.parametrize("profile", list(Profile), ids=lambda p: p.value)
def test_machine_migration_correct_model_survives_failover_mid_migration(profile):
    """The claim and the initial migration with a KRaft failover in the middle (KIP-866 §Initial Data Migration)."""
    run_clean("migration", {"MigrationReachesDualWrite"}, Variant(profile=profile))


# ---- a seeded bug is caught by its invariant -------------------------------------------------------

# One bug from each part of the control plane, ALWAYS and TRANSITION targets both.
CAUGHT_BUGS = [
    "expiry_keeps_ephemerals",  # ZooKeeper sessions (ALWAYS)
    "stop_deletes_controller_epoch",  # controller election (TRANSITION)
    "skip_controller_epoch_check",  # zombie-controller fencing (TRANSITION, needs ~600 examples)
    "accept_stale_broker_epoch",  # KIP-380 request fencing (TRANSITION, a long trace)
    "broker_change_ignores_czxid",  # KIP-380 bounce detection (ALWAYS)
    "shutdown_shrinks_leader_out_of_isr",  # partitions under controlled shutdown (ALWAYS)
    "finalize_level_zero",  # KIP-584 feature levels (ALWAYS)
    "dual_write_uncommitted",  # KIP-866 write-behind (TRANSITION)
    "vote_twice_in_epoch",  # KIP-500 quorum election safety (ALWAYS)
]


@pytest.mark.parametrize("name", CAUGHT_BUGS)
def test_machine_catches_seeded_bug_with_its_invariant_and_saves_a_replayable_trace(name, tmp_path):
    """A plausible mistake in the model makes the machine fail with the invariant the bug targets;
    the message names it and lists the actions, and the trace file replays to the same violation."""
    bug = SEEDED_BUGS_BY_NAME[name]
    machine = machine_class(bug.scope, Variant(frozenset({bug.bug})), trace_dir=tmp_path)
    with pytest.raises((InvariantViolation, BaseExceptionGroup)) as raised:
        run_machine(machine, max_examples=max(settings.default.max_examples, 1_000))
    caught = [v for v in raised_violations(raised.value) if bug.invariant in v.invariants]
    assert caught, f"{name} made the machine fail, but not with {bug.invariant}: {raised.value}"
    error = caught[0]
    message = str(error)
    assert bug.invariant in message.splitlines()[0]
    assert "step  action" in message and traces.describe(error.trace.actions[-1]) in message
    assert error.trace_path is not None and error.trace_path.parent == tmp_path
    assert f"replayable trace: {error.trace_path}" in message

    trace = traces.load_trace(error.trace_path)
    assert trace == error.trace and trace.bugs == {bug.bug} and trace.scope == bug.scope
    replayed = traces.replay(trace)
    assert replayed.reproduced and replayed.violation_step == len(trace.actions)
    assert set(replayed.violations) == set(error.invariants)


# ---- the machine's shape -----------------------------------------------------------------------------


def test_machine_has_one_rule_per_action_type():
    """Every action kind of the model is a rule of its own, but the lost responses, the partition creations, the
    reassignments, the topic deletions, the brokers' lagging servers, the lost dual-write replies and the held
    heartbeats, which only their own scopes budget (exploration covers them whole); ``wait`` is the only other rule."""
    from model.actions import (
        AddPartitions,
        AlterPartition,
        AlterPartitionReassignments,
        ApiPartitionReassignment,
        BrokerZkServerCatchesUp,
        BrokerZkServerLags,
        CreatePartitions,
        DeleteTopics,
        DeliverHeartbeat,
        DualWriteReplyLost,
        HeartbeatResponseLost,
        HoldHeartbeat,
        LeaderAndIsrFailsInBroker,
        MarkTopicDeletion,
        ProcessPartitionModifications,
        RegistrationResponseLost,
        TopicDeletion,
    )
    from properties.machines import MACHINE_KINDS

    rules = {r.function.__name__ for r in machine_class("fencing").setup_state().rules}
    assert rules == {rule_name(kind) for kind in MACHINE_KINDS} | {"wait"}
    assert set(ACTION_TYPES) - set(MACHINE_KINDS) == {LeaderAndIsrFailsInBroker, RegistrationResponseLost,
                                                      HeartbeatResponseLost, AddPartitions,
                                                      ProcessPartitionModifications, CreatePartitions,
                                                      ApiPartitionReassignment, AlterPartitionReassignments,
                                                      AlterPartition, MarkTopicDeletion, TopicDeletion, DeleteTopics,
                                                      BrokerZkServerLags, BrokerZkServerCatchesUp,
                                                      DualWriteReplyLost, HoldHeartbeat, DeliverHeartbeat}


def walk(scope: str, seed: int, steps: int = 30):
    """The states of one seeded random walk through ``scope``'s correct model."""
    state, rng = initial_state(SCOPES[scope]), random.Random(seed)
    for _ in range(steps):
        yield state
        after = successors(state, SCOPES[scope])
        if not after:
            return
        state = rng.choice(after)[1]


@pytest.mark.parametrize("scope", ["cluster", "lifecycle"])
def test_machine_options_are_the_models_successors_whichever_kind_is_asked_first(scope):
    """The machine finds enabled actions lazily, a kind at a time; what it finds for every kind,
    in whatever order the kinds are asked about, is ``model.successors`` grouped by kind."""
    rng = random.Random(7)
    for seed in range(4):
        for state in walk(scope, seed):
            options = Options(state, SCOPES[scope], Variant(), 0)
            kinds = options.kinds()
            rng.shuffle(kinds)
            for kind in kinds[: len(kinds) // 2]:
                options.enabled(kind)
            found = {kind: options.choices(kind).actions for kind in options.kinds() if options.enabled(kind)}
            expected: dict = {}
            for action, _ in successors(state, SCOPES[scope]):
                expected.setdefault(type(action), []).append(action)
            assert found == expected


def test_machine_step_strategy_draws_among_the_rules_whose_preconditions_hold():
    """StepStrategy stands in for Hypothesis's rule selection and never calls the preconditions;
    the rules it draws from are exactly those whose Hypothesis preconditions hold, for any swarm."""
    machine = machine_class("cluster")()
    assert isinstance(machine._rules_strategy, StepStrategy)
    rules, _ = machine._rule_table()
    rng = random.Random(3)
    for state in walk("cluster", 1, steps=40):
        machine.state, machine.options = state, machine._options_of(state)
        machine.switched_off = frozenset(k for k in SWITCHABLE_KINDS if rng.random() < 0.3)
        machine.calm_steps, machine.calm = rng.choice([(0, 0), (2, 1), (2, 3)])
        holding = tuple(i for i, r in enumerate(rules) if all(check(machine) for check in r.preconditions))
        assert machine.valid_rules() == holding


# ---- findings, pinned ------------------------------------------------------------------------------


def test_machine_finding_broker_refused_for_features_stays_out_after_a_downgrade():
    """Found by the cluster machine (random profile), shrunk to 8 steps: broker 2 bounces and
    re-registers; before the controller processes it, UpdateFeatures raises group_coordinator
    to 3, beyond broker 2's range, so the broker change refuses it (KIP-584's broker protections).
    A downgrade back to 1 makes it compatible, but nothing tells the controller to look again,
    as in Kafka, where a refused broker is considered again only when it re-registers.
    ControllerSeesEveryBounce demanded its admission until fd2b311, which accepts a broker the
    controller refused at its current czxid."""
    actions = (
        StopBroker(2),
        ProcessBrokerChange(0),
        RestartBroker(2),
        OpenSession(2),
        RegisterBroker(2),
        UpdateFeatures(0, "group_coordinator", 3, False),
        ProcessBrokerChange(0),
        UpdateFeatures(0, "group_coordinator", 1, True),
    )
    result = traces.replay(traces.Trace("cluster", actions))
    assert result.not_enabled_index is None, result.summary()
    assert result.violation_step is None, result.summary()
