"""Scenario files of an operator's steps, run on the model and on a real Kafka cluster alike.

A file is a ``properties.scenario`` file (commands, ``----``, expected output) that starts with
``cluster brokers=N controllers=M``: a ZooKeeper server and N ZooKeeper-mode brokers, registered,
with M KRaft controllers to be started by the file. Its other commands are what an operator does
(``OPERATOR_STEPS``) and ``wait KEY=VALUE``, what an operator waits for. ``kraftcheck scenario``
runs such a file on the model; ``kraftcheck scenario --kafka`` runs it on the model and on a real
Kafka (``properties.kafka.run``'s cluster, runbook steps and teardown), and each block's output,
from either, must be the expected one.

Rules:
- Only what both sides can show is compared (``VIEW_KEYS``): the active controller's migration
  driver state (the driver's transition lines; in the model, the leader's driver), the last
  ZkMigrationState committed (the metadata log, decoded by DumpLogSegments; in the model, the
  leader's committed image), who holds ``/controller`` (a ZooKeeper broker or a KRaft controller)
  and whether ``/migration`` and each ``/brokers/ids/N`` exist (ZooKeeper, read by kraftcheck's
  own session). Epochs, zxids and offsets differ between the two and are never shown.
- An operator's step is its model actions (the mapping of ``properties.kafka.validate``: a roll
  is a stop, an edit of the broker's settings and a restart), then, when it has a goal, the
  model's hidden protocol steps up to the goal (the shortest path, found breadth first; the
  driver's goal state hop by hop, each to a later state of its table). Kafka takes the same step with the
  runbook's own code and waits for the goal as observed, within the progress bound. A step's
  output is its verdict and the view keys it shows that changed since they were last shown:
  ``wait`` shows every key (the cluster is at rest at its goal), other steps only the keys they
  settle, since Kafka goes on by itself after them (the last broker rolled starts the migration).
- A verdict is ``accepted``, ``refused: CODE`` for an admin request Kafka answered with an error
  (the model's refusal with Kafka's code), or ``stuck: GOAL`` when the goal was not reached. The
  model's ``accepted, unchanged`` is Kafka's success too, so both print ``accepted``.
- A command Kafka cannot take (a protocol step the model takes by itself, such as ``Deliver``;
  ``inject``; ``show`` and ``enabled``, which read the model's own state) makes ``--kafka`` refuse
  the file, naming its line, before anything starts.
"""

from __future__ import annotations

import difflib
import tempfile
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from model import zookeeper as zkm
from model.actions import (
    CrashBroker,
    CrashController,
    DeleteControllerZNodes,
    ExpireSession,
    MigrateBrokerToKRaft,
    ReconfigureController,
    RestartBroker,
    RestartController,
    SessionTimeout,
    ShutdownController,
    StopBroker,
    UpdateMetadataVersion,
    ZkOutage,
    ZkRecover,
)
from model.bugs import Variant
from model.kraft import QuorumRole, UpgradeType, image_of
from model.migration import MIGRATION, MigrationDriverState, Profile
from model.outcome import Verdict
from model.state import CONTROLLER, ClusterState, broker_path, kraft_claim, znode_data
from model.step import candidate_actions, outcome, step
from model.types import BrokerId, Ibp
from properties.scenario import Block, ScenarioError, _options, parse, render

D = MigrationDriverState
DRIVER_ORDER = tuple(D)  # the driver's table, in the order a migration takes it
NONE = "none"


def view_keys(brokers: int) -> tuple[str, ...]:
    """What both a real cluster and the model show, in the order a step's output lists it."""
    return ("driver", "migration", "controller_znode", "migration_znode", *(f"zk_broker_{b}" for b in range(brokers)))


# ---- the operator's steps ----------------------------------------------------------------------


@dataclass(frozen=True)
class OperatorStep:
    """One thing an operator does: its fields, its model actions, what it waits for and what it settles."""

    fields: tuple[str, ...]
    meaning: str
    goal: Callable[[dict[str, Any]], tuple[str, str] | None] = lambda args: None  # (view key, value) waited for
    shows: Callable[[dict[str, Any]], tuple[str, ...]] = lambda args: ()  # view keys it settles


def _broker(args: dict[str, Any]) -> str:
    return f"zk_broker_{args['broker']}"


OPERATOR_STEPS: dict[str, OperatorStep] = {
    "StartControllers": OperatorStep(
        (), "format and start every KRaft controller in migration mode (KIP-866 §Migration Trigger 1)",
        lambda a: ("driver", D.WAIT_FOR_BROKERS.name), lambda a: ("driver", "migration")),
    "RollBrokerIntoMigration": OperatorStep(
        ("broker",), "restart a ZooKeeper broker with the migration settings (§Migration Trigger 2, 3)",
        lambda a: (_broker(a), "registered"), lambda a: (_broker(a),)),
    "MigrateBrokerToKRaft": OperatorStep(
        ("broker",), "restart a migrating ZooKeeper broker as a KRaft broker (ops.html: Migrating brokers to KRaft)"),
    "FinalizeController": OperatorStep(
        ("controller",), "restart a controller without the migration settings (ops.html: Finalizing the migration)",
        lambda a: ("migration", "POST_MIGRATION"), lambda a: ("migration",)),
    "RollBrokerOutOfMigration": OperatorStep(
        ("broker",), "restart a ZooKeeper broker without the migration settings (the rollback's last roll)",
        lambda a: (_broker(a), "registered"), lambda a: (_broker(a),)),
    "DeleteControllerZNodes": OperatorStep(
        (), "the rollback's rmr /controller and /migration"),
    "UpdateMetadataVersion": OperatorStep(
        ("level", "upgrade_type"), "KIP-584's UpdateFeatures for metadata.version, by Kafka's FeatureCommand"),
    "StopBroker": OperatorStep(("broker",), "a clean stop (SIGTERM)"),
    "CrashBroker": OperatorStep(("broker",), "kill -9"),
    "RestartBroker": OperatorStep(("broker",), "start it again, in the mode it last ran in"),
    "ShutdownController": OperatorStep(("controller",), "a clean stop (SIGTERM); the rollback's deprovisioning"),
    "CrashController": OperatorStep(("controller",), "kill -9"),
    "RestartController": OperatorStep(("controller",), "start it again"),
    "PauseBroker": OperatorStep(("broker",), "SIGSTOP: no model action (the model may lose its session meanwhile)"),
    "ResumeBroker": OperatorStep(("broker",), "SIGCONT"),
    "PauseController": OperatorStep(("controller",), "SIGSTOP: no model action"),
    "ResumeController": OperatorStep(("controller",), "SIGCONT"),
    "ExpireSession": OperatorStep(("broker",), "the broker's ZooKeeper session expired at the server (KIP-380)"),
    "ZkOutage": OperatorStep((), "the ZooKeeper server killed"),
    "ZkRecover": OperatorStep((), "the ZooKeeper server started again"),
}
COMMANDS = ("cluster", "step", "wait")
UPGRADE_TYPES = {t.name: t for t in UpgradeType}


def feature_command(level: Ibp, how: UpgradeType) -> list[str]:
    """FeatureCommand's arguments for a metadata.version update: IBP_3_6_IV1 is ``3.6-IV1``."""
    major, minor, iv = level.name.removeprefix("IBP_").split("_")
    kind = "upgrade" if how is UpgradeType.UPGRADE else "downgrade"
    return [kind, f"{major}.{minor}-{iv}", *(["--unsafe"] if how is UpgradeType.UNSAFE_DOWNGRADE else [])]


# Kafka's answer, as FeatureCommand prints the controller's ApiException message, to its error code:
# FeatureControlManager's two forms of INVALID_UPDATE_VERSION ("Invalid update version 13 for feature
# metadata.version. Broker 2 only supports versions 21" from 3.9.2, "Invalid metadata.version 13. ...").
KAFKA_MESSAGES = (
    ("Invalid metadata.version", "INVALID_UPDATE_VERSION"),
    ("Invalid update version", "INVALID_UPDATE_VERSION"),
)


def kafka_error(answer: str) -> str:
    for text, code in KAFKA_MESSAGES:
        if text in answer:
            return code
    return "UNKNOWN_SERVER_ERROR"


# ---- a file ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    block: Block
    name: str  # "cluster", "wait" or an operator step
    args: dict[str, Any]


def is_cluster_file(blocks: list[Block]) -> bool:
    return bool(blocks) and blocks[0].command.split(" ", 1)[0] == "cluster"


def commands(blocks: list[Block], where: str) -> list[Command]:
    """Each block as an operator's command; a command Kafka cannot take is an error naming its line."""
    out: list[Command] = []
    for i, block in enumerate(blocks):
        here = f"{where}:{block.line}"
        word, _, rest = block.command.partition(" ")
        if i == 0 and word != "cluster":
            raise ScenarioError(f"{here}: '{block.command}' runs on the model alone: a file run on a real Kafka "
                                f"starts with 'cluster brokers=N controllers=M'")
        if word == "cluster":
            if i:
                raise ScenarioError(f"{here}: 'cluster' again: a file is one cluster")
            args = _options(rest, here)
            if set(args) - {"brokers", "controllers"} or not all(isinstance(v, int) and v > 0 for v in args.values()):
                raise ScenarioError(f"{here}: cluster takes brokers=N controllers=M (positive numbers)")
            out.append(Command(block, "cluster", {"brokers": args.get("brokers", 3),
                                                  "controllers": args.get("controllers", 1)}))
        elif word == "wait":
            args = _options(rest, here)
            keys = view_keys(out[0].args["brokers"])
            if len(args) != 1 or next(iter(args)) not in keys:
                raise ScenarioError(f"{here}: wait takes one KEY=VALUE, KEY one of {', '.join(keys)}")
            out.append(Command(block, "wait", {k: str(v) for k, v in args.items()}))
        elif word == "step":
            kind, _, fields = rest.strip().partition(" ")
            if kind not in OPERATOR_STEPS:
                raise ScenarioError(f"{here}: {kind or 'step'} is not an operator's step, and a real Kafka cannot be "
                                    f"made to take it (operator steps: {', '.join(OPERATOR_STEPS)})")
            args = _options(fields, here)
            wanted = OPERATOR_STEPS[kind].fields
            if set(args) != set(wanted):
                raise ScenarioError(f"{here}: {kind} takes {' '.join(f + '=' for f in wanted) or 'no field'}")
            _check_fields(kind, args, out[0].args, here)
            out.append(Command(block, kind, args))
        else:
            raise ScenarioError(f"{here}: '{word}' cannot run on a real Kafka (it reads or drives the model alone): "
                                f"a file run on a real Kafka has {', '.join(COMMANDS)}")
    return out


def _check_fields(kind: str, args: dict[str, Any], shape: dict[str, int], here: str) -> None:
    if "broker" in args and args["broker"] not in range(shape["brokers"]):
        raise ScenarioError(f"{here}: broker={args['broker']}: the cluster has brokers 0 to {shape['brokers'] - 1}")
    if "controller" in args and args["controller"] not in controller_ids(shape["controllers"]):
        raise ScenarioError(f"{here}: controller={args['controller']}: the cluster has controllers "
                            f"{', '.join(map(str, controller_ids(shape['controllers'])))}")
    if "level" in args and args["level"] not in Ibp.__members__:
        raise ScenarioError(f"{here}: level={args['level']}: not a metadata.version (IBP_3_6_IV1, ...)")
    if "upgrade_type" in args and args["upgrade_type"] not in UPGRADE_TYPES:
        raise ScenarioError(f"{here}: upgrade_type= takes {', '.join(UPGRADE_TYPES)}")


def controller_ids(count: int) -> list[int]:
    from properties.kafka.configs import FIRST_CONTROLLER_ID

    return [FIRST_CONTROLLER_ID + i for i in range(count)]


# ---- the two sides -----------------------------------------------------------------------------


class Side:
    """A cluster a file's commands run on; each command's output from the view it shows."""

    def __init__(self, brokers: int) -> None:
        self.keys = view_keys(brokers)
        self.shown: dict[str, str | None] = {key: None for key in self.keys}  # None: never shown

    def take(self, command: Command) -> str:
        """One command's output: its verdict, then the view's keys it shows that changed since last shown."""
        name, a = command.name, command.args
        if name == "cluster":
            every = self.start()
            return self.render("accepted" if every else "stuck: every ZooKeeper broker registered", self.keys)
        if name == "wait":
            key, value = next(iter(a.items()))
            return self.render("accepted" if self.reach(key, value) else f"stuck: {key}={value}", self.keys)
        verdict = self.operate(command)
        if verdict != "accepted":
            return verdict
        op = OPERATOR_STEPS[name]
        goal = op.goal(a)
        if goal is not None and not self.reach(*goal):
            verdict = f"stuck: {goal[0]}={goal[1]}"
        return self.render(verdict, op.shows(a))

    def start(self) -> bool:
        """The cluster: ZooKeeper and its brokers, each registered; False when they never were."""
        raise NotImplementedError

    def operate(self, command: Command) -> str:
        """The operator's step: "accepted" when done, else its verdict (a refusal, a goal not reached)."""
        raise NotImplementedError

    def reach(self, key: str, value: str) -> bool:
        raise NotImplementedError

    def view(self, keys: tuple[str, ...]) -> dict[str, str]:
        raise NotImplementedError

    def render(self, verdict: str, keys: tuple[str, ...]) -> str:
        now = self.view(keys)
        lines = [verdict]
        for key in (k for k in self.keys if k in keys):
            if now[key] != self.shown[key]:
                was = self.shown[key]
                lines.append(f"  {key}: {now[key]}" if was is None else f"  {key}: {was} -> {now[key]}")
                self.shown[key] = now[key]
        return "\n".join(lines)


class ModelSide(Side):
    """The model's cluster as ``properties.kafka.validate`` builds a real run's (its ids, its levels)."""

    SEARCH_BOUND = 60_000

    def __init__(self, brokers: int, controllers: int, version: tuple[int, int, int] = (3, 9, 2)) -> None:
        from properties.kafka.validate import Shape, window_budget

        super().__init__(brokers)
        self.shape = Shape.of({"brokers": brokers, "controllers": controllers, "runbook": "finalize"}, version)
        self.scope = self.shape.scope()
        self.variant = Variant(profile=Profile.KAFKA_3_9)
        self.state = self.shape.initial().replace(budget=window_budget(controllers, faulty=True))
        self.paused: set[str] = set()  # processes SIGSTOPped: their sessions may be lost meanwhile

    def view(self, keys: tuple[str, ...] = ()) -> dict[str, str]:
        s = self.state
        leaders = [c for c in s.controllers if c.alive and c.role is QuorumRole.LEADER]
        active = max(leaders, key=lambda c: c.epoch, default=None)
        out = {"driver": active.driver.state.name if active is not None and active.driver is not None else NONE}
        # what DumpLogSegments reads from disk: a stopped controller's log stays there, whole (one
        # controller, or a quorum at rest, has committed all of it)
        logs = [c.log[: c.high_watermark] if c.alive else c.log for c in s.controllers]
        migration = image_of(max(logs, key=len)).migration if logs else None
        out["migration"] = migration.name if migration is not None else NONE
        holder = znode_data(s, CONTROLLER)
        out["controller_znode"] = NONE if holder is None else "kraft" if kraft_claim(s) is not None else "zk"
        out["migration_znode"] = "present" if zkm.get(s.zk, MIGRATION) is not None else "absent"
        for b in s.brokers:
            out[f"zk_broker_{b.id}"] = "registered" if zkm.get(s.zk, broker_path(b.id)) is not None else "absent"
        return out

    def reach(self, key: str, value: str) -> bool:
        """The model's hidden protocol steps up to ``key`` = ``value``: the shortest path, or False."""
        if key == "driver" and value in D.__members__:
            target = DRIVER_ORDER.index(D[value])
            # hop by hop, each to a later state of the table, none past the goal (a driver that recovers a
            # migration skips WAIT_FOR_BROKERS): the whole way in one search would be too wide
            def ahead(v: dict[str, str], at: int) -> bool:
                return v["driver"] in D.__members__ and at < DRIVER_ORDER.index(D[v["driver"]]) <= target

            while (now := self.view()["driver"]) != value:
                at = DRIVER_ORDER.index(D[now]) if now in D.__members__ else -1
                if at >= target and not self._search(lambda v: v["driver"] == value):
                    return False
                if at < target and not self._search(lambda v, at=at: ahead(v, at)):
                    return False
            return True
        return self._search(lambda v: v[key] == value)

    def _paused_fault(self, state: ClusterState, action: Any) -> bool:
        """What a pause lets happen to the paused broker meanwhile, as trace validation allows it
        (``DURING_FAULTS``): its ZooKeeper session expires, the KRaft controller times it out."""
        if isinstance(action, ExpireSession):
            return any(f"broker-{b.id}" in self.paused and b.session == action.session for b in state.brokers)
        return isinstance(action, SessionTimeout) and f"broker-{action.broker}" in self.paused

    def _search(self, goal: Callable[[dict[str, str]], bool]) -> bool:
        from properties.kafka.validate import HIDDEN

        if goal(self.view()):
            return True
        seen, queue = {self.state}, deque([self.state])
        while queue and len(seen) < self.SEARCH_BOUND:
            state = queue.popleft()
            for action in candidate_actions(state, self.scope):
                if not isinstance(action, HIDDEN) and not self._paused_fault(state, action):
                    continue
                nxt = step(state, action, self.variant)
                if nxt is None or nxt in seen:
                    continue
                before, self.state = self.state, nxt
                if goal(self.view()):
                    return True
                self.state = before
                seen.add(nxt)
                queue.append(nxt)
        return False

    def _do(self, *actions: Any) -> bool:
        from properties.kafka.validate import ConfigureMigration

        state: ClusterState | None = self.state
        for action in actions:
            assert state is not None
            state = action.apply(state, self.variant) if isinstance(action, ConfigureMigration) \
                else step(state, action, self.variant)
            if state is None:
                return False
        self.state = state
        return True

    def start(self) -> bool:
        return self._search(lambda v: all(v[f"zk_broker_{b}"] == "registered" for b in range(self.shape.brokers))
                            and v["controller_znode"] == "zk")

    def operate(self, command: Command) -> str:
        from properties.kafka.validate import ConfigureMigration

        name, a = command.name, command.args
        broker = BrokerId(a["broker"]) if "broker" in a else None
        c = a.get("controller")
        if name == "UpdateMetadataVersion":
            active = [x for x in self.state.controllers if x.alive and x.role is QuorumRole.LEADER and x.active]
            if not active:
                return "refused: NOT_CONTROLLER"
            told = outcome(self.state, UpdateMetadataVersion(active[0].id, Ibp[a["level"]],
                                                             UPGRADE_TYPES[a["upgrade_type"]]), self.variant)
            if told.verdict in (Verdict.ACCEPTED, Verdict.UNCHANGED):
                self.state = told.after
                return "accepted"
            return f"refused: {told.error.name if told.error is not None else 'not enabled'}"
        actions: tuple[Any, ...] = {
            "StartControllers": tuple(RestartController(x.id) for x in self.state.controllers),
            "RollBrokerIntoMigration": (StopBroker(broker), ConfigureMigration(broker, True), RestartBroker(broker)),
            "RollBrokerOutOfMigration": (StopBroker(broker), ConfigureMigration(broker, False), RestartBroker(broker)),
            "MigrateBrokerToKRaft": (StopBroker(broker), MigrateBrokerToKRaft(broker), RestartBroker(broker)),
            "FinalizeController": (ShutdownController(c), ReconfigureController(c, False), RestartController(c)),
            "DeleteControllerZNodes": (DeleteControllerZNodes(),),
            "StopBroker": (StopBroker(broker),), "CrashBroker": (CrashBroker(broker),),
            "RestartBroker": (RestartBroker(broker),), "ShutdownController": (ShutdownController(c),),
            "CrashController": (CrashController(c),), "RestartController": (RestartController(c),),
            "ExpireSession": (ExpireSession(self.state.brokers[broker].session),) if broker is not None else (),
            "ZkOutage": (ZkOutage(),), "ZkRecover": (ZkRecover(),),
        }.get(name, ())  # a pause or a resume: no model action
        process = f"broker-{broker}" if broker is not None else f"controller-{c}"
        if name.startswith("Pause"):
            self.paused.add(process)
        elif name.startswith("Resume"):
            self.paused.discard(process)
        return "accepted" if self._do(*actions) else "refused: not enabled"


class KafkaSide(Side):
    """A real cluster on 127.0.0.1, driven with ``properties.kafka.run``'s runbook steps."""

    def __init__(self, brokers: int, controllers: int, install: Any, folder: Path, say: Callable[[str], None]):
        from properties.kafka.run import RealRunPlan, Run

        super().__init__(brokers)
        plan = RealRunPlan(seed=0, runbook="dual-write", faults="none", brokers=brokers, controllers=controllers)
        folder.mkdir(parents=True, exist_ok=True)
        self.run = Run(plan, install, folder, say)
        self.run._operator = open(folder / "operator.jsonl", "a")
        self.modes: dict[str, str] = {}  # process -> the role it last started as

    def close(self) -> None:
        """Everything stopped, whatever happened: the run's own teardown (``Cluster.stop_all``)."""
        try:
            if self.run.observer is not None:
                self.run.observer.stop()
        finally:
            self.run.cluster.stop_all()
            self.run._operator.close()

    def view(self, keys: tuple[str, ...] = ()) -> dict[str, str]:
        """What Kafka shows now; the migration state only when asked for (a dump starts a JVM)."""
        from properties.kafka.observe import parse_log_text

        out = {key: "unknown" for key in self.keys}
        active = self.run.active_controller()
        if active is None:
            out["driver"] = NONE
        else:
            process = self.run.controller(active)
            states = [e["new"] for e in parse_log_text(process.log_since(process.start_offset), process.name)
                      if e["kind"] == "driver-transition"]
            out["driver"] = states[-1] if states else NONE
        if "migration" in keys:
            out["migration"] = self._migration()
        client = self.run.observer.client if self.run.observer is not None else None
        try:
            if client is not None and client.connected:
                out["controller_znode"] = "zk" if self.run.zk_controller() else \
                    "kraft" if client.exists("/controller") else NONE
                out["migration_znode"] = "present" if client.exists("/migration") else "absent"
                for b in range(self.run.plan.brokers):
                    out[f"zk_broker_{b}"] = "registered" if client.exists(f"/brokers/ids/{b}") else "absent"
        except Exception:  # ZooKeeper down: what it holds is unknown, never guessed
            pass
        return out

    def _migration(self) -> str:
        """The last ZkMigrationState committed to the metadata log, as DumpLogSegments decodes it."""
        from model.migration import STATE_BYTES
        from properties.kafka.checks import _live_records
        from properties.kafka.observe import parse_dump

        self.run.dump_metadata("scenario")
        states = {b: s for s, b in STATE_BYTES[Profile.KAFKA_3_9].items()}
        found = NONE
        for path in sorted((self.run.folder / "metadata").glob(f"{self.run.dumps:02d}-*.txt")):
            controller = int(path.stem.rsplit("-", 1)[1])
            records = [r for r in _live_records(parse_dump(path.read_text(), controller))
                       if r["type"] == "ZK_MIGRATION_STATE_RECORD"]
            if records:
                found = states[records[-1]["data"]["zkMigrationState"]].name
        return found

    def reach(self, key: str, value: str) -> bool:
        from properties.kafka.run import RunbookStuck

        try:
            self.run.wait(f"{key}={value}", lambda: self.view((key,))[key] == value)
        except RunbookStuck:
            return False
        return True

    def start(self) -> bool:
        run = self.run
        run.prepare()
        run.start_zookeeper()
        run.start_zk_brokers()
        self.modes.update({f"broker-{b}": "zk-broker" for b in range(run.plan.brokers)})
        return self.reach("controller_znode", "zk")

    def operate(self, command: Command) -> str:
        run, name, a = self.run, command.name, command.args
        b, c = a.get("broker"), a.get("controller")
        if name == "UpdateMetadataVersion":
            command_line = feature_command(Ibp[a["level"]], UPGRADE_TYPES[a["upgrade_type"]])
            run.update_features(*command_line[:2], *command_line[2:])
            answer = run_last_answer(run)
            if answer["refused"]:
                self.run.say(f"  Kafka's answer: {answer['answer'].splitlines()[0]}")
            return "accepted" if not answer["refused"] else f"refused: {kafka_error(answer['answer'])}"
        perform: dict[str, Callable[[], None]] = {
            "StartControllers": run.start_controllers,
            "RollBrokerIntoMigration": lambda: run.roll_zk_broker(b),
            "RollBrokerOutOfMigration": lambda: run.roll_back_to_zk(b, "zk"),
            "MigrateBrokerToKRaft": lambda: run.roll_kraft_broker(b),
            "FinalizeController": lambda: run.finalize_controller(c),
            "DeleteControllerZNodes": lambda: run.delete_controller_znodes(migration=True),
            "StopBroker": lambda: run.stop(run.broker(b), self._mode(f"broker-{b}"), b),
            "CrashBroker": lambda: run.broker(b).kill(),
            "RestartBroker": lambda: self._restart(run.broker(b), b),
            "ShutdownController": lambda: self._deprovision(c),
            "CrashController": lambda: run.controller(c).kill(),
            "RestartController": lambda: self._restart(run.controller(c), c),
            "PauseBroker": lambda: run.broker(b).pause(), "ResumeBroker": lambda: run.broker(b).resume(),
            "PauseController": lambda: run.controller(c).pause(),
            "ResumeController": lambda: run.controller(c).resume(),
            "ExpireSession": lambda: self._expire(b),
            "ZkOutage": lambda: run.cluster.processes["zookeeper"].kill(),
            "ZkRecover": self._zk_recover,
        }
        from properties.kafka.run import RunbookStuck

        process = f"broker-{b}" if b is not None else f"controller-{c}" if c is not None else None
        target = run.cluster.processes.get(process) if process is not None else None
        # as the model refuses a step that is not enabled: a signal to a process that is not running, a
        # start of one that is or was never made (a roll stops it first)
        running = target is not None and target.running
        if process is not None and name.startswith(("Crash", "Pause", "Resume", "Stop", "Shutdown", "Expire",
                                                    "Restart")) and running == name.startswith("Restart"):
            return "refused: not enabled"
        run.note("step-begins", step=f"scenario: {command.block.command}")
        try:
            perform[name]()
        except RunbookStuck as e:
            return f"stuck: {e}"
        except NotEnabled:
            return "refused: not enabled"
        if name in ("StartControllers", "FinalizeController"):
            self.modes.update({f"controller-{x}": "controller" for x in controller_ids(run.plan.controllers)})
        if name == "MigrateBrokerToKRaft":
            self.modes[f"broker-{b}"] = "kraft-broker"
        return "accepted"

    def _mode(self, process: str) -> str:
        return self.modes.get(process, "controller")

    def _restart(self, process: Any, node: int) -> None:
        role = self._mode(process.name)
        self.run.start(process, role, node)
        marker = {"zk-broker": "started (kafka.server.KafkaServer)", "kraft-broker": "Transitioning from RECOVERY to "
                  "RUNNING"}.get(role, "Kafka Server started")
        self.run.wait(f"{process.name} started", self.run.ready(process, marker))

    def _deprovision(self, c: int) -> None:
        self.run.stop(self.run.controller(c), "controller", c)
        self.run.deprovisioned.add(c)

    def _expire(self, b: int) -> None:
        registration = self.run.zk("exists", f"/brokers/ids/{b}")
        if registration is None or not registration.ephemeralOwner:
            raise NotEnabled(f"broker {b} holds no ZooKeeper session")
        self.run.cluster.expire_session(registration.ephemeralOwner)
        self.run.note("fault", fault="expire-broker", process=f"broker-{b}", session=registration.ephemeralOwner)

    def _zk_recover(self) -> None:
        """ZooKeeper started, serving again once kraftcheck's own session is back (the view reads it): a
        client that tried while the server was starting waits out its connect timeout first."""
        zookeeper = self.run.cluster.processes["zookeeper"]
        zookeeper.start()
        self.run.cluster.wait_zookeeper()
        client = self.run.observer.client if self.run.observer is not None else None
        if client is not None:
            self.run.wait("ZooKeeper serving kraftcheck's session again", lambda: client.connected)


class NotEnabled(Exception):
    """The operator's step cannot be taken on the cluster as it is (the model's "not enabled")."""


def run_last_answer(run: Any) -> dict[str, Any]:
    """The last update-features answer the run noted (``Run.update_features`` notes Kafka's answer)."""
    from properties.kafka.observe import read_jsonl

    notes = [e for e in read_jsonl(run.folder / "operator.jsonl") if e.get("action") == "update-features"]
    return notes[-1]


# ---- running a file ----------------------------------------------------------------------------


@dataclass
class ClusterFileResult:
    path: Path
    blocks: list[Block]
    outputs: list[str]  # the model's
    diffs: list[str]
    kafka: list[str] = field(default_factory=list)  # the real cluster's, with --kafka
    version: str = ""
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return not self.diffs


def check_file(path: Path) -> tuple[list[Block], list[Command]]:
    """The file's blocks and commands; ScenarioError, naming the line, when Kafka cannot run one."""
    where = str(path)
    blocks = parse(Path(path).read_text(encoding="utf-8"), where)
    if not blocks:
        raise ScenarioError(f"{where}: no command: a scenario needs at least a 'cluster'")
    return blocks, commands(blocks, where)


def run_file(path: Path, install: Any = None, folder: Path | None = None,
             say: Callable[[str], None] = lambda line: None) -> ClusterFileResult:
    """Runs the file on the model and, given a Kafka installation, on a real cluster in ``folder``
    (a temporary one by default), stopped whatever happens."""
    blocks, cmds = check_file(path)
    shape = cmds[0].args
    began = time.monotonic()
    from properties.kafka.install import parse_version

    # the model's cluster at the release's levels, as trace validation plays it (3.9.2 without --kafka)
    model = ModelSide(shape["brokers"], shape["controllers"],
                      parse_version(install.version) if install is not None else (3, 9, 2))
    outputs = [model.take(c) for c in cmds]
    kafka: list[str] = []
    if install is not None:
        with tempfile.TemporaryDirectory(prefix="kraftcheck-scenario-") as scratch:
            real = KafkaSide(shape["brokers"], shape["controllers"], install, Path(folder or scratch), say)
            try:
                for c in cmds:
                    say(f"{time.monotonic() - began:6.1f} s  {c.block.command}")
                    kafka.append(real.take(c))
            finally:
                real.close()
    diffs = []  # one per block that differs, on either side or both
    for i, block in enumerate(blocks):
        got = [("model", outputs[i])] + ([(f"kafka {install.version}", kafka[i])] if i < len(kafka) else [])
        differ = ["\n".join(difflib.unified_diff(block.expected.splitlines(), output.splitlines(), "expected", who,
                                                 lineterm=""))
                  for who, output in got if output != block.expected]
        if differ:
            diffs.append(f"{path}:{block.line}: {block.command}\n" + "\n".join(differ))
    return ClusterFileResult(Path(path), blocks, outputs, diffs, kafka,
                             install.version if install is not None else "", time.monotonic() - began)


def rewritten(result: ClusterFileResult) -> str | None:
    """The file with the outputs as expected: the model's, and with --kafka only when Kafka agrees on every block."""
    if result.kafka and result.kafka != result.outputs:
        return None
    return render(result.blocks, result.outputs)




def cmd_scenario(args: Any) -> int:
    """``kraftcheck scenario [--kafka [--version V]] FILE...`` for files of an operator's steps: 0 when
    every block gives its expected output (on the model, and on Kafka with ``--kafka``), 1 when one
    differs, 2 when a file cannot be run (one line: a step Kafka cannot take names its line), 3 when
    a real process would not start."""
    import sys

    from properties.cli import CLEAN, USAGE, VIOLATION, report_file
    from properties.files import write_text
    from properties.kafka.cluster import ClusterError, install_signal_handlers

    def fail(message: str, code: int = USAGE) -> int:
        print(f"kraftcheck scenario: error: {message}", file=sys.stderr)
        return code

    if args.impl:
        return fail("--impl runs the implementation on the model's scenario files; a file of an operator's steps "
                    "runs on the model and, with --kafka, on a real Kafka")
    if args.version and not args.kafka:
        return fail("--version names the Kafka release of --kafka")
    try:
        for name in args.files:
            check_file(Path(name))  # every file whole before any cluster starts
    except (ScenarioError, OSError) as err:
        return fail(str(err))
    install = None
    if args.kafka:
        from properties.kafka import install as installs

        version = args.version or installs.DEFAULT_VERSION
        try:
            installs.check_supported(version)
            install = installs.install(version, progress=lambda line: print(line, file=sys.stderr))
        except installs.InstallError as err:
            return fail(str(err))
        if not install.has_zookeeper_mode:
            return fail(f"Kafka {install.version} has no ZooKeeper mode: a file of an operator's steps needs 3.4.0 to "
                        f"3.9.x")
        install_signal_handlers()
    failed = 0
    for name in args.files:
        try:
            result = run_file(Path(name), install, say=lambda line: print(line, file=sys.stderr))
        except ClusterError as err:
            return fail(f"{name}: the cluster could not be run: {err}", 3)
        on = f" on the model and Kafka {result.version} ({result.seconds:.0f} s)" if install is not None else ""
        if args.rewrite:
            text = rewritten(result)
            if text is None:
                failed += 1
                print(f"{result.path}: not written: Kafka {result.version} and the model disagree")
                print("\n".join(result.diffs))
                continue
            write_text(result.path, text)
            print(f"{result.path}: {len(result.blocks)} blocks written{on}")
        else:
            failed += report_file(result.path, len(result.blocks), result.diffs, on)
    return VIOLATION if failed else CLEAN
