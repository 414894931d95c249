"""Named scopes: the bounds under which the model is checked, and the states checks start from.

A scope fixes the cluster's shape (brokers, partition assignment, IBPs, supported feature
ranges, the /features znode at the start), the perturbation budgets, the cap on messages in
flight, and the parameters that operator actions may take. ``initial_state(scope)`` builds the
start state; a *warm* scope starts from a running cluster, reached by running a canonical
prefix of real ``step``s from the cold start (so a warm start is itself a reachable state):
every broker opens a session and registers, broker 0 wins the election and initializes; its
start-up requests are still in flight.
"""

from __future__ import annotations

from model import zookeeper as zkm
from model.actions import (
    Deliver,
    ElectController,
    InitializeController,
    ObserveControllerEpoch,
    OpenSession,
    RegisterBroker,
)
from model.record import record
from model.state import (
    CONTROLLER_EPOCH,
    FEATURES,
    NO_FEATURES,
    TOPIC,
    Broker,
    BrokerConfig,
    Budget,
    ClusterState,
    FeatureRanges,
    FeaturesZNode,
    PartitionState,
    message_sort_key,
    partition_state_path,
)
from model.step import step
from model.types import (
    INITIAL_CONTROLLER_EPOCH,
    NO_SESSION,
    UNKNOWN_BROKER_EPOCH,
    BrokerId,
    ControllerEpoch,
    FeatureLevel,
    FeatureStatus,
    Ibp,
    LeaderEpoch,
    PartitionId,
)

GROUP_COORDINATOR = "group_coordinator"  # a feature name from KIP-584's examples


def ranges(**features: tuple[int, int]) -> FeatureRanges:
    return tuple(sorted((name, (FeatureLevel(lo), FeatureLevel(hi))) for name, (lo, hi) in features.items()))


@record
class Scope:
    name: str
    summary: str
    ibps: tuple[Ibp, ...]  # one per broker; the number of brokers
    supported: tuple[FeatureRanges, ...]  # one per broker
    partitions: tuple[tuple[BrokerId, ...], ...]  # replica assignment, preferred leader first
    budget: Budget
    features_znode: FeaturesZNode | None = None  # /features at the start; None: absent
    warm: bool = True
    ibp_choices: tuple[Ibp, ...] = ()  # values ChangeIbp may set
    feature_updates: tuple[tuple[str, int, bool], ...] = ()  # UpdateFeatures (feature, level, allow_downgrade)
    settled: bool = False  # a warm start delivers its start-up requests before checks begin
    max_depth: int = 12  # depth of the bounded search the seeded-bug tests run

    @property
    def brokers(self) -> int:
        return len(self.ibps)


def cold_state(scope: Scope) -> ClusterState:
    """Every broker process just started: no sessions, no controller, the topic already exists."""
    nodes = {
        CONTROLLER_EPOCH: INITIAL_CONTROLLER_EPOCH,
        TOPIC: scope.partitions,
    }
    for p, replicas in enumerate(scope.partitions):
        nodes[partition_state_path(PartitionId(p))] = PartitionState(
            replicas[0], LeaderEpoch(0), replicas, INITIAL_CONTROLLER_EPOCH
        )
    if scope.features_znode is not None:
        nodes[FEATURES] = scope.features_znode
    brokers = tuple(
        Broker(
            id=BrokerId(i),
            config=BrokerConfig(scope.ibps[i], scope.supported[i]),
            alive=True,
            session=NO_SESSION,
            registered=False,
            epoch=UNKNOWN_BROKER_EPOCH,
            controller_epoch=ControllerEpoch(0),
            replicas=(None,) * len(scope.partitions),
            metadata=(),
            features=NO_FEATURES,
            shutdown_sent=False,
            observed_epoch=None,
            controller=None,
        )
        for i in range(scope.brokers)
    )
    return ClusterState(zkm.initial(nodes), brokers, frozenset(), scope.budget)


def initial_state(scope: Scope) -> ClusterState:
    state = cold_state(scope)
    if not scope.warm:
        return state
    state = state.replace(budget=state.budget.replace(elections=1))
    prefix = [a(BrokerId(b)) for b in range(scope.brokers) for a in (OpenSession, RegisterBroker)]
    prefix += [ObserveControllerEpoch(BrokerId(0)), ElectController(BrokerId(0)), InitializeController(BrokerId(0))]
    for action in prefix:
        nxt = step(state, action)
        if nxt is None:
            raise ValueError(f"scope {scope.name}: warm start cannot take {action}")
        state = nxt
    while scope.settled and state.network:
        state = step(state, Deliver(min(state.network, key=message_sort_key)))
    # The history stays: the next registration of each broker must still beat the warm-up's.
    return state.replace(budget=scope.budget, ghost=type(state.ghost)())


SAME_RANGE = ranges(group_coordinator=(1, 3))

SCOPES: dict[str, Scope] = {
    s.name: s
    for s in (
        Scope(
            name="fencing",
            summary="2 brokers, 1 partition on both; the controller's session can expire and a new one win",
            ibps=(Ibp.IBP_2_7_IV0,) * 2,
            supported=(SAME_RANGE,) * 2,
            partitions=((BrokerId(0), BrokerId(1)),),
            budget=Budget(expiries=2, elections=2, drops=1, operator=1, shutdowns=1, max_in_flight=6),
            feature_updates=((GROUP_COORDINATOR, 2, True),),
            max_depth=9,
        ),
        Scope(
            name="election",
            summary="2 brokers racing for /controller across session expiries and clean stops",
            ibps=(Ibp.IBP_2_7_IV0,) * 2,
            supported=(SAME_RANGE,) * 2,
            partitions=((BrokerId(0), BrokerId(1)),),
            budget=Budget(expiries=2, elections=2, restarts=1, max_in_flight=6),
            settled=True,
            max_depth=10,
        ),
        Scope(
            name="bounce",
            summary="2 brokers, 1 partition; a broker bounces (fast) around a ControlledShutdown",
            ibps=(Ibp.IBP_2_7_IV0,) * 2,
            supported=(SAME_RANGE,) * 2,
            partitions=((BrokerId(0), BrokerId(1)),),
            budget=Budget(restarts=1, shutdowns=1, max_in_flight=8),
            max_depth=8,
        ),
        Scope(
            name="leader-bounce",
            summary="2 brokers; the partition's leader is not the controller, and it bounces",
            ibps=(Ibp.IBP_2_7_IV0,) * 2,
            supported=(SAME_RANGE,) * 2,
            partitions=((BrokerId(1), BrokerId(0)),),
            budget=Budget(restarts=1, shutdowns=1, max_in_flight=8),
            max_depth=8,
        ),
        Scope(
            name="features",
            summary="2 brokers with different supported ranges; UpdateFeatures and a broker restart",
            ibps=(Ibp.IBP_2_7_IV0,) * 2,
            supported=(ranges(group_coordinator=(1, 3)), ranges(group_coordinator=(1, 2))),
            partitions=((BrokerId(0), BrokerId(1)),),
            budget=Budget(restarts=1, operator=1, max_in_flight=6),
            features_znode=FeaturesZNode(FeatureStatus.ENABLED, ranges(group_coordinator=(1, 2))),
            feature_updates=(
                (GROUP_COORDINATOR, 3, False),
                (GROUP_COORDINATOR, 1, False),
                (GROUP_COORDINATOR, 1, True),
                (GROUP_COORDINATOR, 0, True),
            ),
            max_depth=8,
        ),
        Scope(
            name="features-upgrade",
            summary="KIP-584 upgrade case: /features Disabled, the next controller runs a newer IBP",
            ibps=(Ibp.IBP_2_6_IV0, Ibp.IBP_2_7_IV0),
            supported=(SAME_RANGE,) * 2,
            partitions=((BrokerId(0), BrokerId(1)),),
            budget=Budget(expiries=1, elections=1, max_in_flight=6),
            features_znode=FeaturesZNode(FeatureStatus.DISABLED, ()),
            max_depth=8,
        ),
        Scope(
            name="features-downgrade",
            summary="KIP-584 downgrade case: /features Enabled, the next controller runs an older IBP",
            ibps=(Ibp.IBP_2_7_IV0, Ibp.IBP_2_6_IV0),
            supported=(SAME_RANGE,) * 2,
            partitions=((BrokerId(0), BrokerId(1)),),
            budget=Budget(expiries=1, elections=1, max_in_flight=6),
            features_znode=FeaturesZNode(FeatureStatus.ENABLED, ranges(group_coordinator=(1, 3))),
            max_depth=8,
        ),
        Scope(
            name="cluster",
            summary="3 brokers, 2 partitions, every kind of perturbation several times: for long random walks",
            ibps=(Ibp.IBP_2_7_IV0,) * 3,
            supported=(SAME_RANGE, SAME_RANGE, ranges(group_coordinator=(1, 2))),
            partitions=((BrokerId(0), BrokerId(1)), (BrokerId(1), BrokerId(2))),
            budget=Budget(
                crashes=3,
                restarts=3,
                expiries=4,
                elections=6,
                outages=2,
                drops=3,
                operator=4,
                shutdowns=3,
                max_in_flight=10,
            ),
            features_znode=FeaturesZNode(FeatureStatus.ENABLED, ranges(group_coordinator=(1, 2))),
            ibp_choices=(Ibp.IBP_2_6_IV0, Ibp.IBP_2_7_IV0),
            feature_updates=((GROUP_COORDINATOR, 3, False), (GROUP_COORDINATOR, 1, True)),
            max_depth=14,
        ),
    )
}
