"""KIP-584 feature versioning in the ZooKeeper era: the /features znode, its status and epoch.

The seed: the controller bootstraps /features by its IBP (§Feature ZK node status: new cluster,
upgrade, downgrade); the znode's version is the feature epoch, "monotonically increasing";
UpdateFeatures is validated by the controller (AllowDowngrade for a lower level or a deletion by
a level below 1; every live broker must support the new level); brokers refuse to be admitted, or
die, when a finalized level falls outside their supported range. Errors are shipped Kafka's
INVALID_REQUEST (reference §5.2).
"""

from __future__ import annotations

from model.actions import (
    ElectController,
    ExpireSession,
    InitializeController,
    ObserveControllerEpoch,
    OpenSession,
    ProcessBrokerChange,
    RefreshFeatureCache,
    RegisterBroker,
    UpdateFeatures,
)
from model.bugs import CORRECT, Bug
from model.invariants import violations, witnessed
from model.outcome import error_of
from model.scopes import GROUP_COORDINATOR, SAME_RANGE, SCOPES, cold_state, initial_state, ranges
from model.state import (
    FEATURES,
    NO_FEATURES,
    AppliedWrite,
    Budget,
    FeatureCache,
    FeaturesZNode,
    LeaderAndIsr,
    LiveBroker,
    UpdateMetadata,
    broker_path,
)
from model.step import step
from model.types import NO_SESSION, Errors, FeatureStatus, Ibp, ZkCode
from model.zk_era import decide_update_features as decide_with_reason
from model.zk_era import incompatible_features
from model.zookeeper import WatchKind
from tests.conftest import EXCLUDED, buggy, messages, run, tree, znode


def decide_update_features(*args):
    """The decision as (error code, finalized features): its refusal's code, NONE when it has none."""
    refused, finalized = decide_with_reason(*args)
    return error_of(refused), finalized

ENABLED, DISABLED = FeatureStatus.ENABLED, FeatureStatus.DISABLED
GC = GROUP_COORDINATOR


def failover_to_broker_1(state):
    """Controller 0's session expires (zxid 10); broker 1 wins epoch 2 (zxid 11) and initializes."""
    return run(state, ExpireSession(1), ObserveControllerEpoch(1), ElectController(1), InitializeController(1))


# ---- bootstrap (KIP-584 §Feature ZK node status) ------------------------------------------------------


def test_bootstrap_new_cluster_finalizes_the_controllers_supported_ranges():
    """KIP-584 "New cluster bootstrap": /features absent and IBP >= 2.7: create it Enabled with the
    controller's supported features finalized."""
    state = run(
        cold_state(SCOPES["fencing"]),
        OpenSession(0),
        RegisterBroker(0),
        OpenSession(1),
        RegisterBroker(1),
        ObserveControllerEpoch(0),
        ElectController(0),  # zxid 8
    )
    assert state.zk.zxid == 8
    state = run(state, InitializeController(0))
    assert state.ghost.last_multi == (ZkCode.OK, ZkCode.OK)  # check /controller_epoch, create /features
    node = znode(state, FEATURES)
    assert node.data == FeaturesZNode(ENABLED, ranges(group_coordinator=(1, 3)))
    assert (node.version, node.czxid, node.mzxid, node.ephemeral_owner) == (0, 9, 9, NO_SESSION)
    assert state.ghost.applied_writes == (AppliedWrite(0, 1, 1, FEATURES),)
    assert state.brokers[0].controller.epochs() == {0: 5, 1: 7}


def test_bootstrap_new_cluster_with_an_old_ibp_creates_features_disabled_and_empty():
    """KIP-584 "Cluster upgrade", before the upgrade: IBP < 2.7 and /features absent: create it
    Disabled with no finalized features."""
    scope = SCOPES["features-upgrade"].replace(features_znode=None)
    assert scope.ibps[0] is Ibp.IBP_2_6_IV0
    state = run(cold_state(scope), OpenSession(0), RegisterBroker(0), ObserveControllerEpoch(0), ElectController(0))
    state = run(state, InitializeController(0))
    node = znode(state, FEATURES)
    assert node.data == FeaturesZNode(DISABLED, ())
    assert (node.version, node.czxid) == (0, 7)


def test_bootstrap_upgrade_switches_disabled_features_to_enabled_with_nothing_finalized():
    """KIP-584 "Cluster upgrade": /features exists Disabled and the new controller's IBP is >= 2.7:
    switch it to Enabled, finalize nothing yet. A setData, so the feature epoch (version) grows and
    the znode (czxid) stays."""
    start = initial_state(SCOPES["features-upgrade"])
    # Controller 0 runs IBP 2.6 and left the Disabled znode alone.
    node = znode(start, FEATURES)
    assert (node.data, node.version, node.czxid) == (FeaturesZNode(DISABLED, ()), 0, 4)
    assert start.zk.zxid == 9
    state = failover_to_broker_1(start)
    assert state.ghost.last_multi == (ZkCode.OK, ZkCode.OK)  # check /controller_epoch, setData /features
    node = znode(state, FEATURES)
    assert node.data == FeaturesZNode(ENABLED, ())
    assert (node.version, node.czxid, node.mzxid) == (1, 4, 12)
    state = run(state, RefreshFeatureCache(1))
    assert state.brokers[1].features == FeatureCache(1, ENABLED, ())
    # "This lets the user finalize the features later."
    controller = state.brokers[1]
    assert decide_update_features(state, controller, GC, 2, False, CORRECT) == (
        Errors.NONE,
        ranges(group_coordinator=(1, 2)),
    )


def test_bootstrap_downgrade_switches_enabled_features_to_disabled_and_empty():
    """KIP-584 "Cluster downgrade": /features Enabled and the new controller's IBP is < 2.7: switch it
    to Disabled with empty features, by setData (the epoch grows). The brokers' caches follow."""
    start = initial_state(SCOPES["features-downgrade"])
    node = znode(start, FEATURES)
    assert (node.data, node.version) == (FeaturesZNode(ENABLED, ranges(group_coordinator=(1, 3))), 0)
    state = run(start, RefreshFeatureCache(1))
    assert state.brokers[1].features == FeatureCache(0, ENABLED, ranges(group_coordinator=(1, 3)))
    state = failover_to_broker_1(state)
    assert state.brokers[1].config.ibp is Ibp.IBP_2_6_IV0
    node = znode(state, FEATURES)
    assert node.data == FeaturesZNode(DISABLED, ())
    assert (node.version, node.czxid, node.mzxid) == (1, 4, 12)
    state = run(state, RefreshFeatureCache(1))
    assert state.brokers[1].features == FeatureCache(1, DISABLED, ())


def test_bootstrap_leaves_features_alone_when_status_already_matches_the_ibp():
    """Enabled + IBP >= 2.7, or Disabled + IBP < 2.7: no write at all."""
    for name in ("features", "features-upgrade"):
        state = initial_state(SCOPES[name])
        assert znode(state, FEATURES).version == 0
        assert state.ghost.applied_writes == ()


# ---- UpdateFeatures validation (decide_update_features) ------------------------------------------------


def features_controller():
    """Warm "features": controller 0 supports 1..3, broker 1 supports 1..2; finalized 1..2."""
    state = initial_state(SCOPES["features"])
    assert znode(state, FEATURES).data.finalized == ranges(group_coordinator=(1, 2))
    assert [b.id for b in state.brokers[0].controller.live] == [0, 1]
    return state, state.brokers[0]


def decide(feature, level, allow):
    state, controller = features_controller()
    return decide_update_features(state, controller, feature, level, allow, CORRECT)


def test_update_features_downgrade_without_allow_downgrade_is_refused():
    """KIP-584 UpdateFeatures: "AllowDowngrade ... When set to true, the feature version level is
    allowed to be downgraded"; without it, 2 -> 1 is INVALID_REQUEST."""
    assert decide(GC, 1, False) == (Errors.INVALID_REQUEST, ())


def test_update_features_downgrade_with_allow_downgrade_lowers_the_max_level():
    """KIP-584 UpdateFeatures: with AllowDowngrade the max level goes down, the min level stays."""
    assert decide(GC, 1, True) == (Errors.NONE, ranges(group_coordinator=(1, 1)))


def test_update_features_allow_downgrade_with_a_higher_level_is_refused():
    """Shipped: "downgrade type with higher level => INVALID_REQUEST" (reference §5.2). After a
    downgrade to 1, going back up to 2 needs a plain upgrade, not AllowDowngrade."""
    scope = SCOPES["features"].replace(budget=Budget(operator=1, max_in_flight=6))
    state = run(initial_state(scope), UpdateFeatures(0, GC, 1, True))
    assert znode(state, FEATURES).data.finalized == ranges(group_coordinator=(1, 1))
    controller = state.brokers[0]
    assert decide_update_features(state, controller, GC, 2, True, CORRECT) == (Errors.INVALID_REQUEST, ())
    assert decide_update_features(state, controller, GC, 2, False, CORRECT) == (
        Errors.NONE,
        ranges(group_coordinator=(1, 2)),
    )


def test_update_features_level_below_one_with_allow_downgrade_deletes_the_feature():
    """KIP-584 UpdateFeatures: "A value < 1, is special, and can be used to request the deletion"."""
    assert decide(GC, 0, True) == (Errors.NONE, ())
    assert decide(GC, -1, True) == (Errors.NONE, ())


def test_update_features_deletion_without_allow_downgrade_is_refused():
    """KIP-584: deleting a feature (level < 1) is a downgrade and needs AllowDowngrade."""
    assert decide(GC, 0, False) == (Errors.INVALID_REQUEST, ())


def test_update_features_deleting_a_feature_that_is_not_finalized_is_refused():
    """Shipped: "delete of non-existing => INVALID_REQUEST"."""
    assert decide("transaction_coordinator", 0, True) == (Errors.INVALID_REQUEST, ())


def test_update_features_to_the_same_level_is_refused():
    """Shipped ZK controller (reference §5.2): "same level => INVALID_REQUEST"."""
    assert decide(GC, 2, False) == (Errors.INVALID_REQUEST, ())


def test_update_features_to_a_level_a_live_broker_does_not_support_is_refused():
    """KIP-584 §Changes to Kafka Controller: the controller supports 3 but live broker 1 only up to 2."""
    state, controller = features_controller()
    assert controller.config.supported == ranges(group_coordinator=(1, 3))
    assert decide(GC, 3, False) == (Errors.INVALID_REQUEST, ())
    # Broker 1 is what stops it: without it in the live set the upgrade goes through.
    alone = controller.controller.replace(live=(LiveBroker(0, 6, controller.config.supported),))
    assert decide_update_features(state, controller.replace(controller=alone), GC, 3, False, CORRECT) == (
        Errors.NONE,
        ranges(group_coordinator=(1, 3)),
    )


def test_update_features_to_a_level_the_controller_does_not_support_is_refused():
    """KIP-584 §Changes to Kafka Controller: a level outside the controller's own supported range, or a
    feature it does not know."""
    assert decide(GC, 4, False) == (Errors.INVALID_REQUEST, ())
    assert decide("unknown_feature", 1, False) == (Errors.INVALID_REQUEST, ())


def test_update_features_while_versioning_is_disabled_is_refused():
    """/features Disabled: nothing can be finalized (KIP-584 §Feature ZK node status)."""
    state = initial_state(SCOPES["features-upgrade"])
    assert znode(state, FEATURES).data.status is DISABLED
    controller = state.brokers[0]
    assert decide_update_features(state, controller, GC, 1, False, CORRECT) == (Errors.INVALID_REQUEST, ())
    # An IBP 2.6 controller refuses even when /features is still Enabled.
    state, controller = features_controller()
    old = controller.replace(config=controller.config.replace(ibp=Ibp.IBP_2_6_IV0))
    assert decide_update_features(state, old, GC, 1, True, CORRECT) == (Errors.INVALID_REQUEST, ())


def test_update_features_downgrade_refused_without_allow_downgrade_then_applied_with_it():
    """An operator lowers group_coordinator from 2 to 1: refused without AllowDowngrade (nothing is
    written, not even a failed multi), applied with it as a setData that bumps the feature epoch."""
    scope = SCOPES["features"].replace(budget=Budget(operator=2, max_in_flight=6))
    state = initial_state(scope)
    assert state.zk.zxid == 9
    refused = run(state, UpdateFeatures(0, GC, 1, False))
    assert tree(refused) == tree(state) and refused.zk.zxid == 9
    assert refused.ghost.last_multi == ()
    assert refused.budget.operator == 1
    applied = run(refused, UpdateFeatures(0, GC, 1, True))
    assert applied.ghost.last_multi == (ZkCode.OK, ZkCode.OK)
    node = znode(applied, FEATURES)
    assert node.data == FeaturesZNode(ENABLED, ranges(group_coordinator=(1, 1)))
    assert (node.version, node.czxid, node.mzxid) == (1, 4, 10)
    assert applied.budget.operator == 0
    applied = run(applied, RefreshFeatureCache(0), RefreshFeatureCache(1))
    for b in applied.brokers:
        assert b.features == FeatureCache(1, ENABLED, ranges(group_coordinator=(1, 1)))


def test_update_features_deletion_removes_the_feature_from_the_znode():
    """KIP-584: an operator deletes group_coordinator (level 0, AllowDowngrade); /features keeps no
    entry for it and its epoch grows."""
    state = run(initial_state(SCOPES["features"]), UpdateFeatures(0, GC, 0, True))
    node = znode(state, FEATURES)
    assert node.data == FeaturesZNode(ENABLED, ())
    assert node.version == 1


# ---- broker protections (KIP-584's broker protections against race conditions) ------------------------


def test_incompatible_features_compares_finalized_levels_with_the_supported_range():
    """KIP-584's broker protections: finalized [min, max] must lie inside the broker's supported range;
    an unknown feature is incompatible."""
    supported = ranges(group_coordinator=(2, 3))
    assert incompatible_features(supported, ranges(group_coordinator=(2, 3))) == ()
    assert incompatible_features(supported, ranges(group_coordinator=(3, 3))) == ()
    assert incompatible_features(supported, ranges(group_coordinator=(1, 3))) == (GC,)
    assert incompatible_features(supported, ranges(group_coordinator=(2, 4))) == (GC,)
    assert incompatible_features(supported, ranges(other=(1, 1))) == ("other",)
    assert incompatible_features(supported, ()) == ()


def test_broker_whose_range_excludes_a_finalized_level_is_not_admitted_by_the_controller():
    """/features finalizes group_coordinator up to 3; broker 1 supports only up to 2. The controller
    leaves it out of its live brokers at failover and on every later broker change, and sends it
    nothing."""
    state = run(
        cold_state(EXCLUDED),
        OpenSession(0),
        RegisterBroker(0),  # zxid 6
        OpenSession(1),
        RegisterBroker(1),  # zxid 8
        ObserveControllerEpoch(0),
        ElectController(0),
    )
    before, action = state, InitializeController(0)
    state = run(state, action)
    assert "BrokerRefusedForFeatures" in witnessed(before, action, state)
    assert state.brokers[0].controller.live == (LiveBroker(0, 6, ranges(group_coordinator=(1, 3))),)
    assert state.network == {
        UpdateMetadata(0, 1, 6, dest=0, partitions=((0, 0),)),
        LeaderAndIsr(0, 1, 6, dest=0, partition=0, leader=0, leader_epoch=0, isr=(0, 1)),
    }
    # Broker 1 goes (its session expires) and comes back: still not admitted.
    state = run(state, ExpireSession(2))
    assert state.zk.notifications == {(0, "/brokers/ids", WatchKind.CHILD)}
    state = run(state, ProcessBrokerChange(0), OpenSession(1), RegisterBroker(1))
    assert znode(state, broker_path(1)).czxid == 12
    before = state
    state = run(state, ProcessBrokerChange(0))
    assert [b.id for b in state.brokers[0].controller.live] == [0]
    assert state.network == before.network
    assert messages(state, dest=1) == []


def test_broker_whose_cache_would_hold_an_incompatible_finalized_level_dies():
    """FinalizedFeatureChangeListener: incompatible finalized features are fatal for the broker.
    It exits without closing its session, so its registration stays until the session expires."""
    state = run(
        cold_state(EXCLUDED), OpenSession(0), RegisterBroker(0), OpenSession(1), RegisterBroker(1)
    )
    before = state
    state = run(state, RefreshFeatureCache(1))
    assert state.brokers[1].alive is False
    assert state.brokers[1].features == NO_FEATURES and state.brokers[1].session == NO_SESSION
    assert not state.brokers[1].registered
    assert tree(state) == tree(before) and state.zk.sessions == ((1, 0), (2, 1))
    # The compatible broker caches the same znode.
    state = run(state, RefreshFeatureCache(0))
    assert state.brokers[0].features == FeatureCache(0, ENABLED, ranges(group_coordinator=(1, 3)))


def test_broker_feature_cache_never_goes_back_in_epoch():
    """KIP-584: the cache epoch must not go backwards; a read of an older epoch changes nothing."""
    state = initial_state(SCOPES["fencing"])
    assert znode(state, FEATURES).version == 0
    ahead = FeatureCache(5, ENABLED, SAME_RANGE)
    broker = state.brokers[1].replace(features=ahead)
    state = state.replace(brokers=(state.brokers[0], broker))
    after = step(state, RefreshFeatureCache(1))
    assert after is not None and after.brokers == state.brokers
    # Nothing to read when the cache already holds the znode's epoch.
    current = run(initial_state(SCOPES["fencing"]), RefreshFeatureCache(1))
    assert current.brokers[1].features == FeatureCache(0, ENABLED, SAME_RANGE)
    assert step(current, RefreshFeatureCache(1)) is None


def test_broker_feature_cache_reset_on_disable_is_reported():
    """Seeded bug BROKER_RESETS_FEATURE_EPOCH: forgetting the epoch when /features turns Disabled
    sends the cache back to -1, and BrokerFeatureCacheNeverGoesBack reports it."""
    variant = buggy(Bug.BROKER_RESETS_FEATURE_EPOCH)
    state = run(initial_state(SCOPES["features-downgrade"]), RefreshFeatureCache(1))
    state = failover_to_broker_1(state)
    after = step(state, RefreshFeatureCache(1), variant)
    assert after.brokers[1].features == FeatureCache(-1, DISABLED, ())
    assert violations(state, RefreshFeatureCache(1), after) == ["BrokerFeatureCacheNeverGoesBack"]
