"""What the model-independent properties remember of the past: observations, never decisions.

Rules:
- ``observe(before, actions, after)`` is the ``Observations`` (``model.state``) after a step, from
  the one before: it looks at the step's actions (a delivery, an operator's request), the messages
  the step sent (``ghost.sent``) and the two states, as someone outside the processes would, and
  calls no rule of the model. ``model.step.step`` records it after every step; differential
  testing records the implementation's own with the same function.
- What it keeps (``model.end_to_end_invariants`` reads it): per ZK broker, the last KRaft
  UpdateMetadata sent to it and whether that one was the last delivered (a lost or overtaken one
  leaves a broker's cache behind, which says nothing about the protocol); the metadata.version
  levels an operator forced a downgrade to; the KRaft LeaderAndIsr requests lost and not yet overtaken
  by one at least as new for the same broker and partition; the partitions of a deleted topic a ZK broker was left
  hosting without a StopReplica that reached it (``strays``: its StopReplica lost or refused, or the topic's absence
  told by a SendRPCsToBrokers, which sends from the image and has no StopReplica to send), and likewise the partitions
  a ZK broker hosts outside the replicas a KRaft LeaderAndIsr tells (a reassignment removed it): its StopReplica lost
  or refused, or the new replicas told by a SendRPCsToBrokers or while the controller did not reach that broker, or
  a LeaderAndIsr delivered to a broker its replicas leave out (SendRPCsToBrokers sends every target every partition;
  the model's ZK broker takes it, where Kafka's ignores a LeaderAndIsr that does not name it); and, for this step
  only, the brokers whose heartbeats the environment kept from the controller for a whole session timeout
  (``silenced``).
- The model has no clock: there, a live broker's heartbeats going unheard for a session timeout is
  a fault the environment injects, and spends ``Budget.timeouts`` on, in the step that times the
  broker out. That spending is what ``observe`` reads; the implementation's observer
  (``properties.differential``) reads its clock and the heartbeats its controllers answered.
- When nothing is observed, the same ``Observations`` object comes back, so a step that observes
  nothing costs no new ghost.
"""

from __future__ import annotations

from collections.abc import Sequence

from model.actions import Action, Deliver, Drop, Redeliver, SendRPCsToBrokers, SessionTimeout, UpdateMetadataVersion
from model.kraft import UpgradeType
from model.state import Broker, ClusterState, LeaderAndIsr, Observations, StopReplica, UpdateMetadata
from model.types import BrokerId, PartitionId


def observe(
    before: ClusterState, actions: Sequence[Action], after: ClusterState,
    silenced: frozenset[BrokerId] | None = None,
) -> Observations:
    """The observations after a step of ``actions`` from ``before`` to ``after``; ``silenced``: the
    brokers a clock says went unheard (None: the model's fault record, ``Budget.timeouts``)."""
    obs = before.ghost.observed
    told, settled, unsafe, lost = obs.told, obs.settled, obs.unsafe_downgrades, obs.lost
    strays, stopped = obs.strays, obs.stopped
    for action in actions:
        match action:
            case Drop(message=LeaderAndIsr(kraft=True) as m):
                lost = lost | {(m.dest, m.partition, m.leader_epoch)}
            case Deliver(message=LeaderAndIsr(kraft=True) as m) | Redeliver(message=LeaderAndIsr(kraft=True) as m):
                lost = frozenset(x for x in lost if x[:2] != (m.dest, m.partition) or x[2] > m.leader_epoch)
                if (m.dest, m.partition) in stopped and _hosts(after.brokers[m.dest], m.partition):
                    strays = strays | {(m.dest, m.partition)}  # sent before the StopReplica that it overtook
                if m.replicas and m.dest not in m.replicas and _hosts(after.brokers[m.dest], m.partition):
                    strays = strays | {(m.dest, m.partition)}  # a full LeaderAndIsr to a broker outside its replicas
            case Drop(message=StopReplica(kraft=True, delete_partition=True) as m):
                strays = strays | {(m.dest, m.partition)}
            case Deliver(message=StopReplica(kraft=True, delete_partition=True) as m) | Redeliver(
                message=StopReplica(kraft=True, delete_partition=True) as m
            ):
                if _hosts(after.brokers[m.dest], m.partition):  # the broker answered it with an error
                    strays = strays | {(m.dest, m.partition)}
                else:
                    stopped = stopped | {(m.dest, m.partition)}
            case SendRPCsToBrokers():
                for sent in after.ghost.sent:
                    if isinstance(sent, UpdateMetadata) and sent.kraft:
                        hosted = after.brokers[sent.dest].replicas
                        strays = strays | {(sent.dest, PartitionId(p)) for p in range(len(sent.partitions), len(hosted))
                                           if hosted[p] is not None}
            case Deliver(message=UpdateMetadata(kraft=True) as m) | Redeliver(message=UpdateMetadata(kraft=True) as m):
                if m == _told_to(obs.told, m.dest):
                    settled = settled | {m.dest}
                else:  # an older one overtook the last: the cache is behind until another comes
                    settled = settled - {m.dest}
            case UpdateMetadataVersion(level=level, upgrade_type=UpgradeType.UNSAFE_DOWNGRADE):
                unsafe = unsafe | {level}
            case SessionTimeout(broker=b) if silenced is None and after.budget.timeouts < before.budget.timeouts:
                silenced = frozenset({b})
    for sent in after.ghost.sent:
        if isinstance(sent, UpdateMetadata) and sent.kraft:
            last = _told_to(told, sent.dest)
            if last is None or sent.controller_epoch >= last.controller_epoch:
                told = tuple(sorted([(b, u) for b, u in told if b != sent.dest] + [(sent.dest, sent)], key=_broker))
                settled = settled - {sent.dest}
    strays = strays | _left_hosting(actions, after)
    silenced = silenced or frozenset()
    if (told, settled, unsafe, silenced, lost, strays, stopped) == (
        obs.told, obs.settled, obs.unsafe_downgrades, obs.silenced, obs.lost, obs.strays, obs.stopped
    ):
        return obs
    return Observations(told, settled, unsafe, silenced, lost, strays, stopped)


def _left_hosting(actions: Sequence[Action], after: ClusterState) -> frozenset[tuple[BrokerId, PartitionId]]:
    """(broker, partition) of a ZK broker hosting a partition whose new replicas, told in a KRaft LeaderAndIsr this
    step, leave it out, when no StopReplica could come with them: the step is a SendRPCsToBrokers (it sends from the
    image, Kafka's "we cannot send StopReplica requests from the image"), or the step's KRaft requests did not go to
    that broker at all (the controller does not reach it: fenced, or not registered)."""
    told = [m for m in after.ghost.sent if isinstance(m, LeaderAndIsr) and m.kraft and m.replicas]
    if not told:
        return frozenset()
    from_image = any(isinstance(a, SendRPCsToBrokers) for a in actions)
    reached = {m.dest for m in after.ghost.sent
               if isinstance(m, (LeaderAndIsr, UpdateMetadata, StopReplica)) and m.kraft}
    return frozenset((b.id, m.partition) for m in told for b in after.brokers
                     if b.id not in m.replicas and _hosts(b, m.partition) and (from_image or b.id not in reached))


def _hosts(b: Broker, p: PartitionId) -> bool:
    return p < len(b.replicas) and b.replicas[p] is not None


def _broker(entry: tuple[BrokerId, UpdateMetadata]) -> BrokerId:
    return entry[0]


def _told_to(told: tuple[tuple[BrokerId, UpdateMetadata], ...], broker: BrokerId) -> UpdateMetadata | None:
    for b, m in told:
        if b == broker:
            return m
    return None
