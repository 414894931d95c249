"""The KIP-866 metrics the nodes expose (impl.metrics), and the differential check that holds them to the model's.

Seeds: KIP-866 §Metrics (the MBean names and who reports each), §Dual Metadata Writes (the
write-behind lag).
"""

from __future__ import annotations

import pytest

from impl.broker import BrokerNode
from impl.kraft_controller import ControllerNode
from impl.metrics import (
    ACTIVE_CONTROLLER_COUNT,
    BROKER_METADATA_TYPE,
    CONTROLLER_METADATA_TYPE,
    DUAL,
    KRAFT,
    MIGRATING_ZK_BROKER_COUNT,
    ZK_MIGRATION_STATE,
    ZK_WRITE_BEHIND_LAG,
    ZOOKEEPER,
    cluster_metrics,
)
from model.actions import (
    AlterConfigs,
    BecomeLeader,
    DualWrite,
    Fetch,
    KRaftLeaderChange,
    RequestVote,
    StartElection,
)
from model.metrics import metrics
from model.scopes import SCOPES
from properties.differential import Differential, Disagreement
from properties.regressions import A, B, dual_write_scope


def test_metric_names_are_the_kips_mbeans():
    """KIP-866 §Metrics: the names an operator's JMX dashboard reads."""
    assert ZK_WRITE_BEHIND_LAG == "kafka.controller:type=KafkaController,name=ZkWriteBehindLag"
    assert ZK_MIGRATION_STATE == "kafka.controller:type=KafkaController,name=ZkMigrationState"
    assert MIGRATING_ZK_BROKER_COUNT == "kafka.controller:type=KafkaController,name=MigratingZkBrokerCount"
    assert CONTROLLER_METADATA_TYPE == "kafka.controller:type=KafkaController,name=MetadataType"
    assert BROKER_METADATA_TYPE == "kafka.server:type=KafkaServer,name=MetadataType"
    assert (ZOOKEEPER, KRAFT, DUAL) == (1, 2, 3)


def test_controller_reports_the_migration_only_while_active():
    """KIP-866 §Metrics: "only reported by the active controller"; a follower reports nothing of it."""
    diff = Differential(dual_write_scope())
    leader, follower = diff.cluster.controllers[A].metrics(), diff.cluster.controllers[B].metrics()
    assert leader[ACTIVE_CONTROLLER_COUNT] == 1 and follower[ACTIVE_CONTROLLER_COUNT] == 0
    assert leader[ZK_MIGRATION_STATE] == 2  # Migration (the KIP's byte)
    assert leader[MIGRATING_ZK_BROKER_COUNT] == 2
    assert leader[CONTROLLER_METADATA_TYPE] == DUAL  # it dual-writes
    assert all(follower[name] is None for name in (ZK_WRITE_BEHIND_LAG, ZK_MIGRATION_STATE,
                                                   MIGRATING_ZK_BROKER_COUNT, CONTROLLER_METADATA_TYPE))


def test_zookeeper_controller_and_brokers_report_metadata_type_zookeeper():
    """KIP-866 §Metrics: each broker reports MetadataType; the ZooKeeper controller reports ZooKeeper (1)."""
    diff = Differential(SCOPES["election"])  # warmed up: broker 0 won /controller
    controller, other = diff.cluster.brokers[0].metrics(), diff.cluster.brokers[1].metrics()
    assert controller[BROKER_METADATA_TYPE] == other[BROKER_METADATA_TYPE] == ZOOKEEPER
    assert controller[CONTROLLER_METADATA_TYPE] == ZOOKEEPER and controller[ACTIVE_CONTROLLER_COUNT] == 1
    assert other[CONTROLLER_METADATA_TYPE] is None and other[ACTIVE_CONTROLLER_COUNT] == 0
    assert cluster_metrics(diff.cluster) == metrics(diff.model) == {
        "ZkWriteBehindLag": None, "ZkMigrationState": None, "MigratingZkBrokerCount": None,
        "MetadataType": ZOOKEEPER, "BrokerMetadataType": {0: ZOOKEEPER, 1: ZOOKEEPER},
    }


def test_write_behind_lag_counts_committed_records_zookeeper_lacks():
    """KIP-866 §Metrics ZkWriteBehindLag: a committed record not yet dual-written is one record of lag."""
    diff = Differential(dual_write_scope())
    assert cluster_metrics(diff.cluster)["ZkWriteBehindLag"] == 0
    diff.apply(AlterConfigs(A))
    assert cluster_metrics(diff.cluster)["ZkWriteBehindLag"] == 0  # appended, not committed (2 voters)
    diff.apply(Fetch(B, A))
    assert cluster_metrics(diff.cluster)["ZkWriteBehindLag"] == 1
    assert diff.cluster.controllers[A].metrics()[ZK_WRITE_BEHIND_LAG] == 1
    diff.apply(DualWrite(A))
    assert cluster_metrics(diff.cluster)["ZkWriteBehindLag"] == 0


def test_new_leaders_lag_gauge_counts_from_what_its_driver_last_read():
    """KIP-866 §Metrics ZkWriteBehindLag, as Kafka's gauge defines it (KRaftMigrationDriver's dualWriteOffset).

    A newly elected leader's gauge counts, once it is active (its LeaderChange committed), from the
    offset its driver last read from /migration (here: none yet, so its whole log) until its
    KRaftLeaderEvent re-reads /migration; the model defines the metric the same way, and the
    dashboard agrees with it at every step.
    """
    diff = Differential(dual_write_scope())
    for action in (StartElection(B), RequestVote(B, A), BecomeLeader(B)):
        assert diff.apply(action)
    assert diff.cluster.controllers[B].metrics()[ZK_WRITE_BEHIND_LAG] is None  # not active yet: no gauge
    assert diff.apply(Fetch(A, B))  # commits its LeaderChange: it activates
    own = diff.cluster.controllers[B].metrics()[ZK_WRITE_BEHIND_LAG]
    assert cluster_metrics(diff.cluster)["ZkWriteBehindLag"] == metrics(diff.model)["ZkWriteBehindLag"] == own
    assert own == 9  # the committed metadata records of the whole log: its driver has read no offset yet
    assert diff.apply(KRaftLeaderChange(B))
    assert diff.cluster.controllers[B].metrics()[ZK_WRITE_BEHIND_LAG] == 0


def test_dead_processes_report_nothing():
    """A stopped process has no MBeans: the dashboard lists only live brokers."""
    diff = Differential(dual_write_scope(), bounded=False)  # the scope's budget has no crash left
    from model.actions import CrashBroker, CrashController

    diff.apply(CrashBroker(0))
    diff.apply(CrashController(A))
    assert set(diff.cluster.brokers[0].metrics().values()) == {None}
    assert set(diff.cluster.controllers[A].metrics().values()) == {None}
    assert 0 not in cluster_metrics(diff.cluster)["BrokerMetadataType"]


def test_differential_check_reports_a_metric_the_implementation_gets_wrong(monkeypatch):
    """The differential check compares the processes' metrics with the model's after every step."""
    honest = ControllerNode.metrics

    def miscounting(self):
        report = honest(self)
        if report[MIGRATING_ZK_BROKER_COUNT] is not None:
            report[MIGRATING_ZK_BROKER_COUNT] += 1  # counts a fenced registration too, say
        return report

    monkeypatch.setattr(ControllerNode, "metrics", miscounting)
    with pytest.raises(Disagreement, match="metrics are not the model's: MigratingZkBrokerCount") as caught:
        Differential(dual_write_scope())
    assert "after Fetch(controller=3001, leader=3000)" in str(caught.value)  # its first report, in the warm-up
    assert "MigratingZkBrokerCount: impl 1, model 0" in str(caught.value)


def test_differential_check_reports_a_wrong_broker_metadata_type(monkeypatch):
    """A broker that reports KRaft while it runs in ZooKeeper mode is caught at the cold start."""
    honest = BrokerNode.metrics
    monkeypatch.setattr(BrokerNode, "metrics", lambda self: {**honest(self), BROKER_METADATA_TYPE: KRAFT})
    with pytest.raises(Disagreement, match="BrokerMetadataType"):
        Differential(SCOPES["election"])
