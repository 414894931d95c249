"""Dual writes that write only the change; the full reconciliation kept for a new leadership's sync.

Kafka 3.9's driver handles a MetadataChangeEvent in DUAL_WRITE with KRaftMigrationZkWriter.handleDelta: it
writes the topics, partitions and configs the delta changed and never reads ZooKeeper; only SyncKRaftToZk
(every leadership's first write) runs handleSnapshot, which reads ZooKeeper and writes whatever differs. The
KIP says the same ("writing metadata changes to ZK", KIP-866 §Dual Metadata Writes), so both profiles do it.
The consequence: a divergence between ZooKeeper and the image at /migration's offset is not healed by later
dual writes, only by the next failover's full sync. These tests put one there by hand (no action of any scope
makes one: ZkEqualsImageAtMigrationOffset holds in all of them) and follow it through both layers.
"""

from __future__ import annotations

from impl.bugs import ImplBug
from impl.codec import decode, encode
from impl.sim.faults import parse as parse_faults
from impl.sim.scenarios import scenario
from model import zookeeper as zkm
from model.actions import (
    Action,
    AlterConfigs,
    BecomeLeader,
    BecomeZkController,
    BrokerHeartbeat,
    DualWrite,
    Fetch,
    KRaftLeaderChange,
    RequestVote,
    SessionTimeout,
    StartElection,
    SyncKRaftToZk,
    WaitForControllerQuorum,
)
from model.bugs import CORRECT, Bug, Variant
from model.kraft import image_of
from model.migration import CONFIG, MIGRATION
from model.migration_invariants import zk_equals_image_at_migration_offset
from model.scopes import SCOPES, initial_state
from model.state import ClusterState, PartitionState, partition_state_path, znode_data
from model.step import step
from model.types import NO_SESSION, BrokerId, PartitionId
from model.zookeeper import SetData
from properties.differential import Differential, Disagreement, checked_simulation
from tests.conftest import run

A, B = 3000, 3001
P0 = partition_state_path(PartitionId(0))
CONFIG_CHANGE = [AlterConfigs(A), Fetch(B, A), DualWrite(A)]  # an admin write, committed, then dual-written
FAILOVER_SYNC = [
    StartElection(B), RequestVote(B, A), BecomeLeader(B), Fetch(A, B), KRaftLeaderChange(B),
    WaitForControllerQuorum(B), BecomeZkController(B), BecomeZkController(B), SyncKRaftToZk(B),
]


def _take(state: ClusterState, *actions: Action) -> ClusterState:
    """Apply ``actions``, each enabled (``tests.conftest.run`` would stop at the divergence's violations)."""
    for action in actions:
        after = step(state, action)
        assert after is not None, f"not enabled: {action}"
        state = after
    return state


def _shrunk(s: PartitionState) -> PartitionState:
    """The partition's state as a write ZooKeeper should never have taken would leave it: the ISR shrunk."""
    return s.replace(isr=s.isr[:1])


def _diverged() -> ClusterState:
    """The dual-write scope in DUAL_WRITE, its partition's state znode overwritten behind KRaft's back."""
    state = initial_state(SCOPES["dual-write"])
    zk, results = zkm.multi(state.zk, NO_SESSION, (SetData(P0, _shrunk(znode_data(state, P0))),), reader=-1)
    assert zkm.succeeded(results)
    return state.replace(zk=zk)


def test_dual_write_writes_the_change_alone():
    """KIP-866 §Dual Metadata Writes: a config change is one multi of the epoch check, the config and
    /migration; the partition, unchanged since /migration's offset, is not written again."""
    state = run(initial_state(SCOPES["dual-write"]), *CONFIG_CHANGE[:-1])
    after = step(state, CONFIG_CHANGE[-1])
    assert after is not None
    assert after.ghost.last_multi == (zkm.ZkCode.OK,) * 3
    assert zkm.get(after.zk, P0) == zkm.get(state.zk, P0)
    assert znode_data(after, CONFIG) == image_of(after.controllers[0].log).config != znode_data(state, CONFIG)


def test_divergence_survives_dual_writes_and_a_failovers_full_sync_heals_it():
    """What ZooKeeper holds apart from the image stays through a dual write, which advances /migration past
    it; the next leader's SyncKRaftToZk reads ZooKeeper, finds the difference and writes the image's state."""
    state = _diverged()
    healthy = znode_data(initial_state(SCOPES["dual-write"]), P0)
    assert not zk_equals_image_at_migration_offset(state)
    state = _take(state, *CONFIG_CHANGE)
    assert znode_data(state, P0) == _shrunk(healthy)
    assert znode_data(state, MIGRATION).kraft_metadata_offset == state.controllers[0].high_watermark
    assert not zk_equals_image_at_migration_offset(state)
    state = _take(state, *FAILOVER_SYNC)
    assert (znode_data(state, P0).leader, znode_data(state, P0).isr) == (healthy.leader, healthy.isr)
    assert zk_equals_image_at_migration_offset(state)


def test_implementation_keeps_the_divergence_until_the_failovers_sync_as_the_model_does():
    """The same divergence put into the implementation's ZooKeeper: its driver writes the config alone, and the
    new leader's sync restores the partition's ISR."""
    diff = Differential(SCOPES["dual-write"])
    cluster = diff.cluster
    healthy = znode_data(diff.model, P0)
    cluster.port.set_data(cluster.operator_session, P0, encode(P0, _shrunk(healthy), cluster.now))

    def held(path: str) -> object:
        return decode(path, cluster.port.get_data(cluster.operator_session, path)[0])

    config = held(CONFIG)
    for action in CONFIG_CHANGE:
        assert cluster.perform(action) == [action]
    assert held(P0) == _shrunk(healthy) and held(CONFIG) != config
    for action in FAILOVER_SYNC:
        assert cluster.perform(action) == [action]
    assert (held(P0).isr, held(P0).leader) == (healthy.isr, healthy.leader)


def test_delta_of_the_last_record_misses_an_earlier_change():
    """The seeded bug dual_write_delta_of_last_record: a broker fenced (its partition change) and unfenced again
    before the dual write; the delta of the last record alone (the unfencing) leaves the partition change out,
    yet /migration moves past it."""
    scope = SCOPES["broker-migration"]
    bug = Variant(frozenset({Bug.DUAL_WRITE_DELTA_OF_LAST_RECORD}))
    steps = [SessionTimeout(BrokerId(0), A), BrokerHeartbeat(BrokerId(0), A), Fetch(B, A)]
    state = run(initial_state(scope), *steps, variant=bug)
    after = step(state, DualWrite(A), bug)
    assert after is not None and not zk_equals_image_at_migration_offset(after)
    correct = step(state, DualWrite(A), CORRECT)
    assert correct is not None and zk_equals_image_at_migration_offset(correct)
    assert len(after.ghost.last_multi) < len(correct.ghost.last_multi)  # fewer ops: the partition left out


def test_simulation_catches_the_implementations_delta_of_the_last_record():
    """The default campaign's scenario, its faults on: the implementation's dual write, taking the newest
    record's change alone, disagrees with the model at that DualWrite and breaks ZkEqualsImageAtMigrationOffset."""
    sim = checked_simulation(scenario("sim-migration"), 0, parse_faults("all"),
                             bugs=frozenset({ImplBug.DUAL_WRITE_DELTA_OF_LAST_RECORD}), variant=CORRECT)
    try:
        for _ in range(2_000):
            if sim.step() is None:
                break
    except Disagreement as found:
        assert isinstance(found.steps[-1], DualWrite)
        assert "ZkEqualsImageAtMigrationOffset" in found.broken
        return
    raise AssertionError("the seeded bug escaped seed 0 of sim-migration")
