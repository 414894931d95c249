"""A real Kafka 3.9 cluster migrated from ZooKeeper to KRaft under a fault, observed from outside and checked.

These start real processes (Debian's ZooKeeper, Kafka's jars from Maven Central, installed by
scripts/setup.sh into the cache): one short run in the default suite, the longer ones behind the
``slow`` marker. Timing varies from run to run, so nothing here waits a fixed time or expects a
particular interleaving: the run waits on what the processes log, and the tests assert what must
hold in every interleaving (KIP-866 §Migration Overview, §Failure Modes).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from properties.cli import main
from properties.kafka import install
from properties.kafka.run import kafka_answered
from tests.zk_server import SKIP_ENV

# Kills the KRaft controller as the last broker begins its roll into migration mode (the trigger), and lets it back
# before that broker registers: seed 6's draw, 3.05 s into the roll, met Kafka 3.9.2's aborted-unfencing bug in about
# one run of seven (the broker's unfencing inside the migration's transaction, which the failover aborts), a finding
# of its own (tests/test_kafka_checks.py), not what these tests are about.
PLAN = Path(__file__).parent / "data" / "kafka-killed-controller-as-last-broker-rolls-plan.json"

# A real Kafka runs with the real ZooKeeper server: the switch that skips the real-ZooKeeper tests skips these too.
needs_real_zookeeper = pytest.mark.skipif(os.environ.get(SKIP_ENV) == "1", reason=f"{SKIP_ENV}=1")


def _processes_under(folder: Path) -> list[int]:
    """The pids whose command line names ``folder``: what a run left running."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if str(folder).encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.fixture(scope="module")
def migrated(tmp_path_factory):
    """One real migration to dual write, the controller killed mid-migration, as ``kraftcheck kafka run`` does it."""
    if os.environ.get(SKIP_ENV) == "1":
        pytest.skip(f"{SKIP_ENV}=1: the tests against a real ZooKeeper server (and so a real Kafka) are skipped")
    install.install(install.DEFAULT_VERSION)
    folder = tmp_path_factory.mktemp("kafka") / "run"
    code = main(["kafka", "run", "--plan", str(PLAN), "--out", str(folder)])
    return code, folder


def _operator(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "operator.jsonl").read_text().splitlines()]


def test_kafka_migration_to_dual_write_with_a_killed_controller_is_clean(migrated):
    """The controller killed during the trigger comes back, the driver reaches DUAL_WRITE, and no check fires."""
    code, folder = migrated
    events = _operator(folder)
    assert [e["fault"] for e in events if e["kind"] == "fault"] == ["kill-controller"]
    assert [e["process"] for e in events if e["kind"] == "heal"] == ["controller-3000"]
    assert events[-1]["outcome"] == "completed"
    assert json.loads((folder / "violations.json").read_text()) == []
    validation = json.loads((folder / "validation.json").read_text())
    assert validation["outcome"] == "explained", validation["report"]  # every visible change is a model step
    assert validation["explained"] == validation["total"] > 10
    assert code == 0


def test_kafka_run_observes_every_channel(migrated):
    """ZooKeeper's /migration, the decoded metadata log and the driver's log lines all reached the run's folder."""
    _, folder = migrated
    zk = [json.loads(line) for line in (folder / "zk.jsonl").read_text().splitlines()]
    migration = [json.loads(e["data"]) for e in zk if e["path"] == "/migration" and e["exists"]]
    assert migration and migration[-1]["kraft_metadata_offset"] > 0
    dumps = sorted((folder / "metadata").glob("*-final-controller-3000.txt"))
    assert dumps and "ZK_MIGRATION_STATE_RECORD" in dumps[0].read_text()
    log = (folder / "controller-3000" / "logs" / "server.log").read_text()
    assert "to DUAL_WRITE state" in log
    ledger = [e for e in _operator(folder) if e["kind"] == "ledger"][-1]
    assert ledger["written"] > 0 and ledger["read_complete"]  # the client wrote all along, and read it all back
    timeline = [json.loads(line) for line in (folder / "timeline.jsonl").read_text().splitlines()]
    offsets = [e["offset"] for e in timeline if e["channel"] == "metadata"]
    assert offsets == sorted(offsets)  # the merged timeline keeps the log's own order
    # at rest, each ZooKeeper-mode broker was asked alone what it serves: the ledger, orders and refunds; payments,
    # deleted in dual write, by none (ZkBrokersConvergeToCommittedImage found it equal to the image)
    served = [e for e in timeline if e["channel"] == "broker-metadata"]
    assert {e["broker"] for e in served} == {0, 1, 2} and not any("error" in e for e in served)
    assert {t["name"] for t in served[-1]["topics"]} >= {"ledger", "orders", "refunds"}
    assert "payments" not in {t["name"] for e in served for t in e["topics"]}


def test_kafka_run_mirrors_topics_changed_in_dual_write(migrated):
    """KIP-866 §Dual Metadata Writes: refunds, created in dual write, orders' fourth partition, added then, and
    payments, deleted then, reach ZooKeeper, and the topic checks had them to judge (they are among the checks
    that found nothing)."""
    from properties.kafka.checks import TopicImage, _live_records
    from properties.kafka.run import load

    _, folder = migrated
    obs = load(folder)
    log = max(obs.metadata.values(), key=len)
    assert "REMOVE_TOPIC_RECORD" in {r["type"] for r in log}
    assert {"ledger", "orders", "refunds"} <= set(TopicImage.of(_live_records(log)).ids) and "payments" not in set(
        TopicImage.of(_live_records(log)).ids
    )
    assert not obs.zk["/brokers/topics/payments"][-1]["exists"]
    assert obs.zk["/brokers/topics/refunds"][-1]["exists"]
    # orders, grown from 3 partitions to 4 in dual write: the new partition's state znode is written too
    assert sorted(p for t, p in TopicImage.of(_live_records(log)).partitions if t == "orders") == [0, 1, 2, 3]
    assert obs.zk["/brokers/topics/orders/partitions/3/state"][-1]["exists"]
    # orders-0, moved in dual write by Kafka's ReassignPartitionsCommand: ZooKeeper's assignment is the new one
    moved = next(e for e in _operator(folder) if e.get("action") == "reassign")
    assert json.loads(obs.zk["/brokers/topics/orders"][-1]["data"])["partitions"]["0"] == moved["replicas"]
    assert TopicImage.of(_live_records(log)).partitions[("orders", 0)].replicas == tuple(moved["replicas"])


def test_kafka_run_reads_zookeepers_transaction_log(migrated, capsys, tmp_path):
    """ZooKeeper's own log of every write (the zk-txn channel, read after the run) holds the KRaft claim and the dual
    writes fenced by /migration, which OneZkWriterAfterClaim judged clean; a write of the ZooKeeper controller's
    session after the claim, not conditional on /migration, is one more writer (KIP-866 §Controller Leadership)."""
    _, folder = migrated
    txns = [json.loads(line) for line in (folder / "zk-txns.jsonl").read_text().splitlines()]
    assert [t["zxid"] for t in txns] == sorted(t["zxid"] for t in txns) and txns[0]["zxid"] == 1
    claim = next(t for t in txns if any(o.get("path") == "/controller" and o["op"] == "create" and
                                        json.loads(o["data"])["kraftControllerEpoch"] >= 0 for o in t["ops"]))
    after = [t for t in txns if t["zxid"] > claim["zxid"] and not t["failed"]]
    assert any(o.get("path", "").startswith("/brokers/topics") for t in after for o in t["ops"])
    assert all(any(o.get("path") == "/migration" for o in t["ops"]) for t in after
               if any(o.get("path", "").startswith("/brokers/topics") for o in t["ops"]))
    zk_controller = next(t["session"] for t in txns if any(
        o.get("path") == "/controller" and o["op"] == "create" and o.get("ephemeral") for o in t["ops"]))
    copy = tmp_path / "run"
    os.system(f"cp -r {folder} {copy}")
    stray = {"channel": "zk-txn", "zxid": txns[-1]["zxid"] + 1, "session": zk_controller, "time": txns[-1]["time"],
             "type": "setData", "failed": False, "ops": [{"op": "setData", "path": "/config/topics/orders",
                                                          "version": 9, "data": '{"version":1,"config":{}}'}]}
    with open(copy / "zk-txns.jsonl", "a") as f:
        f.write(json.dumps(stray) + "\n")
    capsys.readouterr()
    assert main(["kafka", "check", str(copy)]) == 1
    assert "VIOLATION OneZkWriterAfterClaim" in capsys.readouterr().out


def test_kafka_run_samples_every_process_over_jmx(migrated):
    """KIP-866 §Metrics from outside: the controller's gauges followed the migration to MIGRATION, the
    killed controller was seen unreachable, and every process was sampled once more at rest."""
    _, folder = migrated
    samples = [json.loads(line) for line in (folder / "jmx.jsonl").read_text().splitlines()]
    controller = [e for e in samples if e["process"] == "controller-3000"]
    assert any(not e["up"] for e in controller)  # killed during the trigger
    states = [e["metrics"]["ZkMigrationState"] for e in controller if "ZkMigrationState" in e.get("metrics", {})]
    assert states[-1] == 1  # MIGRATION, in Kafka 3.5+'s numbering
    final = {e["process"]: e for e in samples if e.get("final")}
    assert set(final) == {"controller-3000", "broker-0", "broker-1", "broker-2"}
    assert final["controller-3000"]["metrics"]["MigratingZkBrokerCount"] == 3
    assert sum(e["metrics"].get("ActiveControllerCount", 0) for e in final.values()) == 1  # the KRaft controller


def test_kafka_run_leaves_nothing_running(migrated):
    """Every process the run started is gone once it returns."""
    _, folder = migrated
    assert _processes_under(folder) == []


def test_kafka_check_finds_a_seeded_bug_in_a_real_run(migrated, capsys, tmp_path):
    """The recorded run re-checked offline catches a /controller_epoch that went back (KIP-866 §Controller
    Leadership)."""
    _, folder = migrated
    assert main(["kafka", "check", str(folder)]) == 0
    copy = tmp_path / "run"
    os.system(f"cp -r {folder} {copy}")
    zk = [json.loads(line) for line in (copy / "zk.jsonl").read_text().splitlines()]
    last = [e for e in zk if e["path"] == "/controller_epoch" and e["exists"]][-1]
    went_back = last | {
        "data": str(int(last["data"]) - 1),
        "mzxid": last["mzxid"] + 1000,
        "version": last["version"] + 1,
    }
    with open(copy / "zk.jsonl", "a") as f:
        f.write(json.dumps(went_back) + "\n")
    capsys.readouterr()
    assert main(["kafka", "check", str(copy)]) == 1
    assert "VIOLATION ControllerEpochNeverDecreases" in capsys.readouterr().out


def test_kafka_check_finds_a_lost_write_in_a_real_run(migrated, capsys, tmp_path):
    """An acknowledged write missing from the ledger read back is a lost write (KIP-866 §Motivation)."""
    _, folder = migrated
    copy = tmp_path / "run"
    os.system(f"cp -r {folder} {copy}")
    lines = (copy / "ledger.jsonl").read_text().splitlines()
    (copy / "ledger.jsonl").write_text("\n".join(lines[:-1]) + "\n")
    capsys.readouterr()
    assert main(["kafka", "check", str(copy)]) == 1
    assert "VIOLATION AcknowledgedWritesSurvive" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["kafka", "run", "--version", "3.3.2"], "has no ZooKeeper-to-KRaft migration"),
        (["kafka", "run", "--version", "three"], "is not of the form MAJOR.MINOR.PATCH"),
        (["kafka", "run", "--kafka-dir", "/nonexistent"], "not a folder"),
        (["kafka", "check", "/nonexistent"], "is not a real-Kafka run's folder"),
    ],
)
def test_kafka_cli_bad_input_is_one_line_and_exit_2(argv, message, capsys):
    """Bad options name what is wrong in one line and exit 2 before anything starts."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_kafka_cli_refuses_a_used_out_folder(tmp_path, capsys):
    """A run's folder holds one run: a folder with something in it is refused, and left as it was."""
    (tmp_path / "keep.txt").write_text("x")
    assert main(["kafka", "run", "--out", str(tmp_path)]) == 2
    assert "is not empty" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


@needs_real_zookeeper
@pytest.mark.slow
# Each draws one fault of --faults all: 32 kills the active controller while the last broker rolls into migration
# mode (the trigger), 5 stops ZooKeeper then, 7 pauses the active controller while broker 1 rolls (no stall of
# ZooKeeper in dual write: that loses a dual write, a Kafka finding of its own, test_kafka_topic_checks.py).
@pytest.mark.parametrize("seed", [32, 5, 7])
def test_kafka_full_migration_with_three_controllers_is_clean(seed, tmp_path):
    """Three controllers, every step to finalization, one process fault: clean, and finalized (KIP-866 §Finalizing)."""
    folder = tmp_path / "run"
    code = main(
        [
            "kafka",
            "run",
            "--seed",
            str(seed),
            "--controllers",
            "3",
            "--runbook",
            "finalize",
            "--faults",
            "all",
            "--out",
            str(folder),
        ]
    )
    assert _operator(folder)[-1]["outcome"] == "completed"
    assert code == 0


@needs_real_zookeeper
@pytest.mark.slow
def test_kafka_4_quorum_with_feature_updates_is_clean(tmp_path):
    """Kafka 4.1: three controllers, three brokers, a process fault, metadata.version upgraded, a downgrade
    asked safe then unsafe (KIP-584 §Changes to Kafka Controller, AllowDowngrade): whatever Kafka answers,
    no check fires."""
    install.install("4.1.1")
    folder = tmp_path / "run"
    code = main(["kafka", "run", "--version", "4.1.1", "--seed", "1", "--controllers", "3", "--out", str(folder)])
    events = _operator(folder)
    assert [e["command"][0] for e in events if e.get("action") == "update-features"] == [
        "upgrade",
        "downgrade",
        "downgrade",
    ]
    assert events[-1]["outcome"] == "completed"
    assert code == 0


@pytest.mark.slow
@pytest.mark.parametrize("version", ["3.4.1", "3.6.2"])
def test_kafka_3_kraft_born_feature_updates_reach_kafka(version, tmp_path):
    """The kraft runbook on releases before KIP-919's --bootstrap-controller (3.7) and before
    FeatureCommand moved to kafka-tools (3.6): each update is answered by Kafka, the upgrade taken
    and both downgrades from a level that changed metadata refused (KIP-584 §Changes to Kafka
    Controller); none is the tool failing to start."""
    install.install(version)
    folder = tmp_path / "run"
    code = main(["kafka", "run", "--version", version, "--runbook", "kraft", "--faults", "none", "--out", str(folder)])
    updates = [e for e in _operator(folder) if e.get("action") == "update-features"]
    assert [(e["command"][0], e["refused"]) for e in updates] == [
        ("upgrade", False),
        ("downgrade", True),
        ("downgrade", True),
    ]
    assert all("Could not downgrade metadata.version" in e["answer"] for e in updates[1:])
    validation = json.loads((folder / "validation.json").read_text())
    assert validation["outcome"] == "explained", validation["report"]  # Kafka's answers are the model's decisions
    assert code == 0


def test_only_kafkas_answer_is_recorded_as_a_refusal():
    refused = (
        "Could not downgrade metadata.version to 7. Invalid metadata.version 7. Unsafe metadata downgrade is not "
        "supported in this version.\n1 out of 1 operation(s) failed."
    )
    assert kafka_answered(refused)
    assert not kafka_answered("Caused by: java.lang.ClassNotFoundException: org.apache.kafka.tools.FeatureCommand")
    assert not kafka_answered("argparse: unrecognized arguments: '--bootstrap-controller'")


def test_kafka_4_cannot_run_the_migration(capsys):
    """4.x has no ZooKeeper mode (KAFKA-17613): the migration runbooks are refused in one line."""
    assert main(["kafka", "run", "--version", "4.1.1", "--runbook", "finalize"]) == 2
    assert "has no ZooKeeper mode" in capsys.readouterr().err


@needs_real_zookeeper
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_kafka_run_interrupted_leaves_nothing_running(signum, tmp_path):
    """kraftcheck stopped mid-run (SIGTERM), or killed outright (SIGKILL: no handler runs), takes its cluster
    with it: the kernel kills each process whose parent died (PR_SET_PDEATHSIG)."""
    install.install(install.DEFAULT_VERSION)
    folder = tmp_path / "run"
    command = ["kafka", "run", "--seed", "0", "--runbook", "dual-write", "--faults", "none", "--out", str(folder)]
    interrupt_leaves_nothing_running(command, folder, "broker-*/logs/server.log", signum)


def interrupt_leaves_nothing_running(command: list[str], folder: Path, started: str, signum: int,
                                     env: dict[str, str] | None = None) -> None:
    """Runs ``kraftcheck COMMAND``, sends it ``signum`` once a broker's log under ``folder`` matches ``started``
    (its cluster is up), and asserts that no process naming ``folder`` outlives it; kills any that did."""
    run = subprocess.Popen([sys.executable, "-m", "properties.cli", *command],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        deadline = time.monotonic() + 120
        while not list(folder.glob(started)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _processes_under(folder), "no Kafka process started within 120 s"
        run.send_signal(signum)
        run.wait(60)
        deadline = time.monotonic() + 30
        while _processes_under(folder) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _processes_under(folder) == []
    finally:
        run.kill()
        for pid in _processes_under(folder):
            os.kill(pid, signal.SIGKILL)


def test_kafka_cli_refuses_an_unwritable_out(capsys):
    """An --out that cannot be made is one line and exit 2, before any process starts."""
    assert main(["kafka", "run", "--out", "/proc/kraftcheck-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--out /proc/kraftcheck-run" in err[0]


def _registered_at_most_twice(obs):
    """A seeded checker bug: "a ZooKeeper broker registers at most twice, at its start and at its roll into
    migration mode". It forgets that a broker whose session expired registers again (KIP-380 §Proposed
    Changes), so it fires on a real run only when a broker really lost its session and came back."""
    from properties.kafka.checks import Violation

    out = []
    for path in obs.paths("/brokers/ids/"):
        czxids = sorted({e["czxid"] for e in obs.existing(path)})
        if len(czxids) > 2:
            out.append(Violation("BrokerEpochGrowsWithEachRegistration", f"{path} registered {len(czxids)} times"))
    return out


@needs_real_zookeeper
@pytest.mark.slow
def test_kafka_shrink_makes_a_real_failing_run_short(tmp_path, monkeypatch, capsys):
    """A real run broken by a seeded checker bug, shrunk on real clusters: seed 28 pauses broker 0 past its
    session while broker 1 rolls (it registers a third time) and kills the controller during the write in dual
    write. Only the pause is needed: the kill goes, the client's writes and the optional write go, and a broker
    goes; broker 1's roll, during which the pause strikes, stays. The shrunk plan replays with --plan and breaks
    the check again, and nothing is left running."""
    from properties.kafka import checks
    from properties.kafka.run import plan_from_json

    monkeypatch.setitem(checks.CHECKS, "BrokerEpochGrowsWithEachRegistration", _registered_at_most_twice)
    install.install(install.DEFAULT_VERSION)
    folder = tmp_path / "run"
    argv = ["kafka", "run", "--seed", "28", "--runbook", "dual-write", "--fault-count", "2", "--out", str(folder)]
    assert main(argv) == 1
    assert main(["kafka", "shrink", str(folder), "--shrink-minutes", "30", "--tries", "2"]) == 1
    out = capsys.readouterr().out
    assert "BrokerEpochGrowsWithEachRegistration shrunk: faults 2 -> 1" in out
    shrunk = plan_from_json(json.loads((folder / "shrunk-plan.json").read_text()))
    assert [(f.kind, f.step) for f in shrunk.schedule] == [("pause-broker", "roll-broker-1-migrating")]
    assert (shrunk.brokers, shrunk.client, shrunk.skip) == (2, False, ("write-during-dual-write",))
    log = json.loads((folder / "shrink.json").read_text())
    assert log["finished"] and log["shrunk"]["size"]["steps"] < log["original"]["size"]["steps"]
    assert _processes_under(folder) == []
    replay = tmp_path / "replay"
    assert main(["kafka", "run", "--plan", str(folder / "shrunk-plan.json"), "--out", str(replay)]) == 1
    ran = json.loads((replay / "run.json").read_text())
    assert plan_from_json(ran) == shrunk and ran["drawn"] is False
    assert _processes_under(tmp_path) == []


ABORTED_UNFENCING_PLAN = Path(__file__).parent / "data" / "kafka-3.9-unfencing-aborted-plan.json"


def _unfencing_aborted(records: list[dict], broker: int) -> bool | None:
    """Whether ``broker``'s last unfencing in a controller's log lies inside a metadata transaction that was then
    aborted (True), or outside any or in one that ended (False); None when the log unfences it nowhere."""
    unfencings = [r["offset"] for r in records if r["type"] == "BROKER_REGISTRATION_CHANGE_RECORD"
                  and r["data"].get("brokerId") == broker and r["data"].get("fenced") == -1]
    if not unfencings:
        return None
    open_since = None  # the offset of the transaction open at each point, if any
    for r in sorted(records, key=lambda r: r["offset"]):
        if r["type"] == "BEGIN_TRANSACTION_RECORD":
            open_since = r["offset"]
        elif r["type"] in ("END_TRANSACTION_RECORD", "ABORT_TRANSACTION_RECORD"):
            if open_since is not None and open_since < unfencings[-1] < r["offset"]:
                return r["type"] == "ABORT_TRANSACTION_RECORD"
            open_since = None
    return False


@needs_real_zookeeper
@pytest.mark.slow
def test_kafka_fault_aimed_at_the_last_brokers_unfencing_meets_the_migrations_transaction(tmp_path):
    """The aborted-unfencing plan (a fault aimed at broker 2's move to RUNNING): the controller is killed within half
    a second of that line, after Kafka's log has the unfencing; where the unfencing lay inside the migration's
    transaction, the failover aborts it and BrokerOnlineOnlyOnceUnfencingCommitted fires (Kafka 3.9.2's bug: 5 of 6
    replays did on 2026-11-29), and where Kafka unfenced the broker before the transaction began, the run is clean
    of it. Either way the check agrees with the log, read here on its own; and so does
    MigratingZkBrokerEventuallyUnfenced: no heartbeat unfences broker 2 again, which the settle's wait for the fenced
    brokers gives 30 s to show."""
    from properties.kafka.run import load

    folder = tmp_path / "run"
    main(["kafka", "run", "--plan", str(ABORTED_UNFENCING_PLAN), "--out", str(folder)])
    events = _operator(folder)
    (moment,) = [e for e in events if e["kind"] == "moment"]
    (fault,) = [e for e in events if e["kind"] == "fault"]
    assert moment["after"] == "kraft-broker-running broker=2" and fault["fault"] == "kill-controller"
    assert 0 <= fault["time"] - moment["logged"] < 500
    (records,) = load(folder).metadata.values()
    aborted = _unfencing_aborted(records, 2)
    assert aborted is not None
    fired = {v["invariant"] for v in json.loads((folder / "violations.json").read_text())}
    assert ("BrokerOnlineOnlyOnceUnfencingCommitted" in fired) == aborted
    assert ("MigratingZkBrokerEventuallyUnfenced" in fired) == aborted


EXPIRED_AT_STARTUP_PLAN = Path(__file__).parent / "data" / "kafka-broker-session-expired-at-startup-plan.json"


@needs_real_zookeeper
@pytest.mark.slow
def test_kafka_broker_whose_session_expires_at_startup_is_started_again_and_the_run_is_clean(tmp_path):
    """A pause aimed at broker 1's ZooKeeper registration outlives its session while it still starts: Kafka exits at
    startup on the SessionExpiredException (as it is built to), and the runbook starts it again as a supervisor would;
    the run completes with no violation and trace validation explains it. Should Kafka finish starting before the
    pause, there is nothing to start again and the run is as clean."""
    folder = tmp_path / "run"
    code = main(["kafka", "run", "--plan", str(EXPIRED_AT_STARTUP_PLAN), "--out", str(folder)])
    events = _operator(folder)
    assert [e["process"] for e in events if e["kind"] == "fault"] == ["broker-1"]
    for restart in (e for e in events if e["kind"] == "restart"):
        assert restart["process"] == "broker-1" and "Fatal error during KafkaServer startup" in restart["why"]
    assert events[-1]["outcome"] == "completed"
    assert json.loads((folder / "validation.json").read_text())["outcome"] == "explained"
    assert code == 0


PAUSED_CONTROLLER_PLAN = Path(__file__).parent / "data" / "kafka-3.9-paused-controller-dual-write-lost-plan.json"
LOST_DUAL_WRITE = re.compile(r"Encountered ZooKeeper error during event MetadataChangeEvent\{provenance="
                             r"MetadataProvenance\(lastContainedOffset=(\d+)")


def _partitions_lost_for_good(folder: Path) -> set[tuple[str, int]]:
    """The partitions whose change a failed MetadataChangeEvent carried (records past the offset /migration held when
    it failed, up to the event's last) and no later record changed again: Kafka 3.9 writes only each event's own
    delta, so nothing writes them to ZooKeeper again. Read from the controller's log, its metadata and /migration."""
    from properties.kafka.run import load

    obs = load(folder)
    (records,) = obs.metadata.values()
    text = (folder / "controller-3000" / "logs" / "server.log").read_text()
    lost: set[tuple[str, int]] = set()
    for match in LOST_DUAL_WRITE.finditer(text):
        last = int(match.group(1))
        written = [json.loads(e["data"])["kraft_metadata_offset"] for e in obs.zk.get("/migration", [])
                   if e.get("exists") and json.loads(e["data"])["kraft_metadata_offset"] < last]
        since = max(written, default=-1)
        changed = {(r["data"]["topicId"], r["data"]["partitionId"]) for r in records
                   if r["type"] == "PARTITION_CHANGE_RECORD" and since < r["offset"] <= last}
        later = {(r["data"].get("topicId"), r["data"].get("partitionId")) for r in records
                 if r["type"] in ("PARTITION_CHANGE_RECORD", "PARTITION_RECORD") and r["offset"] > last}
        lost |= changed - later
    return lost


@needs_real_zookeeper
@pytest.mark.slow
def test_kafka_controller_paused_past_its_zookeeper_session_loses_a_dual_write(tmp_path):
    """A finding about Kafka 3.9.2 (KIP-866 §Dual Metadata Writes): the KRaft controller paused 0.42 s after its
    driver's move to KRAFT_CONTROLLER_TO_BROKER_COMM, for longer than its ZooKeeper session (a long GC); the
    MetadataChangeEvent it runs on resuming fails on the expired session ("Will retry.") and is never written. Where
    that event carried partition changes no later record changed again (the brokers it fenced on resuming, in 3 of 3
    replays on 2026-11-29), ZooKeeper keeps the old leaders and epochs for good and ZkEqualsImageAtMigrationOffset
    fires; where later records rewrote them (the event held only the ISR expansions before the pause), it does not.
    Read on its own from the controller's log, the metadata and /migration; trace validation explains either run."""
    folder = tmp_path / "run"
    main(["kafka", "run", "--plan", str(PAUSED_CONTROLLER_PLAN), "--out", str(folder)])
    events = _operator(folder)
    (moment,) = [e for e in events if e["kind"] == "moment"]
    (fault,) = [e for e in events if e["kind"] == "fault"]
    assert moment["after"] == "driver-transition new=KRAFT_CONTROLLER_TO_BROKER_COMM"
    assert fault["fault"] == "pause-controller" and 0 <= fault["time"] - moment["logged"] < 1500
    assert events[-1]["outcome"] == "completed"
    fired = {v["invariant"] for v in json.loads((folder / "violations.json").read_text())}
    assert ("ZkEqualsImageAtMigrationOffset" in fired) == bool(_partitions_lost_for_good(folder))
    assert json.loads((folder / "validation.json").read_text())["outcome"] == "explained"
