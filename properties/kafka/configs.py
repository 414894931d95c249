"""The configuration of every Kafka process a run starts, phase by phase of KIP-866's runbook.

Ground truth: Kafka 3.9's ``docs/ops.html`` ("ZooKeeper to KRaft Migration"), ``KafkaConfig``'s
``validateValues``, and ``tests/kafkatest/services/kafka/kafka.py`` (``reconfigure_zk_for_migration``,
``reconfigure_zk_as_kraft``). Phases, as the KIP's operator sees them:

- ``zk``: a ZooKeeper-mode broker, migration off (before KIP-866 §Migration Trigger).
- ``migrating``: the same broker with ``zookeeper.metadata.migration.enable`` and the controller
  quorum's address (KIP-866 §Migration Trigger 2-3): it registers with KRaft as a migrating broker.
- ``kraft``: a KRaft broker (``process.roles=broker``), after the metadata is in KRaft
  (KIP-866 §Broker Migration).
- controllers are ``migration`` (flag on, ZooKeeper's address set) or ``finalized`` (both gone,
  KIP-866 §Finalizing the Migration).

Sizes are set for a 2-core machine (small buffers, one replica of internal topics); every
timeout a fault depends on is named in ``cluster``.
"""

from __future__ import annotations

from properties.kafka.cluster import BROKER_SESSION_TIMEOUT_MS, ZK_SESSION_TIMEOUT_MS, Cluster

FIRST_CONTROLLER_ID = 3000  # controller node ids must not collide with broker ids
SMALL = {
    "num.network.threads": 2,
    "num.io.threads": 2,
    "background.threads": 2,
    "num.recovery.threads.per.data.dir": 1,
    "offsets.topic.replication.factor": 1,
    "offsets.topic.num.partitions": 1,
    "transaction.state.log.replication.factor": 1,
    "transaction.state.log.min.isr": 1,
    "group.initial.rebalance.delay.ms": 0,
    "log.cleaner.dedupe.buffer.size": 8 * 1024 * 1024,  # the 128 MiB default is a heap buffer
    "auto.create.topics.enable": "false",
}


# Authorization, so that ACLs exist to migrate (KIP-866 §Controller Migration copies them; the runbooks make some):
# ZooKeeper-mode brokers keep theirs in /kafka-acl with AclAuthorizer; KRaft brokers and the controllers (which take
# the ZooKeeper brokers' forwarded CreateAcls in dual write) use StandardAuthorizer, the switch Kafka's docs/ops.html
# puts at the brokers' roll to KRaft. Every client here is PLAINTEXT's User:ANONYMOUS, a super user, so no request is
# ever denied, nor refused while a StandardAuthorizer has not loaded its ACLs (super users are exempt). From 3.5.0
# (KAFKA-14796): Kafka 3.4 refuses an authorizer in migration mode ("ZooKeeper migration does not yet support
# authorizers"), so a 3.4 cluster runs without one.
ACL_MIGRATION = (3, 5, 0)
SUPER_USERS = {"super.users": "User:ANONYMOUS"}
ZK_AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", **SUPER_USERS}
KRAFT_AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer", **SUPER_USERS}


def authorizer(cluster: Cluster, zookeeper_mode: bool) -> dict[str, str]:
    """The authorization settings of a process of ``cluster``: none before ``ACL_MIGRATION``."""
    if cluster.install.release < ACL_MIGRATION:
        return {}
    return ZK_AUTHORIZER if zookeeper_mode else KRAFT_AUTHORIZER


def ibp(version: tuple[int, int, int]) -> str:
    """inter.broker.protocol.version as ``MAJOR.MINOR``: it must equal the controllers' metadata.version."""
    return f"{version[0]}.{version[1]}"


def kraft_born_levels(version: tuple[int, int, int]) -> tuple[str, str]:
    """The ``kraft`` runbook's metadata.version levels as releases: what a KRaft-born cluster is formatted
    at, so that its upgrade moves (3.9 on 4.x, KIP-584's downgrade target; the release before on 3.x,
    3.3 at the least, the first KRaft-ready level), and what it upgrades to."""
    if version >= (4, 0, 0):
        return "3.9", ibp(version)
    return f"{version[0]}.{max(version[1] - 1, 3)}", ibp(version)


def zk_broker(cluster: Cluster, broker: int, phase: str) -> dict[str, object]:
    port = cluster.broker_ports[broker]
    config: dict[str, object] = {
        "broker.id": broker,
        "listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "inter.broker.listener.name": "PLAINTEXT",
        "inter.broker.protocol.version": ibp(cluster.install.release),
        "zookeeper.connect": cluster.zk_connect,
        "zookeeper.session.timeout.ms": ZK_SESSION_TIMEOUT_MS,
        "log.dirs": cluster.root / f"broker-{broker}" / "data",
        **SMALL,
        **authorizer(cluster, zookeeper_mode=True),
    }
    if phase == "migrating":
        config |= {
            "zookeeper.metadata.migration.enable": "true",
            "controller.quorum.voters": cluster.controller_voters(),
            "controller.listener.names": "CONTROLLER",
            # in ZooKeeper mode the CONTROLLER mapping is not added for us (effectiveListenerSecurityProtocolMap)
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        }
    elif phase != "zk":
        raise ValueError(f"unknown ZooKeeper-broker phase {phase!r}")
    return config


def kraft_broker(cluster: Cluster, broker: int) -> dict[str, object]:
    port = cluster.broker_ports[broker]
    return {
        "process.roles": "broker",
        "node.id": broker,
        "listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "controller.quorum.voters": cluster.controller_voters(),
        "controller.listener.names": "CONTROLLER",
        "broker.session.timeout.ms": BROKER_SESSION_TIMEOUT_MS,
        "log.dirs": cluster.root / f"broker-{broker}" / "data",
        **SMALL,
        **authorizer(cluster, zookeeper_mode=False),
    }


def controller(cluster: Cluster, node: int, migration: bool) -> dict[str, object]:
    port = cluster.controller_ports[node]
    config: dict[str, object] = {
        "process.roles": "controller",
        "node.id": node,
        "listeners": f"CONTROLLER://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "controller.quorum.voters": cluster.controller_voters(),
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": cluster.root / f"controller-{node}" / "data",
        "num.io.threads": 2,
        "num.network.threads": 2,
        "background.threads": 2,
        **authorizer(cluster, zookeeper_mode=False),
    }
    if migration:
        config |= {
            "zookeeper.metadata.migration.enable": "true",
            "zookeeper.connect": cluster.zk_connect,
            "zookeeper.session.timeout.ms": ZK_SESSION_TIMEOUT_MS,
            "inter.broker.listener.name": "PLAINTEXT",  # must name the ZooKeeper brokers' listener
        }
    return config
