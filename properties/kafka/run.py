"""One real run: a cluster carried through KIP-866's runbook with faults drawn from a seed, observed.

Rules:
- The plan (``RealRunPlan``) and the seed fix the schedule: which runbook steps run, which fault
  strikes at which step, after how long (from the step's start, or from a moment Kafka logs during
  it: ``FaultPlan.after``), on whom, for how long. Kafka's timing still varies, so
  two runs of one plan can see different interleavings; the run's folder keeps every channel's
  raw files and ``kraftcheck kafka check DIR`` re-checks them offline.
- One thread drives everything: a wait polls its condition and fires the faults and heals that
  fall due meanwhile (``Run.tick``), so a fault can land while the runbook waits on the very
  process it struck, as it would on an operator.
- Every wait has a deadline: the progress bound counted from the later of the wait's start and
  the last heal. A goal not reached by then ends the runbook; the checks report it as a liveness
  violation with the timeline.
- The runbook follows Kafka 3.9's ``docs/ops.html`` ("ZooKeeper to KRaft Migration") and KIP-866
  §Migration Overview: (A) a ZooKeeper cluster with data, (B) controllers provisioned in migration
  mode and brokers rolled with the migration settings, (C) the migration to dual write, with
  metadata changed during it, (D) brokers rolled to KRaft, (E) controllers rolled without the
  migration settings (finalization); or the guide's rollback after B, C or D. The ``kraft``
  runbook is KIP-500 and KIP-584 on a KRaft-born cluster, the only one Kafka 4.x can run.
"""

from __future__ import annotations

import base64
import json
import random
import re
import shutil
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TextIO

from properties.kafka import configs
from properties.kafka.checks import PROGRESS_BOUND_S, UNFENCE_BOUND_S, Observed, Violation, run_checks
from properties.kafka.cluster import (
    JMX_INTERVAL_MS,
    ZK_SESSION_TIMEOUT_MS,
    Cluster,
    ClusterError,
    Process,
    free_port,
)
from properties.kafka.install import Installation
from properties.kafka.observe import (
    BROKER_METADATA,
    LOG_PATTERNS,
    ZK_TXNS,
    ZkObserver,
    merge,
    metadata_files,
    name_sessions,
    parse_dump,
    parse_log,
    parse_log_text,
    quiet_logger,
    read_jsonl,
)
from properties.kafka.workload import TOPIC, LedgerWriter, read_ledger

RUNBOOKS = (
    "kraft",
    "dual-write",
    "kraft-brokers",
    "finalize",
    "rollback-before-brokers",
    "rollback-dual-write",
    "rollback-kraft-brokers",
)
FAULT_MIXES = ("none", "process", "all")
FAULT_KINDS = {
    "none": (),
    "process": ("kill-controller", "kill-broker", "pause-controller", "pause-broker"),
    "all": (
        "kill-controller", "kill-broker", "pause-controller", "pause-broker", "zk-outage", "expire-broker",
        "pause-zookeeper",
    ),
}
ZOOKEEPER_FAULTS = ("zk-outage", "expire-broker", "pause-zookeeper")
# Faults on the ZooKeeper server itself: an outage (killed, started again) and a stall (paused past the session
# timeout, as a long GC or disk stall does: every session expires when it resumes, the KRaft controller's included,
# while its writes wait).
ZOOKEEPER_SERVER_FAULTS = ("zk-outage", "pause-zookeeper")
HEAP_MB = {"zk-broker": 320, "kraft-broker": 320, "controller": 256}


@dataclass(frozen=True)
class FaultPlan:
    step: str  # the runbook step it strikes during
    delay_s: float  # after the step starts, or after its moment (``after``) is logged
    kind: str
    target: int  # a broker id or a controller index, drawn; resolved at fire time
    duration_s: float  # how long until the heal (restart, SIGCONT, ZooKeeper back)
    # a moment (``parse_moment``): the fault waits, from its step's start on, for the first line of it that a
    # process logs, and strikes ``delay_s`` after it is read; never logged, the fault is skipped
    after: str = ""


# How often a wait reads the processes' logs while a fault waits for its moment: a moment's window can be a few
# hundred milliseconds (the migration's metadata transaction, open from its first record to its last).
MOMENT_POLL_S = 0.02
MOMENT_KINDS = {kind: set(pattern.groupindex) for kind, pattern in LOG_PATTERNS}
# the driver's states as Kafka's MigrationDriverState names them (3.4 to 3.9)
DRIVER_STATES = (
    "UNINITIALIZED", "INACTIVE", "WAIT_FOR_CONTROLLER_QUORUM", "WAIT_FOR_BROKERS", "BECOME_CONTROLLER",
    "ZK_MIGRATION", "SYNC_KRAFT_TO_ZK", "KRAFT_CONTROLLER_TO_BROKER_COMM", "DUAL_WRITE",
)


def parse_moment(text: str) -> tuple[str, dict[str, str]]:
    """A moment, ``KIND [FIELD=VALUE ...]``: a decision line of kind KIND (``observe.LOG_PATTERNS``) whose
    fields have these values, say ``kraft-broker-running broker=2`` or ``driver-transition new=ZK_MIGRATION``."""
    kind, *pairs = text.split()
    if kind not in MOMENT_KINDS:
        raise PlanError(f"moment {text!r}: unknown kind {kind!r} (kinds: {', '.join(MOMENT_KINDS)})")
    fields: dict[str, str] = {}
    for pair in pairs:
        name, is_pair, value = pair.partition("=")
        if not is_pair or not value:
            raise PlanError(f"moment {text!r}: {pair!r} is not FIELD=VALUE")
        if name not in MOMENT_KINDS[kind]:
            known = ", ".join(sorted(MOMENT_KINDS[kind])) or "none"
            raise PlanError(f"moment {text!r}: {kind} has no field {name!r} (its fields: {known})")
        fields[name] = value
    return kind, fields


def moment_logged(moment: str, event: dict) -> bool:
    """Whether a parsed decision line (``parse_log_text``) is ``moment``."""
    kind, fields = parse_moment(moment)
    return event["kind"] == kind and all(event.get(name) == value for name, value in fields.items())


def step_moments(step: str, plan: RealRunPlan) -> tuple[str, ...]:
    """The moments a runbook step makes Kafka log, in the order it logs them: where an aimed fault (``aimed``)
    waits. The last broker's roll into migration mode sets the migration off (KIP-866 §Migration Overview: the
    driver starts once every ZooKeeper-mode broker has registered with KRaft), so its moments are the driver's too."""
    rolled = re.fullmatch(r"roll-broker-(\d+)-(migrating|kraft|zk|back-migrating)", step)
    if rolled:
        b, mode = rolled[1], rolled[2]
        if mode in ("migrating", "kraft"):
            moments = [f"kraft-broker-registered broker={b}", f"kraft-broker-running broker={b}"]
            if mode == "migrating":
                moments.insert(0, f"zk-broker-registered broker={b}")
                if int(b) == plan.brokers - 1:
                    moments += [f"driver-transition new={s}" for s in DRIVER_STATES[4:]] + ["migration-completed"]
            return tuple(moments)
        return (f"zk-broker-registered broker={b}", "zk-controller-elected")
    if step.startswith("finalize-controller-"):
        return ("raft-leader", "active-controller")
    if step == "start-controllers" and plan.runbook != "kraft":  # controllers in migration mode start a driver
        return ("raft-leader", "active-controller", "driver-transition new=WAIT_FOR_BROKERS")
    return {
        "start-zk-brokers": ("zk-broker-registered", "zk-controller-elected"),
        "start-controllers": ("raft-leader", "active-controller"),
        "start-kraft-brokers": ("kraft-broker-registered", "kraft-broker-running"),
        "reach-dual-write": ("migration-completed", "driver-transition new=DUAL_WRITE"),
        "write-during-dual-write": ("driver-zk-writes",),
        "reach-zk-controller-before-roll": ("zk-controller-elected",),
        "reach-zk-controller": ("zk-controller-elected",),
    }.get(step, ())


# Steps the operations guide does not need for the migration or the rollback: metadata written while
# it goes on, and the kraft runbook's feature updates after its upgrade. A shrunk plan may leave them out.
OPTIONAL_STEPS = (
    "write-during-dual-write",
    "downgrade-metadata-version",
    "unsafe-downgrade-metadata-version",
    "create-data-after-features",
)


@dataclass(frozen=True)
class RealRunPlan:
    """What one real run does; with the seed it fixes the schedule of steps and faults.

    A plan that a shrink reduced (``properties.kafka.shrink``) names its faults itself
    (``schedule``, instead of the seed's draw), may leave out optional steps (``skip``) and the
    client's writes (``client``); ``kraftcheck kafka run --plan FILE`` runs one exactly."""

    seed: int
    runbook: str = "finalize"
    faults: str = "process"
    brokers: int = 3
    controllers: int = 1
    fault_count: int = 1  # faults drawn for the run (at most one per runbook step)
    schedule: tuple[FaultPlan, ...] | None = None  # these faults, not the seed's
    skip: tuple[str, ...] = ()  # OPTIONAL_STEPS left out
    client: bool = True  # the ledger's producer and its read-back (workload.py)
    # each drawn fault waits for a moment its step makes Kafka log (``step_moments``) and strikes within half a
    # second of it, instead of at a delay into the step; the same faults as unaimed, on the same steps
    aimed: bool = False
    # an aimed draw's steering: the cells ("kind@moment") earlier runs of its campaign struck, which the draw aims
    # away from where its kind has another to strike (``schedule_faults``)
    covered: tuple[str, ...] = ()


class PlanError(ValueError):
    """A plan file that cannot be run: the one-line reason."""


def plan_from_json(data: object) -> RealRunPlan:
    """A plan as ``run.json`` and ``shrunk-plan.json`` hold it (``{"plan": ..., "faults": [...]}``), with
    its faults fixed: replaying it runs exactly these faults, whatever the seed would draw."""
    if not isinstance(data, dict) or not isinstance(data.get("plan"), dict):
        raise PlanError('expected a JSON object with a "plan" object (a run\'s run.json or a shrunk-plan.json)')
    fields = {f for f in RealRunPlan.__dataclass_fields__}
    plan = dict(data["plan"])
    unknown = sorted(set(plan) - fields)
    if unknown:
        raise PlanError(f"plan: unknown key {unknown[0]!r}")
    faults = data.get("faults", plan.get("schedule"))
    try:
        if faults is not None:
            plan["schedule"] = tuple(FaultPlan(**f) for f in faults)
        plan["skip"] = tuple(plan.get("skip", ()))
        plan["covered"] = tuple(plan.get("covered", ()))
        result = RealRunPlan(**plan)
    except TypeError as e:
        raise PlanError(f"plan: {e}") from None
    if not isinstance(result.seed, int) or result.runbook not in RUNBOOKS or result.faults not in FAULT_MIXES:
        raise PlanError(
            f"plan: seed {result.seed!r}, runbook {result.runbook!r}, faults {result.faults!r} "
            f"(runbooks: {', '.join(RUNBOOKS)}; faults: {', '.join(FAULT_MIXES)})"
        )
    for f in result.schedule or ():
        if f.kind not in FAULT_KINDS["all"]:
            raise PlanError(f"plan: unknown fault kind {f.kind!r}")
        if f.after:
            parse_moment(f.after)
    bad = sorted(set(result.skip) - set(OPTIONAL_STEPS))
    if bad:
        raise PlanError(f"plan: step {bad[0]!r} cannot be skipped (optional: {', '.join(OPTIONAL_STEPS)})")
    return result


def plan_json(plan: RealRunPlan, kafka: str) -> dict:
    """The replayable form of ``plan``: what ``plan_from_json`` reads back."""
    fields = asdict(plan)
    faults = fields.pop("schedule")
    return {"plan": fields, "kafka": kafka, "faults": faults}


def plan_problem(plan: RealRunPlan, steps: list[str]) -> str | None:
    """Why ``plan``'s faults cannot run on ``steps`` (a step the runbook lacks, a victim the cluster lacks)."""
    for f in plan.schedule or ():
        if f.step not in steps:
            return f"fault {f.kind} strikes during {f.step!r}, a step runbook {plan.runbook} lacks here"
        count = plan.brokers if f.kind.endswith("broker") else plan.controllers
        if f.kind not in ZOOKEEPER_SERVER_FAULTS and not 0 <= f.target < count:
            return f"fault {f.kind} targets {f.target}, which a cluster of {count} lacks"
    return None


def fault_kinds(plan: RealRunPlan) -> list[str]:
    """The kinds of fault ``plan``'s mix draws from (a KRaft-born cluster has no ZooKeeper to fault)."""
    return [k for k in FAULT_KINDS[plan.faults] if plan.runbook != "kraft" or k not in ZOOKEEPER_FAULTS]


def eligible_steps(kind: str, steps: list[str]) -> list[str]:
    """The steps a fault of ``kind`` may strike: where its victim exists (controllers from their start until a
    rollback deprovisions them; brokers and ZooKeeper from the brokers' start), the admin's data step aside."""
    brokers_start = "start-zk-brokers" if "start-zk-brokers" in steps else "start-kraft-brokers"
    first = steps.index("start-controllers" if kind.endswith("controller") else brokers_start)
    last = (
        steps.index("deprovision-controllers")
        if kind.endswith("controller") and "deprovision-controllers" in steps
        else len(steps)
    )
    return [s for s in steps[first:last] if s != "create-data"]


def schedule_faults(plan: RealRunPlan, steps: list[str]) -> list[FaultPlan]:
    """The seed's faults: each on a step where its victim exists, no two on one step (or the plan's own)."""
    if plan.schedule is not None:
        return sorted(plan.schedule, key=lambda f: steps.index(f.step) if f.step in steps else len(steps))
    kinds = fault_kinds(plan)
    rng = random.Random(plan.seed)
    faults: list[FaultPlan] = []
    where: list[list[str]] = []  # each fault's eligible steps, as drawn
    for _ in range(plan.fault_count if kinds else 0):
        kind = rng.choice(kinds)
        taken = {f.step for f in faults}
        eligible = [s for s in eligible_steps(kind, steps) if s not in taken]
        if not eligible:
            break
        where.append(eligible)
        pause = kind.startswith("pause")
        faults.append(
            FaultPlan(
                step=rng.choice(eligible),
                delay_s=round(rng.uniform(0.0, 4.0), 2),
                kind=kind,
                target=rng.randrange(plan.brokers if kind.endswith("broker") else plan.controllers),
                # a pause outlives the ZooKeeper session (the zombie); a kill or an outage is shorter
                duration_s=round(
                    ZK_SESSION_TIMEOUT_MS / 1000 + rng.uniform(1.0, 4.0) if pause else rng.uniform(1.0, 6.0), 2
                ),
            )
        )
    if plan.aimed:
        # a stream of its own, so an aimed plan's faults are its unaimed twin's, each moved to a moment
        aim = random.Random(f"{plan.seed}-aimed")
        # steered (a campaign's later runs), each fault aims at a cell no run struck yet where it can; the first
        # run's draw is the seed's alone
        covered = set(plan.covered) if plan.covered else None
        for i, f in enumerate(faults):
            if covered is not None:
                f = faults[i] = _steered(f, where[i], {g.step for g in faults} - {f.step}, covered, plan, aim)
            moments = step_moments(f.step, plan)
            if moments:
                fresh = [m for m in moments if covered is None or f"{f.kind}@{m}" not in covered]
                after = aim.choice(fresh or moments)
                if covered is not None:
                    covered.add(f"{f.kind}@{after}")
                faults[i] = replace(f, after=after, delay_s=round(aim.uniform(0.0, 0.5), 2))
    return sorted(faults, key=lambda f: steps.index(f.step))


def _steered(fault: FaultPlan, eligible: list[str], taken: set[str], covered: set[str], plan: RealRunPlan,
             aim: random.Random) -> FaultPlan:
    """``fault`` on its step if a moment there is one its kind has not struck (``covered``), else moved to another
    eligible step, not another fault's, that has such a moment; as it was if none has."""
    def fresh(step: str) -> bool:
        return any(f"{fault.kind}@{m}" not in covered for m in step_moments(step, plan))

    if fresh(fault.step):
        return fault
    elsewhere = [s for s in eligible if s not in taken and fresh(s)]
    return replace(fault, step=aim.choice(elsewhere)) if elsewhere else fault


def aimable_cells(plan: RealRunPlan, steps: list[str]) -> list[tuple[str, str]]:
    """Every (kind, moment) an aimed draw of ``plan``'s fault mix may strike on its runbook's ``steps``, in the
    runbook's order: the cells of a campaign's moment table, those no run struck included."""
    cells: dict[tuple[str, str], None] = {}
    for kind in fault_kinds(plan):
        for step in eligible_steps(kind, steps):
            for moment in step_moments(step, plan):
                cells[(kind, moment)] = None
    return list(cells)


def session_expired_at_start(process: Process) -> bool:
    """Whether ``process``, since it last started, exited at startup on a ZooKeeper session that expired meanwhile:
    ``KafkaServer.startup`` takes any ``SessionExpiredException`` as fatal ("Fatal error during KafkaServer startup",
    the exception on the next line: Kafka's ZooKeeper client retries a request after a lost connection, not after a
    lost session). Another fatal error (a crash such as ``CheckedEphemeral``'s NullPointerException) is not one."""
    text = process.log_since(process.start_offset)
    fatal = text.find("Fatal error during KafkaServer startup")
    cause = text[fatal:].splitlines()[1:2] if fatal >= 0 else []
    return any("KeeperException$SessionExpiredException" in line for line in cause)


class RunbookStuck(Exception):
    """A goal was not reached within the progress bound: the run ends, the checks report it."""


# How long one request of kraftcheck's own ZooKeeper session waits for an answer before the driver looks at its faults
# again (``Run.zk``): a paused server answers nothing, and the heal that resumes it is the driver's own to fire.
ZK_ANSWER_S = 1.0
# ACLs the ZooKeeper runbooks make, each (resource type, literal name, principal, operation), all ALLOW from any host:
# three on one topic in ZooKeeper mode; in dual write one of them deleted (the resource keeps two, rewritten whole)
# and one created on a group. No client here uses either resource. Kafka migrates ACLs from 3.5.0
# (``configs.ACL_MIGRATION``): a 3.4 cluster runs with no authorizer, and the runbooks make none there.
Acl = tuple[str, str, str, str]
ZK_MODE_ACLS: tuple[Acl, ...] = (("topic", "audit", "User:alice", "read"), ("topic", "audit", "User:alice", "write"),
                                 ("topic", "audit", "User:bob", "read"))
DUAL_WRITE_ACLS: tuple[tuple[Acl, ...], tuple[Acl, ...]] = ((("group", "audit-readers", "User:alice", "read"),),
                                                            (("topic", "audit", "User:bob", "read"),))


@dataclass
class Run:
    plan: RealRunPlan
    install: Installation
    folder: Path
    say: Callable[[str], None] = print
    cluster: Cluster = field(init=False)
    cluster_id: str = field(init=False, default="")
    pending: list[tuple[float, str, FaultPlan]] = field(default_factory=list)  # (due, "fault"|"heal", fault)
    # faults waiting for their moment, each with how far it has read each process's log (bytes)
    awaiting: list[tuple[FaultPlan, dict[str, int]]] = field(default_factory=list)
    faults: list[FaultPlan] = field(default_factory=list)
    last_heal: float = 0.0
    dumps: int = 0
    struck: dict[int, Process] = field(default_factory=dict)  # id(fault) -> its victim, until healed
    deferred: dict[int, float] = field(default_factory=dict)  # id(fault) -> when its heal first waited
    outage_ended: float | None = None  # when the last ZooKeeper outage healed
    deprovisioned: set[int] = field(default_factory=set)  # controllers the rollback stopped for good
    roles: dict[str, str] = field(default_factory=dict)  # process name -> the role it was last started in
    started: float = field(default_factory=time.monotonic)
    observer: ZkObserver | None = field(init=False, default=None)  # from ZooKeeper's start on
    writer: LedgerWriter | None = field(init=False, default=None)  # the client's writes, from create-data on
    _operator: TextIO | None = field(init=False, default=None)  # operator.jsonl, open while the run runs

    def __post_init__(self) -> None:
        self.cluster = Cluster(self.install, self.folder)
        # a thread for the calls that block (the admin client's metadata reads, Kafka's tools), so that the one
        # thread that heals awaits their answers as it awaits an admin request's (``blocking``)
        self._blocking = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kraftcheck-blocking")

    # ---- the operator's log -----------------------------------------------------------------

    def note(self, kind: str, **detail) -> None:
        event = {"channel": "operator", "kind": kind, "time": int(time.time() * 1000), **detail}
        self._operator.write(json.dumps(event, sort_keys=True) + "\n")
        self._operator.flush()

    # ---- names --------------------------------------------------------------------------------

    @property
    def controller_ids(self) -> list[int]:
        return [configs.FIRST_CONTROLLER_ID + i for i in range(self.plan.controllers)]

    def broker(self, b: int) -> Process:
        return self.cluster.processes[f"broker-{b}"]

    def controller(self, c: int) -> Process:
        return self.cluster.processes[f"controller-{c}"]

    # ---- kraftcheck's own ZooKeeper session ------------------------------------------------------

    def zk(self, request: str, *args: object, heal: bool = True):
        """``observer.client.<request>(*args)`` (``exists``, ``get``, ``delete``) that never blocks the one thread
        that heals. A server a fault paused accepts the connection and answers nothing (kazoo would wait for ever,
        and the heal that resumes it would never fire), so each try waits ``ZK_ANSWER_S``, and between tries the
        faults and heals due fire (``tick``); RunbookStuck once ZooKeeper has not answered for the progress bound
        past the last heal. ``heal=False``, for a read made while faults fire (inside ``tick``): one try, and
        kazoo's KazooTimeoutError when it goes unanswered."""
        from kazoo.handlers.threading import KazooTimeoutError

        began = time.monotonic()
        while True:
            try:
                return getattr(self.observer.client, f"{request}_async")(*args).get(timeout=ZK_ANSWER_S)
            except KazooTimeoutError:
                if not heal:
                    raise
                self.tick()
                if time.monotonic() > max(began, self.last_heal) + PROGRESS_BOUND_S and not self.pending:
                    raise RunbookStuck(f"ZooKeeper did not answer kraftcheck's {request} of {args[0]} within "
                                       f"{PROGRESS_BOUND_S:.0f} s of the last heal") from None

    def answer(self, future, timeout_s: float = 30.0):
        """An admin request's answer (``future.result``) that never blocks the one thread that heals: the admin
        client waits for a paused broker until its request times out (20 s), and a fault due meanwhile (a pause's
        heal) would fire only after, lengthening the fault beyond its plan. Each try waits ``ZK_ANSWER_S``, and
        between tries the faults and heals due fire (``tick``); past ``timeout_s`` the wait ends as
        ``future.result(0)`` does."""
        from concurrent.futures import TimeoutError as FutureTimeout

        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return future.result(timeout=min(ZK_ANSWER_S, self.poll_s, max(0.0, deadline - time.monotonic())))
            except FutureTimeout:
                if time.monotonic() >= deadline:
                    raise
                self.tick()

    def blocking(self, call: Callable[..., object], *args: object, timeout_s: float = 30.0, **kwargs: object):
        """``call(*args, **kwargs)`` run on the blocking-call thread, its answer awaited as ``answer`` awaits an
        admin request's: a second at a time, the faults and heals due fired in between. The admin client's
        ``list_topics`` waits on a paused broker until its 20 s timeout and a Kafka tool until its own, and a heal
        due meanwhile would fire only after, lengthening the fault beyond its plan."""
        return self.answer(self._blocking.submit(call, *args, **kwargs), timeout_s=timeout_s)

    def listed(self, topic: str | None = None):
        """The cluster's metadata as the admin client lists it (every topic's, or ``topic``'s), without holding up
        the heals (``blocking``)."""
        return self.blocking(self.admin().list_topics, topic, timeout=20, timeout_s=25)

    # ---- faults -------------------------------------------------------------------------------

    def arm(self, step: str) -> None:
        now = time.monotonic()
        for f in self.faults:
            if f.step == step and f.after:
                read = {name: process.log_offset() for name, process in self.cluster.processes.items()}
                self.awaiting.append((f, read))
            elif f.step == step:
                self.pending.append((now + f.delay_s, "fault", f))

    @property
    def poll_s(self) -> float:
        """How long a wait sleeps between looks: often while a fault waits for its moment."""
        return MOMENT_POLL_S if self.awaiting else 0.2

    def watch_moments(self) -> None:
        """Reads each process's log lines since the last look (whole lines only) for the moments faults wait for;
        a fault whose moment is logged falls due ``delay_s`` later. A process started after its fault was armed
        is read from its log's start."""
        for fault, read in list(self.awaiting):
            for name, process in list(self.cluster.processes.items()):
                try:
                    with open(process.log, "rb") as f:
                        f.seek(read.get(name, 0))
                        new = f.read()
                except FileNotFoundError:
                    continue
                whole = new[: new.rfind(b"\n") + 1]
                read[name] = read.get(name, 0) + len(whole)
                lines = parse_log_text(whole.decode("utf-8", "replace"), name)
                seen = next((e for e in lines if moment_logged(fault.after, e)), None)
                if seen is not None:
                    self.awaiting.remove((fault, read))
                    self.pending.append((time.monotonic() + fault.delay_s, "fault", fault))
                    self.note("moment", fault=fault.kind, step=fault.step, after=fault.after, process=name,
                              logged=seen["time"])
                    self.say(f"  moment: {fault.after} ({name}); {fault.kind} in {fault.delay_s:.2f} s")
                    break

    def forget_moments(self) -> None:
        """The faults whose moment was never logged: skipped, and said so."""
        self.watch_moments()
        for fault, _ in self.awaiting:
            self.note("fault-skipped", fault=fault.kind, step=fault.step, after=fault.after,
                      why="its moment was never logged")
            self.say(f"  fault skipped: {fault.kind} (no {fault.after!r} logged after {fault.step} began)")
        self.awaiting.clear()

    def tick(self, sparing: Process | None = None) -> None:
        """Fires the faults and heals due; a fault on ``sparing`` (a process the runbook is stopping) waits."""
        self.watch_moments()
        now = time.monotonic()
        for entry in sorted((e for e in self.pending if e[0] <= now), key=lambda e: e[0]):
            _, what, fault = entry
            if sparing is not None and what == "fault" and self._victim(fault) is sparing:
                continue
            self.pending.remove(entry)
            (self._strike if what == "fault" else self._heal)(fault)

    def _victim(self, fault: FaultPlan) -> Process:
        if fault.kind in ZOOKEEPER_SERVER_FAULTS:
            return self.cluster.processes["zookeeper"]
        if fault.kind.endswith("broker"):
            return self.broker(fault.target)
        active = self.active_controller()
        return self.controller(self.controller_ids[fault.target] if active is None else active)

    def active_controller(self) -> int | None:
        """The running controller whose last Raft transition since it started made it leader, of the newest epoch."""
        leaders: list[tuple[int, int]] = []  # (epoch, controller)
        for c, process in self.running_controllers().items():
            raft = [
                e
                for e in parse_log_text(process.log_since(process.start_offset), process.name)
                if e["kind"] in ("raft-leader", "raft-resigned")
            ]
            if raft and raft[-1]["kind"] == "raft-leader":
                leaders.append((int(raft[-1]["epoch"]), c))
        return max(leaders)[1] if leaders else None

    def _strike(self, fault: FaultPlan) -> None:
        victim = self._victim(fault)
        if not victim.running or victim.paused:
            self.note("fault-skipped", fault=fault.kind, process=victim.name, why="not running")
            return
        if fault.kind == "expire-broker":
            self._expire(fault, victim)
            return
        if fault.kind.startswith("pause"):
            victim.pause()
        else:
            victim.kill()
        self.note("fault", fault=fault.kind, process=victim.name, duration_s=fault.duration_s)
        self.say(f"  fault: {fault.kind} {victim.name} for {fault.duration_s:.1f} s")
        self.pending.append((time.monotonic() + fault.duration_s, "heal", fault))
        self.struck[id(fault)] = victim

    def _expire(self, fault: FaultPlan, victim: Process) -> None:
        """The broker's ZooKeeper session expires at the server while it runs (KIP-380: a bounce it did not choose)."""
        from kazoo.handlers.threading import KazooTimeoutError

        try:
            registration = self.zk("exists", f"/brokers/ids/{fault.target}", heal=False)
        except KazooTimeoutError:
            self.note("fault-skipped", fault=fault.kind, process=victim.name, why="ZooKeeper does not answer")
            return
        if registration is None or not registration.ephemeralOwner:
            self.note(
                "fault-skipped", fault=fault.kind, process=victim.name, why="no ZooKeeper session (a KRaft broker?)"
            )
            return
        try:
            self.cluster.expire_session(registration.ephemeralOwner)
        except ClusterError as e:
            self.note("fault-skipped", fault=fault.kind, process=victim.name, why=str(e))
            return
        self.note("fault", fault=fault.kind, process=victim.name, session=registration.ephemeralOwner)
        self.say(f"  fault: {fault.kind} {victim.name} (session 0x{registration.ephemeralOwner:x})")
        self.last_heal = time.monotonic()  # nothing to heal: the broker registers again by itself

    def _heal(self, fault: FaultPlan) -> None:
        victim = self.struck.pop(id(fault))
        if victim.name in {f"controller-{c}" for c in self.deprovisioned}:
            self.note("heal-skipped", fault=fault.kind, process=victim.name, why="deprovisioned by the rollback")
            return
        if fault.kind in ZOOKEEPER_SERVER_FAULTS:
            self.outage_ended = time.monotonic()
        if fault.kind.startswith("pause"):
            victim.resume()
        elif victim.running:  # the runbook started it again meanwhile (a roll)
            self.last_heal = time.monotonic()
            self.note("heal-skipped", fault=fault.kind, process=victim.name, why="already running again")
            return
        elif self._old_registration(fault, victim):
            # a ZooKeeper-mode broker started while its killed incarnation's registration lives on refuses
            # to start (KafkaZkClient's CheckedEphemeral: "node already exists and owner ... does not match
            # current session") and exits: as an operator would, start it once the old session has expired
            self.struck[id(fault)] = victim
            self.pending.append((time.monotonic() + 0.5, "heal", fault))
            return
        else:
            victim.start()
        self.last_heal = time.monotonic()
        self.note("heal", fault=fault.kind, process=victim.name)
        self.say(f"  heal: {victim.name}")

    def _old_registration(self, fault: FaultPlan, victim: Process) -> bool:
        """A killed ZooKeeper-mode broker's ``/brokers/ids/N`` is still there, and its heal has waited less
        than a session timeout and a start's time for it to go."""
        if fault.kind != "kill-broker" or self.observer is None:
            return False
        first = self.deferred.setdefault(id(fault), time.monotonic())
        if time.monotonic() - first > ZK_SESSION_TIMEOUT_MS / 1000 + 30:
            return False
        config = victim.folder / "server.properties"
        if not config.is_file() or "process.roles=" in config.read_text():
            return False  # a KRaft broker registers with the controllers, not in ZooKeeper
        from kazoo.exceptions import KazooException
        from kazoo.handlers.threading import KazooTimeoutError

        try:
            return self.zk("exists", f"/brokers/ids/{fault.target}", heal=False) is not None
        except KazooTimeoutError:  # no answer yet (a paused server, a slow one): ask again at the next try
            return True
        except KazooException:  # ZooKeeper is down: the broker will give up and be started again (wait)
            return False

    def settle(self) -> None:
        """Lets every scheduled fault strike and heal, then waits for the runbook's end state again."""
        self.forget_moments()
        while self.pending:
            self.tick()
            time.sleep(0.2)
        goal, reached = self.end_state()
        self.wait(f"{goal} after the faults", reached)
        if not self.rolls_back:
            self.wait_for_brokers_unfenced()

    def wait_for_brokers_unfenced(self) -> None:
        """At rest every broker runs, so KRaft's image should fence none: waits, UNFENCE_BOUND_S at most, for the
        active controller's FencedBrokerCount (sampled over JMX after this wait began) to be 0, so that a broker KRaft
        leaves fenced is judged that long after the faults healed (MigratingZkBrokerEventuallyUnfenced); noted when
        the wait runs out."""
        since, deadline = time.time() * 1000, time.monotonic() + UNFENCE_BOUND_S
        while time.monotonic() < deadline:
            if self.fenced_broker_count(since) == 0:
                return
            time.sleep(JMX_INTERVAL_MS / 1000)
        self.note("brokers-fenced-at-rest", count=self.fenced_broker_count(since), waited_s=UNFENCE_BOUND_S)

    def fenced_broker_count(self, since: float) -> int | None:
        """The FencedBrokerCount of the newest JMX sample, taken after ``since``, of a controller that was active then
        (None: no such sample yet; 0 from a release without the gauge: nothing to wait for)."""
        count = None
        for sample in read_jsonl(self.folder / "jmx.jsonl"):
            metrics = sample.get("metrics") or {}
            if sample.get("time", 0) >= since and metrics.get("ActiveControllerCount") == 1 \
                    and sample.get("process", "").startswith("controller-"):
                count = metrics.get("FencedBrokerCount", 0)
        return count

    def sample_broker_metadata(self) -> None:
        """At rest, what every broker serves clients, asked of each alone (``BROKER_METADATA``): the committed image
        where a KRaft controller is in charge at the end, ZooKeeper's state after a rollback."""
        try:
            self.cluster.sample_broker_metadata(self.folder / BROKER_METADATA, list(range(self.plan.brokers)))
        except ClusterError as e:  # kraftcheck's own observation failed: said so, the run still judged on the rest
            self.note("broker-metadata-unread", reason=str(e))

    def end_state(self) -> tuple[str, Callable[[], bool]]:
        """What the finished runbook leaves, as a goal a recovered cluster must be back in."""
        if self.plan.runbook == "dual-write":
            return "dual-write", self.in_dual_write
        if self.rolls_back:
            zk_brokers = [
                self.ready(self.broker(b), "started (kafka.server.KafkaServer)") for b in range(self.plan.brokers)
            ]
            # registered too: a broker whose session a fault expired resigns as controller (and its
            # ActiveControllerCount drops) only as it starts a new session, before it registers again
            return (
                "a ZooKeeper controller and every broker running",
                lambda: self.zk_controller() and all(r() for r in zk_brokers) and self.every_zk_broker_registered(),
            )
        brokers = [
            self.ready(self.broker(b), "Transitioning from RECOVERY to RUNNING") for b in range(self.plan.brokers)
        ]
        if self.plan.runbook in ("kraft-brokers", "kraft"):
            return "every KRaft broker running", lambda: all(ready() for ready in brokers)
        controllers = [self.ready(self.controller(c), "Kafka Server started") for c in self.controller_ids]
        return "every node running", lambda: all(ready() for ready in brokers + controllers)

    def heal_all(self) -> None:
        for entry in sorted((e for e in self.pending if e[1] == "heal"), key=lambda e: e[0]):
            self.pending.remove(entry)
            self._heal(entry[2])
        self.pending.clear()

    # ---- waiting ------------------------------------------------------------------------------

    def wait(self, goal: str, reached: Callable[[], bool], bound: float = PROGRESS_BOUND_S,
             stuck_note: dict | None = None) -> None:
        """Until ``reached()``, firing due faults; stuck after ``bound`` s past the later of now and the last heal
        (noted with ``stuck_note``'s fields as they are then)."""
        began = time.monotonic()
        self.note("goal", goal=goal)
        awaited = getattr(reached, "process", None)
        restarts = 0
        while not reached():
            self.tick()
            struck = any(victim is awaited for victim in self.struck.values())
            if awaited is not None and not awaited.running and not struck:
                why = awaited.fatal_line() or f"exit code {awaited.popen.returncode}"
                if self.outage_explains(restarts):
                    # a ZooKeeper-mode broker started while ZooKeeper is down gives up (it cannot start
                    # without it): once ZooKeeper is back, the operator starts it again
                    if self.cluster.processes["zookeeper"].running:
                        restarts += 1
                        self.note("restart", process=awaited.name, why=why)
                        self.say(f"  {awaited.name} gave up while ZooKeeper was down: started again")
                        awaited.start()
                    time.sleep(self.poll_s)
                    continue
                if restarts < 2 and session_expired_at_start(awaited):
                    # its ZooKeeper session expired while it started (a fault paused it, or ZooKeeper, past the
                    # session timeout), which KafkaServer.startup takes as fatal: a supervisor starts it again
                    restarts += 1
                    self.note("restart", process=awaited.name, why=why)
                    self.say(f"  {awaited.name} exited at startup on its expired ZooKeeper session: started again")
                    awaited.start()
                    continue
                # it exited on its own for another reason: an operator would look at why before going on
                self.note("stuck", goal=goal, exited=awaited.name, why=why)
                raise RunbookStuck(f"{goal}: {awaited.name} exited on its own ({why})")
            if time.monotonic() > max(began, self.last_heal) + bound and not self.pending:
                self.note("stuck", goal=goal, **(stuck_note or {}))
                raise RunbookStuck(f"{goal} not reached within {bound:.0f} s of the last heal")
            time.sleep(self.poll_s)
        self.note("reached", goal=goal)

    def outage_explains(self, restarts: int) -> bool:
        """A ZooKeeper outage is on, or ended within a session timeout and a start's time: a process that gave up
        meanwhile did what Kafka does without ZooKeeper (twice at most per goal, so a real crash still shows)."""
        recent = (
            self.outage_ended is not None and time.monotonic() - self.outage_ended < ZK_SESSION_TIMEOUT_MS / 1000 + 30
        )
        zookeeper = self.cluster.processes.get("zookeeper")
        down = zookeeper is not None and (not zookeeper.running or zookeeper.paused)
        return restarts < 2 and (down or recent)

    def ready(self, process: Process, marker: str) -> Callable[[], bool]:
        def check() -> bool:
            return process.running and not process.paused and marker in process.log_since(process.start_offset)

        check.process = process  # type: ignore[attr-defined]  # what ``wait`` watches for an exit of its own
        return check

    def start(self, process: Process, role: str, node: int) -> None:
        process.start()
        self.roles[process.name] = role
        self.note("step", action="start", role=role, node=node, process=process.name)

    def stop(self, process: Process, role: str, node: int) -> None:
        """A clean stop; one that hangs is killed, and then, as an operator would, the broker's old
        ZooKeeper session is let expire before it starts again (a new process finding its old
        registration still there refuses to start: KafkaZkClient's CheckedEphemeral). So too when a fault
        killed the process before the runbook came to stop it (a 3.9.2 dual-write run with three controllers:
        broker-1 killed 1.8 s before its roll, started again at once, exited on its old registration)."""
        if process.paused:
            process.resume()
        began = int(time.time() * 1000)  # a clean stop takes seconds: what it causes happens from here on
        was_running = process.running
        # the faults due meanwhile fire on time (a controlled shutdown takes seconds: an aimed fault whose moment came
        # as the step before ended struck 11 s late, after the stop), but none on the process being stopped
        clean = process.stop(meanwhile=lambda: self.tick(sparing=process)) if was_running else True
        self.note("step", action="stop", role=role, node=node, process=process.name, clean=clean, began=began)
        if not clean:
            self.say(f"  {process.name} did not stop within 60 s of SIGTERM: killed")
        if not clean or not was_running:
            path = f"/brokers/ids/{node}"
            if role != "controller" and self.observer is not None:
                self.wait(
                    f"{path} gone after {process.name} was killed",
                    lambda: self.zk("exists", path) is None,
                    bound=ZK_SESSION_TIMEOUT_MS / 1000 + 30,
                )

    def running_controllers(self) -> dict[int, Process]:
        """The controllers whose processes run now, by node id."""
        found = {c: self.cluster.processes.get(f"controller-{c}") for c in self.controller_ids}
        return {c: p for c, p in found.items() if p is not None and p.running}

    def in_dual_write(self) -> bool:
        """Some running controller's driver is in DUAL_WRITE: the last transition it logged since it started.

        Each controller is read on its own: a follower's driver logs INACTIVE -> INACTIVE while the
        leader's is in DUAL_WRITE, so the newest line of all would say nothing about the leader."""
        for process in self.running_controllers().values():
            states = [
                e["new"]
                for e in parse_log_text(process.log_since(process.start_offset), process.name)
                if e["kind"] == "driver-transition"
            ]
            if states and states[-1] == "DUAL_WRITE":
                return True
        return False

    # ---- the runbook --------------------------------------------------------------------------

    def steps(self) -> list[tuple[str, Callable[[], None]]]:
        """The runbook's steps in order, but those the plan skips."""
        return [(name, action) for name, action in self.runbook_steps() if name not in self.plan.skip]

    def runbook_steps(self) -> list[tuple[str, Callable[[], None]]]:
        """The runbook's steps in order: KIP-866's migration, and Kafka 3.9's rollback where one is allowed."""
        runbook, brokers = self.plan.runbook, range(self.plan.brokers)
        if runbook == "kraft":  # KIP-500 and KIP-584 on a KRaft-born cluster (Kafka 4.x has no other)
            return [
                ("start-controllers", lambda: self.start_controllers(migration=False)),
                ("start-kraft-brokers", self.start_kraft_brokers),
                ("create-data", self.create_data),
                (
                    "upgrade-metadata-version",
                    lambda: self.update_features("upgrade", self.newest_release),
                ),
                *[(f"roll-broker-{b}-kraft", lambda b=b: self.roll_kraft_broker(b)) for b in brokers],
                (
                    "downgrade-metadata-version",
                    lambda: self.update_features("downgrade", self.oldest_release),
                ),
                (
                    "unsafe-downgrade-metadata-version",
                    lambda: self.update_features("downgrade", self.oldest_release, "--unsafe"),
                ),
                (
                    "create-data-after-features",
                    lambda: self.create_topics([("refunds", 2, 2)], {"retention.ms": "7200000"}),
                ),
            ]
        steps = [
            ("start-zookeeper", self.start_zookeeper),
            ("start-zk-brokers", self.start_zk_brokers),
            ("create-data", self.create_data),
            ("start-controllers", self.start_controllers),
        ]
        if runbook == "rollback-before-brokers":  # ops.html: "deprovision the KRaft controller quorum"
            return steps + [("deprovision-controllers", self.deprovision_controllers)]
        steps += [(f"roll-broker-{b}-migrating", lambda b=b: self.roll_zk_broker(b)) for b in brokers]
        steps += [
            ("reach-dual-write", self.reach_dual_write),
            ("write-during-dual-write", self.write_during_dual_write),
        ]
        if runbook == "dual-write":
            return steps
        if runbook == "rollback-dual-write":
            # ops.html, after "Enter Migration Mode on the brokers": deprovision, rmr /controller and
            # /migration, then roll the brokers without the migration settings
            return steps + [
                ("deprovision-controllers", self.deprovision_controllers),
                ("delete-controller-znodes", lambda: self.delete_controller_znodes(migration=True)),
                # as after "Migrating brokers to KRaft" below: a broker stopped before a ZooKeeper
                # controller is elected sends its controlled shutdown to the gone quorum, and hangs
                ("reach-zk-controller-before-roll", self.reach_zk_controller),
                *[(f"roll-broker-{b}-zk", lambda b=b: self.roll_back_to_zk(b, "zk")) for b in brokers],
                ("reach-zk-controller", self.reach_zk_controller),
            ]
        steps += [(f"roll-broker-{b}-kraft", lambda b=b: self.roll_kraft_broker(b)) for b in brokers]
        if runbook == "rollback-kraft-brokers":
            # ops.html, after "Migrating brokers to KRaft": brokers back to ZooKeeper mode with the
            # migration settings, deprovision, rmr /controller, then a second roll without them
            return steps + [
                *[
                    (f"roll-broker-{b}-back-migrating", lambda b=b: self.roll_back_to_zk(b, "migrating"))
                    for b in brokers
                ],
                ("deprovision-controllers", self.deprovision_controllers),
                ("delete-controller-znodes", lambda: self.delete_controller_znodes(migration=False)),
                # "so that one of the brokers can become the new old-style controller": a broker stopped
                # before then still sends its controlled shutdown to the gone KRaft quorum, and hangs
                ("reach-zk-controller-before-roll", self.reach_zk_controller),
                *[(f"roll-broker-{b}-zk", lambda b=b: self.roll_back_to_zk(b, "zk")) for b in brokers],
                ("reach-zk-controller", self.reach_zk_controller),
            ]
        if runbook == "finalize":
            steps += [
                (f"finalize-controller-{c}", lambda c=c: self.finalize_controller(c)) for c in self.controller_ids
            ]
            if self.install.release >= (3, 5, 0):  # 3.4 commits no POST_MIGRATION: finalizing is the roll alone
                steps += [("reach-post-migration", self.reach_post_migration)]
        return steps

    @property
    def rolls_back(self) -> bool:
        return self.plan.runbook.startswith("rollback")

    def deprovision_controllers(self) -> None:
        self.note("step", action="rollback", runbook=self.plan.runbook)
        for c in self.controller_ids:
            self.stop(self.controller(c), "controller", c)
            self.deprovisioned.add(c)

    def delete_controller_znodes(self, migration: bool) -> None:
        """As the operator does with zookeeper-shell, quickly: the cluster has no controller meanwhile."""
        for path in ("/controller", "/migration") if migration else ("/controller",):
            if self.zk("exists", path):  # kraftcheck's own session, not one a fault can steal
                data, _ = self.zk("get", path)
                self.note("step", action="delete-znode", path=path, data=data.decode("utf-8", "replace"))
                self.zk("delete", path)

    def roll_back_to_zk(self, b: int, phase: str) -> None:
        self.stop(self.broker(b), "broker", b)
        self.cluster.node(f"broker-{b}", configs.zk_broker(self.cluster, b, phase), HEAP_MB["zk-broker"])
        self.start(self.broker(b), "zk-broker", b)
        self.wait(
            f"broker-{b} started in ZooKeeper mode ({phase})",
            self.ready(self.broker(b), "started (kafka.server.KafkaServer)"),
        )

    def zk_controller(self) -> bool:
        """A ZooKeeper broker holds /controller (a KRaft controller writes its Raft epoch there, >= 0) and has
        said it is ready to serve at the epoch of /controller_epoch: by then it has sent every broker the
        UpdateMetadata that names it. A migrating broker stopped while it still names the KRaft controller
        sends its controlled shutdown there (KafkaServer.controlledShutdown, KAFKA-14304), to a quorum the
        rollback deprovisioned, and hangs."""
        from kazoo.exceptions import NoNodeError

        found = self.zk("exists", "/controller")
        if found is None:
            return False
        try:
            data, _ = self.zk("get", "/controller")
            epoch, _ = self.zk("get", "/controller_epoch")
            controller = json.loads(data)
            broker = self.cluster.processes.get(f"broker-{controller.get('brokerid')}")
            ready = f"Ready to serve as the new controller with epoch {int(epoch)}"
            return (
                controller.get("kraftControllerEpoch", -1) < 0
                and broker is not None
                and ready in broker.log_since(broker.start_offset)
            )
        except (ValueError, NoNodeError):  # gone meanwhile, or not yet written
            return False

    def every_zk_broker_registered(self) -> bool:
        """Every broker's ``/brokers/ids/N`` exists: each ZooKeeper-mode broker holds a live session."""
        return all(self.zk("exists", f"/brokers/ids/{b}") is not None for b in range(self.plan.brokers))

    def reach_zk_controller(self) -> None:
        self.wait("a ZooKeeper controller elected", self.zk_controller)

    def start_zookeeper(self) -> None:
        zk = self.cluster.add_zookeeper()
        self.start(zk, "zookeeper", 0)
        self.cluster.wait_zookeeper()
        from kazoo.client import KazooClient

        client = KazooClient(self.cluster.zk_connect, logger=quiet_logger("kazoo"))
        client.start(timeout=30)
        try:  # as kafkatest's migration tests do: the cluster id that the controllers are formatted with
            client.create("/cluster/id", json.dumps({"version": "1", "id": self.cluster_id}).encode(), makepath=True)
        finally:
            client.stop()
            client.close()
        self.observer = ZkObserver(self.cluster.zk_connect, self.folder / "zk.jsonl")
        self.observer.start()

    def prepare(self) -> None:
        """Every node's port and the cluster's id, fixed before anything starts."""
        self.cluster_id = _new_cluster_id()
        for b in range(self.plan.brokers):
            self.cluster.broker_ports[b] = free_port(self.cluster.ports)
        for c in self.controller_ids:
            self.cluster.controller_ports[c] = free_port(self.cluster.ports)

    def start_zk_brokers(self) -> None:
        for b in range(self.plan.brokers):
            self.start(
                self.cluster.node(f"broker-{b}", configs.zk_broker(self.cluster, b, "zk"), HEAP_MB["zk-broker"]),
                "zk-broker",
                b,
            )
        for b in range(self.plan.brokers):
            self.wait(f"broker-{b} started", self.ready(self.broker(b), "started (kafka.server.KafkaServer)"))

    def admin(self):
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": self.bootstrap, "logger": quiet_logger("client")})

    def create_topics(self, topics: list[tuple[str, int, int]], config: dict[str, str]) -> None:
        """Topics and a topic config as an operator makes them, retried (faults can strike meanwhile)
        until they are done or the progress bound runs out."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

        entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in config.items()]
        resource = ConfigResource("topic", topics[0][0], incremental_configs=entries)
        pending = [NewTopic(n, p, min(r, self.plan.brokers)) for n, p, r in topics]
        last_error: list[str] = []
        began = int(time.time() * 1000)  # its records come before its note (trace validation places it here)

        def done() -> bool:
            admin = self.admin()
            try:
                for topic, future in admin.create_topics(pending, request_timeout=20).items():
                    try:
                        self.answer(future)
                    except KafkaException as e:
                        if e.args[0].name() != "TOPIC_ALREADY_EXISTS":  # created by an earlier try
                            raise
                for future in admin.incremental_alter_configs([resource], request_timeout=20).values():
                    self.answer(future)
                return True
            except KafkaException as e:
                last_error[:] = [str(e.args[0])]
                self.note("admin-retry", topics=[t[0] for t in topics], error=last_error[0])
                return False

        self.wait(f"topics {', '.join(t[0] for t in topics)} created", done, stuck_note={"began": began})
        self.note("step", action="admin", topics=[t[0] for t in topics], config=config, began=began)

    def alter_broker_config_and_quota(self, max_bytes: str, producer_byte_rate: int) -> None:
        """Every broker's dynamic config (its cluster default, ``message.max.bytes``), the quotas of user alice
        (``producer_byte_rate``), of user bob@example.com (``request_percentage``: a name ZooKeeper stores sanitized,
        bob%40example.com), of every user (their default, ``producer_byte_rate`` four times alice's) and of every
        client id (their default, ``consumer_byte_rate`` twice alice's) as an operator sets them, with Kafka's
        ConfigCommand (the Python client can name neither a default broker nor a quota), retried until all are done.
        ZooKeeper-mode brokers write them to ZooKeeper; in dual write a broker forwards them to the KRaft controller,
        whose dual write mirrors them (KIP-866 §Dual Metadata Writes). The default and the sanitized name are where
        Kafka's copy went wrong before 3.7.1 (KAFKA-16222, KAFKA-16411)."""
        command = ["kafka.admin.ConfigCommand", "--bootstrap-server", self.bootstrap, "--alter"]
        changes = (
            ["--entity-type", "brokers", "--entity-default", "--add-config", f"message.max.bytes={max_bytes}"],
            ["--entity-type", "users", "--entity-name", "alice", "--add-config",
             f"producer_byte_rate={producer_byte_rate}"],
            ["--entity-type", "users", "--entity-name", "bob@example.com", "--add-config",
             f"request_percentage={producer_byte_rate // 1048576 * 25}"],
            ["--entity-type", "users", "--entity-default", "--add-config",
             f"producer_byte_rate={4 * producer_byte_rate}"],
            ["--entity-type", "clients", "--entity-default", "--add-config",
             f"consumer_byte_rate={2 * producer_byte_rate}"],
        )
        began = int(time.time() * 1000)

        def done() -> bool:
            try:
                for change in changes:
                    self.blocking(self.cluster.tool, [*command, *change], timeout_s=60, timeout=45)
                return True
            except (ClusterError, TimeoutError) as e:
                output = getattr(e, "output", "")
                if "Could not find or load main class" in output or "Exception in thread \"main\" joptsimple" in output:
                    raise RuntimeError(f"ConfigCommand did not reach Kafka: {e}") from e  # kraftcheck's, not Kafka's
                self.note("admin-retry", configs=["brokers/<default>", "users/alice", "users/bob%40example.com",
                                                  "users/<default>", "clients/<default>"], error=str(e)[-300:])
                return False

        self.wait("broker config and quota set", done, stuck_note={"began": began})
        self.note("step", action="configs", broker_default={"message.max.bytes": max_bytes},
                  quotas={"users/alice": {"producer_byte_rate": producer_byte_rate},
                          "users/bob%40example.com": {"request_percentage": producer_byte_rate // 1048576 * 25},
                          "users/<default>": {"producer_byte_rate": 4 * producer_byte_rate},
                          "clients/<default>": {"consumer_byte_rate": 2 * producer_byte_rate}}, began=began)

    def alter_acls(self, create: tuple[Acl, ...], delete: tuple[Acl, ...] = ()) -> None:
        """ACLs created and deleted as an operator does (CreateAcls, DeleteAcls with an exact filter), retried until
        all are done (both are idempotent). ZooKeeper-mode brokers write them to /kafka-acl (AclAuthorizer); in dual
        write they forward them to the KRaft controller, whose dual write mirrors them (KIP-866 §Dual Metadata
        Writes): a resource's ACLs are one znode, rewritten whole."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import (
            AclBinding,
            AclBindingFilter,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
            ResourceType,
        )

        def binding(acl: Acl, kind=AclBinding):
            resource, name, principal, operation = acl
            return kind(ResourceType[resource.upper()], name, ResourcePatternType.LITERAL, principal, "*",
                        AclOperation[operation.upper()], AclPermissionType.ALLOW)

        began = int(time.time() * 1000)

        def done() -> bool:
            admin = self.admin()
            try:
                futures = [*admin.create_acls([binding(a) for a in create], request_timeout=20).values()] if create \
                    else []
                if delete:
                    futures += admin.delete_acls([binding(a, AclBindingFilter) for a in delete],
                                                 request_timeout=20).values()
                for future in futures:
                    self.answer(future)
                return True
            except KafkaException as e:
                self.note("admin-retry", acls=[list(a) for a in (*create, *delete)], error=str(e.args[0]))
                return False

        self.wait("ACLs set", done, stuck_note={"began": began})
        self.note("step", action="acls", created=[list(a) for a in create], deleted=[list(a) for a in delete],
                  began=began)

    def delete_topics(self, topics: list[str]) -> None:
        """Topics deleted as an operator deletes them, retried until the cluster no longer lists them."""
        from confluent_kafka import KafkaException

        began = int(time.time() * 1000)

        def done() -> bool:
            admin = self.admin()
            try:
                for future in admin.delete_topics(topics, operation_timeout=30, request_timeout=20).values():
                    try:
                        self.answer(future)
                    except KafkaException as e:
                        if e.args[0].name() != "UNKNOWN_TOPIC_OR_PART":  # deleted by an earlier try
                            raise
                return not set(topics) & set(self.listed().topics)
            except KafkaException as e:
                self.note("admin-retry", topics=topics, error=str(e.args[0]))
                return False

        self.wait(f"topics {', '.join(topics)} deleted", done, stuck_note={"began": began})
        self.note("step", action="delete-topics", topics=topics, began=began)

    def add_partitions(self, topic: str, total: int) -> None:
        """A topic grown to ``total`` partitions as an operator grows it (CreatePartitions), retried until the
        cluster lists them all."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import NewPartitions

        began = int(time.time() * 1000)

        def done() -> bool:
            admin = self.admin()
            try:
                for future in admin.create_partitions([NewPartitions(topic, total)], request_timeout=20).values():
                    try:
                        self.answer(future)
                    except KafkaException as e:
                        if e.args[0].name() != "INVALID_PARTITIONS":  # grown by an earlier try
                            raise
                listed = self.listed(topic).topics.get(topic)
                return listed is not None and len(listed.partitions) == total
            except KafkaException as e:
                self.note("admin-retry", topics=[topic], error=str(e.args[0]))
                return False

        self.wait(f"topic {topic} grown to {total} partitions", done, stuck_note={"began": began})
        self.note("step", action="add-partitions", topic=topic, partitions=total, began=began)

    def replicas_listed(self, topic: str, partition: int) -> list[int] | None:
        """The partition's replicas as the cluster lists them; None while its metadata does not name the partition
        (a request that timed out, or the topic's metadata answered with an error and no partitions, as a loaded
        cluster did just after the topic grew: that read had failed the run with a KeyError)."""
        from confluent_kafka import KafkaException

        try:
            listed = self.listed(topic).topics.get(topic)
        except KafkaException as e:
            self.note("admin-retry", topics=[topic], error=str(e.args[0]))
            return None
        if listed is None or partition not in listed.partitions:
            self.note("admin-retry", topics=[topic], error=f"no metadata for {topic}-{partition}"
                      + (f" ({listed.error})" if listed is not None and listed.error else ""))
            return None
        return list(listed.partitions[partition].replicas)

    def reassign_partition(self, topic: str, partition: int) -> None:
        """One partition moved as an operator moves it, with Kafka's ReassignPartitionsCommand: its first replica
        swapped for a broker outside its replica set (or moved last when there is none), retried until the
        cluster lists exactly the new replicas. A reassignment in dual write is KRaft's: each step of it reaches
        ZooKeeper through the dual write (KIP-866 §Dual Metadata Writes)."""
        from confluent_kafka import KafkaException

        known: list[list[int]] = []

        def listed() -> bool:
            replicas = self.replicas_listed(topic, partition)
            known[:] = [] if replicas is None else [replicas]
            return replicas is not None

        self.wait(f"{topic}-{partition} listed", listed)
        replicas = known[0]
        spare = [b for b in sorted(self.cluster.broker_ports) if b not in replicas]
        target = [*replicas[1:], spare[0] if spare else replicas[0]]
        plan = self.folder / f"reassign-{topic}-{partition}.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": topic, "partition": partition, "replicas": target}]}))
        tool = ("org.apache.kafka.tools.reassign.ReassignPartitionsCommand" if self.install.release >= (3, 7, 0)
                else "kafka.admin.ReassignPartitionsCommand")
        servers = ",".join(f"127.0.0.1:{p}" for p in self.cluster.broker_ports.values())
        # when the tool was run: the move's records come after it, and may come long before the move completes (a
        # fault in between), so trace validation places the request here, not at its note
        sent: dict[str, int] = {}

        def done() -> bool:
            try:
                if self.replicas_listed(topic, partition) == target:
                    return True
                if not sent:
                    began = int(time.time() * 1000)
                    self.blocking(self.cluster.tool, [tool, "--bootstrap-server", servers, "--reassignment-json-file",
                                                      str(plan), "--execute"], timeout_s=130)
                    sent["began"] = began
            except (KafkaException, ClusterError) as e:
                self.note("admin-retry", topics=[topic], error=str(e.args[0]))
            return False

        self.wait(f"{topic}-{partition} reassigned to {target}", done, stuck_note=sent)
        self.note("step", action="reassign", topic=topic, partition=partition, replicas=target, **sent)

    def create_data(self) -> None:
        self.create_topics([("orders", 3, 2), ("payments", 2, 2)], {"retention.ms": "3600000"})
        self.create_topics([(TOPIC, 3, 3)], {"min.insync.replicas": str(min(2, self.plan.brokers))})
        if self.plan.runbook != "kraft":  # what the migration copies besides topics (MigrationCopiesZkExactly)
            self.alter_broker_config_and_quota("2000000", 1048576)
            if self.install.release >= configs.ACL_MIGRATION:
                self.alter_acls(ZK_MODE_ACLS)
        if not self.plan.client:
            return
        self.writer = LedgerWriter(self.bootstrap, self.folder / "client.jsonl", quiet_logger("producer"))
        self.writer.start()

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.cluster.broker_ports.values())

    def finish_ledger(self, read: bool) -> None:
        """Stops the client's writes and, on a settled cluster, reads the ledger back whole."""
        if self.writer is None:
            return
        unknown = self.writer.finish(timeout=60 if read else 5)
        acknowledged = {a["partition"] for a in read_jsonl(self.writer.path) if "partition" in a}
        complete = read and read_ledger(
            self.bootstrap, self.folder / "ledger.jsonl", quiet_logger("consumer"), acknowledged
        )
        self.note(
            "ledger", written=self.writer.sent, refused=self.writer.refused, unknown=unknown, read_complete=complete
        )
        self.writer = None

    @property
    def oldest_release(self) -> str:
        return configs.kraft_born_levels(self.install.release)[0]

    @property
    def newest_release(self) -> str:
        return configs.kraft_born_levels(self.install.release)[1]

    def format(self, process: Process, release: str) -> None:
        """Kafka's StorageTool: a KRaft node's log directory made for this cluster at ``release``."""
        config = str(process.folder / "server.properties")
        self.cluster.tool(
            ["kafka.tools.StorageTool", "format", "-t", self.cluster_id, "-c", config, "--release-version", release]
        )

    def start_controllers(self, migration: bool = True) -> None:
        for c in self.controller_ids:
            process = self.cluster.node(
                f"controller-{c}", configs.controller(self.cluster, c, migration=migration), HEAP_MB["controller"]
            )
            self.format(process, configs.ibp(self.install.release) if migration else self.oldest_release)
        for c in self.controller_ids:
            self.start(self.controller(c), "controller", c)
        for c in self.controller_ids:
            self.wait(f"controller-{c} started", self.ready(self.controller(c), "Kafka Server started"))

    def start_kraft_brokers(self) -> None:
        for b in range(self.plan.brokers):
            process = self.cluster.node(f"broker-{b}", configs.kraft_broker(self.cluster, b), HEAP_MB["kraft-broker"])
            self.format(process, self.oldest_release)
        for b in range(self.plan.brokers):
            self.start(self.broker(b), "kraft-broker", b)
        for b in range(self.plan.brokers):
            self.wait(
                f"broker-{b} running as a KRaft broker",
                self.ready(self.broker(b), "Transitioning from RECOVERY to RUNNING"),
            )

    def update_features(self, kind: str, release: str, *flags: str) -> None:
        """KIP-584's UpdateFeatures as an operator sends it, with Kafka's FeatureCommand; a refusal is an answer too.

        4.x names the target a release (``--release-version``, KIP-1022); 3.x a metadata.version
        (``--metadata``). The tool is ``kafka.admin.FeatureCommand`` before 3.6, and it reaches the
        controllers directly only from 3.7 (``--bootstrap-controller``, KIP-919); before, through the
        brokers. Only Kafka's answer is recorded: a tool that never reached Kafka is kraftcheck's failure."""
        release_now = self.install.release
        if release_now >= (3, 7, 0):
            ports = self.cluster.controller_ports.values()
            bootstrap = ["--bootstrap-controller", ",".join(f"127.0.0.1:{p}" for p in ports)]
        else:
            bootstrap = ["--bootstrap-server", ",".join(f"127.0.0.1:{p}" for p in self.cluster.broker_ports.values())]
        tool = "org.apache.kafka.tools.FeatureCommand" if release_now >= (3, 6, 0) else "kafka.admin.FeatureCommand"
        level = "--release-version" if release_now >= (4, 0, 0) else "--metadata"
        command = [kind, level, release, *flags]
        began = int(time.time() * 1000)  # the tool takes seconds: its records come before its note
        try:
            answer = self.blocking(self.cluster.tool, [tool, *bootstrap, *command], timeout_s=130).strip()
            refused = False
        except ClusterError as e:
            answer, refused = "\n".join(line for line in e.output.splitlines() if not line.startswith("log4j:")), True
            if not kafka_answered(answer):
                # the tool's usage, a missing class, a cluster it never reached: not Kafka's answer
                raise RuntimeError(f"FeatureCommand {' '.join(command)} did not reach Kafka: {e}") from e
        self.note(
            "step", action="update-features", command=command, refused=refused, answer=answer[-500:], began=began
        )
        self.say(f"  features {' '.join(command)}: {'refused' if refused else 'done'}")

    def roll_zk_broker(self, b: int) -> None:
        self.stop(self.broker(b), "zk-broker", b)
        self.cluster.node(f"broker-{b}", configs.zk_broker(self.cluster, b, "migrating"), HEAP_MB["zk-broker"])
        self.start(self.broker(b), "zk-broker", b)
        self.wait(
            f"broker-{b} started in migration mode", self.ready(self.broker(b), "started (kafka.server.KafkaServer)")
        )

    def reach_dual_write(self) -> None:
        self.wait("dual-write", self.in_dual_write)
        self.dump_metadata("dual-write")

    def write_during_dual_write(self) -> None:
        """A topic created, another grown by a partition and one of its partitions moved, a third deleted, and every
        broker's config and a user's quota changed (before the move, which Kafka before 3.6.2 never completes), while
        KRaft writes ZooKeeper behind it (KIP-866 §Dual Metadata Writes): all must reach ZooKeeper
        (``ZkEqualsImageAtMigrationOffset``). A fault drawn for this step strikes between the writes, when due, so
        that a write can meet it (a ZooKeeper stall with a write waiting on it, say)."""
        self.tick()
        self.create_topics([("refunds", 2, 2)], {"retention.ms": "7200000"})
        self.tick()
        self.delete_topics(["payments"])
        self.tick()
        self.add_partitions("orders", 4)
        self.tick()
        self.alter_broker_config_and_quota("3000000", 2097152)
        if self.install.release >= configs.ACL_MIGRATION:
            self.tick()
            self.alter_acls(*DUAL_WRITE_ACLS)
        self.tick()
        self.reassign_partition("orders", 0)

    def roll_kraft_broker(self, b: int) -> None:
        """The broker restarted as a KRaft broker: a migrating ZK broker rolled into KRaft mode, or (runbook kraft)
        a KRaft broker rolled."""
        self.stop(self.broker(b), self.roles.get(f"broker-{b}", "zk-broker"), b)
        self.cluster.node(f"broker-{b}", configs.kraft_broker(self.cluster, b), HEAP_MB["kraft-broker"])
        self.start(self.broker(b), "kraft-broker", b)
        self.wait(
            f"broker-{b} running as a KRaft broker",
            self.ready(self.broker(b), "Transitioning from RECOVERY to RUNNING"),
        )

    def finalize_controller(self, c: int) -> None:
        self.stop(self.controller(c), "controller", c)
        self.cluster.node(
            f"controller-{c}", configs.controller(self.cluster, c, migration=False), HEAP_MB["controller"]
        )
        self.start(self.controller(c), "controller", c)
        self.wait(f"controller-{c} started without migration", self.ready(self.controller(c), "Kafka Server started"))

    def reach_post_migration(self) -> None:
        def finalized() -> bool:
            return any(
                "to POST_MIGRATION" in self.controller(c).log_since(self.controller(c).start_offset)
                for c in self.controller_ids
            )

        self.wait("post-migration", finalized)

    # ---- the metadata log ---------------------------------------------------------------------

    def dump_metadata(self, label: str) -> None:
        """Each controller's metadata log, decoded by Kafka's DumpLogSegments, kept as text."""
        folder = self.folder / "metadata"
        folder.mkdir(exist_ok=True)
        self.dumps += 1
        for c in self.controller_ids:
            if f"controller-{c}" not in self.cluster.processes:
                continue
            files = metadata_files(self.controller(c).folder)
            if not files:
                continue
            try:
                text = self.cluster.tool(
                    [
                        "kafka.tools.DumpLogSegments",
                        "--cluster-metadata-decoder",
                        "--files",
                        ",".join(str(f) for f in files),
                    ]
                )
            except ClusterError as e:
                self.note("dump-failed", controller=c, why=str(e))
                continue
            (folder / f"{self.dumps:02d}-{label}-controller-{c}.txt").write_text(text)

    # ---- the whole run ------------------------------------------------------------------------

    def execute(self) -> str:
        """Carries the runbook out; returns how it ended: "completed", "stuck: ..." or "failed: ..."."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self._operator = open(self.folder / "operator.jsonl", "a")
        steps = self.steps()
        self.faults = schedule_faults(self.plan, [name for name, _ in steps])
        (self.folder / "run.json").write_text(
            json.dumps(
                {
                    **plan_json(replace(self.plan, schedule=tuple(self.faults)), self.install.version),
                    "drawn": self.plan.schedule is None,  # the faults the seed drew, or the plan's own
                    "lib": str(self.install.lib),
                },
                indent=1,
            )
            + "\n"
        )
        outcome = "completed"
        try:
            with self.cluster:
                try:
                    self.prepare()
                    self.cluster.start_jmx_poller(self.folder / "jmx.jsonl")
                    for name, action in steps:
                        self.say(f"{time.monotonic() - self.started:6.1f} s  {name}")
                        self.note("step-begins", step=name)
                        self.arm(name)
                        action()
                        self.tick()
                    self.say(f"{time.monotonic() - self.started:6.1f} s  settle")
                    self.settle()
                    self.finish_ledger(read=True)
                    self.sample_broker_metadata()
                except RunbookStuck as e:
                    outcome = f"stuck: {e}"
                except ClusterError as e:
                    outcome = f"failed: {e}"
                except BaseException as e:  # interrupted, or kraftcheck's own error: said so, then raised
                    outcome = f"interrupted: {type(e).__name__}"
                    raise
                finally:
                    self.finish_ledger(read=False)  # a run that ended early: acknowledgements kept, nothing judged
                    self.heal_all()
                    self.dump_metadata("final")
                    self.cluster.stop_jmx_poller()  # its last sample of each process is marked final
                    if self.observer is not None:
                        time.sleep(0.5)  # the last watch events
                        self.observer.stop()
        finally:
            unread = self.cluster.read_zk_txn_log(self.folder / ZK_TXNS)  # the server has stopped: the log is whole
            if unread is not None:
                self.note("zk-txn-log-unread", reason=unread)
            self.note("end", outcome=outcome, seconds=round(time.monotonic() - self.started, 1))
            self._operator.close()
            self._blocking.shutdown(wait=False, cancel_futures=True)
        return outcome


Execute = Callable[[RealRunPlan, Installation, Path], str]  # a plan carried out into a folder -> how it ended


def execute_run(plan: RealRunPlan, kafka: Installation, folder: Path) -> str:
    """``plan`` carried out on a real cluster into ``folder`` (what campaigns and shrinks run, unless a test
    gives them a stand-in), quietly: "completed", "stuck: ..." or "failed: ..."."""
    return Run(plan, kafka, folder, say=lambda line: None).execute()


def kafka_answered(tool_output: str) -> bool:
    """Whether a failed FeatureCommand carries Kafka's answer: every release's tool ends a refused
    update with "N out of M operation(s) failed.", after one "Could not ..." line per feature with
    the controller's error."""
    return "operation(s) failed." in tool_output


def _new_cluster_id() -> str:
    """A Kafka Uuid string (URL-safe base64 of 16 bytes, unpadded) that does not start with '-'."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


# ---- reading a run's folder back ----------------------------------------------------------------


def load(folder: Path) -> Observed:
    """A run's channels from its folder, each in its own order."""
    meta = json.loads((folder / "run.json").read_text())
    from properties.kafka.install import parse_version

    obs = Observed(version=parse_version(meta["kafka"]))
    last_zxid = 0
    for event in read_jsonl(folder / "zk.jsonl"):
        # a deletion has no zxid of its own: it came after every write seen before it
        last_zxid = max(last_zxid, event.get("mzxid", 0))
        event["zxid"] = event.get("mzxid", last_zxid)
        obs.zk.setdefault(event["path"], []).append(event)
    dumps = sorted((folder / "metadata").glob("*.txt")) if (folder / "metadata").is_dir() else []
    for path in dumps:
        controller = int(path.stem.rsplit("-", 1)[1])
        records = parse_dump(path.read_text(), controller)
        obs.dumps.append(records)
        obs.metadata[controller] = records  # the last dump of each controller is its final log
    for log in sorted(folder.glob("*/logs/server.log")):
        obs.logs[log.parent.parent.name] = parse_log(log, log.parent.parent.name)
    obs.operator = read_jsonl(folder / "operator.jsonl")
    obs.acknowledged = read_jsonl(folder / "client.jsonl")
    obs.ledger = read_jsonl(folder / "ledger.jsonl")
    obs.jmx = read_jsonl(folder / "jmx.jsonl")  # absent from runs made before JMX was read: no samples
    obs.zk_txns = read_jsonl(folder / ZK_TXNS)  # absent from runs made before it was read: nothing checked on it
    obs.broker_metadata = read_jsonl(folder / BROKER_METADATA)  # absent from runs made before it was sampled
    name_sessions(obs.zk_txns)
    return obs


def timeline(obs: Observed) -> list[dict]:
    """Every event of the run: ZooKeeper by zxid, each log by offset, each process's lines in order."""
    zk = sorted((e for events in obs.zk.values() for e in events), key=lambda e: (e["zxid"], e["seen"]))
    streams = [zk, obs.zk_txns, *obs.metadata.values(), *obs.logs.values(), obs.operator, obs.jmx, obs.broker_metadata]
    return merge(streams)


def check_folder(folder: Path) -> tuple[Observed, list[Violation]]:
    """Checks a run's folder again: the invariants, then trace validation against the model.

    Writes ``timeline.jsonl``, ``validation.json`` and, last, ``violations.json``, each whole or not at all."""
    from properties.kafka.validate import TRACE_VALIDATION, validate

    obs = load(folder)
    violations = run_checks(obs)
    validation = validate(obs, json.loads((folder / "run.json").read_text()).get("plan", {}))
    if validation.failed:
        evidence = (validation.unexplained.event,) if validation.unexplained is not None else ()
        violations.append(Violation(TRACE_VALIDATION, validation.headline(), evidence))
    (folder / "validation.json.tmp").write_text(json.dumps(validation.as_json(), indent=1) + "\n")
    (folder / "validation.json.tmp").replace(folder / "validation.json")
    with open(folder / "timeline.jsonl.tmp", "w") as f:
        for event in timeline(obs):
            f.write(json.dumps(event, sort_keys=True) + "\n")
    (folder / "timeline.jsonl.tmp").replace(folder / "timeline.jsonl")
    verdict = [{"invariant": v.invariant, "message": v.message, "evidence": list(v.evidence)} for v in violations]
    (folder / "violations.json.tmp").write_text(json.dumps(verdict, indent=1) + "\n")
    (folder / "violations.json.tmp").replace(folder / "violations.json")
    return obs, violations


def fresh_folder(folder: Path) -> None:
    if folder.exists():
        shutil.rmtree(folder)
