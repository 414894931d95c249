"""KIP-866's metrics (§Metrics) as the processes expose them, and what a dashboard of the cluster shows.

Rules:
- Each node's ``metrics()`` is its MBeans, Kafka's names to values, computed from what the
  process holds (nothing is read from ZooKeeper or asked of another node). A metric the process
  does not report is None: the migration's metrics are reported only by the active KRaft
  controller, a dead process reports nothing.
- ``cluster_metrics(cluster)`` combines the reports as an operator reading every process's MBeans
  would: the controller metrics of the active KRaft controller with the newest epoch (a deposed
  leader goes on reporting until it learns it was deposed), else MetadataType ZooKeeper when a
  ZooKeeper controller runs; and each live broker's MetadataType. Its keys are
  ``model.metrics.metrics``'s; the comparison of the two lives in ``properties.differential``
  (``impl/`` computes nothing with the model's functions).

Names: ``ActiveControllerCount`` is Kafka's gauge of the active controller (QuorumControllerMetrics
and ZooKeeper's KafkaController); ``current-epoch`` is an attribute of Kafka's ``raft-metrics``
(KafkaRaftMetrics), written here as ``name=current-epoch`` so that every metric has one key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from impl.cluster import Cluster

_CONTROLLER = "kafka.controller:type=KafkaController,name="
ZK_WRITE_BEHIND_LAG = _CONTROLLER + "ZkWriteBehindLag"
ZK_MIGRATION_STATE = _CONTROLLER + "ZkMigrationState"
MIGRATING_ZK_BROKER_COUNT = _CONTROLLER + "MigratingZkBrokerCount"
CONTROLLER_METADATA_TYPE = _CONTROLLER + "MetadataType"
ACTIVE_CONTROLLER_COUNT = _CONTROLLER + "ActiveControllerCount"
BROKER_METADATA_TYPE = "kafka.server:type=KafkaServer,name=MetadataType"
CURRENT_EPOCH = "kafka.server:type=raft-metrics,name=current-epoch"

# The MetadataType enumeration (KIP-866 §Metrics).
ZOOKEEPER, KRAFT, DUAL = 1, 2, 3

# What the active KRaft controller reports about the migration, and the dashboard's name for each.
MIGRATION_METRICS = {
    ZK_WRITE_BEHIND_LAG: "ZkWriteBehindLag",
    ZK_MIGRATION_STATE: "ZkMigrationState",
    MIGRATING_ZK_BROKER_COUNT: "MigratingZkBrokerCount",
    CONTROLLER_METADATA_TYPE: "MetadataType",
}


def cluster_metrics(cluster: Cluster) -> dict:
    """The cluster's KIP-866 metrics, from its processes' reports (the keys of ``model.metrics.metrics``)."""
    controllers = [(k, cluster.controllers[k].metrics()) for k in sorted(cluster.controllers)]
    brokers = {b: cluster.brokers[b].metrics() for b in sorted(cluster.brokers)}
    active = [(k, r) for k, r in controllers if r[ACTIVE_CONTROLLER_COUNT] == 1]
    out: dict = dict.fromkeys(MIGRATION_METRICS.values())
    if active:
        _, newest = max(active, key=lambda kr: kr[1][CURRENT_EPOCH])  # the first of equals, as the model's max
        out.update({key: newest[name] for name, key in MIGRATION_METRICS.items()})
    elif any(r[CONTROLLER_METADATA_TYPE] == ZOOKEEPER for r in brokers.values()):
        out["MetadataType"] = ZOOKEEPER
    out["BrokerMetadataType"] = {b: r[BROKER_METADATA_TYPE] for b, r in brokers.items()
                                 if r[BROKER_METADATA_TYPE] is not None}
    return out

