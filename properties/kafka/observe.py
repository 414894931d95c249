"""What a real Kafka exposes, read from outside, as events of one timeline.

Five channels, each with its own total order, none of them a change to Kafka:
- ``zk``: znodes and their ``Stat`` (czxid, mzxid, version, ephemeralOwner), watched with kazoo
  from a session of kraftcheck's own. ZooKeeper orders every write by zxid. A watch fires once and
  the re-read may skip versions, so an observation says "this znode was so at mzxid", never "it
  went through every version" (a gap in versions is an unobserved change, not an error).
- ``metadata``: each KRaft controller's ``__cluster_metadata`` log, decoded by Kafka's own
  ``DumpLogSegments --cluster-metadata-decoder``: records with their offset, the batch's leader
  epoch (the Raft epoch) and its CreateTime. The offset orders them.
- ``log``: the processes' log lines where they carry a decision (driver transitions, claims,
  elections, registrations, fencing), in file order per process.
- ``zk-txn``: ZooKeeper's own transaction log, read after the run with ZooKeeper's classes
  (``ZkTxnLog.java``, into ``zk-txns.jsonl``): every transaction in zxid order with the session that
  made it and each op of a multi (a check with the version it checked, a write with the version it
  gave and its data when short text), failed multis marked. What the watches cannot give: every write,
  and who made it.
- ``broker-metadata``: at the end of a run, what each broker serves clients, asked of it alone
  with Kafka's own MetadataRequest (``BrokerMetadata.java``, into ``broker-metadata.jsonl``): its
  live brokers, topics with their ids, and each partition's leader, leader epoch, replicas and ISR,
  a round a second until a round answers as the one before. What a broker holds in memory, as it
  serves it.

Each event has a ``time`` in epoch milliseconds from the one clock all processes share (znode
mtime, record CreateTime, log timestamp), used only to interleave channels: the timeline keeps
each channel's own order exactly and breaks ties between channels by time (``merge``).
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path

ZK_TXNS = "zk-txns.jsonl"  # the zk-txn channel, in the run's folder
BROKER_METADATA = "broker-metadata.jsonl"  # the broker-metadata channel: what each broker serves, at rest
WATCHED = ("/controller", "/controller_epoch", "/migration", "/feature", "/cluster/id")
WATCHED_CHILDREN = ("/brokers/ids", "/brokers/topics", "/config/topics", "/admin/delete_topics", "/config/brokers",
                    "/config/users", "/config/clients", "/kafka-acl/Topic", "/kafka-acl/Group")


# ---- the ZooKeeper channel ------------------------------------------------------------------


def quiet_logger(name: str) -> logging.Logger:
    """A logger that keeps a client library's chatter (librdkafka, kazoo) out of the terminal."""
    logger = logging.getLogger(f"kraftcheck.kafka.{name}")
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
    logger.propagate = False
    return logger


class ZkObserver:
    """Watches the znodes the checks read and appends each observation to ``path`` as a JSON line."""

    def __init__(self, connect: str, path: Path) -> None:
        from kazoo.client import KazooClient

        self.path = path
        self._lock = threading.Lock()
        self._file = open(path, "a", buffering=1)
        self._watched: set[str] = set()
        # a session of its own, never one a fault steals; a long timeout rides out ZooKeeper outages
        # reconnection chatter during a ZooKeeper outage is expected: it stays out of the terminal
        self.client = KazooClient(
            connect, timeout=30.0, connection_retry={"max_tries": -1, "max_delay": 1.0}, logger=quiet_logger("observer")
        )

    def start(self) -> None:
        self.client.start(timeout=30)
        for path in WATCHED:
            self._watch(path)
        for parent in WATCHED_CHILDREN:
            self._watch_children(parent)

    def stop(self) -> None:
        try:
            self.client.stop()
            self.client.close()
        finally:
            with self._lock:
                self._file.close()

    def _record(self, path: str, data: bytes | None, stat) -> None:
        event = {"channel": "zk", "path": path, "seen": time.time()}
        if stat is None:
            event |= {"exists": False, "time": int(time.time() * 1000)}
        else:
            event |= {
                "exists": True,
                "data": None if data is None else data.decode("utf-8", "replace"),
                "czxid": stat.czxid,
                "mzxid": stat.mzxid,
                "version": stat.version,
                "owner": stat.ephemeralOwner,
                "time": stat.mtime,
            }
        with self._lock:
            if not self._file.closed:
                self._file.write(json.dumps(event, sort_keys=True) + "\n")

    def _watch(self, path: str) -> None:
        if path in self._watched:
            return
        self._watched.add(path)

        def changed(data, stat, _event=None):
            self._record(path, data, stat)
            if path.startswith("/brokers/topics/") and path.count("/") == 3 and stat is not None:
                self._watch_children(f"{path}/partitions")
            return True

        self.client.DataWatch(path, changed)

    def _watch_children(self, parent: str) -> None:
        """Each child of ``parent`` watched, from whenever ``parent`` exists (again)."""
        key = parent + "/*"
        if key in self._watched:
            return
        self._watched.add(key)
        active = [False]  # kazoo's ChildrenWatch ends for good when its node is deleted

        def children(names):
            for name in names or ():
                child = f"{parent}/{name}"
                self._watch(f"{child}/state" if parent.endswith("/partitions") else child)
            return True

        def parent_changed(data, stat, _event=None):
            if stat is None:
                active[0] = False
            elif not active[0]:
                active[0] = True
                self.client.ChildrenWatch(parent, children)
            return True

        self.client.DataWatch(parent, parent_changed)


# ---- the metadata channel -------------------------------------------------------------------

_BATCH = re.compile(
    r"^baseOffset: (\d+) lastOffset: (\d+) .*?partitionLeaderEpoch: (-?\d+) isTransactional: (\w+) "
    r"isControl: (\w+).*?CreateTime: (-?\d+)"
)
_RECORD = re.compile(r"^\| offset: (\d+) CreateTime: (-?\d+) .*?(?:payload: (\{.*\})|controlType: (\w+)\(\d+\))\s*$")


def parse_dump(text: str, controller: int) -> list[dict]:
    """DumpLogSegments --cluster-metadata-decoder output as metadata events, in offset order."""
    events: list[dict] = []
    base, epoch = -1, -1
    for line in text.splitlines():
        batch = _BATCH.match(line)
        if batch:
            base, epoch = int(batch[1]), int(batch[3])
            continue
        record = _RECORD.match(line)
        if record is None:
            continue
        event = {
            "channel": "metadata",
            "controller": controller,
            "offset": int(record[1]),
            "time": int(record[2]),
            "epoch": epoch,
            "batch": base,  # the batch's first offset (a batch can hold several controller events' records)
        }
        if record[3] is not None:
            payload = json.loads(record[3])
            event |= {"type": payload["type"], "data": payload.get("data", {})}
        else:
            event |= {"type": f"CONTROL:{record[4]}", "data": {}}
        events.append(event)
    return events


def metadata_files(controller_dir: Path) -> list[Path]:
    folder = controller_dir / "data" / "__cluster_metadata-0"
    return sorted(folder.glob("*.checkpoint")) + sorted(folder.glob("*.log"))


# ---- the log channel ------------------------------------------------------------------------

_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] (\w+) (.*)$")

# (kind, pattern): the decisions the checks read, as Kafka 3.9 logs them
LOG_PATTERNS: tuple[tuple[str, re.Pattern], ...] = tuple(
    (kind, re.compile(p))
    for kind, p in (
        (
            "driver-transition",
            # 3.4 logs it at DEBUG without the "[KRaftMigrationDriver id=N]" prefix; the logger names it
            r"(?P<node>\d+) transitioning from (?P<old>\w+) to (?P<new>\w+) state "
            r"\(org\.apache\.kafka\.metadata\.migration\.KRaftMigrationDriver\)",
        ),
        (
            # why a driver stays put: the controllers not ready (3.5 and 3.6: "... due to: Missing apiVersion from
            # nodes: [N]", the Raft client's ApiVersions; 3.7 on: "... Not ready due to: ...", KIP-919's
            # registrations), or ZK brokers not registered with KRaft yet
            "driver-waiting",
            r"\[KRaftMigrationDriver id=(?P<node>\d+)\] (?P<reason>Still waiting for all controller nodes ready to "
            r"begin the migration\. ?(?:Not ready )?due to: ?.*?|Still waiting for ZK brokers .*? to register with "
            r"KRaft\.|No brokers are (?:known to KRaft|registered in ZK), waiting for brokers to register\.) "
            r"\(org\.apache\.kafka\.metadata\.migration\.KRaftMigrationDriver\)",
        ),
        (
            "driver-zk-writes",
            r"\[KRaftMigrationDriver id=(?P<node>\d+)\] Made the following ZK writes when (?P<what>[^:]+):",
        ),
        (
            "driver-claimed",
            # 3.5 to 3.8 log it at TRACE, "Claiming ZK controller leadership. Transitioned migration
            # state ..." when the claim changed the state ("... Kept migration state" when it failed);
            # 3.4 logs no claim at all (its claims are read from the /controller watch)
            r"\[KRaftMigrationDriver id=(?P<node>\d+)\] "
            r"(?:Claimed ZK controller leadership|Claiming ZK controller leadership\. Transitioned)",
        ),
        (
            "migration-completed",
            r"Completed migration of metadata from Zoo[kK]eeper to KRaft",  # 3.4: "Zookeeper"
        ),
        (
            "raft-leader",  # 3.4 names the node "nodeId"
            r"\[RaftManager (?:id|nodeId)=(?P<node>\d+)\] Completed transition to Leader\(.*?epoch=(?P<epoch>\d+)",
        ),
        (
            "raft-resigned",
            r"\[RaftManager (?:id|nodeId)=(?P<node>\d+)\] Completed transition to "
            r"(?:Resigned|Follower|Candidate|Unattached|Voted)",
        ),
        (
            "active-controller",
            r"\[QuorumController id=(?P<node>\d+)\] Becoming the active controller at epoch (?P<epoch>\d+)",
        ),
        (
            "migration-state-replayed",
            r"\[QuorumController id=(?P<node>\d+)\] Replayed a ZkMigrationStateRecord changing the migration "
            r"state from (?P<old>\w+) to (?P<new>\w+)",
        ),
        (
            "zk-controller-elected",
            r"\[Controller id=(?P<node>\d+)\] \d+ successfully elected as the controller\. Epoch incremented to "
            r"(?P<epoch>\d+) and epoch zk version is now (?P<version>\d+)",
        ),
        ("zk-controller-resigned", r"\[Controller id=(?P<node>\d+)\] Resigned"),
        (
            # a controller's channel to a ZooKeeper-mode broker (a ZK controller's, or a KRaft controller's in
            # migration: MigrationPropagatorBatch) logs an error answer; the response names each partition
            "leader-and-isr-failed",
            r"\[Controller id=(?P<node>\d+)\] Received error (?P<error>\w+) in LeaderAndIsr response "
            r"(?P<response>.*) from broker (?P<broker>\d+)",
        ),
        (
            "zk-broker-registered",
            r"Registered broker (?P<broker>\d+) at path /brokers/ids/\d+ with addresses: .*czxid \(broker "
            r"epoch\): (?P<epoch>\d+)",
        ),
        (
            "zk-broker-change",
            r"\[Controller id=(?P<node>\d+)\] Newly added brokers: (?P<added>[\d,]*), deleted brokers: "
            r"(?P<deleted>[\d,]*), bounced brokers: (?P<bounced>[\d,]*), all live brokers: (?P<live>[\d,]*)",
        ),
        (
            "kraft-broker-registered",
            r"\[BrokerLifecycleManager id=(?P<broker>\d+)(?: isZkBroker=(?P<zk>\w+))?\] Successfully registered "
            r"broker \d+ with broker epoch (?P<epoch>\d+)",
        ),
        (
            "kraft-broker-running",
            r"\[BrokerLifecycleManager id=(?P<broker>\d+).*Transitioning from RECOVERY to RUNNING",
        ),
        ("broker-fenced-timeout", r"Fencing broker (?P<broker>\d+) because its session has timed out"),
        ("process-started", r"(?:\[KafkaServer id=(?P<zkbroker>\d+)\] started|Kafka Server started)"),
    )
)


def _millis(stamp: str) -> int:
    return int(datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp() * 1000)


def line_time(line: str) -> int | None:
    """When a line of a Kafka log was logged (ms since the epoch), if it is one."""
    head = _LINE.match(line)
    return None if head is None else _millis(head[1])


def parse_log(path: Path, process: str) -> list[dict]:
    """The decision lines of one process's server.log, in file order."""
    try:
        return parse_log_text(path.read_text(errors="replace"), process)
    except FileNotFoundError:
        return []


def parse_log_text(text: str, process: str) -> list[dict]:
    """The decision lines of a log's text, numbered from its first line."""
    events = []
    for number, line in enumerate(text.splitlines(), 1):
        head = _LINE.match(line)
        if head is None:
            continue
        for kind, pattern in LOG_PATTERNS:
            found = pattern.search(head[3])
            if found:
                fields = {k: v for k, v in found.groupdict().items() if v is not None}
                event = {"channel": "log", "process": process, "line": number, "time": _millis(head[1]), "kind": kind}
                events.append(event | fields)
                break
    return events


# ---- ZooKeeper's transaction log --------------------------------------------------------------


def name_sessions(txns: list[dict]) -> None:
    """Marks each transaction of ZooKeeper's log with the process whose session made it (``by``), where the log shows
    it: the session that creates a broker's ephemeral /brokers/ids/N is broker-N's; one that writes a KRaft claim into
    /controller, or stamps /migration, is that controller's. Other sessions (kraftcheck's own, a KRaft controller's
    that wrote nothing of the kind) stay unnamed."""
    owners: dict[int, str] = {}
    for t in txns:
        for o in t["ops"]:
            path = o.get("path") or ""
            if o["op"] == "create" and o.get("ephemeral") and path.startswith("/brokers/ids/"):
                owners.setdefault(t["session"], "broker-" + path.rsplit("/", 1)[1])
            elif o["op"] in ("create", "setData") and path in ("/controller", "/migration") and o.get("data"):
                try:
                    data = json.loads(o["data"])
                except json.JSONDecodeError:
                    continue
                epoch, node = ((data.get("kraftControllerEpoch", -1), data.get("brokerid")) if path == "/controller"
                               else (data.get("kraft_controller_epoch", -1), data.get("kraft_controller_id")))
                if isinstance(epoch, int) and epoch >= 0 and node is not None:
                    owners.setdefault(t["session"], f"controller-{node}")
    for t in txns:
        if t["session"] in owners:
            t["by"] = owners[t["session"]]


def session_of(txn: dict) -> str:
    """A transaction's session as a reader finds it: its id, and its process when ``name_sessions`` knew it."""
    return f"session 0x{txn['session']:x}" + (f" ({txn['by']})" if "by" in txn else "")


# ---- one timeline ---------------------------------------------------------------------------


def read_jsonl(path: Path) -> list[dict]:
    """The whole lines of a JSON-lines file (a torn last line, from a killed writer, is left out)."""
    events = []
    try:
        text = path.read_text()
    except FileNotFoundError:
        return events
    for line in text.splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return events


def merge(streams: Iterable[list[dict]]) -> list[dict]:
    """One timeline: each stream's own order kept exactly, streams interleaved by time."""
    heads: list[Iterator[dict]] = [iter(s) for s in streams]
    current = [next(h, None) for h in heads]
    merged = []
    while True:
        live = [(e["time"], i) for i, e in enumerate(current) if e is not None]
        if not live:
            return merged
        _, i = min(live)
        merged.append(current[i])
        current[i] = next(heads[i], None)


def _zk_op(op: dict) -> str:
    """One op of a ZooKeeper transaction: its kind, path and version, or the error it failed with (kazoo's name)."""
    if op["op"] == "error":
        from kazoo.exceptions import EXCEPTIONS

        code = op.get("error")
        return f"error {code} ({EXCEPTIONS[code].__name__})" if code in EXCEPTIONS else f"error {code}"
    return f"{op['op']} {op.get('path', '')}".rstrip() + (f" v{op['version']}" if "version" in op else "")


def describe(event: dict) -> str:
    """One observation as a line a reader can find again in the run's raw files."""
    channel = event.get("channel")
    if channel == "zk":
        if not event["exists"]:
            return f"zk   {event['path']} deleted"
        return (
            f"zk   {event['path']} = {event['data']} (czxid {event['czxid']}, mzxid {event['mzxid']}, "
            f"version {event['version']})"
        )
    if channel == "zk-txn":
        ops = "; ".join(_zk_op(o) for o in event["ops"])
        failed = " (failed)" if event["failed"] else ""
        ops = f": {ops}" if ops else ""
        return f"txn  zxid 0x{event['zxid']:x} {session_of(event)} {event['type']}{failed}{ops}"[:240]
    if channel == "metadata":
        return (
            f"log  controller {event['controller']} offset {event['offset']} epoch {event['epoch']}: "
            f"{event['type']} {json.dumps(event['data'])[:160]}"
        )
    if channel == "broker-metadata":
        if "error" in event:
            return f"meta broker {event['broker']} round {event['round']}: {event['error']}"
        partitions = sum(len(t["partitions"]) for t in event["topics"])
        return (f"meta broker {event['broker']} round {event['round']}: live brokers {event['brokers']}, "
                f"{len(event['topics'])} topics, {partitions} partitions")
    if channel == "log":
        fields = {k: v for k, v in event.items() if k not in ("channel", "process", "line", "time", "kind")}
        return f"line {event['process']}/logs/server.log:{event['line']} {event['kind']} {fields}"
    return f"op   {json.dumps(event)[:200]}"
