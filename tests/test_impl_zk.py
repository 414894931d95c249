"""The ZooKeeper-mode broker (impl.broker) and its controller role (impl.zk_controller), checked against the model.

Every situation runs through ``properties.differential.Differential``: the implementation and the
model take the same steps from the scope's cold start and warm-up, and must agree after each
one (the abstraction of the whole cluster equals the model's state). The tests then look at the
implementation itself (its ZooKeeper, its nodes' memory) for the point of the situation.

- Situations: one per protocol rule the ZooKeeper-era control plane keeps (KIP-380 generations,
  the /controller_epoch fencing, KIP-584 features), each a short script of model actions.
- Walks: seeded random walks over the model's enabled actions for every part-1 scope.
- Seeded bugs (``impl.bugs``): each must make the differential run disagree, both in its
  scripted situation and in a walk over its scope within a fixed number of seeds.
"""

from __future__ import annotations

import random

import pytest

from impl.broker import BrokerNode
from impl.bugs import IMPL_SEEDED_BUGS, ImplBug
from impl.protocol import Reconfigure, Start, Stop, Trace
from model.actions import (
    ChangeIbp,
    CrashBroker,
    Deliver,
    ElectController,
    ExpireSession,
    InitializeController,
    MigrateBrokerToKRaft,
    ObserveControllerEpoch,
    OpenSession,
    ProcessBrokerChange,
    RefreshFeatureCache,
    RegisterBroker,
    ResignController,
    RestartBroker,
    RollbackBrokerToZk,
    SendControlledShutdown,
    StopBroker,
    UpdateFeatures,
)
from model.scopes import GROUP_COORDINATOR, SAME_RANGE, SCOPES
from model.state import (
    CONTROLLER_EPOCH,
    FEATURES,
    ControlledShutdown,
    LeaderAndIsr,
    StopReplica,
    UpdateMetadata,
    broker_path,
    message_sort_key,
    partition_state_path,
)
from model.step import enabled_actions
from model.types import BrokerId, FeatureLevel, FeatureStatus, Ibp, PartitionId, ReplicaRole
from properties.differential import Differential, Disagreement, walk
from properties.mutants import DIFFERENTIAL_SEEDS, DIFFERENTIAL_STEPS
from tests.conftest import EXCLUDED, OFFLINE, TWO_PARTITIONS

B0, B1, B2 = BrokerId(0), BrokerId(1), BrokerId(2)
SCOPES_OWNED = {
    **{name: SCOPES[name] for name in ("fencing", "election", "bounce", "leader-bounce", "features",
                                       "features-upgrade", "features-downgrade", "cluster")},
    TWO_PARTITIONS.name: TWO_PARTITIONS,
    OFFLINE.name: OFFLINE,
    EXCLUDED.name: EXCLUDED,
}


# ---- helpers -------------------------------------------------------------------------------------

def run(diff: Differential, *actions) -> Differential:
    """Apply each action to both sides; each must be taken (a trace) by the implementation."""
    for action in actions:
        traces = diff.apply(action)
        assert traces, f"the implementation refused {action}"
    return diff


def in_flight(diff: Differential, kind: type, dest: int, **fields):
    """The one message of ``kind`` to ``dest`` (with ``fields``) in flight, as the model writes it."""
    found = [m for m in sorted(diff.model.network, key=message_sort_key)
             if isinstance(m, kind) and m.dest == dest and all(getattr(m, k) == v for k, v in fields.items())]
    assert len(found) == 1, f"expected one {kind.__name__} to {dest} with {fields}, found {found}"
    return found[0]


def deliver(diff: Differential, kind: type, dest: int, **fields) -> Differential:
    return run(diff, Deliver(in_flight(diff, kind, dest, **fields)))


def session_of(diff: Differential, b: int):
    return diff.model.brokers[b].session


def broker(diff: Differential, b: int) -> BrokerNode:
    return diff.cluster.brokers[b]


def znode(diff: Differential, path: str):
    """(bytes, Stat) of ``path`` in the implementation's ZooKeeper, or None."""
    return diff.cluster.port.snapshot().get(path)


def expire(diff: Differential, b: int) -> Differential:
    return run(diff, ExpireSession(session_of(diff, b)))


def take_over(diff: Differential, new: int, old: int = 0) -> Differential:
    """``old``'s session expires and ``new`` wins the next election (KIP-380's zombie controller)."""
    expire(diff, old)
    return run(diff, ObserveControllerEpoch(BrokerId(new)), ElectController(BrokerId(new)),
               InitializeController(BrokerId(new)))


def bounce(diff: Differential, b: int) -> Differential:
    """A clean restart fast enough that the controller sees only the new registration (KIP-380 §Motivation)."""
    b = BrokerId(b)
    return run(diff, StopBroker(b), RestartBroker(b), OpenSession(b), RegisterBroker(b))


# ---- registration and generations (KIP-380) ---------------------------------------------------------

def test_broker_epoch_is_czxid_of_its_registration():
    """KIP-380 §Broker Registration: the broker epoch is the czxid of /brokers/ids/<id>, learned in the same multi."""
    diff = Differential(SCOPES["fencing"])
    for b in (0, 1):
        _, stat = znode(diff, broker_path(BrokerId(b)))
        assert broker(diff, b).epoch == stat.czxid
        assert stat.ephemeral_owner == broker(diff, b).session


def test_broker_reregisters_with_a_larger_epoch_after_a_bounce():
    """KIP-380 §Broker Registration: each registration of the same id is a new znode, so a larger epoch."""
    diff = Differential(SCOPES["bounce"])
    before = broker(diff, 1).epoch
    bounce(diff, 1)
    assert broker(diff, 1).epoch > before


def test_broker_defers_control_requests_until_it_knows_its_epoch():
    """KAFKA-7235 / KIP-380 §Motivation: a restarted broker serves requests only once it has registered."""
    diff = Differential(SCOPES["bounce"])
    run(diff, StopBroker(B1), RestartBroker(B1))
    request = in_flight(diff, LeaderAndIsr, 1)
    assert diff.apply(Deliver(request)) == []  # stays in flight: the model's Deliver is not enabled either
    assert request in diff.model.network
    run(diff, OpenSession(B1), RegisterBroker(B1))
    deliver(diff, LeaderAndIsr, 1)  # now answered: STALE_BROKER_EPOCH, nothing applied
    assert broker(diff, 1).replicas == {}


def test_broker_rejects_request_addressed_to_its_earlier_generation():
    """KIP-380 §Broker Rejects Control Requests: a LeaderAndIsr for the previous generation is not applied."""
    diff = older_generation_request(Differential(SCOPES["bounce"]))
    assert broker(diff, 1).replicas == {}
    assert broker(diff, 1).controller_epoch == 0


def older_generation_request(diff: Differential) -> Differential:
    old = in_flight(diff, LeaderAndIsr, 1)
    bounce(diff, 1)
    return run(diff, Deliver(old))


def test_broker_rejects_request_of_an_older_controller_epoch():
    """KIP-380 / KAFKA-6082: after a new controller's request, the old controller's requests are stale."""
    diff = stale_controller_request(Differential(SCOPES["fencing"]))
    assert broker(diff, 1).controller_epoch == 2


def stale_controller_request(diff: Differential) -> Differential:
    take_over(diff, new=1)
    deliver(diff, UpdateMetadata, 1, controller_epoch=2)
    return deliver(diff, UpdateMetadata, 1, controller_epoch=1)


# ---- the controller election and its fencing (KIP-866 §Controller Leadership) ----------------------

def test_controller_election_bumps_epoch_with_compare_and_set():
    """KafkaZkClient.registerControllerAndIncrementControllerEpoch: /controller and the epoch CAS in one multi."""
    diff = Differential(SCOPES["fencing"])
    role = broker(diff, 0).controller
    data, stat = znode(diff, CONTROLLER_EPOCH)
    assert (role.epoch, role.epoch_zk_version) == (int(data), stat.version) == (1, 1)
    take_over(diff, new=1)
    data, stat = znode(diff, CONTROLLER_EPOCH)
    assert (broker(diff, 1).controller.epoch, int(data), stat.version) == (2, 2, 2)


def test_controller_election_fails_on_a_stale_observed_epoch():
    """The CAS on /controller_epoch: a broker that read the epoch before another won cannot win with it."""
    diff = Differential(SCOPES["election"])
    stale_election(diff)
    assert broker(diff, 1).controller is None
    assert broker(diff, 1).observed_epoch is None


def stale_election(diff: Differential) -> Differential:
    """Both brokers read /controller_epoch at version 1; 0 wins and its session expires; 1 tries with what it read."""
    expire(diff, 0)
    run(diff, ObserveControllerEpoch(B1), ResignController(B0), OpenSession(B0), RegisterBroker(B0),
        ObserveControllerEpoch(B0), ElectController(B0))
    expire(diff, 0)
    return run(diff, ElectController(B1))


def test_zombie_controller_write_is_fenced_and_it_resigns():
    """KIP-380/KAFKA-6082: a controller whose session expired writes with the old epoch version: the check
    fails, nothing is written, and it resigns."""
    diff = Differential(SCOPES["fencing"])
    zombie_update(diff)
    assert broker(diff, 0).controller is None
    data, _ = znode(diff, FEATURES)
    assert b'"max_version_level":3' in data


def zombie_update(diff: Differential) -> Differential:
    take_over(diff, new=1)
    return run(diff, OpenSession(B0), UpdateFeatures(B0, GROUP_COORDINATOR, FeatureLevel(2), True))


def test_controller_resigns_when_zookeeper_names_another():
    """onControllerResignation: the old controller learns from ZooKeeper that it lost /controller."""
    diff = Differential(SCOPES["fencing"])
    take_over(diff, new=1)
    run(diff, ResignController(B0))
    assert broker(diff, 0).controller is None
    assert not broker(diff, 0).notifications.pending


# ---- broker changes (KIP-380 §Controller Detects Bounced Broker) -----------------------------------

def test_controller_detects_fast_bounce_by_czxid():
    """KIP-380: the id stays in /brokers/ids across a fast bounce; the larger czxid tells the controller."""
    diff = Differential(SCOPES["bounce"])
    bounce(diff, 1)
    run(diff, ProcessBrokerChange(B0))
    assert broker(diff, 0).controller.live[1].epoch == broker(diff, 1).epoch
    in_flight(diff, UpdateMetadata, 1, broker_epoch=diff.model.brokers[1].epoch)


def test_controller_fails_a_bounced_leader_over_to_a_new_leader_epoch():
    """KIP-380 step 4: a bounced leader's partitions are failed over, so its old leader epoch is never reused."""
    diff = Differential(SCOPES["leader-bounce"])
    bounce(diff, 1)
    run(diff, ProcessBrokerChange(B0))
    data, _ = znode(diff, partition_state_path(PartitionId(0)))
    assert b'"leader":0' in data and b'"leader_epoch":1' in data
    in_flight(diff, LeaderAndIsr, 1, leader=B0, leader_epoch=1)


def test_controller_moves_leadership_on_controlled_shutdown():
    """KafkaController.doControlledShutdown: leaderships move away, ISRs shrink, followers are stopped."""
    diff = Differential(TWO_PARTITIONS)
    run(diff, SendControlledShutdown(B1))
    deliver(diff, ControlledShutdown, 0)
    in_flight(diff, LeaderAndIsr, 0, partition=PartitionId(0), leader=B0, isr=(B0,))
    in_flight(diff, StopReplica, 1, partition=PartitionId(1))
    deliver(diff, StopReplica, 1, partition=PartitionId(1))
    assert broker(diff, 1).replicas[1][1] is ReplicaRole.STOPPED


def test_broker_stop_replica_with_delete_partitions_no_longer_hosts_the_partition():
    """KIP-380 §Public Interfaces (StopReplicaRequest's delete_partitions), BrokerEpochIntegrationTest's
    testControlRequestWithNewerBrokerEpoch: a current-generation StopReplica that deletes the partition
    removes it from the broker (ReplicaManager.stopReplicas), where one that does not only stops it; the
    model does the same and LeaderEpochsNeverDecrease holds on both steps."""
    from model.harness import Inject

    diff = Differential(TWO_PARTITIONS)
    epoch = diff.model.brokers[1].epoch
    controller_epoch = broker(diff, 1).controller_epoch
    stop = StopReplica(B0, controller_epoch, epoch, dest=B1, partition=PartitionId(1), delete_partition=False)
    run(diff, Inject(stop))
    assert broker(diff, 1).replicas[1][1] is ReplicaRole.STOPPED
    run(diff, Inject(stop.replace(partition=PartitionId(0), delete_partition=True)))
    assert 0 not in broker(diff, 1).replicas and 1 in broker(diff, 1).replicas
    assert diff.model.brokers[1].replicas[0] is None


def test_controller_ignores_controlled_shutdown_of_an_earlier_generation():
    """KIP-380 §Controller Rejects ControlledShutdownRequest Sent from Former Generations."""
    diff = Differential(SCOPES["bounce"])
    run(diff, SendControlledShutdown(B1))
    bounce(diff, 1)
    run(diff, ProcessBrokerChange(B0))
    before = znode(diff, partition_state_path(PartitionId(0)))
    deliver(diff, ControlledShutdown, 0)
    assert znode(diff, partition_state_path(PartitionId(0))) == before


# ---- feature versioning (KIP-584) -------------------------------------------------------------------

def test_controller_refuses_a_broker_that_cannot_run_the_finalized_features():
    """KIP-584's broker protections: an incompatible broker is left out, and it exits when it reads /features."""
    diff = Differential(EXCLUDED)
    run(diff, *[a(b) for b in (B0, B1) for a in (OpenSession, RegisterBroker)],
        ObserveControllerEpoch(B0), ElectController(B0), InitializeController(B0))
    role = broker(diff, 0).controller
    assert set(role.live) == {0}
    assert role.refused == {(1, broker(diff, 1).epoch)}
    run(diff, RefreshFeatureCache(B1))
    assert not broker(diff, 1).alive


def test_controller_disables_features_on_ibp_downgrade_and_cache_keeps_its_epoch():
    """KIP-584 §Feature ZK node status (downgrade): /features becomes Disabled; the broker cache never goes back."""
    diff = Differential(SCOPES["features-downgrade"])
    feature_downgrade(diff)
    _, stat = znode(diff, FEATURES)
    assert broker(diff, 1).features == (stat.version, FeatureStatus.DISABLED, ())


def feature_downgrade(diff: Differential) -> Differential:
    run(diff, RefreshFeatureCache(B1))
    take_over(diff, new=1)
    return run(diff, RefreshFeatureCache(B1))


def test_controller_enables_features_on_ibp_upgrade():
    """KIP-584 §Feature ZK node status (upgrade): a controller at 2.7 enables a Disabled /features."""
    diff = Differential(SCOPES["features-upgrade"])
    take_over(diff, new=1)
    run(diff, RefreshFeatureCache(B1))
    assert broker(diff, 1).features[1] is FeatureStatus.ENABLED


def test_update_features_refuses_a_level_a_live_broker_cannot_run():
    """KIP-584 §Changes to Kafka Controller: a finalized level every admitted broker must support; nothing
    is written."""
    diff = Differential(SCOPES["features"])
    before = znode(diff, FEATURES)
    run(diff, UpdateFeatures(B0, GROUP_COORDINATOR, FeatureLevel(3), False))
    assert znode(diff, FEATURES) == before


# ---- the process: crash, stop, start, operator reconfiguration ---------------------------------------

def test_broker_crash_keeps_session_and_stop_closes_it():
    """A crash leaves the ephemeral registration until the session expires; a clean stop removes it at once."""
    diff = Differential(SCOPES["cluster"])
    run(diff, CrashBroker(B2))
    assert znode(diff, broker_path(B2)) is not None
    run(diff, StopBroker(B1))
    assert znode(diff, broker_path(B1)) is None
    assert not broker(diff, 1).alive and broker(diff, 1).session is None


def _drive(node: BrokerNode, event) -> list:
    """Run ``node``'s handler for an event that needs no ZooKeeper; the traces it yields."""
    traces = []
    for effect in node.handle(event):
        assert isinstance(effect, Trace), effect
        traces.append(effect.action)
    return traces


def _stopped(**config) -> BrokerNode:
    props = {"broker.id": "0", "inter.broker.protocol.version": "3.4-IV0", "zookeeper.connect": "zk:2181",
             "zookeeper.metadata.migration.enable": "true"}
    props.update(config)
    node = BrokerNode(0, props, SAME_RANGE)
    node._alive = False
    return node


def test_broker_reconfigure_moves_to_kraft_and_back():
    """KIP-866 §Broker Migration and §Rollback to ZK: process.roles=broker on a stopped broker, and back."""
    node = _stopped()
    migrate = Reconfigure(0, 1, (("node.id", "0"), ("process.roles", "broker")))
    assert _drive(node, migrate) == [MigrateBrokerToKRaft(B0)]
    assert node.kraft_mode
    assert _drive(node, Reconfigure(0, 2, (("process.roles", ""),))) == [RollbackBrokerToZk(B0)]
    assert not node.kraft_mode
    node.meta_properties = 1  # a KRaft broker that replayed POST_MIGRATION wrote meta.properties v1
    _drive(node, Reconfigure(0, 3, (("process.roles", "broker"),)))
    assert _drive(node, Reconfigure(0, 4, (("process.roles", ""),))) == []  # no way back any more
    assert node.kraft_mode


def test_broker_reconfigure_refuses_kraft_without_the_migration_flag():
    """KIP-866 §Migration Trigger 2: only a broker with zookeeper.metadata.migration.enable moves to KRaft."""
    node = _stopped(**{"zookeeper.metadata.migration.enable": "false"})
    assert _drive(node, Reconfigure(0, 1, (("process.roles", "broker"),))) == []
    assert not node.kraft_mode
    assert _drive(node, Reconfigure(0, 2, (("inter.broker.protocol.version", "3.6-IV1"),))) == \
        [ChangeIbp(B0, Ibp.IBP_3_6_IV1)]


def test_broker_start_takes_a_new_incarnation_only_when_it_talks_to_kraft():
    """KIP-866 §Broker Registration: a process with the migration flag registers with KRaft under a new incarnation."""
    node = _stopped()
    assert _drive(node, Start(0, 1, incarnation=77)) == [RestartBroker(B0)]
    assert node.incarnation == 77
    zk_only = _stopped(**{"zookeeper.metadata.migration.enable": "false"})
    _drive(zk_only, Start(0, 1, incarnation=78))
    assert zk_only.incarnation == 0
    assert _drive(zk_only, Start(0, 2, incarnation=79)) == []  # already running
    assert _drive(_stopped(), Stop(0, 3)) == []  # not running


# ---- walks -------------------------------------------------------------------------------------------

WALK_SEEDS = 30


@pytest.mark.parametrize("name", sorted(SCOPES_OWNED))
def test_walks_agree_with_model(name):
    """Random walks over the model's enabled actions: the implementation agrees after every step."""
    for seed in range(WALK_SEEDS):
        walk(SCOPES_OWNED[name], seed, 200)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SCOPES_OWNED))
def test_walks_agree_with_model_many_seeds(name):
    for seed in range(WALK_SEEDS, 500):
        walk(SCOPES_OWNED[name], seed, 200)


# ---- seeded bugs -------------------------------------------------------------------------------------

def swarm_walk(scope, seed: int, steps: int, bugs: frozenset[ImplBug]) -> Differential:
    """A walk that, per seed, leaves out about half of the action kinds (swarm testing, Groce et al. 2012).

    A uniform walk rarely strings together the ten steps a zombie controller or a stale election
    needs; leaving out, say, ResignController or Deliver for a whole walk makes those paths common.
    """
    rng = random.Random(seed)
    diff = Differential(scope, bugs=bugs, seed=seed)
    decided: dict[type, bool] = {}
    for _ in range(steps):
        actions = enabled_actions(diff.model, scope)
        if not actions:
            break
        for a in actions:
            if type(a) not in decided:
                decided[type(a)] = rng.random() < 0.5
        allowed = [a for a in actions if not decided[type(a)]] or actions
        diff.apply(rng.choice(allowed))
    return diff


# The situation each mistake gets wrong, and the scope it is scripted in.
SCENARIOS = {
    ImplBug.ACCEPT_OLDER_BROKER_EPOCH: ("bounce", older_generation_request),
    ImplBug.ACCEPT_STALE_CONTROLLER_EPOCH: ("fencing", stale_controller_request),
    ImplBug.CONTROLLER_WRITE_WITHOUT_EPOCH_CHECK: ("fencing", zombie_update),
    ImplBug.ELECTION_SETS_EPOCH_WITHOUT_VERSION: ("election", stale_election),
    ImplBug.BROKER_EPOCH_FROM_SESSION_ID: ("bounce", None),  # the warm-up's first registration shows it
    ImplBug.FEATURE_CACHE_GOES_BACK: ("features-downgrade", feature_downgrade),
}
# Swarm walks for the mistakes whose paths are long (a zombie's write, a lost election race): (scope, seeds).
SWARMS = {
    ImplBug.ACCEPT_STALE_CONTROLLER_EPOCH: ("fencing", 60),
    ImplBug.CONTROLLER_WRITE_WITHOUT_EPOCH_CHECK: ("fencing", 100),
    ImplBug.ELECTION_SETS_EPOCH_WITHOUT_VERSION: ("election", 150),
}
MINE = [b for b in IMPL_SEEDED_BUGS if b.bug in SCENARIOS]


def test_every_bug_of_the_zk_nodes_is_registered():
    assert {b.bug for b in MINE} == set(SCENARIOS)
    assert all(b.scope in SCOPES for b in MINE)


@pytest.mark.parametrize("seeded", MINE, ids=lambda b: b.name)
def test_seeded_bug_caught_in_its_situation(seeded):
    """The scripted situation the mistake gets wrong: the differential run disagrees."""
    scope_name, scenario = SCENARIOS[seeded.bug]
    scope = SCOPES_OWNED[scope_name]
    with pytest.raises(Disagreement):
        diff = Differential(scope, bugs=frozenset({seeded.bug}))
        if scenario is not None:
            scenario(diff)
    if scenario is not None:  # and the correct implementation goes through the same situation
        scenario(Differential(scope))


@pytest.mark.parametrize("seeded", MINE, ids=lambda b: b.name)
def test_seeded_bug_caught_by_walks_of_its_scope(seeded):
    """What ``kraftcheck mutants`` requires: plain walks of the registered scope find it within its seed budget."""
    for seed in range(DIFFERENTIAL_SEEDS):
        try:
            walk(SCOPES[seeded.scope], seed, DIFFERENTIAL_STEPS, bugs=frozenset({seeded.bug}))
        except Disagreement:
            return
    pytest.fail(f"{seeded.name}: no disagreement in {DIFFERENTIAL_SEEDS} walks of {seeded.scope}")


@pytest.mark.parametrize("bug", sorted(SWARMS, key=lambda b: b.value), ids=lambda b: b.value)
def test_seeded_bug_caught_by_swarm_walks(bug):
    """Swarm walks find the long-path mistakes in a few seeds (a plain walk needs up to hundreds)."""
    scope_name, seeds = SWARMS[bug]
    for seed in range(seeds):
        try:
            swarm_walk(SCOPES_OWNED[scope_name], seed, 200, bugs=frozenset({bug}))
        except Disagreement:
            return
    pytest.fail(f"{bug.value}: no disagreement in {seeds} swarm walks of {scope_name}")
