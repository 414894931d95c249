"""Partition leadership as the ZooKeeper controller runs it, and how brokers apply it.

Offline-partition election (KafkaController's OfflinePartitionLeaderElectionStrategy): the first
replica in assignment order that is both in the ISR and live becomes leader, the leader epoch
bumps, the ISR shrinks to its live members, and every live replica gets a LeaderAndIsr. A
broker applies a LeaderAndIsr only if its leader epoch is newer than the one it holds
(ReplicaManager; KIP-380 §Motivation relies on that ordering), and StopReplica stops a replica
without touching its leader epoch.
"""

from __future__ import annotations

from model.actions import (
    CrashBroker,
    Deliver,
    ElectPartitionLeader,
    ExpireSession,
    OpenSession,
    ProcessBrokerChange,
    RegisterBroker,
    RestartBroker,
    SendControlledShutdown,
    StopBroker,
)
from model.scopes import initial_state
from model.state import (
    ControlledShutdown,
    LeaderAndIsr,
    LocalReplica,
    PartitionState,
    StopReplica,
    partition_state_path,
)
from model.step import step
from model.types import ReplicaRole, ZkCode
from tests.conftest import OFFLINE, messages, run, znode

LEADER, FOLLOWER, STOPPED = ReplicaRole.LEADER, ReplicaRole.FOLLOWER, ReplicaRole.STOPPED


def offline_start():
    """OFFLINE, settled: controller 0 (epoch 1); epochs 0:5, 1:7, 2:9; partition 0 led by 1."""
    state = initial_state(OFFLINE)
    assert state.zk.zxid == 11 and state.network == frozenset()
    assert [b.epoch for b in state.brokers] == [5, 7, 9]
    assert znode(state, partition_state_path(0)).data == PartitionState(1, 0, (1, 2, 0), 0)
    assert [b.replicas for b in state.brokers] == [
        (LocalReplica(0, FOLLOWER),),
        (LocalReplica(0, LEADER),),
        (LocalReplica(0, FOLLOWER),),
    ]
    return state


def deliver_all(state):
    return run(state, *(Deliver(m) for m in messages(state)))


def test_broker_failure_elects_first_live_isr_replica_in_assignment_order():
    """Leader 1 stops; assignment (1, 2, 0): broker 2 comes before broker 0, so onBrokerFailure makes 2
    leader in epoch 1 in the same event, the ISR shrinks to (2, 0), and both live replicas get
    LeaderAndIsr with their broker epochs (KIP-380 §Controller Detects Bounced Broker, dead brokers)."""
    state = run(offline_start(), StopBroker(1), ProcessBrokerChange(0))
    assert state.brokers[0].controller.epochs() == {0: 5, 2: 9}
    assert state.ghost.last_multi == (ZkCode.OK, ZkCode.OK)  # check /controller_epoch, setData
    node = znode(state, partition_state_path(0))
    assert node.data == PartitionState(leader=2, leader_epoch=1, isr=(2, 0), controller_epoch=1)
    assert (node.version, node.mzxid, node.czxid) == (1, 13, 2)  # stop took zxid 12
    assert state.network == {
        LeaderAndIsr(0, 1, 9, dest=2, partition=0, leader=2, leader_epoch=1, isr=(2, 0)),
        LeaderAndIsr(0, 1, 5, dest=0, partition=0, leader=2, leader_epoch=1, isr=(2, 0)),
    }
    state = deliver_all(state)
    assert state.brokers[2].replicas == (LocalReplica(1, LEADER),)
    assert state.brokers[0].replicas == (LocalReplica(1, FOLLOWER),)
    # The partition has a live leader again: no further election.
    assert step(state, ElectPartitionLeader(0, 0)) is None


def test_offline_election_is_not_enabled_while_the_leader_is_live():
    """Only partitions whose leader is not live are elected (OfflinePartition in KafkaController)."""
    assert step(offline_start(), ElectPartitionLeader(0, 0)) is None


def test_broker_failure_election_skips_a_live_replica_that_left_the_isr():
    """Broker 2 shut down cleanly out of the ISR (1, 2, 0) but is live; then leader 1 crashes and its
    session expires. Broker 2 comes first in assignment order, yet broker 0 is elected: only ISR
    members are eligible (no unclean election). Broker 2 still gets the LeaderAndIsr, as a replica."""
    state = run(offline_start(), SendControlledShutdown(2))
    state = run(state, Deliver(ControlledShutdown(2, 9, 0)))
    assert znode(state, partition_state_path(0)).data == PartitionState(1, 1, (1, 0), 1)
    assert set(messages(state)) == {
        LeaderAndIsr(0, 1, 7, dest=1, partition=0, leader=1, leader_epoch=1, isr=(1, 0)),
        LeaderAndIsr(0, 1, 5, dest=0, partition=0, leader=1, leader_epoch=1, isr=(1, 0)),
        StopReplica(0, 1, 9, dest=2, partition=0, delete_partition=False),
    }
    before = run(state, CrashBroker(1), ExpireSession(2))
    state = run(before, ProcessBrokerChange(0))
    assert state.brokers[0].controller.epochs() == {0: 5, 2: 9}
    node = znode(state, partition_state_path(0))
    assert node.data == PartitionState(leader=0, leader_epoch=2, isr=(0,), controller_epoch=1)
    assert (node.version, node.mzxid) == (2, 14)
    assert state.network - before.network == {
        LeaderAndIsr(0, 1, 9, dest=2, partition=0, leader=0, leader_epoch=2, isr=(0,)),
        LeaderAndIsr(0, 1, 5, dest=0, partition=0, leader=0, leader_epoch=2, isr=(0,)),
    }


def test_partition_without_a_live_isr_replica_goes_offline_then_elects_the_returning_one():
    """Brokers 2 and 0 both shut down cleanly out of the ISR, leaving (1,); broker 1 dies. No ISR
    member is live: the partition goes offline (NoLeader, leader epoch bumped, ISR kept). When broker
    1 comes back as a new broker, ElectPartitionLeader elects it cleanly, in a newer leader epoch
    than its previous generation ever led in."""
    state = run(offline_start(), SendControlledShutdown(2), Deliver(ControlledShutdown(2, 9, 0)))
    state = run(state, SendControlledShutdown(0), Deliver(ControlledShutdown(0, 5, 0)))
    assert znode(state, partition_state_path(0)).data == PartitionState(1, 2, (1,), 1)
    state = run(state, CrashBroker(1), ExpireSession(2), ProcessBrokerChange(0))
    assert state.brokers[0].controller.epochs() == {0: 5, 2: 9}
    assert znode(state, partition_state_path(0)).data == PartitionState(-1, 3, (1,), 1)
    assert step(state, ElectPartitionLeader(0, 0)) is None
    state = run(state, RestartBroker(1), OpenSession(1), RegisterBroker(1), ProcessBrokerChange(0))
    assert state.brokers[0].controller.epochs() == {0: 5, 1: 17, 2: 9}
    state = deliver_all(state)  # make room under the scope's cap on messages in flight
    before = state
    state = run(state, ElectPartitionLeader(0, 0))
    assert znode(state, partition_state_path(0)).data == PartitionState(1, 4, (1,), 1)
    assert state.network - before.network == {
        LeaderAndIsr(0, 1, 17, dest=1, partition=0, leader=1, leader_epoch=4, isr=(1,)),
        LeaderAndIsr(0, 1, 5, dest=0, partition=0, leader=1, leader_epoch=4, isr=(1,)),
        LeaderAndIsr(0, 1, 9, dest=2, partition=0, leader=1, leader_epoch=4, isr=(1,)),
    }


def test_no_election_for_a_state_znode_whose_topic_znode_is_gone():
    """A partition's state znode left without its topic znode (the model's one topic, deleted on KRaft in dual write
    and then grown by a partition there, as a trace validation plays a real run that deletes one topic and grows
    another, then rolls back): the ZooKeeper controller knows partitions from the topic znodes only, and elects
    no leader for it (before, the step raised IndexError and a real run's check stopped with an internal error)."""
    from model import zookeeper as zkm
    from model.state import TOPIC
    from model.types import NO_SESSION
    from model.zookeeper import Delete

    state = offline_start()
    zk, results = zkm.multi(state.zk, NO_SESSION, (Delete(TOPIC),))
    assert results == (ZkCode.OK,)
    state = run(state.replace(zk=zk), StopBroker(1), ProcessBrokerChange(0))
    assert 1 not in state.brokers[0].controller.epochs()
    assert znode(state, partition_state_path(0)).data.leader == 1  # its leader is gone, and no election ran
    assert step(state, ElectPartitionLeader(0, 0)) is None
