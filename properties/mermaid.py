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
- ``svg`` draws the same diagram as an SVG picture without Mermaid, for pages that must show it
  without a script (the campaign report): one lane per participant, one row per step (an arrow
  between lanes, or a note on the actor's lane), the step's text beside the lanes, and the
  violation as a red row across the lanes. The SVG names no file and no font to fetch.
"""

from __future__ import annotations

import html
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
            return f"UpdateMetadata{' incremental' if m.incremental else ''} leaders [{leaders}] ({fenced})"
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
        case act.LeaderAndIsrFailsInBroker(message=m):
            return StepView(_sender(m), node(m.dest), "fails inside, no fetcher: " + message_text(m), "drop")
        case act.ZkOutage():
            return StepView(zk, None, "outage: ZooKeeper loses its quorum", "note")
        case act.ZkRecover():
            return StepView(zk, None, "ZooKeeper serves again", "note")
        case act.ZkServerLags(controller=n):
            return StepView(zk, None, f"the server {node(n)} reads from falls behind", "note")
        case act.ZkServerCatchesUp(controller=n):
            return StepView(zk, None, f"the server {node(n)} reads from catches up", "note")
        case act.BrokerZkServerLags(broker=n):
            return StepView(zk, None, f"the server {node(n)} reads from falls behind", "note")
        case act.BrokerZkServerCatchesUp(broker=n):
            return StepView(zk, None, f"the server {node(n)} reads from catches up", "note")
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
        case act.AddPartitions(broker=b, replicas=replicas):
            return StepView(node(b), zk, f"admin: CreatePartitions, set /brokers/topics/t (+ {list(replicas)})")
        case act.ProcessPartitionModifications(controller=b):
            return StepView(node(b), zk, "new partitions: create their state znodes")
        case act.ApiPartitionReassignment(controller=b, partition=p, replicas=replicas):
            return StepView(node(b), zk, f"admin: AlterPartitionReassignments p{p} to {list(replicas)}, epoch + 1")
        case act.MarkTopicDeletion(broker=b):
            return StepView(node(b), zk, "admin: DeleteTopics, create /admin/delete_topics/t")
        case act.TopicDeletion(controller=b):
            return StepView(node(b), zk, "delete topic t: its znodes and the mark, StopReplica (delete)")
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
        case act.DualWriteSessionExpired(controller=c):
            return StepView(node(c), zk, "driver: dual write fails (session expired)")
        case act.DualWriteReplyLost(controller=c):
            return StepView(node(c), zk, "driver: dual write applied, reply lost, resend fails on /migration")
        case act.PublishMetadataChange(controller=c):
            return StepView(node(c), None, "publisher: MetadataChangeEvent queued", "note")
        case act.RunMetadataChange(controller=c):
            return StepView(node(c), zk, "driver: queued MetadataChangeEvent runs")
        case act.RegisterWithKRaft(broker=b, controller=c):
            return StepView(node(b), node(c), "BrokerRegistration")
        case act.RegisterController(controller=c, leader=leader):
            return StepView(node(c), node(leader), "ControllerRegistration")
        case act.BrokerHeartbeat(broker=b, controller=c):
            return StepView(node(b), node(c), "BrokerHeartbeat")
        case act.RegistrationResponseLost(broker=b, controller=c):
            return StepView(node(b), node(c), "BrokerRegistration: response lost")
        case act.HeartbeatResponseLost(broker=b, controller=c):
            return StepView(node(b), node(c), "BrokerHeartbeat: response lost")
        case act.HoldHeartbeat(broker=b, controller=c):
            return StepView(node(b), node(c), "BrokerHeartbeat: held in the network", "drop")
        case act.DeliverHeartbeat(request=r):
            return StepView(node(r.broker), node(r.controller), f"late BrokerHeartbeat (epoch {r.broker_epoch})")
        case act.FetchMetadata(broker=b, controller=c):
            return StepView(node(b), node(c), "Fetch metadata")
        case act.SessionTimeout(broker=b, controller=c, fence=fence):
            return StepView(node(c), node(b), "session timeout: fenced" if fence else "session lapsed")
        case act.BeginControlledShutdown(broker=b):
            return StepView(node(b), None, "SIGINT: controlled shutdown", "note")
        case act.AlterConfigs(controller=c):
            return StepView(node(c), None, "admin: IncrementalAlterConfigs", "note")
        case act.CreatePartitions(controller=c, replicas=replicas):
            return StepView(node(c), None, f"admin: CreatePartitions {list(replicas)}", "note")
        case act.AlterPartitionReassignments(controller=c, partition=p, replicas=replicas):
            return StepView(node(c), None, f"admin: AlterPartitionReassignments p{p} to {list(replicas)}", "note")
        case act.AlterPartition(broker=b, controller=c, partition=p, replica=r):
            return StepView(node(b), node(c), f"AlterPartition p{p}: {r} joins the ISR")
        case act.DeleteTopics(controller=c):
            return StepView(node(c), None, "admin: DeleteTopics t", "note")
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
    from properties.progress import STALLED

    goal, stalled, bound = broke.partition(STALLED)
    if stalled:
        return f"VIOLATION: no progress, {goal} not met within {bound} after the faults stopped"
    return f"VIOLATION: breaks {broke.replace(',', ', ')}"


def diagram(scope, actions, broke: str | None = None, broke_at: int | None = None,
            refused: frozenset[int] = frozenset()) -> str:
    """The sequence diagram of ``actions`` in ``scope``; ``broke``: what step ``broke_at`` (1-based; default the last)
    broke; ``refused``: step numbers the implementation refused (no change)."""
    views = [view(a) for a in actions]
    declared = _declared(scope, views)
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


def _declared(scope, views: list[StepView]) -> list[str]:
    """The scope's participants, then any other node the steps name (never one used undeclared)."""
    declared = participants(scope)
    used = {p for v in views for p in (v.actor, v.target) if p is not None}
    return declared + sorted(used - set(declared), key=_order)


# The SVG's geometry, in pixels: a lane per participant, a row per step, text at about CHAR px a character.
LANE, ROW, HEAD, PAD, CHAR = 112, 24, 34, 8, 6.6
SVG_STEPS = 300  # a longer trace is drawn to this step and says so


def svg(scope, actions, broke: str | None = None, broke_at: int | None = None,
        refused: frozenset[int] = frozenset(), ident: str = "seq") -> str:
    """The sequence diagram of ``actions`` as SVG inline in HTML (so without a namespace declaration; arguments as
    for ``diagram``; ``ident`` keeps the arrowheads' ids apart when a page holds several)."""
    views = [view(a) for a in actions]
    broke_at = len(views) if broke_at is None else broke_at
    cut = len(views) > SVG_STEPS
    views = views[:SVG_STEPS]
    lanes = _declared(scope, views)
    x = {p: PAD + LANE * i + LANE / 2 for i, p in enumerate(lanes)}
    text_x = PAD + LANE * len(lanes) + 10
    rows: list[tuple[StepView | None, str]] = []  # (the step's view, or None for the verdict row; its text)
    for number, v in enumerate(views, 1):
        rows.append((v, f"{number}. {v.text}" + (" (refused)" if number in refused else "")))
        if broke is not None and number == broke_at:
            rows.append((None, verdict(broke)))
    if cut:
        rows.append((None, f"... {len(actions) - SVG_STEPS} more steps not drawn (kraftcheck replay shows them all)"))
    width = int(max([text_x + CHAR * len(t) if v else 2 * PAD + 6 + CHAR * len(t) for v, t in rows] + [text_x])
                + PAD)
    height = int(HEAD + ROW * len(rows) + PAD + 4)
    e = html.escape
    out = [f'<svg class="sequence" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="system-ui, sans-serif" font-size="12" role="img">',
           f'<defs><marker id="{ident}-head" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
           'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#333"/></marker></defs>']
    for p in lanes:
        out.append(f'<rect x="{x[p] - LANE / 2 + 4:.0f}" y="2" width="{LANE - 8}" height="{HEAD - 10}" rx="3" '
                   f'fill="#eef2f8" stroke="#8093b3"/><text x="{x[p]:.0f}" y="{HEAD / 2 + 2:.0f}" '
                   f'text-anchor="middle" font-weight="bold">{e(name(p))}</text>')
        out.append(f'<line x1="{x[p]:.0f}" y1="{HEAD - 8}" x2="{x[p]:.0f}" y2="{height - PAD}" stroke="#b8c2d3" '
                   'stroke-dasharray="4 3"/>')
    for row, (v, text) in enumerate(rows):
        y = HEAD + ROW * row + ROW / 2
        if v is None:
            out.append(f'<rect x="{PAD}" y="{y - ROW / 2 + 2:.0f}" width="{width - 2 * PAD}" height="{ROW - 4}" '
                       'fill="#fdecea" stroke="#c0392b"/>')
            out.append(f'<text x="{PAD + 6}" y="{y + 4:.0f}" fill="#a93226" font-weight="bold">{e(text)}</text>')
            continue
        a = x.get(v.actor, PAD)
        if v.style == "note" or v.target is None or v.target == v.actor:
            out.append(f'<rect x="{a - 14:.0f}" y="{y - 7:.0f}" width="28" height="14" rx="2" fill="#fff8dc" '
                       'stroke="#b59f3b"/>')
        else:
            b = x[v.target]
            dash = ' stroke-dasharray="5 3"' if v.style in ("again", "drop") else ""
            end = b - 4 if b > a else b + 4
            head = "" if v.style == "drop" else f' marker-end="url(#{ident}-head)"'
            out.append(f'<line x1="{a:.0f}" y1="{y:.0f}" x2="{end:.0f}" y2="{y:.0f}" stroke="#333"{dash}{head}/>')
            if v.style == "drop":  # a lost message: a cross where it would have arrived
                out.append(f'<path d="M{end - 5:.0f},{y - 5:.0f} l10,10 M{end - 5:.0f},{y + 5:.0f} l10,-10" '
                           'stroke="#c0392b" stroke-width="2"/>')
            out.append(f'<circle cx="{a:.0f}" cy="{y:.0f}" r="2.5" fill="#333"/>')
        out.append(f'<text x="{text_x:.0f}" y="{y + 4:.0f}">{e(text)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def sequence_diagram(trace, broke: str | None = None, broke_at: int | None = None,
                     refused: frozenset[int] = frozenset()) -> str:
    """The diagram of a trace file (``properties.traces``: a model or a differential trace). Without ``broke``, the
    recorded violation (a differential trace's signature) is drawn at the last step."""
    from impl.sim.scenarios import scenario

    if broke is None and broke_at is None:
        broke = getattr(trace, "signature", None) or trace.violation
    return diagram(scenario(trace.scope), trace.actions, broke, broke_at, refused)


def sequence_svg(trace, ident: str = "seq") -> str:
    """``svg`` of a trace file, with its recorded violation (a differential trace's signature) at the last step."""
    from impl.sim.scenarios import scenario

    return svg(scenario(trace.scope), trace.actions, getattr(trace, "signature", None) or trace.violation,
               ident=ident)
