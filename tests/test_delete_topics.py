"""A topic deleted on KRaft during the migration (issue #17 §2 and §4, scope ``delete-topics``).

An admin's DeleteTopics of the one topic reaches the active KRaft controller. In pre-migration it is refused
(QuorumController's gate: NOT_CONTROLLER); once migrated it is a RemoveTopicRecord, which takes the topic's partitions
out of the image. In dual write the driver deletes the topic's znodes from ZooKeeper (handleTopicsDelta,
ZkTopicMigrationClient.deleteTopic) and sends the ZK brokers UpdateMetadata without its partitions and StopReplica
with deletePartitions (MigrationPropagator; KIP-866 §ZK Broker RPCs: "following reassignments and topic deletions, we
will need to send StopReplicas to ZK brokers for them to stop managing certain replicas"). The end-to-end property
ZkBrokersDropDeletedTopic sees a broker that kept hosting it: the shared seeded bug (a StopReplica that only stops,
the KIP's words read literally) and the implementation's own slip (no StopReplica at all).
"""

from __future__ import annotations

import pytest

from impl.bugs import SHARED_SEEDED_BUGS, ImplBug
from model.actions import (
    DeleteTopics,
    Deliver,
    Drop,
    DualWrite,
    MarkTopicDeletion,
    TopicDeletion,
)
from model.bugs import Bug, Profile, Variant
from model.end_to_end_invariants import zk_brokers_at_quiescence
from model.invariants import violations
from model.kraft import TOPIC_NAME, ControllerId, RemoveTopicRecord, image_of
from model.migration import pending_deletion_path
from model.scopes import SCOPES, initial_state
from model.state import TOPIC, StopReplica, UpdateMetadata, partition_state_path, znode_data
from model.step import outcome, step
from model.types import BrokerId, Errors, PartitionId, ReplicaRole
from properties.differential import Differential, Disagreement
from tests.conftest import agreed, appended, messages, path_to_dual_write, run

B0, B1, C0, P0 = BrokerId(0), BrokerId(1), ControllerId(3000), PartitionId(0)
SCOPE = "delete-topics"
DUAL_WRITE = path_to_dual_write(C0)  # the driver in DUAL_WRITE
MIGRATE = DUAL_WRITE[:6]  # ... up to the migration committed


def start():
    return initial_state(SCOPES[SCOPE])


def deliver_all(state, variant=Variant(), broken=None):
    while state.network:
        action = Deliver(messages(state)[0])
        nxt = step(state, action, variant)
        if broken is not None:
            broken += violations(state, action, nxt)
        state = nxt
    return state


def hosting(state):
    """Both ZK brokers in dual write, each hosting partition 0 (leader and follower)."""
    return deliver_all(run(state, *DUAL_WRITE))


def test_deletion_is_refused_in_pre_migration_and_a_remove_topic_record_once_migrated():
    """The pre-migration gate answers NOT_CONTROLLER; once migrated, a RemoveTopicRecord (both profiles), which
    empties the image's partitions; a second request finds no topic (UNKNOWN_TOPIC_OR_PARTITION)."""
    taken = outcome(start(), DeleteTopics(C0))
    assert taken.error is Errors.NOT_CONTROLLER and "pre-migration" in taken.reason
    for profile in Profile:
        variant = Variant(profile=profile)
        migrated = hosting(start())
        deleted = step(migrated, DeleteTopics(C0), variant)
        assert appended(migrated, deleted, C0) == [RemoveTopicRecord(TOPIC_NAME)]
        again = deleted.replace(budget=deleted.budget.replace(topic_deletions=1))
        assert outcome(again, DeleteTopics(C0), variant).error is Errors.UNKNOWN_TOPIC_OR_PARTITION


def test_dual_write_deletes_the_znodes_and_both_brokers_stop_hosting():
    """handleTopicsDelta's deleteTopic: the partition state znode and the topic znode go in the dual write's multi;
    UpdateMetadata without the partition and StopReplica(deletePartitions) to both brokers, which drop it."""
    written = run(hosting(start()), DeleteTopics(C0), DualWrite(C0))
    assert znode_data(written, TOPIC) is None and znode_data(written, partition_state_path(P0)) is None
    stops = messages(written, StopReplica)
    assert sorted(m.dest for m in stops) == [B0, B1] and all(m.delete_partition and m.kraft for m in stops)
    assert all(m.partitions == () for m in messages(written, UpdateMetadata))
    broken = []
    told = deliver_all(written, broken=broken)
    assert told.brokers[0].replicas == (None,) == told.brokers[1].replicas and broken == []
    assert zk_brokers_at_quiescence(told) is not None


def test_scopes_without_the_budget_offer_no_deletion():
    assert all(s.budget.topic_deletions == 0 for n, s in SCOPES.items() if n not in (SCOPE, "deletion-while-fenced"))
    migrated = hosting(start())
    assert step(migrated.replace(budget=migrated.budget.replace(topic_deletions=0)), DeleteTopics(C0)) is None


def test_a_stop_replica_that_keeps_the_partition_leaves_it_hosted():
    """The shared seeded bug: "stop managing" read as a StopReplica without deletePartitions; the brokers stop the
    replica and keep it, and only the end-to-end property sees it (the model's own rules agree with it)."""
    variant = Variant(frozenset({Bug.DELETION_STOPS_WITHOUT_DELETE}))
    broken = []
    told = deliver_all(run(hosting(start()), DeleteTopics(C0), DualWrite(C0), variant=variant), variant, broken)
    assert told.brokers[0].replicas[0].role is ReplicaRole.STOPPED
    assert set(broken) == {"ZkBrokersDropDeletedTopic"}


def test_a_lost_stop_replica_waives_the_check_for_its_partition():
    """A StopReplica lost on the way leaves the partition hosted with no rule broken (nothing resends it):
    ``ghost.observed.strays`` keeps the check off that broker's partition; the other broker's is still checked."""
    state = run(hosting(start()), DeleteTopics(C0), DualWrite(C0))
    state = state.replace(budget=state.budget.replace(drops=1))
    lost = next(m for m in messages(state, StopReplica) if m.dest == B0)
    state = step(state, Drop(lost))
    assert (B0, P0) in state.ghost.observed.strays
    broken = []
    state = deliver_all(state, broken=broken)
    assert state.brokers[0].replicas[0] is not None and state.brokers[1].replicas == (None,)
    assert zk_brokers_at_quiescence(state) is not None and broken == []


def test_the_model_seeded_bug_is_the_shared_pair_of_the_impl_one():
    pair = next(b for b in SHARED_SEEDED_BUGS if b.model_bug is Bug.DELETION_STOPS_WITHOUT_DELETE)
    assert pair.bug is ImplBug.DELETION_STOPS_WITHOUT_DELETE and pair.invariant == "ZkBrokersDropDeletedTopic"
    assert pair.scope == SCOPE


# ---- in ZooKeeper mode, and pending when the migration starts (KIP-866 §Topic Deletions, KAFKA-15605) --------

MARK = pending_deletion_path(TOPIC_NAME)


def test_zk_mode_deletion_marks_the_topic_then_the_controller_deletes_it():
    """AdminZkClient.deleteTopic writes only the mark; the ZK controller's TopicDeletion deletes the znodes and the
    mark in one fenced write and sends StopReplica(deletePartitions) to both replicas, which drop the partition."""
    marked = run(start(), MarkTopicDeletion(B1))
    assert znode_data(marked, MARK) == () and znode_data(marked, TOPIC) is not None
    assert marked.budget.topic_deletions == 0 and "spent" in outcome(marked, MarkTopicDeletion(B0)).reason
    deleted = run(marked, TopicDeletion(B0))
    assert znode_data(deleted, TOPIC) is None and znode_data(deleted, MARK) is None
    assert sorted((m.dest, m.delete_partition) for m in messages(deleted, StopReplica)) == [(B0, True), (B1, True)]
    told = deliver_all(deleted)
    assert told.brokers[0].replicas == (None,) == told.brokers[1].replicas and told.brokers[1].metadata == ()
    assert step(told, TopicDeletion(B0)) is None  # nothing marked any more


def test_zk_mode_deletion_is_forwarded_once_kraft_owns_the_metadata():
    """Once a KRaft controller has claimed ZooKeeper, a migrating ZK broker forwards DeleteTopics to it: nothing is
    written and nothing spent here; the ZK controller's own deletion is fenced by the claim."""
    claimed = run(start(), *MIGRATE[:3])
    assert step(claimed, MarkTopicDeletion(B1)) is None
    marked_then_claimed = run(start(), MarkTopicDeletion(B1), *MIGRATE[:3])
    fenced = step(marked_then_claimed, TopicDeletion(B0))
    assert fenced is None or znode_data(fenced, TOPIC) is not None


def test_a_deletion_pending_at_migration_is_not_migrated_and_the_sync_completes_it():
    """The migration copies no topic pending deletion (KIP-866 §Topic Deletions; ZkTopicMigrationClient since
    KAFKA-15605's fix, so both profiles), and the sync deletes its znodes and the mark. The brokers, told only
    UpdateMetadata without it (SendRPCsToBrokers has no StopReplica to send from an image), keep hosting it: observed
    as strays (``ghost.observed.strays``), which ZkBrokersDropDeletedTopic leaves out."""
    for profile in Profile:
        variant = Variant(profile=profile)
        broken = []
        state = start()
        for action in (MarkTopicDeletion(B1), *DUAL_WRITE):
            nxt = step(state, action, variant)
            broken += violations(state, action, nxt)
            state = nxt
        assert not image_of(state.controllers[0].log).partitions
        assert znode_data(state, TOPIC) is None and znode_data(state, MARK) is None
        state = deliver_all(state, variant, broken)
        assert state.brokers[0].replicas[0] is not None and {(B0, P0), (B1, P0)} <= state.ghost.observed.strays
        findings = SCOPES[SCOPE].expected_findings(profile)  # no transaction at 3.4
        assert set(broken) <= findings and zk_brokers_at_quiescence(state) is not None


def test_kafka_15605_migrates_the_pending_deletion_as_a_live_topic():
    """Kafka 3.4 to 3.6.0 (KAFKA-15605): iterateTopics read every topic, pending deletions included, and the sync
    read no marks: the topic the admin deleted is live in KRaft while ZooKeeper still marks it."""
    variant = Variant(frozenset({Bug.MIGRATES_PENDING_DELETION}))
    state = run(start(), MarkTopicDeletion(B1), *MIGRATE[:5], variant=variant)
    assert image_of(state.controllers[0].log).partitions and znode_data(state, MARK) == ()
    assert "PendingDeletionNeverLiveInKRaft" in violations(state, MIGRATE[5], step(state, MIGRATE[5], variant))
    correct = run(start(), MarkTopicDeletion(B1), *MIGRATE)
    assert not image_of(correct.controllers[0].log).partitions


# ---- the implementation -------------------------------------------------------------------------------------


def test_impl_agrees_through_the_deletion():
    """The scripted path, applied to both: the migration, the deletion, its dual write (the impl lists the topic's
    znodes and deletes them deepest first), the UpdateMetadata and StopReplica delivered."""
    diff = Differential(SCOPES[SCOPE])

    agreed(diff, *DUAL_WRITE)
    assert diff.model.brokers[1].replicas[0] is not None
    agreed(diff, DeleteTopics(C0), DualWrite(C0))
    assert znode_data(diff.model, TOPIC) is None and znode_data(diff.model, partition_state_path(P0)) is None
    assert diff.model.brokers[0].replicas == (None,) == diff.model.brokers[1].replicas


def test_impl_agrees_through_the_zk_mode_deletion_and_a_pending_one_at_migration():
    """The ZK controller's deletion (the impl lists the topic's znodes to delete them), and a deletion still pending
    when the migration starts: not migrated, completed by the sync, brokers left hosting it."""
    diff = Differential(SCOPES[SCOPE])

    agreed(diff, MarkTopicDeletion(B1), TopicDeletion(B0))
    assert znode_data(diff.model, TOPIC) is None and diff.model.brokers[1].replicas == (None,)
    diff = Differential(SCOPES[SCOPE])
    agreed(diff, MarkTopicDeletion(B1), *DUAL_WRITE)
    assert znode_data(diff.model, MARK) is None and diff.model.brokers[1].replicas[0] is not None


def test_the_impl_bug_alone_disagrees_at_the_dual_write():
    """Made by the implementation only, the missing StopReplica is a disagreement with the model at the dual write."""
    diff = Differential(SCOPES[SCOPE], bugs=frozenset({ImplBug.DELETION_SENDS_NO_STOP_REPLICA}))
    for action in (*DUAL_WRITE, DeleteTopics(C0)):
        assert diff.apply(action) == [action]
    with pytest.raises(Disagreement, match="only in model: StopReplica"):
        diff.apply(DualWrite(C0))


def test_impl_correct_campaign_runs_of_the_scope_agree():
    """Seeded simulator runs of the scope (its controller's admin deletes the topic once): no disagreement."""
    from properties.plan import Plan
    from properties.runs import run_seed

    for seed in range(3):
        result = run_seed(Plan(scope=SCOPE, faults="all"), seed, coverage=False)
        assert result.disagreement is None, str(result.disagreement)


def test_fault_mix_delete_topics_is_named_and_off_elsewhere():
    from impl.sim.faults import MIXES, parse

    assert parse("all+delete-topics").delete_topic
    assert not any(m.delete_topic for name, m in MIXES.items() if name != "delete-topics")


def test_campaign_under_all_delete_topics_agrees_and_catches_both_bugs():
    """sim-migration under ``all+delete-topics``: the correct implementation agrees with the model; seed 1 catches
    the shared bug (ZkBrokersDropDeletedTopic: both layers stop without deleting, so they agree) and the impl-only
    one (a disagreement at the dual write); under ``all`` (nothing deleted) the shared bug breaks nothing there."""
    from properties.campaign.options import make_plan
    from properties.runs import run_seed

    def seed1(faults, mutant=None):
        plan = make_plan(seeds=2, faults=faults, out="unused", **({"mutant": mutant} if mutant else {}))
        return run_seed(plan, 1, coverage=False).disagreement

    mutant = "shared_deletion_stops_without_delete"
    assert "ZkBrokersDropDeletedTopic" in str(seed1("all+delete-topics", mutant))
    assert seed1("all", mutant) is None
    assert "only in model: StopReplica" in str(seed1("all+delete-topics", ImplBug.DELETION_SENDS_NO_STOP_REPLICA.value))
    for seed in (0, 1):
        correct = run_seed(make_plan(seeds=2, faults="all+delete-topics", out="unused"), seed, coverage=False)
        assert correct.disagreement is None, str(correct.disagreement)


def test_default_campaign_sends_a_worlds_one_shot_admin_requests():
    """A drawn configuration's admin sends its world's one-shot requests at ``ONCE`` (a named scope's weighs them as
    spontaneous steps), a ZK broker's AddPartitions too: the default plan's first delete-topics world run,
    seed 16, deletes the topic and catches impl_deletion_sends_no_stop_replica; weighed as spontaneous steps no
    delete-topics world run up to seed 90 deleted anything."""
    from impl.sim.simulator import ONCE, SPONTANEOUS, _weight
    from model.actions import AddPartitions, DeleteTopics
    from properties.campaign.options import make_plan
    from properties.runs import run_seed

    assert _weight(DeleteTopics, drawn=True) == ONCE and _weight(DeleteTopics) == SPONTANEOUS
    assert _weight(AddPartitions, drawn=True) == ONCE and _weight(AddPartitions) == SPONTANEOUS
    plan = make_plan(seeds=17, mutant=ImplBug.DELETION_SENDS_NO_STOP_REPLICA.value, out="unused")
    assert "delete-topics" in plan.scope_of(16)
    run = run_seed(plan, 16, coverage=False)
    assert any(type(s.action) is DeleteTopics for s in run.record)
    assert run.disagreement is not None


def test_stalled_deletion_leaves_a_zk_deletion_pending_into_the_migration():
    """Mix and world ``stalled-deletion``: each ZK broker's admin marks the topic for deletion and no ZK controller
    completes it, so a mark made before the KRaft claim is pending when the migration reads ZooKeeper (KAFKA-15605).
    The correct implementation agrees with the model there (fixed configuration, seed 20); the mistake put into both
    (the topic copied live, as Kafka 3.4 to 3.6.0 did) is caught by PendingDeletionNeverLiveInKRaft, which does not
    ask the model, and under ``all`` (nothing deleted) it breaks nothing. A drawn configuration in that world
    creates no partition."""
    from impl.sim.faults import MIXES, parse
    from impl.sim.scenarios import Configuration, creates_partition
    from model.types import Ibp
    from properties.campaign.options import make_plan
    from properties.runs import run_seed

    assert parse("all+stalled-deletion").stalled_deletion
    assert not any(m.stalled_deletion for name, m in MIXES.items() if name != "stalled-deletion")
    base = Configuration(1, Ibp.IBP_3_6_IV1, (Ibp.IBP_3_6_IV1,) * 3, admin=("partitions",))
    assert creates_partition(base) and creates_partition(base.__class__(**{**base.__dict__, "worlds": ("held",)}))
    for world in ("stalled-deletion", "delete-topics"):
        assert not creates_partition(base.__class__(**{**base.__dict__, "worlds": (world,)}))

    def seed(number, faults, mutant=None, configs="fixed"):
        plan = make_plan(seeds=number + 1, faults=faults, configs=configs, out="unused",
                         **({"mutant": mutant} if mutant else {}))
        return run_seed(plan, number, coverage=False)

    mutant = "shared_migrates_pending_deletion"
    caught = seed(20, "all+stalled-deletion", mutant)
    assert "PendingDeletionNeverLiveInKRaft" in str(caught.disagreement)
    assert any(type(s.action) is MarkTopicDeletion for s in caught.record)
    assert seed(20, "all", mutant).disagreement is None
    correct = seed(20, "all+stalled-deletion")
    assert correct.disagreement is None, str(correct.disagreement)
    # the default campaign: its seed 24 lives in the world (its first but seed 18) and catches the mistake
    assert "stalled-deletion" in make_plan(seeds=25, out="unused").scope_of(24)
    assert "PendingDeletionNeverLiveInKRaft" in str(seed(24, "all", mutant, configs="drawn").disagreement)
    assert seed(24, "all", configs="drawn").disagreement is None
