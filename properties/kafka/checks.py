"""The model's invariants, evaluated on what a real Kafka run exposed.

Rules:
- A check here is named after the model property it evaluates (``model.PROPERTIES``) and reads
  only the observed channels (``properties.kafka.observe``): every observable invariant is checked
  on every observed state or change. The model's own tables decide where they apply (the driver's
  ``VALID_TRANSITIONS``, the migration state's ``STATE_ORDER`` and ``STATE_BYTES``).
- Observation is partial. A watch may skip znode versions and a dump may miss records a later
  leader truncated, so a check fires only on what was seen, never on what was not: two observed
  versions with a gap between them are compared as "before" and "after", not as one step.
- Every model property is either checked here or listed in ``NOT_OBSERVABLE`` with the reason;
  a test keeps the two lists covering the registry.
- Progress (the model's eventually-properties) is checked against the run's operator log: once
  the last fault has healed, the runbook's goals must be reached within ``PROGRESS_BOUND_S``.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from model import PROPERTIES
from model.end_to_end_invariants import METADATA_ZNODES
from model.kraft import PartitionRecord, ZkMigrationState
from model.kraft_migration import migrated_partition
from model.migration import STATE_BYTES, STATE_ORDER, MigrationDriverState, Profile, is_valid_transition
from model.state import PartitionState
from model.types import CHANGED_METADATA, FEATURE_LEVELS
from properties.kafka.observe import session_of

PROGRESS_BOUND_S = 120  # the driver re-polls at most 60 s apart (KRaftMigrationDriver.PollTimeSupplier)
# The longest a migration driver waits before it tries a failed step again: PollTimeSupplier's backoff, 100 ms doubled
# up to 60 s, with 2% jitter. A write still failing this long after a heal has been tried again since.
DRIVER_RETRY_BOUND_S = 62
# Comparisons across channels go by time: a watch sees a deletion a little after it happened, and a
# driver decides on a ZooKeeper read made a little before it logs; only what is this much clear counts.
CROSS_CHANNEL_SLACK_MS = 500
MODEL = {p.name: p for p in PROPERTIES}


def profile_of(version: tuple[int, int, int]) -> Profile:
    """The model's rules a Kafka release follows: 3.4 predates the differences ``kafka-3.9`` marks
    (it migrates from 3.4-IV0, with no metadata transactions)."""
    return Profile.KIP if version < (3, 5, 0) else Profile.KAFKA_3_9


@dataclass(frozen=True)
class Violation:
    invariant: str
    message: str  # one line: what was observed, with the keys (zxid, offset, log line) to find it
    evidence: tuple[dict, ...] = ()  # the events that show it


@dataclass
class Observed:
    """A run's channels, each in its own order (built by ``properties.kafka.run.load``)."""

    version: tuple[int, int, int]
    zk: dict[str, list[dict]] = field(default_factory=dict)  # path -> observations, by mzxid
    metadata: dict[int, list[dict]] = field(default_factory=dict)  # controller -> final log, by offset
    dumps: list[list[dict]] = field(default_factory=list)  # every dump taken during the run
    logs: dict[str, list[dict]] = field(default_factory=dict)  # process -> decision lines, in order
    operator: list[dict] = field(default_factory=list)  # runbook steps and faults, in order
    acknowledged: list[dict] = field(default_factory=list)  # the client's writes, as Kafka acknowledged them
    ledger: list[dict] = field(default_factory=list)  # the ledger topic read back at the end
    jmx: list[dict] = field(default_factory=list)  # each process's gauges, sampled over JMX, when they changed
    zk_txns: list[dict] = field(default_factory=list)  # ZooKeeper's transaction log, by zxid (empty: not read)
    broker_metadata: list[dict] = field(default_factory=list)  # each broker's served metadata at rest, by round

    @property
    def profile(self) -> Profile:
        return profile_of(self.version)

    @property
    def migration_states(self) -> dict[int, ZkMigrationState]:
        """ZkMigrationStateRecord's byte -> state, read as Kafka 3.5 and later read every log.

        Differs: the KIP numbers PRE_MIGRATION 1 and MIGRATION 2, and so did 3.4; but 3.4 wrote only
        one record, 1 (PRE_MIGRATION), when the migration began, and none when it was done, so 3.5 swapped
        the two to read a 3.4 log as MIGRATION (ZkMigrationState.java's comment, KAFKA-14805). A 3.4
        run's 1 is its migration's beginning (``migration_record_begins``), read as MIGRATION."""
        return {b: s for s, b in STATE_BYTES[Profile.KAFKA_3_9].items()}

    @property
    def migration_record_begins(self) -> bool:
        """Kafka 3.4 writes its one ZkMigrationStateRecord (byte 1, MIGRATION as 3.5+ reads it) when the
        migration begins, before the migrated records, in no transaction, and nothing when it completes
        (QuorumController.MigrationRecordConsumer.beginMigration, "Begin ZK Migration"; KAFKA-14805)."""
        return self.version < (3, 5, 0)

    @property
    def extra_driver_transitions(self) -> frozenset[tuple[MigrationDriverState, MigrationDriverState]]:
        # Differs: Kafka 3.4's driver had no SYNC_KRAFT_TO_ZK (3.5 added it between the migration and
        # the broker RPCs); the model's table is 3.5 and later's
        if self.version < (3, 5, 0):
            return frozenset(
                {(MigrationDriverState.ZK_MIGRATION, MigrationDriverState.KRAFT_CONTROLLER_TO_BROKER_COMM)}
            )
        return frozenset()

    @property
    def zk_brokers_take_equal_leader_epoch(self) -> bool:
        """Whether a ZooKeeper-mode broker applies a KRaft controller's LeaderAndIsr at the leader epoch it
        has, not only at a newer one: so a partition change that adds replicas needs no leader-epoch bump."""
        # Differs: KAFKA-16120 (3.6.2, 3.7.0 on) has ReplicaManager.becomeLeaderOrFollower take an equal leader
        # epoch from a KRaft controller (IsKRaftController); before, as in ZooKeeper mode, only a newer one
        return self.version >= (3, 6, 2)

    @property
    def reassignment_needs_every_target_in_isr(self) -> bool:
        """Whether a KRaft controller completes a reassignment only with every target replica in the ISR, not only
        the adding ones."""
        # Differs: KAFKA-15665 (3.8.0) made PartitionReassignmentReplicas.maybeCompleteReassignment ask the ISR for
        # every target replica; 3.7.2 and before asked it for the adding ones only (a 3.7.2 run completed orders-0's
        # move with an original replica, never rejoined, outside the ISR). KAFKA-19975 (after 4.1) again completes
        # with a replica neither added nor removed outside the ISR unless the move shrinks the replica set: from 4.2
        # on only the rule every release shares, the adding replicas in the ISR, is judged.
        return (3, 8, 0) <= self.version < (4, 2, 0)

    @property
    def leader_change_shifts_first_records(self) -> bool:
        """Whether a new active controller's first records may sit one offset past where it believes they go."""
        # Differs: before KAFKA-15213 (3.6.0) QuorumController.claim took the last committed offset as its write
        # offset, not counting the LeaderChange control record Raft appends as the new epoch's first entry, so a
        # registration handled before the leadership's first append carries the control record's offset as its
        # epoch, one less than its own (a 3.5.2 run: RegisterBrokerRecord at offset 58, epoch 57, LEADER_CHANGE at
        # 57). From 3.6.0 the claim starts at Raft's log end offset, after the control record.
        return self.version < (3, 6, 0)

    def existing(self, path: str) -> list[dict]:
        return [e for e in self.zk.get(path, ()) if e["exists"]]

    def paths(self, prefix: str) -> list[str]:
        return sorted(p for p in self.zk if p.startswith(prefix) and p.count("/") == prefix.count("/"))

    def log_events(self, kind: str) -> list[dict]:
        return [e for events in self.logs.values() for e in events if e["kind"] == kind]


CheckFn = Callable[[Observed], list[Violation]]
CHECKS: dict[str, CheckFn] = {}


def check(name: str) -> Callable[[CheckFn], CheckFn]:
    """Registers a check of the model property ``name`` (the registry's own name, so docs join them)."""
    if name not in MODEL:
        raise KeyError(f"{name} is not a model property")

    def register(fn: CheckFn) -> CheckFn:
        CHECKS[name] = fn
        return fn

    return register


def _json(event: dict) -> dict:
    try:
        value = json.loads(event.get("data") or "null")
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {"value": value}


def _pairs(events: list[dict]):
    return zip(events, events[1:])


# ---- ZooKeeper (KIP-380, KIP-866 §Controller Leadership) ------------------------------------


@check("ZxidStrictlyIncreases")
def zxids_increase(obs: Observed) -> list[Violation]:
    out = []
    for path, events in obs.zk.items():
        for e in events:
            if e["exists"] and e["czxid"] > e["mzxid"]:
                out.append(Violation("ZxidStrictlyIncreases", f"{path}: czxid {e['czxid']} > mzxid {e['mzxid']}", (e,)))
        for a, b in _pairs([e for e in events if e["exists"]]):
            if a["czxid"] == b["czxid"] and (b["version"] > a["version"]) != (b["mzxid"] > a["mzxid"]):
                out.append(
                    Violation(
                        "ZxidStrictlyIncreases",
                        f"{path}: version {a['version']}->{b['version']} with mzxid {a['mzxid']}->{b['mzxid']}",
                        (a, b),
                    )
                )
    return out


@check("MultiIsAllOrNothing")
def multi_is_all_or_nothing(obs: Observed) -> list[Violation]:
    """No znode the watches saw was created or written at the zxid of a multi ZooKeeper logged as failed (the zk-txn
    channel): ZooKeeper logs a failed multi with ErrorTxn from its failed op on and applies none of its ops. Only
    creations and writes carry their zxid; a deletion a failed multi made would go unseen."""
    failed = {t["zxid"]: t for t in obs.zk_txns if t["failed"] and t["type"] == "multi"}
    out = []
    for path, events in obs.zk.items():
        for e in events:
            for stamp in ("czxid", "mzxid"):
                if e["exists"] and e[stamp] in failed:
                    out.append(Violation("MultiIsAllOrNothing", f"{path} has {stamp} 0x{e[stamp]:x}, the zxid of a "
                                         "multi ZooKeeper logged as failed", (failed[e[stamp]], e)))
                    break
    return out


@check("CzxidFixedForNodeLife")
def czxid_fixed(obs: Observed) -> list[Violation]:
    out = []
    for path, events in obs.zk.items():
        for a, b in _pairs([e for e in events if e["exists"]]):
            if b["czxid"] != a["czxid"] and b["czxid"] < a["czxid"]:
                out.append(
                    Violation(
                        "CzxidFixedForNodeLife",
                        f"{path}: a later znode has an older czxid ({a['czxid']} then {b['czxid']})",
                        (a, b),
                    )
                )
            if b["czxid"] == a["czxid"] and b["version"] < a["version"]:
                out.append(
                    Violation(
                        "CzxidFixedForNodeLife",
                        f"{path}: version went back ({a['version']} then {b['version']}) in one znode's life",
                        (a, b),
                    )
                )
    return out


def _controller_epochs(obs: Observed) -> list[tuple[int, dict]]:
    out = []
    for e in obs.existing("/controller_epoch"):
        try:
            out.append((int(e["data"]), e))
        except (TypeError, ValueError):
            continue
    return out


@check("ControllerEpochNeverDecreases")
def controller_epoch_never_decreases(obs: Observed) -> list[Violation]:
    out = []
    events = obs.zk.get("/controller_epoch", [])
    seen = False
    for e in events:
        if e["exists"]:
            seen = True
        elif seen:
            out.append(Violation("ControllerEpochNeverDecreases", "/controller_epoch was deleted", (e,)))
    for (a, ea), (b, eb) in _pairs(_controller_epochs(obs)):
        if b < a:
            out.append(
                Violation(
                    "ControllerEpochNeverDecreases",
                    f"/controller_epoch went from {a} to {b} (mzxid {ea['mzxid']} -> {eb['mzxid']})",
                    (ea, eb),
                )
            )
    return out


@check("ZkControllerEpochsIncreaseAcrossHandOver")
def epochs_increase_across_hand_over(obs: Observed) -> list[Violation]:
    """Every write to /controller_epoch is an election or a KRaft claim: each takes a new, larger epoch."""
    out = []
    for (a, ea), (b, eb) in _pairs(_controller_epochs(obs)):
        if eb["version"] > ea["version"] and b <= a:
            out.append(
                Violation(
                    "ZkControllerEpochsIncreaseAcrossHandOver",
                    f"/controller_epoch rewritten to {b} after {a} (version {ea['version']} -> {eb['version']}, "
                    f"mzxid {eb['mzxid']})",
                    (ea, eb),
                )
            )
    return out


@check("EveryElectionBumpsControllerEpoch")
def every_election_bumps_epoch(obs: Observed) -> list[Violation]:
    """A new /controller is written in the same multi as /controller_epoch + 1: the same zxid."""
    out = []
    epochs = _controller_epochs(obs)
    by_mzxid = {e["mzxid"]: (value, e) for value, e in epochs}
    for c in obs.existing("/controller"):
        write = by_mzxid.get(c["mzxid"])
        if write is None:
            # a watch always delivers the newest version, so the last one seen is the final one: the
            # write is missing if that predates /controller, or if no version between was skipped
            before = [e for _, e in epochs if e["mzxid"] < c["mzxid"]]
            after = [e for _, e in epochs if e["mzxid"] > c["mzxid"]]
            if before and (not after or after[0]["version"] == before[-1]["version"] + 1):
                out.append(
                    Violation(
                        "EveryElectionBumpsControllerEpoch",
                        f"/controller written at zxid {c['mzxid']} without a /controller_epoch write in the same multi",
                        (c,),
                    )
                )
            continue
        value, e = write
        previous = [(v, x) for v, x in epochs if x["version"] == e["version"] - 1]
        if previous and value != previous[0][0] + 1:
            out.append(
                Violation(
                    "EveryElectionBumpsControllerEpoch",
                    f"/controller at zxid {c['mzxid']} came with /controller_epoch {previous[0][0]} -> {value}",
                    (previous[0][1], e, c),
                )
            )
    return out


@check("AtMostOneControllerPerEpoch")
def one_controller_per_epoch(obs: Observed) -> list[Violation]:
    out = []
    winners: dict[int, set[str]] = defaultdict(set)
    events: dict[int, list[dict]] = defaultdict(list)
    for e in obs.log_events("zk-controller-elected"):
        winners[int(e["epoch"])].add(e["node"])
        events[int(e["epoch"])].append(e)
    for c in obs.existing("/controller"):  # KRaft claims: the epoch written in the same multi
        body = _json(c)
        if body.get("kraftControllerEpoch", -1) >= 0:  # ZooKeeper controllers write -1
            for value, e in _controller_epochs(obs):
                if e["mzxid"] == c["mzxid"]:
                    winners[value].add(f"kraft-{body.get('brokerid')}")
                    events[value].append(c)
    for epoch, nodes in winners.items():
        if len(nodes) > 1:
            out.append(
                Violation(
                    "AtMostOneControllerPerEpoch",
                    f"controller epoch {epoch} won by {sorted(nodes)}",
                    tuple(events[epoch]),
                )
            )
    return out


def _broker_registrations(obs: Observed) -> dict[int, list[dict]]:
    return {
        int(p.rsplit("/", 1)[1]): obs.existing(p) for p in obs.paths("/brokers/ids/") if p.rsplit("/", 1)[1].isdigit()
    }


@check("BrokerEpochGrowsWithEachRegistration")
def broker_epoch_grows(obs: Observed) -> list[Violation]:
    out = []
    for broker, events in _broker_registrations(obs).items():
        czxids = [e for e in events]
        for a, b in _pairs(czxids):
            if b["czxid"] < a["czxid"]:
                out.append(
                    Violation(
                        "BrokerEpochGrowsWithEachRegistration",
                        f"broker {broker} registered in ZooKeeper with czxid {b['czxid']} after {a['czxid']}",
                        (a, b),
                    )
                )
    for controller, records in obs.metadata.items():
        last: dict[int, dict] = {}
        for r in _live_records(records):
            if r["type"] == "REGISTER_BROKER_RECORD":
                broker = r["data"]["brokerId"]
                # an amended registration (the same incarnation retried) keeps its epoch: OneBrokerEpochPerIncarnation
                incarnation = r["data"].get("incarnationId")
                earlier = last.get(broker)
                amended = incarnation is not None and earlier is not None
                amended = amended and earlier["data"].get("incarnationId") == incarnation
                if earlier is not None and not amended and r["data"]["brokerEpoch"] <= earlier["data"]["brokerEpoch"]:
                    out.append(
                        Violation(
                            "BrokerEpochGrowsWithEachRegistration",
                            f"broker {broker} registered with KRaft at epoch {r['data']['brokerEpoch']} after "
                            f"{last[broker]['data']['brokerEpoch']} (offset {r['offset']})",
                            (last[broker], r),
                        )
                    )
                last[broker] = r
    return out


@check("BrokerEpochIsRegistrationCzxid")
def broker_epoch_is_czxid(obs: Observed) -> list[Violation]:
    """Every registration ZooKeeper holds is one its broker logged, with that czxid as its epoch."""
    out = []
    logged: dict[int, set[int]] = defaultdict(set)
    for e in obs.log_events("zk-broker-registered"):
        logged[int(e["broker"])].add(int(e["epoch"]))
    for broker, events in _broker_registrations(obs).items():
        for e in events:
            if e["czxid"] not in logged[broker]:
                out.append(
                    Violation(
                        "BrokerEpochIsRegistrationCzxid",
                        f"/brokers/ids/{broker} has czxid {e['czxid']}, an epoch broker {broker} never logged "
                        f"(it logged {sorted(logged[broker])})",
                        (e,),
                    )
                )
    return out


# ---- the KRaft quorum and its log (KIP-500) ---------------------------------------------------


def _live_records(records: list[dict]) -> list[dict]:
    """The records that count: those of aborted metadata transactions are left out, as replay does."""
    out: list[dict] = []
    pending: list[dict] | None = None
    for r in records:
        kind = r["type"]
        if kind == "BEGIN_TRANSACTION_RECORD":
            pending = []
        elif kind == "END_TRANSACTION_RECORD":
            out.extend(pending or [])
            pending = None
        elif kind == "ABORT_TRANSACTION_RECORD":
            pending = None
        elif pending is not None:
            pending.append(r)
        else:
            out.append(r)
    return out  # an open transaction's records are not replayed until its END


@check("AtMostOneKRaftLeaderPerEpoch")
def one_kraft_leader_per_epoch(obs: Observed) -> list[Violation]:
    leaders: dict[int, set[str]] = defaultdict(set)
    events: dict[int, list[dict]] = defaultdict(list)
    for e in obs.log_events("raft-leader"):
        leaders[int(e["epoch"])].add(e["node"])
        events[int(e["epoch"])].append(e)
    return [
        Violation(
            "AtMostOneKRaftLeaderPerEpoch",
            f"Raft epoch {epoch} led by controllers {sorted(nodes)}",
            tuple(events[epoch]),
        )
        for epoch, nodes in leaders.items()
        if len(nodes) > 1
    ]


@check("KRaftEpochNeverDecreases")
def kraft_epoch_never_decreases(obs: Observed) -> list[Violation]:
    out = []
    for controller, records in obs.metadata.items():
        for a, b in _pairs(records):
            if b["epoch"] < a["epoch"]:
                out.append(
                    Violation(
                        "KRaftEpochNeverDecreases",
                        f"controller {controller}'s log goes from epoch {a['epoch']} (offset {a['offset']}) to "
                        f"{b['epoch']} (offset {b['offset']})",
                        (a, b),
                    )
                )
    for process, events in obs.logs.items():
        leads = [e for e in events if e["kind"] == "raft-leader"]
        for a, b in _pairs(leads):
            if int(b["epoch"]) <= int(a["epoch"]):
                out.append(
                    Violation("KRaftEpochNeverDecreases", f"{process} led epoch {a['epoch']} then {b['epoch']}", (a, b))
                )
    return out


@check("CommittedRecordsNeverChange")
def committed_records_never_change(obs: Observed) -> list[Violation]:
    """What ZooKeeper was told is committed (/migration's offset) stays, in every dump and every voter's log."""
    out = []
    committed = max((_json(e).get("kraft_metadata_offset", -1) for e in obs.existing("/migration")), default=-1)
    reference: dict[int, dict] = {}
    for records in [*obs.metadata.values(), *obs.dumps]:
        for r in records:
            if r["offset"] > committed:
                break
            first = reference.setdefault(r["offset"], r)
            if (first["type"], first["data"], first["epoch"]) != (r["type"], r["data"], r["epoch"]):
                out.append(
                    Violation(
                        "CommittedRecordsNeverChange",
                        f"offset {r['offset']} (committed: /migration reached {committed}) holds "
                        f"{first['type']}@{first['epoch']} in one log and {r['type']}@{r['epoch']} in another",
                        (first, r),
                    )
                )
    return out


CLEANUP_RECORDS = ("PARTITION_CHANGE_RECORD", "BROKER_REGISTRATION_CHANGE_RECORD")


@check("BrokerEpochIsRegistrationOffset")
def broker_epoch_is_offset(obs: Observed) -> list[Violation]:
    """The epoch is the controller's nextWriteOffset: where the registration's records begin (reference §3.1).

    Kafka writes the records that clean up an unclean earlier incarnation (KIP-966's partition
    changes) before the RegisterBrokerRecord, so the record can sit a few offsets after the epoch
    it carries, with nothing but such cleanup records between. A registration retried by the same
    incarnation (its answer lost) is amended, not renewed: Kafka 3.9 writes the record again with the
    epoch the incarnation has (ClusterControlManager.registerBroker, "Amending registration"), which
    ``OneBrokerEpochPerIncarnation`` checks instead. Before 3.6.0 (KAFKA-15213) a new leader's write
    offset did not count the LeaderChange control record its epoch begins with, so that record may
    sit between the epoch and the registration too (``Observed.leader_change_shifts_first_records``).
    """
    between_allowed = CLEANUP_RECORDS + ("CONTROL:LEADER_CHANGE",) if obs.leader_change_shifts_first_records \
        else CLEANUP_RECORDS
    out = []
    for records in obs.metadata.values():
        by_offset = {r["offset"]: r for r in records}
        incarnations: set[tuple[int, str]] = set()
        for r in records:
            if r["type"] != "REGISTER_BROKER_RECORD":
                continue
            incarnation = (r["data"]["brokerId"], r["data"].get("incarnationId", ""))
            if incarnation in incarnations:
                continue  # an amended registration
            incarnations.add(incarnation)
            epoch = r["data"].get("brokerEpoch", -1)
            between = [by_offset.get(o) for o in range(epoch, r["offset"])]
            if epoch > r["offset"] or any(x is None or x["type"] not in between_allowed for x in between):
                out.append(
                    Violation(
                        "BrokerEpochIsRegistrationOffset",
                        f"RegisterBrokerRecord at offset {r['offset']} gives broker {r['data']['brokerId']} "
                        f"epoch {epoch}"
                        + (
                            f", with {', '.join(x['type'] for x in between if x)} between"
                            if 0 < len(between) < 10
                            else ""
                        ),
                        (r,),
                    )
                )
    return out


@check("OneBrokerEpochPerIncarnation")
def one_broker_epoch_per_incarnation(obs: Observed) -> list[Violation]:
    """Every RegisterBrokerRecord of one incarnation (broker id and incarnation id) carries one epoch: a
    retried registration is the same registration (KIP-500 §Broker Metadata Management; Kafka amends it)."""
    out = []
    for controller, records in obs.metadata.items():
        first: dict[tuple[int, str], dict] = {}
        for r in _live_records(records):
            if r["type"] != "REGISTER_BROKER_RECORD":
                continue
            key = (r["data"]["brokerId"], r["data"].get("incarnationId", ""))
            earlier = first.setdefault(key, r)
            if earlier["data"].get("brokerEpoch") != r["data"].get("brokerEpoch"):
                out.append(
                    Violation(
                        "OneBrokerEpochPerIncarnation",
                        f"broker {key[0]}'s incarnation {key[1]} registered with epoch "
                        f"{earlier['data'].get('brokerEpoch')} at offset {earlier['offset']} and with epoch "
                        f"{r['data'].get('brokerEpoch')} at offset {r['offset']} of controller {controller}'s log",
                        (earlier, r),
                    )
                )
    return out


@check("AdmittedBrokersSupportFinalizedFeatures")
def brokers_support_finalized_features(obs: Observed) -> list[Violation]:
    """KIP-584: no level is finalized outside a registered broker's range, and no broker registers outside one."""
    out = []
    for controller, records in obs.metadata.items():
        ranges: dict[int, dict[str, tuple[int, int]]] = {}
        finalized: dict[str, int] = {}
        for r in _live_records(records):
            data = r["data"]
            if r["type"] == "REGISTER_BROKER_RECORD":
                supported = {
                    f["name"]: (f["minSupportedVersion"], f["maxSupportedVersion"]) for f in data.get("features", [])
                }
                ranges[data["brokerId"]] = supported
                bad = {
                    n: lvl
                    for n, lvl in finalized.items()
                    if n in supported and lvl and not supported[n][0] <= lvl <= supported[n][1]
                }
                if bad:
                    out.append(
                        Violation(
                            "AdmittedBrokersSupportFinalizedFeatures",
                            f"broker {data['brokerId']} registered at offset {r['offset']} supporting "
                            f"{supported} while {bad} is finalized",
                            (r,),
                        )
                    )
            elif r["type"] == "UNREGISTER_BROKER_RECORD":
                ranges.pop(data.get("brokerId"), None)
            elif r["type"] == "FEATURE_LEVEL_RECORD":
                name, level = data["name"], data["featureLevel"]
                finalized[name] = level
                refusing = sorted(
                    b
                    for b, supported in ranges.items()
                    if name in supported and level and not supported[name][0] <= level <= supported[name][1]
                )
                if refusing:
                    out.append(
                        Violation(
                            "AdmittedBrokersSupportFinalizedFeatures",
                            f"{name} finalized at {level} (offset {r['offset']}) outside the range of "
                            f"registered brokers {refusing}",
                            (r,),
                        )
                    )
    return out


@check("ZkBrokersAdmittedAtMetadataVersion")
def zk_brokers_at_metadata_version(obs: Observed) -> list[Violation]:
    out = []
    for records in obs.metadata.values():
        level = None
        for r in _live_records(records):
            if r["type"] == "FEATURE_LEVEL_RECORD" and r["data"].get("name") == "metadata.version":
                level = r["data"]["featureLevel"]
            if r["type"] == "REGISTER_BROKER_RECORD" and r["data"].get("isMigratingZkBroker") and level is not None:
                mv = next((f for f in r["data"].get("features", []) if f["name"] == "metadata.version"), None)
                if mv is not None and not (mv["minSupportedVersion"] == mv["maxSupportedVersion"] == level):
                    out.append(
                        Violation(
                            "ZkBrokersAdmittedAtMetadataVersion",
                            f"ZK broker {r['data']['brokerId']} admitted at offset {r['offset']} with IBP range "
                            f"[{mv['minSupportedVersion']}, {mv['maxSupportedVersion']}] "
                            f"under metadata.version {level}",
                            (r,),
                        )
                    )
    return out


# ---- the migration (KIP-866) ------------------------------------------------------------------


def _migration_states(obs: Observed, records: list[dict]) -> list[tuple[ZkMigrationState, dict]]:
    by_byte = obs.migration_states
    return [
        (by_byte[r["data"]["zkMigrationState"]], r)
        for r in _live_records(records)
        if r["type"] == "ZK_MIGRATION_STATE_RECORD" and r["data"].get("zkMigrationState") in by_byte
    ]


@check("MigrationStateOnlyMovesForward")
def migration_state_moves_forward(obs: Observed) -> list[Violation]:
    out = []
    for controller, records in obs.metadata.items():
        previous: ZkMigrationState | None = None
        previous_record: dict | None = None
        for state, r in _migration_states(obs, records):
            # Differs: 3.4's one record is its migration's beginning, with no PRE_MIGRATION before it
            first_of_34 = obs.migration_record_begins and previous is None and state is ZkMigrationState.MIGRATION
            if state != previous and state not in STATE_ORDER[previous] and not first_of_34:
                out.append(
                    Violation(
                        "MigrationStateOnlyMovesForward",
                        f"controller {controller}'s log moves the migration state "
                        f"{previous.name if previous else 'unset'} -> {state.name} at offset {r['offset']}",
                        tuple(x for x in (previous_record, r) if x),
                    )
                )
            previous, previous_record = state, r
    return out


@check("MetadataVersionFixedDuringMigration")
def metadata_version_fixed(obs: Observed) -> list[Violation]:
    out = []
    for records in obs.metadata.values():
        migrating = False
        for r in _live_records(records):
            if r["type"] == "ZK_MIGRATION_STATE_RECORD":
                state = obs.migration_states.get(r["data"].get("zkMigrationState"))
                migrating = state is ZkMigrationState.MIGRATION
            elif migrating and r["type"] == "FEATURE_LEVEL_RECORD" and r["data"].get("name") == "metadata.version":
                out.append(
                    Violation(
                        "MetadataVersionFixedDuringMigration",
                        f"metadata.version set to {r['data'].get('featureLevel')} at offset {r['offset']} "
                        f"during the migration",
                        (r,),
                    )
                )
    return out


# Kafka's MetadataVersion.didMetadataChange for every feature level a real run may go through: the model's table
# (3.3-IV0 to 3.9-IV0, 4 to 21) and the 4.x releases' levels up to 4.3-IV0 (22 to 30), of which 4.0-IV1 (23) and
# 4.3-IV0 (30) changed metadata (Kafka's upgrade notes name both). A level above these is not judged: what it changed
# is not known here.
KNOWN_FEATURE_LEVELS = range(min(FEATURE_LEVELS.values()), 31)
CHANGED_METADATA_LEVELS = CHANGED_METADATA | {23, 30}
DOWNGRADED_TO = re.compile(r"metadata\.version was downgraded to (\d+)")


def _forced_downgrades(obs: Observed) -> set[int] | None:
    """The metadata.version levels an operator forced a downgrade to (FeatureCommand's ``--unsafe``, accepted);
    None: one was accepted to a level Kafka's answer does not name, so any may have been forced."""
    levels: set[int] = set()
    for e in obs.operator:
        if e.get("action") != "update-features" or e.get("refused") or "--unsafe" not in e.get("command", ()):
            continue
        found = DOWNGRADED_TO.search(e.get("answer", ""))
        if found is None:
            return None
        levels.add(int(found.group(1)))
    return levels


@check("MetadataVersionGoesDownOnlyWhenForced")
def metadata_version_goes_down_only_when_forced(obs: Observed) -> list[Violation]:
    """KIP-584: a downgrade that may lose metadata needs the operator's force (Kafka refuses such an unsafe one
    outright: FeatureControlManager's "Unsafe metadata downgrade is not supported in this version"). No committed
    record takes metadata.version down across a level that changed metadata (MetadataVersion.checkIfMetadataChanged),
    unless an operator forced that downgrade."""
    forced = _forced_downgrades(obs)
    if forced is None:
        return []
    out = []
    for controller, records in obs.metadata.items():
        level, set_at = None, None
        for r in _live_records(records):
            if r["type"] != "FEATURE_LEVEL_RECORD" or r["data"].get("name") != "metadata.version":
                continue
            new = r["data"]["featureLevel"]
            lost = [] if level is None or new >= level else [
                changed for changed in range(new + 1, level + 1) if changed in CHANGED_METADATA_LEVELS
            ]
            known = level is not None and {new, level} <= set(KNOWN_FEATURE_LEVELS)
            if known and lost and new not in forced:
                out.append(
                    Violation(
                        "MetadataVersionGoesDownOnlyWhenForced",
                        f"controller {controller}'s log takes metadata.version from {level} (offset {set_at['offset']})"
                        f" down to {new} at offset {r['offset']}, across level{'s' * (len(lost) > 1)} "
                        f"{', '.join(map(str, lost))} that changed metadata, and no operator forced it",
                        (set_at, r),
                    )
                )
            level, set_at = new, r
    return out


@check("FailoverAbortsMigrationTransaction")
def failover_aborts_transaction(obs: Observed) -> list[Violation]:
    """A transaction left open by one leader is aborted by the next before it writes anything else."""
    out = []
    ignored = {"CONTROL:LEADER_CHANGE", "NO_OP_RECORD", "ABORT_TRANSACTION_RECORD"}
    for controller, records in obs.metadata.items():
        open_at: dict | None = None
        for r in records:
            if r["type"] == "BEGIN_TRANSACTION_RECORD":
                open_at = r
            elif r["type"] in ("END_TRANSACTION_RECORD", "ABORT_TRANSACTION_RECORD"):
                open_at = None
            elif open_at is not None and r["epoch"] > open_at["epoch"] and r["type"] not in ignored:
                out.append(
                    Violation(
                        "FailoverAbortsMigrationTransaction",
                        f"leader of epoch {r['epoch']} wrote {r['type']} at offset {r['offset']} inside the "
                        f"transaction opened at offset {open_at['offset']} in epoch {open_at['epoch']}",
                        (open_at, r),
                    )
                )
                open_at = None
    return out


@check("InitialMigrationAllOrNothing")
def initial_migration_all_or_nothing(obs: Observed) -> list[Violation]:
    """MIGRATION counts only together with the migrated metadata: every topic ZooKeeper held before.

    Differs: 3.4 writes its record first and the migrated records after it, in no transaction (KIP-868's
    transactions came in 3.6, and 3.9 refuses to start a migration without them, KAFKA-17457), so on 3.4
    the topics are looked for in the whole log: a migration left partial shows there still."""
    out = []
    for controller, records in obs.metadata.items():
        live = _live_records(records)
        migrated = [r for state, r in _migration_states(obs, records) if state is ZkMigrationState.MIGRATION]
        if not migrated:
            continue
        at = migrated[0]
        upto = live[-1]["offset"] if obs.migration_record_begins and live else at["offset"]
        topics = {r["data"]["name"] for r in live if r["type"] == "TOPIC_RECORD" and r["offset"] <= upto}
        in_zk = {
            p.rsplit("/", 1)[1]
            for p in obs.paths("/brokers/topics/")
            if any(e["time"] < at["time"] for e in obs.existing(p))
        }
        missing = sorted(in_zk - topics)
        if missing:
            out.append(
                Violation(
                    "InitialMigrationAllOrNothing",
                    f"controller {controller}'s log counts MIGRATION at offset {at['offset']} without the "
                    f"topics {missing} that ZooKeeper held",
                    (at,),
                )
            )
    return out


@check("DriverTakesOnlyTableTransitions")
def driver_takes_table_transitions(obs: Observed) -> list[Violation]:
    out = []
    for process, events in obs.logs.items():
        state = MigrationDriverState.UNINITIALIZED
        for e in events:
            if e["kind"] == "process-started":
                continue
            if e["kind"] != "driver-transition":
                continue
            old, new = MigrationDriverState[e["old"]], MigrationDriverState[e["new"]]
            if old is MigrationDriverState.UNINITIALIZED:
                state = old  # a new process (a restart): its driver starts over
            if old != state:
                out.append(
                    Violation(
                        "DriverTakesOnlyTableTransitions",
                        f"{process}'s driver left {old.name} while in {state.name} (log line {e['line']})",
                        (e,),
                    )
                )
            if not is_valid_transition(old, new) and (old, new) not in obs.extra_driver_transitions:
                out.append(
                    Violation(
                        "DriverTakesOnlyTableTransitions",
                        f"{process}'s driver moved {old.name} -> {new.name} (log line {e['line']})",
                        (e,),
                    )
                )
            state = new
    return out


@check("DualWritesOnlyInDualWriteStates")
def dual_writes_only_in_dual_write(obs: Observed) -> list[Violation]:
    out = []
    for process, events in obs.logs.items():
        state = MigrationDriverState.UNINITIALIZED
        for e in events:
            if e["kind"] == "driver-transition":
                state = MigrationDriverState[e["new"]]
            elif (
                e["kind"] == "driver-zk-writes"
                and e["what"].startswith("handling KRaft")
                and not state.allows_dual_write
            ):
                out.append(
                    Violation(
                        "DualWritesOnlyInDualWriteStates",
                        f"{process} wrote a KRaft delta to ZooKeeper in {state.name} (log line {e['line']})",
                        (e,),
                    )
                )
    return out


def _migration_znodes(obs: Observed) -> list[tuple[dict, dict]]:
    return [(_json(e), e) for e in obs.existing("/migration")]


@check("ZkWritesFollowKRaftCommits")
def zk_writes_follow_commits(obs: Observed) -> list[Violation]:
    """/migration names an offset and epoch of the KRaft log: that record must be in the log; and every
    topic, partition state and topic config KRaft writes to ZooKeeper in dual write is a state the log
    had committed (``dual_writes_follow_commits``)."""
    out = dual_writes_follow_commits(obs)
    logs = list(obs.metadata.values())
    if not logs:
        return out
    for body, e in _migration_znodes(obs):
        offset, epoch = body.get("kraft_metadata_offset", -1), body.get("kraft_metadata_epoch", -1)
        if offset < 0:
            continue
        found = [r for records in logs for r in records if r["offset"] == offset]
        ends = [records[-1]["offset"] if records else -1 for records in logs]
        if not found and max(ends) >= offset and not any(records and records[0]["offset"] > offset for records in logs):
            out.append(
                Violation(
                    "ZkWritesFollowKRaftCommits",
                    f"/migration (mzxid {e['mzxid']}) names offset {offset}, which no controller's log holds",
                    (e,),
                )
            )
        elif found and all(r["epoch"] != epoch for r in found):
            out.append(
                Violation(
                    "ZkWritesFollowKRaftCommits",
                    f"/migration (mzxid {e['mzxid']}) names offset {offset} in epoch {epoch}; the log has it in "
                    f"epoch {found[0]['epoch']}",
                    (e, found[0]),
                )
            )
    return out


@check("OnlyCurrentKRaftLeaderWritesApply")
def only_current_kraft_leader_writes(obs: Observed) -> list[Violation]:
    out = []
    for (a, ea), (b, eb) in _pairs(_migration_znodes(obs)):
        if b.get("kraft_controller_epoch", -1) < a.get("kraft_controller_epoch", -1):
            out.append(
                Violation(
                    "OnlyCurrentKRaftLeaderWritesApply",
                    f"/migration written by Raft epoch {b.get('kraft_controller_epoch')} after epoch "
                    f"{a.get('kraft_controller_epoch')} (mzxid {eb['mzxid']})",
                    (ea, eb),
                )
            )
        elif b.get("kraft_controller_epoch") == a.get("kraft_controller_epoch") and b.get(
            "kraft_metadata_offset", -1
        ) < a.get("kraft_metadata_offset", -1):
            out.append(
                Violation(
                    "OnlyCurrentKRaftLeaderWritesApply",
                    f"/migration's offset went back from {a.get('kraft_metadata_offset')} to "
                    f"{b.get('kraft_metadata_offset')} in one Raft epoch (mzxid {eb['mzxid']})",
                    (ea, eb),
                )
            )
    return out


@check("MigrationOffsetNeverGoesBack")
def migration_offset_never_goes_back(obs: Observed) -> list[Violation]:
    """/migration's offset never decreases while the znode lives (a rollback deletes it; a new one starts again)."""
    out = []
    for (a, ea), (b, eb) in _pairs(_migration_znodes(obs)):
        if ea["czxid"] == eb["czxid"] and b.get("kraft_metadata_offset", -1) < a.get("kraft_metadata_offset", -1):
            out.append(
                Violation(
                    "MigrationOffsetNeverGoesBack",
                    f"/migration's offset went back from {a.get('kraft_metadata_offset')} to "
                    f"{b.get('kraft_metadata_offset')} (mzxid {eb['mzxid']})",
                    (ea, eb),
                )
            )
    return out


@check("KRaftEpochInZkOnlyIncreases")
def kraft_epoch_in_zk_increases(obs: Observed) -> list[Violation]:
    out = []
    claims = [(_json(e).get("kraftControllerEpoch"), e) for e in obs.existing("/controller")]
    claims = [(epoch, e) for epoch, e in claims if epoch is not None and epoch >= 0]
    for (a, ea), (b, eb) in _pairs(claims):
        if b < a:
            out.append(
                Violation(
                    "KRaftEpochInZkOnlyIncreases",
                    f"/controller claimed by Raft epoch {b} after epoch {a} (mzxid {eb['mzxid']})",
                    (ea, eb),
                )
            )
    return out


# Written outside the fenced multi by design: a config change's notification, a plain create that
# ZkConfigMigrationClient makes once its fenced write of the entity's config succeeded
# (KafkaZkClient.createConfigChangeNotification). It carries no metadata: it names the entity whose
# znode the brokers should read again, which the fenced write changed.
CONFIG_CHANGE_NOTIFICATIONS = "/config/changes/"
_ZK_WRITES = ("create", "setData", "delete", "createContainer", "createTTL", "deleteContainer")


@check("NoZkWriteAfterPostMigration")
def no_zk_write_after_post_migration(obs: Observed) -> list[Violation]:
    out = []
    finalized = [
        r
        for records in obs.metadata.values()
        for state, r in _migration_states(obs, records)
        if state is ZkMigrationState.POST_MIGRATION
    ]
    if not finalized:
        return out
    since = min(r["time"] for r in finalized)
    for body, e in _migration_znodes(obs):
        if e["time"] > since:
            out.append(
                Violation(
                    "NoZkWriteAfterPostMigration",
                    f"/migration written (mzxid {e['mzxid']}) after POST_MIGRATION was committed",
                    (finalized[0], e),
                )
            )
    # ZooKeeper's log has every write the watches may have skipped, metadata as well as /migration
    seen = {e["mzxid"] for _, e in _migration_znodes(obs)}
    for t in obs.zk_txns:
        written = [o["path"] for o in t["ops"] if o["op"] in _ZK_WRITES
                   and (o["path"] == "/migration" or o["path"].startswith(METADATA_ZNODES))]
        if written and not t["failed"] and t["time"] > since and t["zxid"] not in seen:
            out.append(
                Violation(
                    "NoZkWriteAfterPostMigration",
                    f"{written[0]} written (zxid 0x{t['zxid']:x}, {session_of(t)}) after POST_MIGRATION was committed",
                    (finalized[0], t),
                )
            )
    return out


def _kraft_claimant(controller: dict | None) -> tuple[int, int] | None:
    """(controller id, Raft epoch) of /controller's data when a KRaft controller wrote it (KIP-866 §Controller
    Leadership: kraftControllerEpoch set); None while a ZooKeeper-mode broker holds it or nobody does."""
    if controller is None or controller.get("kraftControllerEpoch", -1) < 0:
        return None
    return controller.get("brokerid"), controller["kraftControllerEpoch"]


@check("OneZkWriterAfterClaim")
def one_zk_writer_after_claim(obs: Observed) -> list[Violation]:
    """Read off ZooKeeper's transaction log (the zk-txn channel): while /controller holds a KRaft controller's
    claim, every committed transaction that changes ZooKeeper's metadata (the model's METADATA_ZNODES; config change
    notifications aside, ``CONFIG_CHANGE_NOTIFICATIONS``) is conditional on /migration, moving it or checking its
    version, and leaves /migration stamped by the claimant (its kraft_controller_id and kraft_controller_epoch are
    /controller's brokerid and kraftControllerEpoch). Kafka's dual write fences each of its multis so
    (KafkaZkClient.retryMigrationRequestsUntilConnected: the last op of a batch sets /migration, the others check
    its version, each checks /controller_epoch's); a stale ZooKeeper controller's multi checks /controller_epoch at
    its own, older version, fails, and writes nothing. /controller is the claim's from the transaction that writes
    it until one deletes it (a rollback's operator) or the session owning it (an ephemeral one) closes."""
    out = []
    controller: dict | None = None
    owner: int | None = None  # the session of an ephemeral /controller
    migration: dict | None = None
    for t in obs.zk_txns:
        if t["failed"]:
            continue
        claimant = _kraft_claimant(controller)
        writes = [o for o in t["ops"] if o["op"] in _ZK_WRITES and o["path"].startswith(METADATA_ZNODES)
                  and not o["path"].startswith(CONFIG_CHANGE_NOTIFICATIONS)]
        for o in t["ops"]:
            if o.get("path") not in ("/controller", "/migration") or o["op"] not in ("create", "setData", "delete"):
                continue
            data = None if o["op"] == "delete" else _json(o)
            if o["path"] == "/migration":
                migration = data
                continue
            controller = data
            if o["op"] != "setData":
                owner = t["session"] if o.get("ephemeral") else None
        if t["type"] == "closeSession" and t["session"] == owner:
            controller = owner = None
        if claimant is None or not writes:
            continue
        what = f"{writes[0]['op']} {writes[0]['path']}" + (f" and {len(writes) - 1} more" if len(writes) > 1 else "")
        where = (f"zxid 0x{t['zxid']:x}, {session_of(t)}: {what} while controller {claimant[0]}'s claim at "
                 f"Raft epoch {claimant[1]} holds /controller")
        fenced = any(o.get("path") == "/migration" and o["op"] in ("setData", "check") for o in t["ops"])
        stamp = None if migration is None else (migration.get("kraft_controller_id"),
                                                migration.get("kraft_controller_epoch"))
        if not fenced:
            out.append(Violation("OneZkWriterAfterClaim", f"{where}, in a transaction that neither moves nor checks "
                                 "/migration", (t,)))
        elif stamp != claimant:
            out.append(Violation("OneZkWriterAfterClaim", f"{where}, leaving /migration stamped by "
                                 + ("nobody" if stamp is None else f"controller {stamp[0]} at Raft epoch {stamp[1]}"),
                                 (t,)))
    return out


@check("MigrationStartsOnlyWithEveryKnownZkBroker")
def migration_starts_with_every_broker(obs: Observed) -> list[Violation]:
    """At the claim, every broker live in ZooKeeper has registered with KRaft as a migrating broker."""
    out = []
    registered: list[tuple[int, int]] = sorted(
        (r["time"], r["data"]["brokerId"])
        for records in obs.metadata.values()
        for r in records
        if r["type"] == "REGISTER_BROKER_RECORD" and r["data"].get("isMigratingZkBroker")
    )
    for claim in obs.log_events("driver-transition"):
        if claim["new"] != "BECOME_CONTROLLER":
            continue
        known = {b for t, b in registered if t <= claim["time"]}
        for broker, events in _broker_registrations(obs).items():
            live = [e for e in events if e["time"] <= claim["time"] - CROSS_CHANNEL_SLACK_MS]
            gone = [
                e
                for e in obs.zk.get(f"/brokers/ids/{broker}", [])
                if not e["exists"]
                and live
                and e["seen"] * 1000 > live[-1]["time"]
                and e["seen"] * 1000 <= claim["time"] + CROSS_CHANNEL_SLACK_MS
            ]
            if live and not gone and broker not in known:
                out.append(
                    Violation(
                        "MigrationStartsOnlyWithEveryKnownZkBroker",
                        f"{claim['process']}'s driver went to claim ZooKeeper while ZK broker {broker} (czxid "
                        f"{live[-1]['czxid']}) had not registered with KRaft",
                        (claim, live[-1]),
                    )
                )
    return out


@check("MigrationWaitsForEveryVoterRegisteredReady")
def migration_waits_for_ready_registrations(obs: Observed) -> list[Violation]:
    """When the driver left WAIT_FOR_CONTROLLER_QUORUM for WAIT_FOR_BROKERS, every voter's last
    RegisterControllerRecord said zkMigrationReady (QuorumFeatures.reasonAllControllersZkMigrationNotReady).
    As the model keeps it: only a log that holds controller registrations (3.7-IV0 on) is judged."""
    final = max(obs.metadata.values(), key=len, default=[])
    registrations = [r for r in _live_records(final) if r["type"] == "REGISTER_CONTROLLER_RECORD"]
    if not registrations:
        return []
    out = []
    for t in obs.log_events("driver-transition"):
        if (t["old"], t["new"]) != ("WAIT_FOR_CONTROLLER_QUORUM", "WAIT_FOR_BROKERS"):
            continue
        last: dict[int, dict] = {}
        for r in registrations:
            if r["time"] <= t["time"] + CROSS_CHANNEL_SLACK_MS:
                last[int(r["data"]["controllerId"])] = r
        for voter in sorted(obs.metadata):
            r = last.get(voter)
            if r is None or not r["data"].get("zkMigrationReady"):
                said = "no registration" if r is None else f"a registration at offset {r['offset']} not ready"
                out.append(Violation(
                    "MigrationWaitsForEveryVoterRegisteredReady",
                    f"{t['process']}'s driver left WAIT_FOR_CONTROLLER_QUORUM while controller {voter} had {said}",
                    (t,) if r is None else (t, r),
                ))
    return out


@check("NoKRaftBrokerTakesALiveZkBrokersId")
def no_kraft_broker_takes_live_id(obs: Observed) -> list[Violation]:
    """As the model keeps it: KRaft's own registration of the ZK broker, not its ephemeral in ZooKeeper.

    A ZK broker stopped while ZooKeeper is down leaves /brokers/ids/N in place until its session
    expires after ZooKeeper is back, though KRaft fenced it at its controlled shutdown: the KRaft
    broker that takes the id then is not taking a live ZK broker's place.
    """
    out = []
    for records in obs.metadata.values():
        image = BrokerRegistrations()
        for r in _live_records(records):
            data = r["data"]
            broker = data.get("brokerId")
            previous = image.last.get(broker)
            if r["type"] == "REGISTER_BROKER_RECORD" and not data.get("isMigratingZkBroker"):
                if previous is not None and previous["data"].get("isMigratingZkBroker") and not image.fenced[broker]:
                    out.append(
                        Violation(
                            "NoKRaftBrokerTakesALiveZkBrokersId",
                            f"KRaft broker {broker} registered at offset {r['offset']} while the ZK broker's "
                            f"registration (offset {previous['offset']}, epoch {previous['data'].get('brokerEpoch')}) "
                            "was unfenced",
                            (previous, r),
                        )
                    )
            image.apply(r)
    return out


@dataclass
class BrokerRegistrations:
    """The brokers of a metadata image, replayed record by record: each one's newest registration and
    whether it is fenced (ClusterControlManager's replay: a registration starts fenced unless it says)."""

    last: dict[int, dict] = field(default_factory=dict)  # broker -> its newest RegisterBrokerRecord
    fenced: dict[int, bool] = field(default_factory=dict)

    def apply(self, r: dict) -> None:
        data = r["data"]
        broker = data.get("brokerId")
        if r["type"] == "REGISTER_BROKER_RECORD":
            self.last[broker], self.fenced[broker] = r, data.get("fenced", True)
        elif r["type"] == "BROKER_REGISTRATION_CHANGE_RECORD" and data.get("fenced", 0) != 0:
            self.fenced[broker] = data["fenced"] == 1  # 1 fenced, -1 unfenced, 0 unchanged
        elif r["type"] in ("FENCE_BROKER_RECORD", "UNFENCE_BROKER_RECORD"):
            self.fenced[data.get("id", broker)] = r["type"] == "FENCE_BROKER_RECORD"
        elif r["type"] == "UNREGISTER_BROKER_RECORD":
            self.last.pop(broker, None)
            self.fenced.pop(broker, None)

    @classmethod
    def of(cls, records: list[dict]) -> BrokerRegistrations:
        image = cls()
        for r in _live_records(records):
            image.apply(r)
        return image

    def counts(self) -> dict[str, int]:
        """As ControllerMetadataMetricsPublisher counts them for its gauges."""
        return {
            "ActiveBrokerCount": sum(1 for b in self.last if not self.fenced[b]),
            "FencedBrokerCount": sum(1 for b in self.last if self.fenced[b]),
            "MigratingZkBrokerCount": sum(1 for r in self.last.values() if r["data"].get("isMigratingZkBroker")),
        }


# ---- what brokers serve, at rest (KIP-866 §ZK Broker RPCs, KIP-500 §Broker Metadata Management) -----------
#
# At the end of a run, every broker is asked alone what it serves clients (``broker-metadata.jsonl``, a round a
# second until a round answers as the one before): its live brokers, each topic's id, each partition's leader,
# leader epoch, replicas and ISR. Where a KRaft controller is in charge at the end, a ZooKeeper-mode broker learns
# them from its UpdateMetadata, a KRaft broker from replaying the log: either way, once the cluster has settled, the
# committed image's. The image a sample is held to is the final log's as of the sample's time, or any state it
# passed through in the SERVED_SLACK_MS before (a broker applies a change a moment after it is appended). After a
# rollback a ZooKeeper controller is in charge, and ZooKeeper's state is what the brokers must serve.

BROKERS_SERVE_IMAGE = "KRaftBrokersServeCommittedImage"  # a real-run check: the model's KRaft brokers replay exactly
SERVED_SLACK_MS = 2000


def _served(sample: dict) -> dict[tuple, object]:
    """A broker's answer, entity by entity: its live brokers, each topic's id and each partition."""
    out: dict[tuple, object] = {("live brokers",): tuple(sorted(sample["brokers"]))}
    for topic in sample["topics"]:
        out[("topic", topic["name"])] = topic["id"]
        for p in topic["partitions"]:
            out[("partition", topic["name"], p["partition"])] = (
                p["leader"], p["leader_epoch"], tuple(p["replicas"]), tuple(sorted(p["isr"])))
    return out


def _image_served(topics: TopicImage, brokers: BrokerRegistrations) -> dict[tuple, object]:
    """What a broker holding this image serves, in ``_served``'s form (a fenced broker is not live)."""
    out: dict[tuple, object] = {("live brokers",): tuple(sorted(b for b in brokers.last if not brokers.fenced[b]))}
    out |= {("topic", name): topic_id for name, topic_id in topics.ids.items()}
    for (name, p), part in topics.partitions.items():
        r = part.record
        out[("partition", name, p)] = (r.leader, r.leader_epoch, part.replicas, tuple(sorted(r.isr)))
    return out


def _served_text(key: tuple, value: object) -> str:
    if value is None:
        return "none"
    if key[0] == "partition":
        leader, epoch, replicas, isr = value
        return f"leader {leader} at epoch {epoch}, replicas {list(replicas)}, ISR {list(isr)}"
    return str(list(value)) if isinstance(value, tuple) else f"id {value}"


def _brokers_serve_the_committed_image(obs: Observed) -> list[Violation]:
    """KIP-866 §ZK Broker RPCs ("UpdateMetadata ... to keep the ZK brokers' metadata up to date") and KIP-500 §Broker
    Metadata Management: at rest, each broker serves the committed image's live brokers (a fenced one left out),
    topics with their ids, and partitions with their leader, leader epoch, replicas and ISR; a deleted topic is
    served by none. A ZooKeeper-mode broker's answer is ZkBrokersConvergeToCommittedImage's, a KRaft broker's
    KRaftBrokersServeCommittedImage's."""
    last: dict[int, dict] = {}
    for sample in obs.broker_metadata:
        last[sample["broker"]] = sample
    log = _live_records(max(obs.metadata.values(), key=len, default=[]))
    if not last or not log or _zk_controlled_at_end(obs):
        return []  # a rollback's end: a ZooKeeper controller tells the brokers ZooKeeper's state (BROKERS_SERVE_ZK)
    out = []
    for broker, sample in sorted(last.items()):
        if "error" in sample:
            continue  # a broker that could not be asked serves nothing to judge
        topics, brokers, states = TopicImage(), BrokerRegistrations(), []
        for r in log:
            if r["time"] > sample["time"]:
                break
            topics.apply(r)
            brokers.apply(r)
            if not states or r["time"] >= sample["time"] - SERVED_SLACK_MS:
                states.append(_image_served(topics, brokers))
            else:
                states[0] = _image_served(topics, brokers)
        registration = brokers.last.get(broker)
        if registration is None or not states:
            continue  # not registered with KRaft: what it serves is a ZooKeeper controller's
        zk_mode = bool(registration["data"].get("isMigratingZkBroker"))
        served = _served(sample)
        differences = [
            f"{' '.join(map(str, key))}: serves {_served_text(key, served.get(key))}, the image has "
            f"{_served_text(key, states[-1].get(key))}"
            for key in sorted(set(served).union(*states), key=str)
            if all(served.get(key) != state.get(key) for state in states)
        ]
        if differences:
            out.append(Violation(
                "ZkBrokersConvergeToCommittedImage" if zk_mode else BROKERS_SERVE_IMAGE,
                f"at rest {'ZooKeeper-mode' if zk_mode else 'KRaft'} broker {broker} (round {sample['round']} of "
                f"broker-metadata.jsonl) differs from the committed image: " + "; ".join(differences[:6])
                + (f"; and {len(differences) - 6} more" if len(differences) > 6 else ""),
                (sample,),
            ))
    return out


@check("ZkBrokersConvergeToCommittedImage")
def zk_brokers_converge_to_committed_image(obs: Observed) -> list[Violation]:
    return [v for v in _brokers_serve_the_committed_image(obs) if v.invariant == "ZkBrokersConvergeToCommittedImage"]


def kraft_brokers_serve_committed_image(obs: Observed) -> list[Violation]:
    return [v for v in _brokers_serve_the_committed_image(obs) if v.invariant == BROKERS_SERVE_IMAGE]


CHECKS[BROKERS_SERVE_IMAGE] = kraft_brokers_serve_committed_image


BROKERS_SERVE_ZK = "BrokersServeZooKeeperAfterRollback"  # a real-run check: the model's brokers are told exactly


def _zk_controlled_at_end(obs: Observed) -> bool:
    """Whether /controller ends held by a ZooKeeper-mode broker (a rollback's end), not by a KRaft claim."""
    seen = obs.zk.get("/controller", [])
    return bool(seen) and seen[-1]["exists"] and _kraft_claimant(_json(seen[-1])) is None


def _zk_served(obs: Observed, zxid: int) -> tuple[dict[tuple, object], set[tuple]]:
    """What a broker told by a ZooKeeper controller serves, as ZooKeeper stood at ``zxid``, in ``_served``'s form
    (the registered brokers, each topic's id and each partition's state), and the keys a watch may have missed."""
    topics = zk_topics(obs, zxid, migrating=False)
    live = []
    for path in obs.paths("/brokers/ids/"):
        e, _ = _at(obs.zk[path], zxid)
        if e is not None and e["exists"]:
            live.append(int(path.rsplit("/", 1)[1]))
    out: dict[tuple, object] = {("live brokers",): tuple(sorted(live))}
    out |= {("topic", name): topic_id for name, topic_id in topics.ids.items()}
    for (name, p), part in topics.partitions.items():
        r = part.record
        out[("partition", name, p)] = (r.leader, r.leader_epoch, part.replicas, tuple(sorted(r.isr)))
    return out, {key for key in topics.unknown if key[0] in ("topic", "partition")}


def brokers_serve_zookeeper_after_rollback(obs: Observed) -> list[Violation]:
    """KIP-866 §Rollback to ZK: once the migration is rolled back and a ZooKeeper controller is in charge again, it
    tells every broker ZooKeeper's state (UpdateMetadata from its context, which it loaded from ZooKeeper): at rest,
    each broker serves the registered brokers, every topic with its id and every partition's leader, leader epoch,
    replicas and ISR as ZooKeeper has them at that moment, or as ZooKeeper stood in the SERVED_SLACK_MS before; a
    topic ZooKeeper no longer has, by none. What a watch may have missed is not judged. A real-run check: the
    model's brokers are told exactly."""
    if not obs.broker_metadata or not _zk_controlled_at_end(obs):
        return []
    writes = sorted((e["zxid"], e["time"]) for events in obs.zk.values() for e in events)
    last: dict[int, dict] = {}
    for sample in obs.broker_metadata:
        last[sample["broker"]] = sample
    out = []
    for broker, sample in sorted(last.items()):
        if "error" in sample:
            continue
        before = [zxid for zxid, time in writes if time < sample["time"] - SERVED_SLACK_MS]
        window = [zxid for zxid, time in writes if sample["time"] - SERVED_SLACK_MS <= time <= sample["time"]]
        zxids = before[-1:] + window
        if not zxids:
            continue
        states = [_zk_served(obs, zxid) for zxid in zxids]
        unknown = set().union(*(missed for _, missed in states))
        served = _served(sample)
        differences = [
            f"{' '.join(map(str, key))}: serves {_served_text(key, served.get(key))}, ZooKeeper has "
            f"{_served_text(key, states[-1][0].get(key))}"
            for key in sorted(set(served).union(*(state for state, _ in states)), key=str)
            if key not in unknown and ("topic", *key[1:2]) not in unknown
            and all(served.get(key) != state.get(key) for state, _ in states)
        ]
        if differences:
            out.append(Violation(
                BROKERS_SERVE_ZK,
                f"at rest after the rollback broker {broker} (round {sample['round']} of broker-metadata.jsonl) "
                "differs from ZooKeeper: " + "; ".join(differences[:6])
                + (f"; and {len(differences) - 6} more" if len(differences) > 6 else ""),
                (sample,),
            ))
    return out


CHECKS[BROKERS_SERVE_ZK] = brokers_serve_zookeeper_after_rollback


# ---- progress (the model's eventually-properties, on the run's clock) -------------------------


def _faults_healed_at(obs: Observed) -> float:
    return max((e["time"] for e in obs.operator if e.get("kind") in ("fault", "heal", "heal-skipped")), default=0)


@check("MigrationReachesDualWriteWithoutFaults")
def reaches_dual_write(obs: Observed) -> list[Violation]:
    """Once faults have healed, the runbook's migration reaches DUAL_WRITE within the bound."""
    goals = [e for e in obs.operator if e.get("kind") == "goal" and e.get("goal") == "dual-write"]
    if not goals:
        return []
    healed = _faults_healed_at(obs)
    reached = [e for e in obs.log_events("driver-transition") if e["new"] == "DUAL_WRITE"]
    deadline = max(healed, goals[0]["time"]) + PROGRESS_BOUND_S * 1000
    if not any(e["time"] <= deadline for e in reached):  # reached before the runbook asked counts too
        where, waits = _where_drivers_stood(obs, max(healed, goals[0]["time"]))
        return [
            Violation(
                "MigrationReachesDualWriteWithoutFaults",
                f"no driver reached DUAL_WRITE within {PROGRESS_BOUND_S} s of the last fault healing"
                + (f": {where}" if where else ""),
                tuple(goals) + waits,
            )
        ]
    return []


def _where_drivers_stood(obs: Observed, since: float) -> tuple[str, tuple[dict, ...]]:
    """Where each migration driver ended and why it said it waited (its last such line since ``since``), for a
    migration that made no progress; and those lines. A driver that ended INACTIVE and said nothing is a standby's,
    left out unless its controller was the last Raft leader, which is named even if its driver logged no
    transition at all (KAFKA-16563: a driver that never polled again stays UNINITIALIZED)."""
    state: dict[str, str] = {}
    for e in sorted(obs.log_events("driver-transition"), key=lambda e: e["time"]):
        state[e["node"]] = e["new"]
    waiting: dict[str, list[dict]] = defaultdict(list)
    for e in obs.log_events("driver-waiting"):
        if e["time"] >= since:
            waiting[e["node"]].append(e)
    leaders = sorted(obs.log_events("raft-leader"), key=lambda e: e["time"])
    leader = leaders[-1]["node"] if leaders else None
    parts, lines = [], []
    for node in sorted(set(state) | set(waiting) | ({leader} if leader else set())):
        if node not in waiting and state.get(node) == "INACTIVE" and node != leader:
            continue
        text = f"the driver of controller {node}{' (the last Raft leader)' if node == leader else ''} " + (
            f"ended in {state[node]}" if node in state else "logged no transition")
        if waiting[node]:
            last = waiting[node][-1]
            times = len(waiting[node])
            text += (f", logging \"{last['reason']}\" {times} time{'s' if times > 1 else ''} (the last at "
                     f"{last['process']}/logs/server.log:{last['line']})")
            lines.append(last)
        parts.append(text)
    return "; ".join(parts), tuple(lines)


UNFENCE = -1  # BrokerRegistrationChangeRecord.fenced: BrokerRegistrationFencingChange.UNFENCE


def _unfencings(log: list[dict]) -> dict[tuple[int, int], list[tuple[dict, dict | None]]]:
    """Each record that unfences a broker epoch (BrokerRegistrationChangeRecord, or UnfenceBrokerRecord before
    metadata.version 3.3), by (broker, epoch), with the AbortTransactionRecord of the metadata transaction that took it
    back (KIP-868: an aborted transaction's records are never applied), or None."""
    out: dict[tuple[int, int], list[tuple[dict, dict | None]]] = defaultdict(list)
    pending: list[tuple[int, int, dict]] | None = None
    for r in log:
        kind, data = r["type"], r["data"]
        if kind == "BEGIN_TRANSACTION_RECORD":
            pending = []
        elif kind in ("END_TRANSACTION_RECORD", "ABORT_TRANSACTION_RECORD"):
            for broker, epoch, unfencing in pending or []:
                out[(broker, epoch)].append((unfencing, r if kind == "ABORT_TRANSACTION_RECORD" else None))
            pending = None
        elif (kind == "BROKER_REGISTRATION_CHANGE_RECORD" and data.get("fenced") == UNFENCE) \
                or kind == "UNFENCE_BROKER_RECORD":
            broker, epoch = data.get("brokerId", data.get("id")), data.get("brokerEpoch", data.get("epoch"))
            if pending is not None:
                pending.append((broker, epoch, r))
            else:
                out[(broker, epoch)].append((r, None))
    for broker, epoch, unfencing in pending or []:  # an open transaction's: not taken back (yet)
        out[(broker, epoch)].append((unfencing, None))
    return out


@check("BrokerOnlineOnlyOnceUnfencingCommitted")
def broker_runs_only_on_a_kept_unfencing(obs: Observed) -> list[Violation]:
    """KIP-500 §Broker States: a broker leaves Fenced when the controller unfences it. A broker (KRaft, or ZooKeeper-
    mode and migrating: BrokerLifecycleManager) that logs its move to RUNNING at broker epoch E acts on an unfencing of
    E that KRaft's log keeps: one that only an aborted metadata transaction held was never applied (KIP-868), and KRaft
    counts the broker fenced while it serves. What a real run cannot show: whether the unfencing had committed when
    the broker was answered (the high watermark at that moment is the controllers' memory)."""
    log = max(obs.metadata.values(), key=len, default=[])
    unfencings = _unfencings(log)
    out = []
    for process, events in sorted(obs.logs.items()):
        registered: int | None = None
        for e in events:
            if e["kind"] == "kraft-broker-registered":
                registered = int(e["epoch"])
            elif e["kind"] == "kraft-broker-running" and registered is not None:
                broker = int(e["broker"])
                found = unfencings.get((broker, registered), [])
                if not found or any(abort is None for _, abort in found):
                    continue  # kept; or no unfencing in the log at all (a log cut short): nothing to judge
                unfencing, abort = found[-1]
                reason = abort["data"].get("reason")
                out.append(Violation(
                    "BrokerOnlineOnlyOnceUnfencingCommitted",
                    f"broker {broker} moved to RUNNING at broker epoch {registered} ({process}/logs/server.log:"
                    f"{e['line']}), but KRaft never unfenced that epoch: its unfencing at offset {unfencing['offset']} "
                    f"was inside a metadata transaction aborted at offset {abort['offset']}"
                    f"{f' ({reason!r})' if reason else ''}, so KRaft's image keeps broker {broker} fenced while it "
                    f"serves (a migrating ZooKeeper-mode broker then gets no control request from the KRaft "
                    f"controller)",
                    (e, unfencing, abort),
                ))
    return out


# How long a running migrating ZooKeeper-mode broker may stay fenced in KRaft's image once it registered and the
# faults healed: it heartbeats every broker.heartbeat.interval.ms (2 s) and, replaying no log, is caught up at once,
# so the first heartbeat the active controller answers unfences it; this leaves room for a controller failover and
# a loaded machine. The runbook's settle waits as long for the active controller's FencedBrokerCount to reach 0.
UNFENCE_BOUND_S = 30


@check("MigratingZkBrokerEventuallyUnfenced")
def migrating_zk_broker_unfenced(obs: Observed) -> list[Violation]:
    """KIP-866 §Broker Registration and KIP-500 §Broker States: a ZooKeeper-mode broker that registered with KRaft
    and runs on is unfenced by its next heartbeats. Each broker whose newest registration in the final log is a
    migrating ZooKeeper-mode broker's, and that runs at the run's end, is unfenced in KRaft's image by then, unless it
    registered, or the faults healed, less than UNFENCE_BOUND_S before (no time to judge). It runs at the end when it
    answered at rest; in a run that took no sample at rest (one that got stuck), when its process's last operator
    event started or healed it, judged at the run's end."""
    final = max(obs.metadata.values(), key=len, default=[])
    if not final or _zk_controlled_at_end(obs):
        return []
    image, unfencings, healed = BrokerRegistrations.of(final), _unfencings(final), _faults_healed_at(obs)
    out = []
    for broker, registration in sorted(image.last.items()):
        if not registration["data"].get("isMigratingZkBroker") or not image.fenced[broker]:
            continue
        judged = _running_at_end(obs, broker)
        since = max(healed, registration["time"])
        if judged is None or judged["time"] - since < UNFENCE_BOUND_S * 1000:
            continue
        epoch = registration["data"].get("brokerEpoch")
        taken_back = [(u, abort) for u, abort in unfencings.get((broker, epoch), []) if abort is not None]
        why = "KRaft never unfenced that epoch"
        if taken_back:
            unfencing, abort = taken_back[-1]
            why = (f"its unfencing at offset {unfencing['offset']} was inside a metadata transaction aborted at offset "
                   f"{abort['offset']}, and none of its heartbeats unfenced it again")
        out.append(Violation(
            "MigratingZkBrokerEventuallyUnfenced",
            f"broker {broker}, a running migrating ZooKeeper-mode broker registered with KRaft at broker epoch {epoch} "
            f"(offset {registration['offset']}), is still fenced in KRaft's image at the run's end, "
            f"{(judged['time'] - since) / 1000:.0f} s after it registered or the faults healed: {why} (the KRaft "
            f"controller sends a fenced broker no UpdateMetadata)",
            (registration, judged, *(taken_back[-1] if taken_back else ())),
        ))
    return out


def _running_at_end(obs: Observed, broker: int) -> dict | None:
    """The event that shows broker ``broker`` running at the run's end: its last answer at rest; without samples at
    rest, the run's end, if the last operator event on its process started or healed it. None: not known to run."""
    if obs.broker_metadata:
        samples = [e for e in obs.broker_metadata if e["broker"] == broker]
        return samples[-1] if samples and "error" not in samples[-1] else None
    process = f"broker-{broker}"
    last = [e for e in obs.operator if e.get("process") == process and e.get("kind") in ("step", "fault", "heal")]
    ends = [e for e in obs.operator if e.get("kind") == "end"]
    if not last or not ends or not (last[-1]["kind"] == "heal" or last[-1].get("action") == "start"):
        return None
    return ends[-1]


@check("LiveFencedBrokerEventuallyUnfenced")
def fenced_broker_unfenced(obs: Observed) -> list[Violation]:
    """Every KRaft broker the runbook started reaches RUNNING (unfenced) within the bound of healing."""
    out = []
    healed = _faults_healed_at(obs)
    running = defaultdict(list)
    for e in obs.log_events("kraft-broker-running"):
        running[int(e["broker"])].append(e["time"])
    for start in (
        e
        for e in obs.operator
        if e.get("kind") == "step" and e.get("role") == "kraft-broker" and e.get("action") == "start"
    ):
        deadline = max(healed, start["time"]) + PROGRESS_BOUND_S * 1000
        if not any(start["time"] - 1 <= t <= deadline for t in running[start["node"]]):
            out.append(
                Violation(
                    "LiveFencedBrokerEventuallyUnfenced",
                    f"KRaft broker {start['node']} started at {start['time']} did not reach RUNNING within "
                    f"{PROGRESS_BOUND_S} s of healing",
                    (start,),
                )
            )
    return out


@check("RollbackLosesNothingCommitted")
def rollback_loses_nothing(obs: Observed) -> list[Violation]:
    """After a rollback, ZooKeeper holds every topic KRaft committed (KIP-866 §Rollback to ZK)."""
    if not any(e.get("kind") == "step" and e.get("action") == "rollback" for e in obs.operator):
        return []
    out = []
    for controller, records in obs.metadata.items():
        topics: dict[str, dict] = {}
        for r in _live_records(records):
            if r["type"] == "TOPIC_RECORD":
                topics[r["data"]["topicId"]] = r
            elif r["type"] == "REMOVE_TOPIC_RECORD":
                topics.pop(r["data"].get("topicId"), None)
        for r in topics.values():
            seen = obs.zk.get(f"/brokers/topics/{r['data']['name']}", [])
            if not seen or not seen[-1]["exists"]:
                out.append(
                    Violation(
                        "RollbackLosesNothingCommitted",
                        f"topic {r['data']['name']} (offset {r['offset']} of controller {controller}'s log) is "
                        f"not in ZooKeeper after the rollback",
                        (r,),
                    )
                )
    return out


# ---- topics, partitions and topic configs (KIP-866 §Controller Migration, §Dual Metadata Writes) -----
#
# The model has one topic whose partitions carry a leader, an ISR and a leader epoch, and one dynamic
# config value. Its migration copies each partition's state znode as ``migrated_partition`` says (the
# controller epoch of the znode's last writer is not copied), and its dual writes keep the same fields
# equal in ZooKeeper and in the image (``ZkEqualsImageAtMigrationOffset``). The checks below read a
# real run's znodes and records in that vocabulary (``model.kraft.PartitionRecord``) and compare also
# what Kafka has and the model does not: each topic's name and id, each partition's replicas (the
# topic znode's assignment), the partition epoch (KRaft's; in ZooKeeper the state znode's version,
# which ZkTopicMigrationClient copies) and every topic config by name; and, beside topics, brokers' dynamic
# configs (/config/brokers: ConfigRecords of the BROKER resource) and the quotas of users and of client ids
# (/config/users, /config/clients: ClientQuotaRecords), which ZkConfigMigrationClient copies and dual-writes, and the
# ACLs of topics and groups (/kafka-acl/Topic, /kafka-acl/Group: AccessControlEntryRecords), which ZkAclMigrationClient
# copies and dual-writes resource by resource. Not compared: the adding and removing replicas of a reassignment in
# flight (``ZkBrokerPartitionChangesBumpLeaderEpoch`` reads how the replica set moves), the leader recovery state,
# KRaft's log directories and eligible leader replicas (KRaft only), a quota of a user and a client id together
# (/config/users/U/clients/C, which no runbook makes), ACLs of other resource types or patterns (none made), and what
# the migration also copies but no observer watches (SCRAM credentials, producer ids, delegation tokens).
#
# ZooKeeper "as of zxid Z" is each znode's last observation at or before Z. A watch can skip
# versions: a znode whose next observation skips a version may have changed unseen before Z, and is
# left out of the comparison (``Topics.unknown``), never guessed.

MIGRATION_COPIES_ZK = "MigrationCopiesZkExactly"  # a real-run check: the model's migration copies by construction
TOPIC_CONFIG = 2  # ConfigResource.Type.TOPIC: a ConfigRecord's resourceType for a topic's config
NO_LEADER_CHANGE = -2  # PartitionChangeRecord's leader when it keeps the leader (and the leader epoch)
TOPIC_RECORDS = ("TOPIC_RECORD", "PARTITION_RECORD", "PARTITION_CHANGE_RECORD", "CONFIG_RECORD", "REMOVE_TOPIC_RECORD",
                 "CLIENT_QUOTA_RECORD", "ACCESS_CONTROL_ENTRY_RECORD", "REMOVE_ACCESS_CONTROL_ENTRY_RECORD")
BROKER_CONFIG = 4  # ConfigResource.Type.BROKER: a broker's dynamic config, or every broker's (resourceName "")
ZK_DEFAULT = "<default>"  # ZooKeeper's name of a default entity (ConfigEntityName.DEFAULT): every broker, user, client
# A ClientQuotaRecord's entity type and ZooKeeper's folder for it, for the entities of one type (a user and a client id
# together, /config/users/U/clients/C, are not compared: no runbook makes one)
QUOTA_ENTITIES = {"user": "users", "client-id": "clients"}
# An AccessControlEntryRecord's codes as ZooKeeper's /kafka-acl names them (Kafka's SecurityUtils: the enum's name in
# PascalCase): ResourceType, the folder below /kafka-acl; AclOperation and AclPermissionType, an entry's fields. A
# literal resource's ACLs are the znode /kafka-acl/<type>/<name>; other patterns (/kafka-acl-extended) no runbook makes.
ACL_RESOURCE_TYPES = ("Unknown", "Any", "Topic", "Group", "Cluster", "TransactionalId", "DelegationToken", "User")
ACL_OPERATIONS = ("Unknown", "Any", "All", "Read", "Write", "Create", "Delete", "Alter", "Describe", "ClusterAction",
                  "DescribeConfigs", "AlterConfigs", "IdempotentWrite", "CreateTokens", "DescribeTokens")
ACL_PERMISSIONS = ("Unknown", "Any", "Deny", "Allow")
LITERAL_PATTERN = 3  # PatternType.LITERAL
WATCHED_ACL_RESOURCES = ("Topic", "Group")  # the /kafka-acl folders the observer watches (``observe.WATCHED_CHILDREN``)
# A change committed this long before dual write ends must be in ZooKeeper by then: 3.9.2's dual writes
# reached ZooKeeper within 141 ms of the record's append (557 changes over nine runs with faults).
DUAL_WRITE_SLACK_MS = 1000
# A controller killed or paused, or ZooKeeper down or stalled, holds dual writes back until the driver is in
# DUAL_WRITE again and has written what it missed: no coverage is asked of a run that healed so lately.
DRIVER_FAULTS = ("kill-controller", "pause-controller", "zk-outage", "pause-zookeeper")
DRIVER_CATCH_UP_MS = 30_000


@dataclass(frozen=True)
class Partition:
    """One partition as ZooKeeper or a KRaft image holds it: the model's record of it, and what Kafka adds."""

    record: PartitionRecord  # the model's: partition, leader, ISR, leader epoch
    replicas: tuple[int, ...]
    partition_epoch: int  # KRaft's; ZooKeeper's is the state znode's version

    def describe(self, epochs: bool) -> str:
        r = self.record
        text = f"replicas {list(self.replicas)}, leader {r.leader}, ISR {list(r.isr)}, leader epoch {r.leader_epoch}"
        return text + (f", partition epoch {self.partition_epoch}" if epochs else "")


@dataclass
class Topics:
    """Topics (name -> topic id), their partitions and their non-empty configs; and the other entities the migration
    copies that the runbooks make: brokers' dynamic configs (by ZooKeeper's name: a broker id, or ``ZK_DEFAULT`` for
    every broker's) and client quotas (by ZooKeeper's path below /config: ``users/alice``, ``clients/<default>``,
    ``users/bob%40example.com``: ``quota_znode_name``)."""

    ids: dict[str, str] = field(default_factory=dict)
    partitions: dict[tuple[str, int], Partition] = field(default_factory=dict)
    configs: dict[str, dict[str, str]] = field(default_factory=dict)
    broker_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    quotas: dict[str, dict[str, float]] = field(default_factory=dict)
    # a literal resource's ACLs (by ZooKeeper's path below /kafka-acl: ``Topic/audit``), each as ``_acl_entry`` shows it
    acls: dict[str, frozenset[str]] = field(default_factory=dict)
    # ("topic", name), ("partition", name, p), ("config", name), ("broker-config", name), ("quota", path), ("acl", path)
    unknown: set[tuple] = field(default_factory=set)

    def entities(self, epochs: bool) -> dict[tuple, object]:
        """Each topic's id, partition and config, each broker config and quota, keyed as ``unknown`` is, in
        comparable form."""
        out: dict[tuple, object] = {("topic", t): i for t, i in self.ids.items()}
        for (t, p), part in self.partitions.items():
            out[("partition", t, p)] = part if epochs else replace(part, partition_epoch=-1)
        out |= {("config", t): tuple(sorted(c.items())) for t, c in self.configs.items()}
        out |= {("broker-config", b): tuple(sorted(c.items())) for b, c in self.broker_configs.items()}
        out |= {("quota", q): tuple(sorted(c.items())) for q, c in self.quotas.items()}
        out |= {("acl", r): entries for r, entries in self.acls.items()}
        return out

    def differences(self, images: list[Topics], name: str, epochs: bool) -> list[str]:
        """How ZooKeeper (``self``) differs from every one of ``images`` (the first called ``name``, the
        others later states of it), entity by entity; what is unknown is left out, and so are the
        partitions and config of a topic found missing or extra."""
        zk = self.entities(epochs)
        kraft = [image.entities(epochs) for image in images]
        skip = {n for kind, n, *_ in self.unknown if kind == "topic"}
        out, reported = [], set()
        for key in sorted(set(zk).union(*kraft), key=lambda k: (k[1], k[0] != "topic", k)):
            if key in self.unknown or key[1] in skip or key[1] in reported:
                continue
            if any(zk.get(key) == values.get(key) for values in kraft):
                continue
            if key[0] == "topic" and (key not in zk or key not in kraft[0]):
                reported.add(key[1])
            what = {
                "topic": f"topic {key[1]}", "partition": f"partition {key[1]}-{key[-1]}",
                "broker-config": "every broker's dynamic config" if key[1] == ZK_DEFAULT
                else f"broker {key[1]}'s dynamic config",
                "quota": f"the quota of {key[1]}",
                "acl": f"the ACLs of {key[1]}",
            }.get(key[0], f"the config of topic {key[1]}")
            later = "" if len(images) == 1 else " (nor any later committed state)"
            out.append(
                f"{what}: ZooKeeper has {_shown(zk.get(key), epochs)}; {name} has "
                f"{_shown(kraft[0].get(key), epochs)}{later}"
            )
        return out


def _shown(value: object, epochs: bool) -> str:
    if value is None:
        return "none"
    if isinstance(value, Partition):
        return value.describe(epochs)
    if isinstance(value, frozenset):
        return "[" + ", ".join(sorted(value)) + "]"
    if isinstance(value, tuple):
        return str(dict(value))
    return f"id {value}"


@dataclass
class TopicImage(Topics):
    """The topics part of a KRaft metadata image, replayed record by record as Kafka replays them
    (PartitionRegistration.merge: a leader change bumps the leader epoch, every change the partition
    epoch; RemoveTopicRecord takes the topic's partitions and configs with it)."""

    names: dict[str, str] = field(default_factory=dict)  # topic id -> name
    acl_ids: dict[str, tuple[str, str]] = field(default_factory=dict)  # ACL id -> (its resource, its entry)

    def apply(self, r: dict) -> None:
        data, kind = r["data"], r["type"]
        if kind == "TOPIC_RECORD":
            self.ids[data["name"]], self.names[data["topicId"]] = data["topicId"], data["name"]
        elif kind == "PARTITION_RECORD" and data["topicId"] in self.names:
            p = data["partitionId"]
            record = PartitionRecord(p, data["leader"], tuple(data["isr"]), data["leaderEpoch"])
            self.partitions[(self.names[data["topicId"]], p)] = Partition(
                record, tuple(data["replicas"]), data["partitionEpoch"]
            )
        elif kind == "PARTITION_CHANGE_RECORD" and data["topicId"] in self.names:
            key = (self.names[data["topicId"]], data["partitionId"])
            old = self.partitions.get(key)
            if old is None:
                return
            moved = data.get("leader", NO_LEADER_CHANGE) != NO_LEADER_CHANGE
            record = old.record.replace(
                leader=data["leader"] if moved else old.record.leader,
                isr=tuple(data.get("isr", old.record.isr)),
                leader_epoch=old.record.leader_epoch + (1 if moved else 0),
            )
            self.partitions[key] = Partition(record, tuple(data.get("replicas", old.replicas)), old.partition_epoch + 1)
        elif kind == "CONFIG_RECORD" and data.get("resourceType") == TOPIC_CONFIG:
            config = self.configs.setdefault(data["resourceName"], {})
            if data.get("value") is None:
                config.pop(data["name"], None)
            else:
                config[data["name"]] = data["value"]
            if not config:
                del self.configs[data["resourceName"]]
        elif kind == "REMOVE_TOPIC_RECORD" and data["topicId"] in self.names:
            topic = self.names.pop(data["topicId"])
            self.ids.pop(topic, None)
            self.configs.pop(topic, None)
            self.partitions = {k: v for k, v in self.partitions.items() if k[0] != topic}
        elif kind == "CONFIG_RECORD" and data.get("resourceType") == BROKER_CONFIG:
            _set(self.broker_configs, data["resourceName"] or ZK_DEFAULT, data["name"], data.get("value"))
        elif kind == "CLIENT_QUOTA_RECORD" and len(data.get("entity", ())) == 1:
            [entity] = data["entity"]
            kind_of = entity.get("entityType")
            # an entity type KRaft does not know (Kafka 3.4's migration wrote ZooKeeper's folder name, "users") is
            # kept under a name of its own, so that a comparison shows it beside the quota missing
            folder = QUOTA_ENTITIES.get(kind_of, f"(entity type {kind_of!r}) ")
            name = f"{folder}{'' if folder.endswith(' ') else '/'}{quota_znode_name(entity.get('entityName'))}"
            _set(self.quotas, name, data["key"], None if data.get("remove") else float(data["value"]))
        elif kind == "ACCESS_CONTROL_ENTRY_RECORD":
            resource = f"{ACL_RESOURCE_TYPES[data['resourceType']]}/{data['resourceName']}"
            if data["patternType"] != LITERAL_PATTERN:
                resource = f"(pattern type {data['patternType']}) {resource}"
            entry = _acl_entry(data["principal"], data["host"], ACL_OPERATIONS[data["operation"]],
                               ACL_PERMISSIONS[data["permissionType"]])
            self.acl_ids[data["id"]] = resource, entry
            self.acls[resource] = self.acls.get(resource, frozenset()) | {entry}
        elif kind == "REMOVE_ACCESS_CONTROL_ENTRY_RECORD" and data["id"] in self.acl_ids:
            resource, entry = self.acl_ids.pop(data["id"])
            self.acls[resource] = self.acls[resource] - {entry}
            if not self.acls[resource]:
                del self.acls[resource]

    def snapshot(self) -> Topics:
        return Topics(dict(self.ids), dict(self.partitions), {t: dict(c) for t, c in self.configs.items()},
                      {b: dict(c) for b, c in self.broker_configs.items()},
                      {q: dict(c) for q, c in self.quotas.items()}, dict(self.acls))

    @classmethod
    def of(cls, records: list[dict]) -> TopicImage:
        image = cls()
        for r in records:
            image.apply(r)
        return image


def _set(entities: dict[str, dict], name: str, key: str, value: object) -> None:
    """``entities[name][key] = value``, or the key removed when ``value`` is None; an entity left empty is removed,
    as ZooKeeper and the image leave no empty one."""
    values = entities.setdefault(name, {})
    if value is None:
        values.pop(key, None)
    else:
        values[key] = value
    if not values:
        del entities[name]


def _at(events: list[dict], zxid: int) -> tuple[dict | None, bool]:
    """A znode's last observation at or before ``zxid`` (None: none), and whether it is known to be
    the znode as it was at ``zxid``: no version between it and the next observation went unseen, and
    its data was kept (a recording cut down to what other checks read may leave it out)."""
    before = [e for e in events if e["zxid"] <= zxid]
    after = [e for e in events if e["zxid"] > zxid]
    last = before[-1] if before else None
    if last is not None and last["exists"] and not last.get("data"):
        return last, False
    if not after or not after[0]["exists"]:
        return last, True
    nxt = after[0]
    if last is not None and last["exists"] and nxt["czxid"] == last["czxid"]:
        return last, nxt["version"] == last["version"] + 1
    return last, nxt["czxid"] > zxid  # a znode created after zxid: absent at zxid, or unknown


def zk_topics(obs: Observed, zxid: int, migrating: bool) -> Topics:
    """ZooKeeper's topics as of ``zxid``, read as ZkTopicMigrationClient reads them. ``migrating``:
    as the migration reads them, a partition with no state znode as Kafka initializes it (its
    replicas as the ISR, the first the leader, epochs 0) and a topic pending deletion left out."""
    out = Topics()
    pending = set()
    for path in obs.paths("/admin/delete_topics/"):
        e, _ = _at(obs.zk[path], zxid)
        if e is not None and e["exists"]:
            pending.add(path.rsplit("/", 1)[1])
    for path in obs.paths("/brokers/topics/"):
        topic = path.rsplit("/", 1)[1]
        e, known = _at(obs.zk[path], zxid)
        if not known:
            out.unknown.add(("topic", topic))
        if e is None or not e["exists"] or (migrating and topic in pending):
            continue
        body = _json(e)
        out.ids[topic] = body.get("topic_id", "")
        for p, replicas in body.get("partitions", {}).items():
            state, known = _at(obs.zk.get(f"{path}/partitions/{p}/state", []), zxid)
            if not known:
                out.unknown.add(("partition", topic, int(p)))
            if state is not None and state["exists"]:
                s = _json(state)
                zk_state = PartitionState(s.get("leader"), s.get("leader_epoch"), tuple(s.get("isr", ())), -1)
                partition = Partition(migrated_partition(int(p), zk_state), tuple(replicas), state["version"])
            elif migrating and replicas:
                partition = Partition(PartitionRecord(int(p), replicas[0], tuple(replicas), 0), tuple(replicas), 0)
            else:
                continue
            out.partitions[(topic, int(p))] = partition
        config, known = _at(obs.zk.get(f"/config/topics/{topic}", []), zxid)
        if not known:
            out.unknown.add(("config", topic))
        if config is not None and config["exists"] and _json(config).get("config"):
            out.configs[topic] = dict(_json(config)["config"])
    for folder, kind, into in (("brokers", "broker-config", out.broker_configs), ("users", "quota", out.quotas),
                               ("clients", "quota", out.quotas)):
        for path in obs.paths(f"/config/{folder}/"):
            name = path.split("/", 2)[2] if kind == "quota" else path.rsplit("/", 1)[1]
            e, known = _at(obs.zk[path], zxid)
            if not known:
                out.unknown.add((kind, name))
            value = _config_entity(kind, e) if e is not None and e["exists"] else None
            if value:
                into[name] = dict(value)
    for resource in WATCHED_ACL_RESOURCES:
        for path in obs.paths(f"/kafka-acl/{resource}/"):
            name = path.split("/", 2)[2]
            e, known = _at(obs.zk[path], zxid)
            if not known:
                out.unknown.add(("acl", name))
            entries = _acl_entries(e) if e is not None and e["exists"] else None
            if entries:
                out.acls[name] = entries
    return out


def _acl_entry(principal: str, host: str, operation: str, permission: str) -> str:
    """One ACL of a resource as the checks show it: ``User:alice Allow Read from *``."""
    return f"{principal} {permission} {operation} from {host}"


def _acl_entries(e: dict) -> frozenset[str] | None:
    """A /kafka-acl/<type>/<name> znode's ACLs (AclAuthorizer's JSON: {"version":1,"acls":[{"principal",
    "permissionType", "operation", "host"}]}); None for a znode whose data a cut-down recording left out."""
    if not e.get("data"):
        return None
    return frozenset(_acl_entry(a["principal"], a["host"], a["operation"], a["permissionType"])
                     for a in _json(e).get("acls", ()))


def quota_znode_name(entity_name: str | None) -> str:
    """ZooKeeper's znode name for a ClientQuotaRecord's entity name: the default entity (KRaft's null name) is
    ``ZK_DEFAULT``; any other name is stored sanitized (Kafka's Sanitizer.sanitize: URL-encoded, with ``*`` and the
    space percent-encoded too, so every byte but ASCII letters, digits and ``._-`` becomes %XX). The empty name is a
    user or client id of its own, not the default: Kafka before 3.6.2 migrated defaults so (KAFKA-16411)."""
    if entity_name is None:
        return ZK_DEFAULT
    if entity_name == "":
        return "(the empty name)"
    return "".join(chr(b) if chr(b).isascii() and (chr(b).isalnum() or chr(b) in "._-") else f"%{b:02X}"
                   for b in entity_name.encode())


def _config_entity(kind: str, e: dict) -> tuple[tuple[str, object], ...] | None:
    """A /config/brokers, /config/users or /config/clients znode's values in comparable form: a quota's as numbers
    (ZooKeeper holds strings, the image doubles); None for a znode whose data a cut-down recording left out."""
    if not e.get("data"):
        return None
    values = _json(e).get("config", {})
    return tuple(sorted((k, float(v) if kind == "quota" else v) for k, v in values.items()))


@dataclass(frozen=True)
class Migration:
    """The initial migration as a run shows it: its records, the claim it ran under, where it ended."""

    records: list[dict]  # the TOPIC/PARTITION/CONFIG records it wrote
    claim: dict  # the /controller observation of the KRaft claim it ran under
    end: int  # its last offset (3.6 on: its transaction's END_TRANSACTION_RECORD)


def _migration(obs: Observed, log: list[dict]) -> Migration | None:
    """The committed migration in ``log``: 3.6 on, the last "ZK Migration" transaction that ended.
    Before 3.6 there is no transaction: the records written under the claim up to the offset the
    first /migration write after it recorded."""
    claims = [e for e in obs.existing("/controller") if _json(e).get("kraftControllerEpoch", -1) >= 0]
    found: tuple[list[dict], int] | None = None
    pending: list[dict] | None = None
    for r in log:
        if r["type"] == "BEGIN_TRANSACTION_RECORD":
            pending = [r] if r["data"].get("name") == "ZK Migration" else None
        elif r["type"] == "END_TRANSACTION_RECORD" and pending:
            found, pending = (pending[1:], r["offset"]), None
        elif r["type"] == "ABORT_TRANSACTION_RECORD":
            pending = None
        elif pending is not None:
            pending.append(r)
    if found is not None:
        records, end = found
        start = records[0]["time"] if records else log[-1]["time"]
        claim = [c for c in claims if c["time"] <= start]
        if not claim:
            return None
        return Migration([r for r in records if r["type"] in TOPIC_RECORDS], claim[-1], end)
    if obs.version >= (3, 6, 0) or not claims:
        return None
    first = next((e for b, e in _migration_znodes(obs) if b.get("kraft_metadata_offset", -1) >= 0), None)
    if first is None:
        return None
    claim = [c for c in claims if c["mzxid"] < first["mzxid"]]
    if not claim:
        return None
    end = _json(first)["kraft_metadata_offset"]
    records = [
        r
        for r in _live_records(log)
        if r["type"] in TOPIC_RECORDS and claim[-1]["time"] <= r["time"] and r["offset"] <= end
    ]
    return Migration(records, claim[-1], end)


def migration_copies_zk_exactly(obs: Observed) -> list[Violation]:
    """KIP-866 §Controller Migration ("copy the existing metadata from ZK and write it into the KRaft
    metadata log", in a single transaction), §Initial Data Migration: the migration's topic, partition,
    config and quota records are exactly ZooKeeper's as of the KRaft claim it ran under (nothing but
    that controller writes them once it has claimed ZooKeeper): every topic with its id, every
    partition with its replicas, leader, ISR, leader epoch and partition epoch, every topic config,
    every broker's dynamic config, every user's and client id's quota; nothing missing and nothing else."""
    log = max(obs.metadata.values(), key=len, default=[])
    migration = _migration(obs, log)
    if migration is None:
        return []
    claim = migration.claim
    zk = zk_topics(obs, claim["mzxid"], migrating=True)
    name = f"the migration (up to offset {migration.end})"
    return [
        Violation(MIGRATION_COPIES_ZK, f"{d} (ZooKeeper as of the claim, zxid {claim['mzxid']})", (claim,))
        for d in zk.differences([TopicImage.of(migration.records)], name, epochs=True)
    ]


CHECKS[MIGRATION_COPIES_ZK] = migration_copies_zk_exactly


def _zk_entity(path: str, e: dict) -> tuple[tuple, object] | None:
    """A topic znode as an entity of ``Topics.entities`` (a partition by the model's record alone)."""
    parts = path.split("/")
    if not e.get("data"):
        return None  # left out of a cut-down recording
    if path.startswith("/brokers/topics/") and len(parts) == 4:
        return ("topic", parts[3]), _json(e).get("topic_id")
    if path.startswith("/brokers/topics/") and len(parts) == 7 and parts[6] == "state":
        s = _json(e)
        state = PartitionState(s.get("leader"), s.get("leader_epoch"), tuple(s.get("isr", ())), -1)
        return ("partition", parts[3], int(parts[5])), migrated_partition(int(parts[5]), state)
    if path.startswith("/config/topics/") and len(parts) == 4:
        return ("config", parts[3]), tuple(sorted(_json(e).get("config", {}).items()))
    if path.startswith("/config/brokers/") and len(parts) == 4:
        return ("broker-config", parts[3]), _config_entity("broker-config", e)
    if path.startswith(("/config/users/", "/config/clients/")) and len(parts) == 4:
        return ("quota", f"{parts[2]}/{parts[3]}"), _config_entity("quota", e)
    if path.startswith("/kafka-acl/") and len(parts) == 4:
        return ("acl", f"{parts[2]}/{parts[3]}"), _acl_entries(e)
    return None


def dual_writes_follow_commits(obs: Observed) -> list[Violation]:
    """KIP-866 §Dual Metadata Writes (write-behind): each topic, partition state and topic config znode
    written after the migration, before dual write ends, holds a state of it that the log had appended
    by then (``CROSS_CHANNEL_SLACK_MS`` allowed between the clocks): a partition's leader, ISR and
    leader epoch, a topic's id, a config (or none yet: ZooKeeper creates a topic's config empty)."""
    log = max(obs.metadata.values(), key=len, default=[])
    migration = _migration(obs, log)
    if migration is None:
        return []
    end = min(_dual_write_ends(obs), log[-1]["time"])
    image, states = TopicImage(), []  # (append time, the entities then)
    for r in _live_records(log):
        if r["type"] in TOPIC_RECORDS:
            image.apply(r)
            entities = image.entities(epochs=True)
            for key, value in list(entities.items()):
                if isinstance(value, Partition):
                    entities[key] = value.record
            states.append((r["time"], entities))
    out = []
    for path, events in obs.zk.items():
        for e in events:
            entity = _zk_entity(path, e) if e["exists"] and migration.claim["mzxid"] < e["mzxid"] else None
            if entity is None or e["time"] > end or entity[1] == ():
                continue
            key, value = entity
            if not any(t <= e["time"] + CROSS_CHANNEL_SLACK_MS and values.get(key) == value for t, values in states):
                out.append(
                    Violation(
                        "ZkWritesFollowKRaftCommits",
                        f"{path} written in dual write (mzxid {e['mzxid']}) with {e['data']}, which the log had not "
                        "committed by then",
                        (e,),
                    )
                )
    return out


def _dual_write_ends(obs: Observed) -> int:
    """When the runbook ends dual write: it begins finalizing or rolling back, or the run ends."""
    for e in obs.operator:
        step = e.get("step", "")
        if e.get("kind") == "step-begins" and step.startswith(("finalize-controller", "deprovision")):
            return e["time"]
    ends = [e["time"] for e in obs.operator if e.get("kind") == "end"]
    return ends[-1] if ends else max((e["time"] for events in obs.zk.values() for e in events), default=0)


def _fault_near(obs: Observed, time: int) -> bool:
    """Whether a fault that holds the driver back was unhealed at ``time``, or healed too shortly before
    it for the driver to catch up (``DRIVER_CATCH_UP_MS``)."""
    struck = 0
    for e in obs.operator:
        if e["time"] > time:
            break
        if e.get("fault") not in DRIVER_FAULTS:
            continue
        if e.get("kind") == "fault":
            struck += 1
        elif e.get("kind") in ("heal", "heal-skipped"):
            struck -= 1
            if e["time"] > time - DRIVER_CATCH_UP_MS:
                return True
    return struck > 0


@check("ZkEqualsImageAtMigrationOffset")
def zk_equals_image_at_migration_offset(obs: Observed) -> list[Violation]:
    """KIP-866 §Dual Metadata Writes, §Migration State ZNode, judged at the end of dual write (the
    runbook begins finalizing or rolling back, or the run ends; the final dump of the log, if that is
    earlier): ZooKeeper's topics, partition states and topic configs, as its last write before then
    left them, are the committed image's at /migration's offset, deletions included; and every topic
    change committed ``DUAL_WRITE_SLACK_MS`` before the end has reached ZooKeeper by then, unless a
    fault held the driver back (``_fault_near``). A later committed state is accepted too, entity by
    entity: Kafka writes a change's znodes before it moves /migration's offset past it (and 3.4 never
    moves it during dual write), so ZooKeeper may be ahead of the offset, never behind it or beside
    the log."""
    log = max(obs.metadata.values(), key=len, default=[])
    migration = _migration(obs, log)
    if migration is None:
        return []
    # the final dump ends the log a little before the run ends: ZooKeeper is judged as of the dump
    end = min(_dual_write_ends(obs), log[-1]["time"])
    seen = (e for events in obs.zk.values() for e in events if e["exists"] and e["time"] <= end)
    zxid = max((e["mzxid"] for e in seen), default=0)
    writes = [
        body["kraft_metadata_offset"]
        for body, e in _migration_znodes(obs)
        if migration.claim["mzxid"] < e["mzxid"] <= zxid and body.get("kraft_metadata_offset", -1) >= migration.end
    ]
    if not writes or writes[-1] > log[-1]["offset"]:
        return []
    live = [r for r in _live_records(log) if r["type"] in TOPIC_RECORDS]
    target = writes[-1]
    if not _fault_near(obs, end):
        target = max([target, *(r["offset"] for r in live if r["time"] <= end - DUAL_WRITE_SLACK_MS)])
    image, images = TopicImage(), []
    for r in live:
        if r["offset"] > target and not images:
            images.append(image.snapshot())
        image.apply(r)
        if r["offset"] > target:
            images.append(image.snapshot())
    images = images or [image.snapshot()]
    name = f"the image at offset {target}" + ("" if target == writes[-1] else f" (/migration says {writes[-1]})")
    return [
        Violation("ZkEqualsImageAtMigrationOffset", f"at the end of dual write, {d} (ZooKeeper as of zxid {zxid})")
        for d in zk_topics(obs, zxid, migrating=False).differences(images, name, epochs=False)
    ]


# ---- what ZooKeeper-mode brokers are told (KIP-866 §ZK Broker RPCs) --------------------------------
#
# From the migration's end until it is finalized, the KRaft controller tells ZooKeeper-mode brokers of
# every partition change with a LeaderAndIsr (MigrationPropagator sends one to each replica of a changed
# partition), and a ZooKeeper-mode broker applies a LeaderAndIsr only at a newer leader epoch than its
# own (ReplicaManager.becomeLeaderOrFollower). ZooKeeper's controller bumps the leader epoch with every
# change a broker did not make itself (a new leader, replicas added or removed, the ISR shrunk); the
# KRaft controller bumps it only where PartitionChangeBuilder says (a leader change, replicas removed,
# in migration an ISR shrink), never when replicas are added. An ISR expansion comes from the leader's
# own AlterPartition, which it has applied already: it needs no bump.

ZK_BROKER_EPOCH_BUMP = "ZkBrokerPartitionChangesBumpLeaderEpoch"


def _may_run_in_zk_mode(brokers: BrokerRegistrations, broker: int) -> bool:
    """Whether ``broker`` may still run in ZooKeeper mode as the log stands: every broker of a migrating
    cluster began in ZooKeeper mode (KIP-866 §Broker Migration), and only a registration of a KRaft
    broker (``isMigratingZkBroker`` false) shows it restarted in KRaft mode. A broker rolled back to
    ZooKeeper mode registers as a migrating ZK broker again; one the log shows no registration of (a
    recording cut down to the topic records) is taken as in ZooKeeper mode."""
    last = brokers.last.get(broker)
    return last is None or bool(last["data"].get("isMigratingZkBroker"))


def _changes_zk_brokers_act_on(obs: Observed, old: Partition, data: dict) -> list[str]:
    """What in a PARTITION_CHANGE_RECORD a ZooKeeper-mode replica must apply from a LeaderAndIsr."""
    replicas, isr = data.get("replicas", old.replicas), data.get("isr", old.record.isr)
    removed = [b for b in old.replicas if b not in replicas]
    added = [b for b in replicas if b not in old.replicas]
    dropped = [b for b in old.record.isr if b not in isr]
    what = []
    if added and not obs.zk_brokers_take_equal_leader_epoch:
        what.append(f"adds replica{'s' * (len(added) > 1)} {', '.join(map(str, added))}")
    if removed:
        what.append(f"removes replica{'s' * (len(removed) > 1)} {', '.join(map(str, removed))}")
    if dropped:
        what.append(f"drops {', '.join(map(str, dropped))} from the ISR")
    return what


def zk_broker_partition_changes_bump_leader_epoch(obs: Observed) -> list[Violation]:
    """KIP-866 §ZK Broker RPCs ("when the KRaft controller handles AlterPartitions or performs a leader
    election, we will need to send LeaderAndIsr requests to ZK brokers") and §Rejected Alternatives,
    Online Broker Migration (the ZK brokers' code left "mostly unchanged"): from the end of the initial
    migration until POST_MIGRATION is committed, every PARTITION_CHANGE_RECORD that a ZooKeeper-mode
    replica must act on (replicas removed or added, the ISR shrunk) sets the leader, so that the leader
    epoch moves, if a replica before or after the change may still run in ZooKeeper mode
    (``_may_run_in_zk_mode``). A leader change always moves it (PartitionRegistration.merge)."""
    log = max(obs.metadata.values(), key=len, default=[])
    migration = _migration(obs, log)
    if migration is None:
        return []
    image, brokers, out = TopicImage(), BrokerRegistrations(), []
    for r in _live_records(log):
        data = r["data"]
        if r["type"] == "ZK_MIGRATION_STATE_RECORD":
            if obs.migration_states.get(data.get("zkMigrationState")) is ZkMigrationState.POST_MIGRATION:
                break  # finalized: the controller sends ZooKeeper-mode brokers nothing more
        elif r["type"] == "PARTITION_CHANGE_RECORD" and r["offset"] > migration.end:
            topic = image.names.get(data["topicId"])
            old = image.partitions.get((topic, data["partitionId"]))
            before = old.replicas if old else ()
            replicas = list(data.get("replicas", before))
            zk_mode = [b for b in sorted({*replicas, *before}) if _may_run_in_zk_mode(brokers, b)]
            what = _changes_zk_brokers_act_on(obs, old, data) if old and zk_mode else []
            if old and what and data.get("leader", NO_LEADER_CHANGE) == NO_LEADER_CHANGE:
                several = len(zk_mode) > 1
                brokers_named = f"broker{'s' * several} {', '.join(map(str, zk_mode))} appl{'y' if several else 'ies'}"
                out.append(
                    Violation(
                        ZK_BROKER_EPOCH_BUMP,
                        f"the PARTITION_CHANGE_RECORD at offset {r['offset']} {' and '.join(what)} of "
                        f"{topic}-{data['partitionId']} (replicas {list(old.replicas)} -> {replicas}) at leader epoch "
                        f"{old.record.leader_epoch}, which it does not bump; ZooKeeper-mode {brokers_named} a "
                        "LeaderAndIsr only at a newer leader epoch",
                        (r,),
                    )
                )
        image.apply(r)
        brokers.apply(r)
    return out


CHECKS[ZK_BROKER_EPOCH_BUMP] = zk_broker_partition_changes_bump_leader_epoch


@dataclass(frozen=True)
class Assignment:
    """A partition's replicas as a KRaft log holds them, with a reassignment's adding and removing replicas."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def reassigning(self) -> bool:
        return bool(self.adding or self.removing)

    def changed(self, data: dict) -> Assignment:
        """After a PARTITION_CHANGE_RECORD: a field it leaves out is unchanged."""
        return Assignment(*(tuple(data.get(name, getattr(self, field_name))) for name, field_name in (
            ("replicas", "replicas"), ("isr", "isr"), ("addingReplicas", "adding"), ("removingReplicas", "removing"))))


@check("ReassignmentCompletesWithTargetInIsr")
def reassignment_completes_with_target_in_isr(obs: Observed) -> list[Violation]:
    """A record that completes a reassignment (its adding and removing replicas cleared, the removing ones gone)
    leaves every replica it added in the ISR, and from 3.8.0 every replica
    (``Observed.reassignment_needs_every_target_in_isr``; PartitionReassignmentReplicas.maybeCompleteReassignment),
    and one that moves a partition with no reassignment in progress adds no replica outside the ISR. A cancelled
    reassignment (back to the replicas it began from, the adding ones gone) adds none."""
    log = _live_records(max(obs.metadata.values(), key=len, default=[]))
    names: dict[str, str] = {}
    parts: dict[tuple[str, int], Assignment] = {}
    out = []
    for r in log:
        data = r["data"]
        if r["type"] == "TOPIC_RECORD":
            names[data["topicId"]] = data["name"]
        elif r["type"] == "REMOVE_TOPIC_RECORD":
            parts = {key: a for key, a in parts.items() if key[0] != data.get("topicId")}
        elif r["type"] == "PARTITION_RECORD":
            parts[(data["topicId"], data["partitionId"])] = Assignment(
                tuple(data["replicas"]), tuple(data["isr"]), tuple(data.get("addingReplicas") or ()),
                tuple(data.get("removingReplicas") or ()))
        elif r["type"] == "PARTITION_CHANGE_RECORD" and (key := (data["topicId"], data["partitionId"])) in parts:
            was = parts[key]
            now = parts[key] = was.changed(data)
            if now.reassigning or now.replicas == was.replicas:
                continue
            cancelled = was.adding and set(now.replicas) == set(was.replicas) - set(was.adding)
            if cancelled:
                joined = set()
            elif was.reassigning:  # its replicas already name the adding ones
                joined = set(now.replicas) if obs.reassignment_needs_every_target_in_isr else set(was.adding)
            else:
                joined = set(now.replicas) - set(was.replicas)
            outside = sorted(joined - set(now.isr))
            if outside:
                how = "completes the reassignment of" if was.reassigning else "moves"
                out.append(Violation(
                    "ReassignmentCompletesWithTargetInIsr",
                    f"the PARTITION_CHANGE_RECORD at offset {r['offset']} {how} {names.get(key[0], key[0])}-{key[1]}"
                    f" (replicas {list(was.replicas)} -> {list(now.replicas)}) with "
                    f"replica{'s' * (len(outside) > 1)} {', '.join(map(str, outside))} outside the ISR "
                    f"{list(now.isr)}",
                    (r,),
                ))
    return out


# A LeaderAndIsr that fails inside a ZooKeeper-mode broker (the handler threw: UNKNOWN_SERVER_ERROR for the whole
# request) may leave it half-applied: ReplicaManager.makeFollowers takes each partition's new leader epoch before
# it creates the partition's log and its fetcher, so an exception part-way (a ZooKeeper read of the topic's config
# in an expired session, Kafka 3.9) leaves the partitions before it at the new epoch with no fetcher. Only a newer
# leader epoch makes the broker act on that partition again (an equal one it has taken is "not a new epoch"), or a
# restart. Other error answers (a stale controller or broker epoch) are refusals decided before anything changes.
FAILED_LEADER_AND_ISR = "FailedLeaderAndIsrIsRepaired"
_TOPIC_ERRORS = re.compile(r"LeaderAndIsrTopicError\(topicId=([\w-]+), partitionErrors=\[(.*?)\]\)")
_PARTITION_ERROR = re.compile(r"partitionIndex=(\d+), errorCode=(-?\d+)")


def _failed_partitions(response: str) -> list[tuple[str, int]]:
    """(topic id, partition) of each partition a LeaderAndIsr response answers with an error."""
    return [(topic_id, int(p)) for topic_id, errors in _TOPIC_ERRORS.findall(response)
            for p, code in _PARTITION_ERROR.findall(errors) if code != "0"]


def failed_leader_and_isr_is_repaired(obs: Observed) -> list[Violation]:
    """KIP-866 §ZK Broker RPCs (the KRaft controller sends ZooKeeper-mode brokers the LeaderAndIsr a ZK controller
    would) and KIP-380 §Motivation (a ZK controller that sees a broker's new epoch, a bounce, sends it its state
    again): when a KRaft controller's LeaderAndIsr failed inside a ZooKeeper-mode broker (UNKNOWN_SERVER_ERROR), each
    partition it named is, by the end of the run, deleted, no longer on that broker, back in its ISR, moved to a
    newer leader epoch after the failure, or the broker restarted. A KRaft controller resends on neither the error
    nor the broker's new ZooKeeper session (its KRaft registration does not change), so a partition the failure
    left at the new epoch without a fetcher stays out of the ISR for good. A real-run check: the model's
    LeaderAndIsr handling is atomic."""
    log = _live_records(max(obs.metadata.values(), key=len, default=[]))
    final = TopicImage.of(log)
    out = []
    for e in obs.log_events("leader-and-isr-failed"):
        if e["error"] != "UNKNOWN_SERVER_ERROR" or not e["process"].startswith("controller-"):
            continue
        broker, failed_at = int(e["broker"]), e["time"]
        if any(s["kind"] == "process-started" and s["time"] > failed_at for s in obs.logs.get(f"broker-{broker}", ())):
            continue
        then = TopicImage.of([r for r in log if r["time"] <= failed_at])
        stuck = []
        for topic_id, p in _failed_partitions(e["response"]):
            name = final.names.get(topic_id)
            now = final.partitions.get((name, p)) if name is not None else None
            if now is None or broker not in now.replicas or broker in now.record.isr:
                continue
            before = then.partitions.get((name, p))
            if before is None or now.record.leader_epoch <= before.record.leader_epoch:
                stuck.append(f"{name}-{p}")
        if stuck:
            several = len(stuck) > 1
            out.append(Violation(
                FAILED_LEADER_AND_ISR,
                f"broker {broker} failed controller {e['node']}'s LeaderAndIsr (UNKNOWN_SERVER_ERROR, "
                f"{e['process']}/logs/server.log:{e['line']}); {', '.join(sorted(stuck))} "
                f"{'were' if several else 'was'} never sent to it again at a newer leader epoch, it did not restart, "
                f"and it is outside {'their' if several else 'its'} ISR at the end",
                (e,),
            ))
    return out


CHECKS[FAILED_LEADER_AND_ISR] = failed_leader_and_isr_is_repaired


RUNBOOK_PROGRESS = "RunbookReachesItsEnd"  # the real run's own liveness property: no model state names it
ACKNOWLEDGED_WRITES = "AcknowledgedWritesSurvive"  # what a client sees: the model has no records in topics


def runbook_reaches_its_end(obs: Observed) -> list[Violation]:
    """KIP-866 §Migration Overview: every operator step completes once faults heal (the goal waited on is named)."""
    return [
        Violation(
            RUNBOOK_PROGRESS,
            f"the runbook was stuck: {e['goal']} not reached within {PROGRESS_BOUND_S} s of the last heal",
            (e,),
        )
        for e in obs.operator
        if e.get("kind") == "stuck"
    ]


CHECKS[RUNBOOK_PROGRESS] = runbook_reaches_its_end


def acknowledged_writes_survive(obs: Observed) -> list[Violation]:
    """KIP-866 §Motivation ("without impact to partition availability and ... client applications"):
    every write Kafka acknowledged (acks=all) is read back, at the partition and offset it was given."""
    read = [e for e in obs.operator if e.get("kind") == "ledger"]
    if not read or not read[-1].get("read_complete"):
        return []  # the ledger could not be read whole: nothing to judge
    found = {(r["partition"], r["offset"]): r["seq"] for r in obs.ledger}
    in_partition = {(r["partition"], r["seq"]) for r in obs.ledger}
    out = []
    for ack in obs.acknowledged:
        if "partition" not in ack:
            continue  # not acknowledged: an error was reported instead
        if ack.get("offset") is None:
            # persisted with no offset: a retried batch the broker had already written is answered
            # DUPLICATE_SEQUENCE_NUMBER, which the idempotent client takes as delivered, without an
            # offset (seen while a partition's leader hung in its shutdown); judged by its partition
            if (ack["partition"], ack["seq"]) not in in_partition:
                out.append(
                    Violation(
                        ACKNOWLEDGED_WRITES,
                        f"write {ack['seq']}, acknowledged at ledger-{ack['partition']} (offset unknown), "
                        "is not in the partition",
                        (ack,),
                    )
                )
            continue
        there = found.get((ack["partition"], ack["offset"]))
        if there != ack["seq"]:
            what = "nothing" if there is None else f"write {there}"
            out.append(
                Violation(
                    ACKNOWLEDGED_WRITES,
                    f"write {ack['seq']}, acknowledged at ledger-{ack['partition']} offset {ack['offset']}, "
                    f"reads back as {what}",
                    (ack,),
                )
            )
    return out


CHECKS[ACKNOWLEDGED_WRITES] = acknowledged_writes_survive

# A real-run progress check on ZooKeeper's log. The model parks a driver whose dual write failed on /migration's
# version (ActiveDriverNeverStaysInactive); Kafka's stays in DUAL_WRITE and tries again every poll, so the harm shows
# as writes that keep failing.
DUAL_WRITES_RESUME = "DualWritesResumeOnceFaultsHeal"
_BAD_VERSION = -103  # KeeperException.Code.BADVERSION


def _first_error(t: dict) -> int | None:
    return next((o["error"] for o in t["ops"] if o["op"] == "error"), None)


def dual_writes_resume_once_faults_heal(obs: Observed) -> list[Violation]:
    """KIP-866 §Dual Metadata Writes, §Failure Modes (a ZooKeeper write that fails holds the log back, within a bound,
    until it succeeds): once the last fault has healed, the KRaft controller that holds the claim does not go on
    failing its writes on a version, as a driver that holds a /migration version ZooKeeper no longer has does (Kafka
    3.6.2 to 3.9.2, after a resent write that had applied: every later write fails, the full sync before dual write
    as well as the dual writes). A write of the claimant's that fails with BadVersion more than
    ``DRIVER_RETRY_BOUND_S`` after the last heal (the driver has tried again since), with no newer claim made, is the
    violation, so a run the runbook saw stuck ``PROGRESS_BOUND_S`` after the heal is judged on the retries it made
    meanwhile. The claimant's writes are those of the session that claimed, and those of any session that checks
    /controller_epoch at the version the claim gave it (only the claimant knows it: a session that expired in a
    ZooKeeper stall is replaced, and the claim, a persistent znode, stays). A deposed claimant's failures (a newer
    claim bumped /controller_epoch) are its fencing."""
    bound_ms = _faults_healed_at(obs) + DRIVER_RETRY_BOUND_S * 1000
    claiming: _Claim | None = None
    late: list[dict] = []
    for t in obs.zk_txns:
        for o in t["ops"]:
            if o.get("path") == "/controller" and o["op"] in ("create", "setData"):
                claimant = _kraft_claimant(_json(o))
                epoch = next((x.get("version") for x in t["ops"]
                              if x.get("path") == "/controller_epoch" and x["op"] == "setData"), None)
                claiming = None if claimant is None else _Claim(t["session"], claimant[0], epoch)
                late = []
        if (claiming is not None and t["failed"] and claiming.made(t) and t["time"] > bound_ms
                and _first_error(t) == _BAD_VERSION):
            late.append(t)
    if not late:
        return []
    sessions = ", ".join(f"0x{session:x}" for session in dict.fromkeys(t["session"] for t in late))
    return [Violation(
        DUAL_WRITES_RESUME,
        f"controller {claiming.controller}'s ZooKeeper writes (session {sessions}) still failed with BadVersion "
        f"{DRIVER_RETRY_BOUND_S} s after the last heal: {len(late)} of them, from zxid 0x{late[0]['zxid']:x} to "
        f"0x{late[-1]['zxid']:x}",
        (late[0], late[-1]),
    )]


@dataclass(frozen=True)
class _Claim:
    """A KRaft controller's claim of /controller, as ZooKeeper's log shows it."""

    session: int
    controller: int | None
    epoch_version: int | None  # the version /controller_epoch took in the claim's multi

    def made(self, t: dict) -> bool:
        """Whether the transaction ``t`` is the claimant's: its session's, or conditional on the claim's epoch."""
        first = t["ops"][0] if t["ops"] else {}
        return t["session"] == self.session or (
            self.epoch_version is not None and first.get("op") == "check"
            and first.get("path") == "/controller_epoch" and first.get("version") == self.epoch_version)


CHECKS[DUAL_WRITES_RESUME] = dual_writes_resume_once_faults_heal


# ---- gauges, sampled over JMX (KIP-866 §Metrics) ----------------------------------------------
#
# A gauge is read from outside at intervals, so two processes are never read at one instant and a
# process shows what it had applied when it was read. The checks below compare each process only
# with itself in order (within one incarnation: an unreachable sample or a restart ends one), or
# compare the last samples of a completed run, taken once everything had settled ("final").

GAUGES_FOLLOW_THE_LOG = "ZkMigrationStateGaugeFollowsTheLog"
ONE_ACTIVE_CONTROLLER = "OneActiveControllerAtRest"
BROKER_GAUGES = "BrokerCountGaugesMatchTheLog"
NO_METADATA_ERRORS = "MetadataAppliesWithoutErrors"
METADATA_ERROR_GAUGES = ("MetadataErrorCount", "metadata-apply-error-count", "metadata-load-error-count")
NOT_LOADED = -1  # ControllerMetadataMetrics' ZkMigrationState before the first image is published


def _incarnations(obs: Observed) -> dict[str, list[list[dict]]]:
    """Each process's reachable samples, split where it was unreachable (stopped, killed, paused)."""
    out: dict[str, list[list[dict]]] = defaultdict(lambda: [[]])
    for e in obs.jmx:
        runs = out[e["process"]]
        if not e["up"]:
            if runs[-1]:
                runs.append([])
        elif e.get("metrics"):
            runs[-1].append(e)
    return {p: [r for r in runs if r] for p, runs in out.items()}


def _final_samples(obs: Observed) -> dict[str, dict]:
    """The reachable last samples of a run that completed, when every scheduled fault had healed."""
    ends = [e for e in obs.operator if e.get("kind") == "end"]
    if not ends or ends[-1].get("outcome") != "completed":
        return {}
    return {e["process"]: e for e in obs.jmx if e.get("final") and e["up"] and e.get("metrics")}


@check("HighWatermarkNeverDecreases")
def high_watermark_never_decreases(obs: Observed) -> list[Violation]:
    """Raft's high-watermark gauge, per process and incarnation, once known (it reads -1 before)."""
    out = []
    for process, runs in _incarnations(obs).items():
        for samples in runs:
            known = [e for e in samples if e["metrics"].get("high-watermark", -1) >= 0]
            for a, b in _pairs(known):
                if b["metrics"]["high-watermark"] < a["metrics"]["high-watermark"]:
                    out.append(
                        Violation(
                            "HighWatermarkNeverDecreases",
                            f"{process}'s high watermark went {a['metrics']['high-watermark']} -> "
                            f"{b['metrics']['high-watermark']} while it ran",
                            (a, b),
                        )
                    )
    return out


def zk_migration_state_gauge_follows_the_log(obs: Observed) -> list[Violation]:
    """KIP-866 §Migration Overview ("these four will be exposed as the ZkMigrationState metric") and
    §Metrics: a KRaft controller's gauge only shows states its log committed, in the log's order,
    and at rest the state the log ended in. Kafka 3.9 reports it on every controller, not only the
    active one as the KIP says, and a ZooKeeper-mode broker reports ZK (4), which the KIP does not
    have (reference real-kafka.md §2.6): only controllers' samples are judged."""
    if not obs.metadata:
        return []
    log = max(obs.metadata.values(), key=len)  # every controller's log agrees on what it committed
    states = [state for state, _ in _migration_states(obs, log)]
    order = [s for i, s in enumerate(states) if i == 0 or s != states[i - 1]] or [ZkMigrationState.NONE]
    if order[0] is not ZkMigrationState.NONE:
        # Differs: an image starts at NONE (FeaturesImage's default), and a new controller publishes the
        # bootstrap records' image before its PRE_MIGRATION commits: the gauge shows a NONE the log never wrote
        order = [ZkMigrationState.NONE, *order]
    out = []
    for process, runs in _incarnations(obs).items():
        if not process.startswith("controller-"):
            continue
        for samples in runs:
            position = 0
            for e in samples:
                value = e["metrics"].get("ZkMigrationState", NOT_LOADED)
                if value == NOT_LOADED:
                    continue
                state = obs.migration_states.get(value)
                if state is None or state not in order[position:]:
                    out.append(
                        Violation(
                            GAUGES_FOLLOW_THE_LOG,
                            f"{process} reported ZkMigrationState {value} "
                            f"({state.name if state else 'not a state'}) after {order[position].name}; its log went "
                            f"{' -> '.join(s.name for s in order)}",
                            (e,),
                        )
                    )
                    break
                position = order.index(state, position)
    for process, e in _final_samples(obs).items():
        value = e["metrics"].get("ZkMigrationState")
        if process.startswith("controller-") and value is not None and obs.migration_states.get(value) != order[-1]:
            out.append(
                Violation(
                    GAUGES_FOLLOW_THE_LOG,
                    f"at rest {process} reported ZkMigrationState {value}; the log ended in {order[-1].name}",
                    (e,),
                )
            )
    return out


CHECKS[GAUGES_FOLLOW_THE_LOG] = zk_migration_state_gauge_follows_the_log


def one_active_controller_at_rest(obs: Observed) -> list[Violation]:
    """KIP-866 §Controller Leadership and KIP-500 §The Controller Quorum: one controller leads the
    cluster, a ZooKeeper-mode broker or a KRaft controller, never both and never none. Judged at
    rest: in flight, a deposed controller reports itself active until it learns (a zombie)."""
    final = _final_samples(obs)
    active = {p: e for p, e in final.items() if e["metrics"].get("ActiveControllerCount", 0) >= 1}
    if not final or len(active) == 1 or not any("ActiveControllerCount" in e["metrics"] for e in final.values()):
        return []
    who = ", ".join(sorted(active)) or "no process"
    return [Violation(ONE_ACTIVE_CONTROLLER, f"at rest {who} reported ActiveControllerCount 1", tuple(final.values()))]


CHECKS[ONE_ACTIVE_CONTROLLER] = one_active_controller_at_rest


def broker_count_gauges_match_the_log(obs: Observed) -> list[Violation]:
    """KIP-866 §Metrics (MigratingZkBrokerCount: "ZK brokers that are registered with KRaft") and
    KIP-500 §Broker States: at rest, a controller's broker gauges count its log's registrations.

    The logs are dumped one controller after another at the run's end, before the last samples: a record committed
    meanwhile (a broker that a healed fault let register again, say) is in the gauges and in the later dumps, not in
    the earlier ones. A controller whose dump lacks a record another's holds is judged by its last sample before that
    record was written, which shows what its dump shows."""
    out = []
    for process, e in _final_samples(obs).items():
        controller = int(process.rsplit("-", 1)[1]) if process.startswith("controller-") else None
        if controller not in obs.metadata:
            continue
        records = obs.metadata[controller]
        last = records[-1]["offset"] if records else -1
        missing = [r["time"] for log in obs.metadata.values() for r in log if r["offset"] > last]
        if missing:
            before = [s for s in obs.jmx if s["process"] == process and s.get("up") and s.get("metrics")
                      and s["time"] < min(missing)]
            if not before:
                continue
            e = before[-1]
        if e["metrics"].get("ZkMigrationState") == -1:
            # a controller that has not loaded its first image yet (a restarted one, still replaying) counts nothing
            # yet: its gauges read 0 (3.8.1, a controller killed and started again 4 s before the run's end)
            continue
        expected = BrokerRegistrations.of(obs.metadata[controller]).counts()
        for gauge, count in expected.items():
            value = e["metrics"].get(gauge)
            if value is not None and value != count:
                out.append(
                    Violation(
                        BROKER_GAUGES,
                        f"at rest {process} reported {gauge} {value}; its log's registrations give {count}",
                        (e,),
                    )
                )
    return out


CHECKS[BROKER_GAUGES] = broker_count_gauges_match_the_log


def metadata_applies_without_errors(obs: Observed) -> list[Violation]:
    """KIP-500 §Broker Metadata Management: every node replays every committed record. Kafka counts
    the records a controller or broker failed to apply or load; the counts stay 0."""
    out = []
    reported: set[tuple[str, str]] = set()
    for e in obs.jmx:
        for gauge in METADATA_ERROR_GAUGES:
            value = e.get("metrics", {}).get(gauge)
            if value and (e["process"], gauge) not in reported:
                reported.add((e["process"], gauge))
                out.append(Violation(NO_METADATA_ERRORS, f"{e['process']} reported {gauge} {value}", (e,)))
    return out


CHECKS[NO_METADATA_ERRORS] = metadata_applies_without_errors


# ---- what cannot be seen from outside ------------------------------------------------------------

_NO_FEATURE_UPDATES = "the runbooks make no KIP-584 feature update in ZooKeeper mode, where /feature would show it"
_MEMORY = "held only in a process's memory; no channel shows it"
NOT_OBSERVABLE: dict[str, str] = {
    "EphemeralsOnlyForLiveSessions": "ZooKeeper's log shows sessions opening and closing, but whether an ephemeral"
    " znode outlived its session is the server's tree, which the watches see only when it changes",
    "OnlyCurrentControllerWritesApply": "which controller epoch a write was made under is " + _MEMORY,
    "NoStaleControlRequestApplied": "which control requests a broker applied is " + _MEMORY,
    "ControllerSeesEveryBounce": "the controller's broker-epoch cache is " + _MEMORY + " (its log shows deltas only)",
    "StaleControlledShutdownMovesNothing": "ControlledShutdown requests are not logged with their epochs",
    "LeaderEpochsNeverDecrease": "partition state znodes are watched but brokers' own leader epochs are " + _MEMORY,
    "OneLeaderPerLeaderEpoch": "which broker believes it leads is " + _MEMORY,
    "LeaderIsInIsr": "the model's one-topic partitions are not Kafka's; partition znodes are kept in the timeline only",
    "FinalizedFeaturesWellFormed": _NO_FEATURE_UPDATES,
    "FeatureEpochNeverDecreases": _NO_FEATURE_UPDATES,
    "DisabledFeaturesFinalizeNothing": _NO_FEATURE_UPDATES,
    "BrokerFeatureCacheNeverGoesBack": "a broker's feature cache is " + _MEMORY,
    "CommittedRecordsOnMajority": "followers' logs are dumped only at the end of a run, not at each commit",
    "FencedBrokersNeverServed": "what a broker serves to clients is not sampled",
    "UnfencedOnlyWhenCaughtUp": "a broker's replay position is " + _MEMORY,
    "BrokerEpochGivenByController": "the broker epoch a broker holds is " + _MEMORY,
    "TopicDeletionsCompletedByMigration": (
        "the runbooks delete no topic in ZooKeeper mode (the deletion in dual write goes through KRaft): "
        "/admin/delete_topics is watched, but no deletion is ever pending there"
    ),
    "WriteBehindLagBounded": (
        "Kafka's ZkWriteBehindLag gauge is sampled (jmx.jsonl), but Kafka sets no bound to check it against "
        "(KIP-866 §Dual Metadata Writes: 'We may also determine a bound'); the model's bound is its own"
    ),
    "UpdateMetadataBeforeLeaderAndIsr": "control requests to ZooKeeper brokers are not logged one by one",
    "OnlyAllowedWritesInPreMigration": "the model's allowed record kinds are not mapped to Kafka's record types yet",
    # the model-independent properties (model.end_to_end_invariants): not built for real runs yet
    "ZkHoldsWhatZkBrokersAreTold": "control requests to ZooKeeper brokers are not logged one by one",
    "HeartbeatingBrokerNeverFenced": "the heartbeats a controller answered are not logged one by one",
    "ServedMetadataSurvivesFailover": "a broker's replayed metadata is " + _MEMORY,
    "BrokerTakesOnlyCommittedRegistration": "when a broker took its epoch from the registration's answer is " + _MEMORY,
    "KRaftZkWritesFailOnlyOnStaleReads": "ZooKeeper's log shows the driver's failed multis, but an ErrorTxn carries"
    " only its code, not the path of the op that failed, and Kafka's dual write fails with NodeExists by design when"
    " it creates a parent that exists (90 such multis in 128 runs of 3.9.2); ZooKeeper here is one server, which"
    " never lags",
    "ZkBrokersDropDeletedTopic": "the partitions a ZooKeeper broker hosts are " + _MEMORY,
    "ZkBrokersDropReassignedReplicas": "the partitions a ZooKeeper broker hosts are " + _MEMORY,
    "PendingDeletionNeverLiveInKRaft": "the runbooks delete no topic in ZooKeeper mode: no deletion is ever pending"
    " in /admin/delete_topics",
    "StaleHeartbeatWritesNothing": "the heartbeats a controller answered, with their broker epochs, are not logged one"
    " by one",
}
# sometimes-properties are witnesses, not checks: a real run's are read from trace validation's explaining path
# (``validate.witnesses_on_path``) and counted in a campaign's report
NOT_OBSERVABLE |= {
    p.name: "a witness (sometimes), not a check: a real campaign's report counts the runs whose explaining path"
    " (trace validation) reaches it"
    for p in PROPERTIES
    if p.kind.value == "sometimes"
}
NOT_OBSERVABLE |= {
    name: "an eventually-property whose trigger is " + _MEMORY
    for name in (
        "EveryLiveBrokerEventuallyRegistered",
        "ControllerEventuallySeesEveryBroker",
        "DriverLeavesWaitForBrokersWhenReady",
        "ActiveDriverNeverStaysInactive",
    )
}


def run_checks(obs: Observed) -> list[Violation]:
    violations = []
    for name in sorted(CHECKS):
        violations.extend(CHECKS[name](obs))
    return violations
