"""The KIP-866 metrics, read off a state (KIP-866 §Metrics).

Each is what the active KRaft controller (or each broker) would report: ``ZkWriteBehindLag``,
``ZkMigrationState`` (as the profile's byte), ``MigratingZkBrokerCount`` and ``MetadataType``.
The implementation's nodes expose the same names, and differential tests compare the two.
"""

from __future__ import annotations

from model.kraft import ZkMigrationState, is_metadata
from model.kraft_quorum import committed_image, is_active
from model.migration import STATE_BYTES, MigrationDriverState, Profile
from model.state import ClusterState, KRaftController

# kafka.controller:type=KafkaController,name=MetadataType and kafka.server:type=KafkaServer,name=MetadataType
ZOOKEEPER, KRAFT, DUAL = 1, 2, 3


def active_controller(state: ClusterState) -> KRaftController | None:
    """The active controller with the newest epoch (a deposed one may still believe it is active)."""
    active = [c for c in state.controllers if is_active(c)]
    return max(active, key=lambda c: c.epoch) if active else None


def zk_write_behind_lag(state: ClusterState) -> int | None:
    """Committed metadata records past the offset the active controller's driver last wrote to (or read
    from) /migration: Kafka's gauge (KRaftMigrationDriver's dualWriteOffset), so a newly elected leader
    that has not read /migration yet reports its whole log. None when no controller reports it."""
    c = active_controller(state)
    if c is None or c.driver is None or c.driver.state is MigrationDriverState.UNINITIALIZED:
        return None
    if committed_image(c).migration_state is not ZkMigrationState.MIGRATION:
        return None
    offset = max(c.driver.migration_offset, 0)
    return sum(1 for e in c.log[offset:c.high_watermark] if is_metadata(e))


def zk_migration_state(state: ClusterState, profile: Profile = Profile.KIP) -> int | None:
    c = active_controller(state)
    if c is None:
        return None
    return STATE_BYTES[profile][committed_image(c).migration_state]


def migrating_zk_broker_count(state: ClusterState) -> int | None:
    c = active_controller(state)
    if c is None:
        return None
    return sum(1 for r in committed_image(c).brokers if r.is_migrating_zk_broker and not r.fenced)


def controller_metadata_type(state: ClusterState) -> int | None:
    """ZooKeeper (1) for a ZK controller, KRaft (2), or Dual (3) while the active controller dual-writes."""
    c = active_controller(state)
    if c is not None:
        return DUAL if c.driver is not None and c.driver.state.allows_dual_write else KRAFT
    if any(b.controller is not None and b.alive for b in state.brokers):
        return ZOOKEEPER
    return None


def broker_metadata_type(state: ClusterState) -> dict[int, int]:
    return {b.id: KRAFT if b.config.kraft_mode else ZOOKEEPER for b in state.brokers if b.alive}


def metrics(state: ClusterState, profile: Profile = Profile.KIP) -> dict[str, object]:
    return {
        "ZkWriteBehindLag": zk_write_behind_lag(state),
        "ZkMigrationState": zk_migration_state(state, profile),
        "MigratingZkBrokerCount": migrating_zk_broker_count(state),
        "MetadataType": controller_metadata_type(state),
        "BrokerMetadataType": broker_metadata_type(state),
    }
