"""Mermaid sequence diagrams of traces: who did what to whom, step by step, and the step that broke.

Rules:
- One participant per process, declared first, in this order: ZooKeeper, each KRaft controller
  (ids from 3000), each broker. The ZooKeeper controller is a broker's role, so its steps start
  at that broker. A node a trace names outside its scope is declared too (never used undeclared).
- Each step is one line. A step that talks to another process is an arrow from the node that
  acts to the other: a message delivery from its sender to its destination (a lost message is a
  cross, a duplicate a dotted arrow), a ZooKeeper read or write from the node to ZooKeeper, an
  RPC from the caller to the callee (its response is inside the same step). A step a node takes
  alone (a fault, a timer, the operator's reconfiguration, a driver transition) is a Note over it.
- Every text starts with the step number, as in ``kraftcheck replay``'s table; the violating step
  is followed by a Note over the nodes it involved saying what broke.
- ``view(action)`` is the one place an action becomes a picture; ``kraftcheck replay``'s table uses
  its text and actor too. An action type without a case here is still drawn: a Note over its
  actor with its class name and fields.
- Mermaid ends a statement at a newline or ";" and reads "#" as the start of an entity: text is
  cleaned of them (``_clean``).
"""

from __future__ import annotations

from dataclasses import dataclass

from model import actions as act  # every action kind, matched by name below
from model.kraft import FIRST_CONTROLLER_ID
from model.state import ControlledShutdown, LeaderAndIsr, StopReplica, UpdateMetadata

ZOOKEEPER = "ZK"
ARROWS = {"call": "->>", "again": "-->>", "drop": "--x"}  # Mermaid's solid, dotted and crossed arrows


@dataclass(frozen=True)
class StepView:
    """One step as the diagram and the table show it: who acts, towards whom (None: alone), what."""

    actor: str  # a participant id: "ZK", "C3000", "B1"
    target: str | None
    text: str
    style: str = "call"  # "call", "again", "drop" (arrows) or "note"


def node(node_id: int) -> str:
    """The participant id of a broker or a KRaft controller."""
    return f"C{node_id}" if node_id >= FIRST_CONTROLLER_ID else f"B{node_id}"


def name(participant: str) -> str:
    """The participant's displayed name: "ZooKeeper", "controller 3000", "broker 1"."""
    if participant == ZOOKEEPER:
        return "ZooKeeper"
    return f"controller {participant[1:]}" if participant[0] == "C" else f"broker {participant[1:]}"


def message_text(m) -> str:
    """A message with its key fields, short: ``LeaderAndIsr p0 leader 1 epoch 3 isr [1, 2] (ctrl epoch 2)``."""
    fenced = f"controller epoch {getattr(m, 'controller_epoch', '?')}, broker epoch {m.broker_epoch}"
    match m:
        case LeaderAndIsr():
            isr = ", ".join(map(str, m.isr))
            return f"LeaderAndIsr p{m.partition} leader {m.leader} epoch {m.leader_epoch} isr [{isr}] ({fenced})"
        case UpdateMetadata():
            leaders = ", ".join(f"p{p} {leader}@{epoch}" for p, (leader, epoch) in enumerate(m.partitions))
            return f"UpdateMetadata leaders [{leaders}] ({fenced})"
        case StopReplica():
            return f"StopReplica p{m.partition}{' delete' if m.delete_partition else ''} ({fenced})"
        case ControlledShutdown():
            return f"ControlledShutdown (broker epoch {m.broker_epoch})"
    return type(m).__name__


def _sender(m) -> str:
    return node(m.broker_id) if isinstance(m, ControlledShutdown) else node(m.controller_id)


def view(action) -> StepView:
    """How one action is drawn (see the module's rules)."""
    zk = ZOOKEEPER
    match action:
        case act.Deliver(message=m):
            return StepView(_sender(m), node(m.dest), message_text(m))
        case act.Redeliver(message=m):
            return StepView(_sender(m), node(m.dest), "again: " + message_text(m), "again")
        case act.Drop(message=m):
            return StepView(_sender(m), node(m.dest), "lost: " + message_text(m), "drop")
        case act.ZkOutage():
            return StepView(zk, None, "outage: ZooKeeper loses its quorum", "note")
        case act.ZkRecover():
            return StepView(zk, None, "ZooKeeper serves again", "note")
        case act.ExpireSession(session=s):
            return StepView(zk, None, f"expires session {s}", "note")
        case act.DeleteControllerZNodes():
            return StepView(zk, None, "operator deletes /controller and /controller_epoch", "note")
        case act.CrashBroker(broker=n) | act.CrashController(controller=n):
            return StepView(node(n), None, "crash", "note")
        case act.StopBroker(broker=n) | act.ShutdownController(controller=n):
            return StepView(node(n), None, "clean stop", "note")
        case act.RestartBroker(broker=n) | act.RestartController(controller=n):
            return StepView(node(n), None, "restart", "note")
        case act.ChangeIbp(broker=b, ibp=ibp):
            return StepView(node(b), None, f"operator: inter.broker.protocol.version {ibp.name}", "note")
        case act.MigrateBrokerToKRaft(broker=b):
            return StepView(node(b), None, "operator: restart as a KRaft broker", "note")
        case act.RollbackBrokerToZk(broker=b):
            return StepView(node(b), None, "operator: back to ZooKeeper mode", "note")
        case act.ReconfigureController(controller=c, migration_enabled=on):
            return StepView(node(c), None, f"operator: zookeeper.metadata.migration.enable={str(on).lower()}", "note")
        case act.OpenSession(broker=b):
            return StepView(node(b), zk, "open session")
        case act.RegisterBroker(broker=b):
            return StepView(node(b), zk, f"create /brokers/ids/{b}")
        case act.SendControlledShutdown(broker=b):
            return StepView(node(b), None, "sends ControlledShutdown", "note")
        case act.RefreshFeatureCache(broker=b):
            return StepView(node(b), zk, "read /features")
        case act.ObserveControllerEpoch(broker=b):
            return StepView(node(b), zk, "read /controller_epoch")
        case act.ElectController(broker=b):
            return StepView(node(b), zk, "elect: create /controller, CAS /controller_epoch + 1")
        case act.ResignController(broker=b):
            return StepView(node(b), None, "resigns as controller", "note")
        case act.InitializeController(controller=b):
            return StepView(node(b), zk, "controller failover: features, brokers, watch")
        case act.ProcessBrokerChange(controller=b):
            return StepView(node(b), zk, "read /brokers/ids (broker change)")
        case act.ElectPartitionLeader(controller=b, partition=p):
            return StepView(node(b), zk, f"elect a leader of p{p}")
        case act.UpdateFeatures(controller=b, feature=f, level=level, allow_downgrade=down):
            return StepView(node(b), zk, f"UpdateFeatures {f}={level}{' allow downgrade' if down else ''}")
        case act.StartElection(controller=c):
            return StepView(node(c), None, "election timeout: candidate", "note")
        case act.RequestVote(controller=c, voter=v):
            return StepView(node(c), node(v), "Vote")
        case act.BecomeLeader(controller=c):
            return StepView(node(c), None, "becomes leader", "note")
        case act.Fetch(controller=c, leader=leader):
            return StepView(node(c), node(leader), "Fetch")
        case act.RecoverMigrationState(controller=c):
            return StepView(node(c), zk, "driver: read /migration")
        case act.KRaftLeaderChange(controller=c):
            return StepView(node(c), None, "driver: KRaftLeaderEvent", "note")
        case act.WaitForControllerQuorum(controller=c):
            return StepView(node(c), None, "driver: controller quorum ready", "note")
        case act.WaitForZkBrokers(controller=c):
            return StepView(node(c), None, "driver: every ZK broker registered", "note")
        case act.BecomeZkController(controller=c):
            return StepView(node(c), zk, "claim: CAS /controller_epoch + 1, write /controller")
        case act.MigrateMetadata(controller=c):
            return StepView(node(c), zk, "driver: read the metadata to migrate")
        case act.CompleteMigration(controller=c):
            return StepView(node(c), None, "driver: ZkMigrationStateRecord MIGRATION", "note")
        case act.MigrationCommitted(controller=c):
            return StepView(node(c), zk, "driver: write /migration (migration committed)")
        case act.SyncKRaftToZk(controller=c):
            return StepView(node(c), zk, "driver: sync the image to ZooKeeper")
        case act.SendRPCsToBrokers(controller=c):
            return StepView(node(c), None, "driver: queue UpdateMetadata, LeaderAndIsr to ZK brokers", "note")
        case act.DualWrite(controller=c):
            return StepView(node(c), zk, "driver: dual write")
        case act.RegisterWithKRaft(broker=b, controller=c):
            return StepView(node(b), node(c), "BrokerRegistration")
        case act.BrokerHeartbeat(broker=b, controller=c):
            return StepView(node(b), node(c), "BrokerHeartbeat")
        case act.FetchMetadata(broker=b, controller=c):
            return StepView(node(b), node(c), "Fetch metadata")
        case act.SessionTimeout(broker=b, controller=c):
            return StepView(node(c), node(b), "session timeout: fenced")
        case act.BeginControlledShutdown(broker=b):
            return StepView(node(b), None, "SIGINT: controlled shutdown", "note")
        case act.AlterConfigs(controller=c):
            return StepView(node(c), None, "admin: IncrementalAlterConfigs", "note")
        case act.UpdateMetadataVersion(controller=c, level=level, upgrade_type=kind):
            return StepView(node(c), None, f"admin: metadata.version {level.name} ({kind.name.lower()})", "note")
    actor = getattr(action, "broker", getattr(action, "controller", None))
    from properties.traces import describe

    return StepView(ZOOKEEPER if actor is None else node(actor), None, describe(action), "note")


def participants(scope) -> list[str]:
    """ZooKeeper, the scope's KRaft controllers, its brokers: participant ids in the order they are declared."""
    return ([ZOOKEEPER] + [node(FIRST_CONTROLLER_ID + i) for i in range(len(scope.controllers))]
            + [node(b) for b in range(scope.brokers)])


def _order(participant: str) -> tuple[int, int]:
    return (0, 0) if participant == ZOOKEEPER else ((1 if participant[0] == "C" else 2), int(participant[1:]))


def _clean(text: str) -> str:
    return " ".join(text.replace(";", ",").replace("#", "no.").split())


def verdict(broke: str) -> str:
    """What a violation says in the diagram: the broken invariants, or that the implementation and model differ."""
    if broke.startswith("Disagreement:"):
        _, how, fields = broke.split(":", 2)
        return f"VIOLATION: implementation and model disagree ({how.split('@')[0]}) on {fields.replace(',', ', ')}"
    return f"VIOLATION: breaks {broke.replace(',', ', ')}"


def diagram(scope, actions, broke: str | None = None, broke_at: int | None = None,
            refused: frozenset[int] = frozenset()) -> str:
    """The sequence diagram of ``actions`` in ``scope``; ``broke``: what step ``broke_at`` (1-based; default the last)
    broke; ``refused``: step numbers the implementation refused (no change)."""
    views = [view(a) for a in actions]
    declared = participants(scope)
    used = {p for v in views for p in (v.actor, v.target) if p is not None}
    declared += sorted(used - set(declared), key=_order)
    lines = ["sequenceDiagram"]
    lines += [f"    participant {p} as {name(p)}" for p in declared]
    broke_at = len(views) if broke_at is None else broke_at
    for number, v in enumerate(views, 1):
        text = _clean(f"{number}. {v.text}" + (" (refused)" if number in refused else ""))
        if v.style == "note":
            lines.append(f"    Note over {v.actor}: {text}")
        else:
            lines.append(f"    {v.actor}{ARROWS[v.style]}{v.target}: {text}")
        if broke is not None and number == broke_at:
            over = v.actor if v.target is None or v.target == v.actor else f"{v.actor},{v.target}"
            lines.append(f"    Note over {over}: {_clean(verdict(broke))}")
    return "\n".join(lines) + "\n"


def sequence_diagram(trace, broke: str | None = None, broke_at: int | None = None,
                     refused: frozenset[int] = frozenset()) -> str:
    """The diagram of a trace file (``properties.traces``: a model or a differential trace). Without ``broke``, the
    recorded violation (a differential trace's signature) is drawn at the last step."""
    from impl.sim.scenarios import scenario

    if broke is None and broke_at is None:
        broke = getattr(trace, "signature", None) or trace.violation
    return diagram(scenario(trace.scope), trace.actions, broke, broke_at, refused)
