"""A topic deleted in dual write while a ZK broker is fenced (issue #17 §4, scope ``deletion-while-fenced``).

The Kafka bug the real runs' broker-metadata channel found on 3.7.2 to 3.9.2 (docs/guide/real-kafka.md, Findings):
a ZooKeeper-mode broker away when the topic is deleted, and unfenced after, serves the deleted topic for good.
MigrationPropagator's channel manager holds only the unfenced ZK brokers, so the deletion's StopReplica to the fenced
one is skipped and never sent again; and the delta path tells the broker, once unfenced, in an incremental
UpdateMetadata, which leaves what it does not name cached (only the full sync after a failover sends full ones,
KAFKA-15799). The kafka-3.9 profile follows Kafka there, kip does not; the model-independent properties
ZkBrokersConvergeToCommittedImage and ZkBrokersDropDeletedTopic catch Kafka's behaviour in the profile that shares it.
"""

from __future__ import annotations

import pytest

from model.actions import BrokerHeartbeat, DeleteTopics, Deliver, DualWrite, SessionTimeout
from model.bugs import SEEDED_BUGS_BY_NAME, Bug, Profile, Variant
from model.end_to_end_invariants import zk_brokers_at_quiescence
from model.invariants import violations
from model.kraft import ControllerId, image_of
from model.scopes import FENCED_BROKER_MISSES_DELETION, SCOPES, initial_state, profile_findings
from model.state import StopReplica, UpdateMetadata
from model.step import step
from model.types import BrokerId, LeaderEpoch, PartitionId
from properties.explore import explore
from tests.conftest import messages

B0, B1, P0 = BrokerId(0), BrokerId(1), PartitionId(0)
SCOPE = "deletion-while-fenced"
C0 = ControllerId(3000)
KAFKA_3_9 = Variant(profile=Profile.KAFKA_3_9)
# The shortest path the search finds: the deletion commits, broker 0 is fenced before the driver writes it, the
# dual write deletes the topic, the broker heartbeats and is unfenced, and that change is dual-written in turn.
AWAY_WHILE_DELETED = (
    DeleteTopics(C0), SessionTimeout(B0, C0), DualWrite(C0), BrokerHeartbeat(B0, C0), DualWrite(C0),
)


def walk(variant: Variant, *actions):
    """``actions`` from the scope's start, then every message delivered; the properties broken on the way."""
    state, broken = initial_state(SCOPES[SCOPE]), []
    for action in actions:
        nxt = step(state, action, variant)
        assert nxt is not None, f"not enabled: {action}"
        broken += violations(state, action, nxt)
        state = nxt
    sent = set(state.network)
    while state.network:
        action = Deliver(messages(state)[0])
        nxt = step(state, action, variant)
        broken += violations(state, action, nxt)
        state = nxt
    return state, sent, set(broken)


def test_kip_stops_the_fenced_broker_and_tells_it_in_full():
    """kip: the deletion's StopReplica goes to the fenced broker too, and the UpdateMetadata that follows its
    unfencing is full: both brokers drop the topic, and the cluster quiesces with broker 0 checked."""
    start = initial_state(SCOPES[SCOPE])
    assert start.brokers[0].replicas[0] is not None and start.brokers[0].metadata
    state, sent, broken = walk(Variant(), *AWAY_WHILE_DELETED)
    assert not broken
    assert any(isinstance(m, StopReplica) and m.dest == B0 and m.delete_partition for m in sent)
    assert not any(m.incremental for m in sent if isinstance(m, UpdateMetadata))
    assert not image_of(state.controllers[0].log).partitions
    assert state.brokers[0].replicas == (None,) and state.brokers[0].metadata == ()
    quiet = zk_brokers_at_quiescence(state)
    assert quiet is not None and B0 in quiet[1]


def test_kafka_3_9_leaves_the_fenced_broker_hosting_and_serving_the_deleted_topic():
    """kafka-3.9: no StopReplica to the fenced broker, and an incremental UpdateMetadata once it is unfenced: it
    still hosts the partition and caches its leader when the cluster quiesces, which both model-independent
    properties report; the broker that stayed unfenced drops the topic."""
    state, sent, broken = walk(KAFKA_3_9, *AWAY_WHILE_DELETED)
    assert broken == {"ZkBrokersConvergeToCommittedImage", "ZkBrokersDropDeletedTopic"}
    assert not any(isinstance(m, StopReplica) and m.dest == B0 for m in sent)
    told = [m for m in sent if isinstance(m, UpdateMetadata) and m.dest == B0]
    assert told and told[-1].incremental and told[-1].partitions == ()
    assert state.brokers[0].replicas[0] is not None and state.brokers[0].metadata != ()
    assert state.brokers[1].replicas == (None,) and state.brokers[1].metadata == ()
    assert (B0, P0) not in state.ghost.observed.strays


def test_an_incremental_update_metadata_keeps_what_it_does_not_name():
    """The ZK broker's cache (ZkMetadataCache.updateMetadata): a full UpdateMetadata replaces it, an incremental one
    changes only the partitions it names."""
    state = initial_state(SCOPES[SCOPE])
    cached = state.brokers[0].metadata
    assert cached
    template = next(m for m in walk(Variant(), DeleteTopics(C0), DualWrite(C0))[1]
                    if isinstance(m, UpdateMetadata) and m.dest == B0)
    for incremental, expected in ((False, ()), (True, cached)):
        m = template.replace(incremental=incremental)
        after = step(state.replace(network=frozenset({m})), Deliver(m), Variant())
        assert after.brokers[0].metadata == expected
    renewed = template.replace(incremental=True, partitions=((B1, LeaderEpoch(9)),))
    after = step(state.replace(network=frozenset({renewed})), Deliver(renewed), Variant())
    assert after.brokers[0].metadata == ((B1, LeaderEpoch(9)),) + cached[1:]


def test_the_scope_documents_its_findings_and_the_search_finds_them():
    """The scope's findings are kafka-3.9's alone; explored whole, kip breaks nothing and kafka-3.9 breaks exactly
    them, with the six-step path above; the seeded bug DELETION_SKIPS_FENCED_BROKER (kafka-3.9's rule under kip)
    is caught there by the property it names."""
    scope = SCOPES[SCOPE]
    assert scope.expected_findings(Profile.KIP) == set()
    expected = {prop for _, prop in FENCED_BROKER_MISSES_DELETION}
    assert scope.expected_findings(Profile.KAFKA_3_9) == expected | profile_findings(Profile.KAFKA_3_9)
    found = explore(SCOPE, KAFKA_3_9).violations
    assert set(found) == expected
    assert all(len(trace.actions) == len(AWAY_WHILE_DELETED) + 1 for trace in found.values())
    seeded = SEEDED_BUGS_BY_NAME[Bug.DELETION_SKIPS_FENCED_BROKER.value]
    assert (seeded.invariant, seeded.scope) == ("ZkBrokersDropDeletedTopic", SCOPE)


# ---- the implementation -------------------------------------------------------------------------------------


def test_impl_follows_kip_and_its_seeded_bug_disagrees_at_the_deletion():
    """The implementation takes the six-step path as kip does; with the seeded bug alone (Kafka's rule against kip's
    model) it disagrees at the dual write that deletes the topic: the fenced broker's StopReplica is missing."""
    from impl.bugs import ImplBug
    from properties.differential import Differential, Disagreement

    diff = Differential(SCOPES[SCOPE])
    for action in AWAY_WHILE_DELETED:
        assert diff.apply(action) == [action]
    buggy = Differential(SCOPES[SCOPE], bugs=frozenset({ImplBug.DELETION_SKIPS_FENCED_BROKER}))
    buggy.apply(AWAY_WHILE_DELETED[0])
    buggy.apply(AWAY_WHILE_DELETED[1])
    with pytest.raises(Disagreement, match="only in model: StopReplica"):
        buggy.apply(AWAY_WHILE_DELETED[2])
