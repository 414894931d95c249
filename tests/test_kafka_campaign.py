"""A real-Kafka campaign's bookkeeping: one run per seed, resumed without losing or doubling a run.

The runs here are stand-ins that write a run's folder as a real run leaves it (a real run takes a
minute; tests/test_kafka_real.py runs real ones), so what is tested is the campaign's own logic.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from properties.kafka import campaign as campaign_module
from properties.kafka.install import Installation
from properties.kafka.run import RealRunPlan

KAFKA = Installation("3.9.2", Path("/nonexistent"))


def _fake_execute(started: list[int]):
    def execute(plan: RealRunPlan, kafka: Installation, folder: Path) -> str:
        started.append(plan.seed)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "run.json").write_text(
            json.dumps({"plan": {"seed": plan.seed, "runbook": plan.runbook}, "kafka": "3.9.2", "faults": []})
        )
        stuck = plan.seed == 2  # seed 2 gets stuck: a progress violation
        lines = [{"channel": "operator", "kind": "stuck", "goal": "dual-write", "time": 5}] if stuck else []
        lines.append(
            {
                "channel": "operator",
                "kind": "end",
                "outcome": "stuck" if stuck else "completed",
                "seconds": 1.0,
                "time": 6,
            }
        )
        (folder / "operator.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
        return "completed"

    return execute


def test_kafka_campaign_tables_report_and_resume(tmp_path):
    """Three seeds give three rows and seed 2's violation; a killed run's half folder is run again, alone."""
    started: list[int] = []
    execute = _fake_execute(started)
    plan = RealRunPlan(seed=0, runbook="dual-write")
    runs, violations = campaign_module.campaign(
        plan, KAFKA, tmp_path, 3, None, None, say=lambda line: None, execute=execute
    )
    assert started == [0, 1, 2]
    assert [r["seed"] for r in runs] == [0, 1, 2]
    assert [(v["seed"], v["invariant"]) for v in violations] == [(2, "RunbookReachesItsEnd")]
    assert pq.read_table(tmp_path / "runs.parquet").num_rows == 3
    assert pq.read_table(tmp_path / "violations.parquet").to_pylist()[0]["seed"] == 2
    assert "RunbookReachesItsEnd" in (tmp_path / "report.html").read_text()
    # these runs logged nothing: trace validation says so rather than "explained"
    assert pq.read_table(tmp_path / "runs.parquet").column("trace").to_pylist() == ["not validated"] * 3
    assert "3 not validated" in (tmp_path / "report.html").read_text()

    (tmp_path / "runs" / "seed-1" / "violations.json").unlink()  # seed 1 was killed before it was checked
    started.clear()
    runs, _ = campaign_module.campaign(plan, KAFKA, tmp_path, 4, None, None, say=lambda line: None, execute=execute)
    assert started == [1, 3]
    assert [r["seed"] for r in runs] == [0, 1, 2, 3]
    assert pq.read_table(tmp_path / "runs.parquet").num_rows == 4


class _Alive:
    """A stand-in for a running process's Popen."""

    pid = 0
    returncode = None

    def poll(self):
        return None


def _three_controllers(tmp_path, logs: dict[int, list[str]]):
    from properties.kafka.run import Run

    run = Run(RealRunPlan(seed=0, controllers=3), KAFKA, tmp_path)
    for c, lines in logs.items():
        process = run.cluster.node(f"controller-{c}", {}, 64)
        process.log.parent.mkdir(parents=True, exist_ok=True)
        process.log.write_text(
            "".join(f"[2026-11-26 19:58:{10 + i:02d},000] INFO {line}\n" for i, line in enumerate(lines))
        )
        process.popen = _Alive()
    return run


DRIVER = "(org.apache.kafka.metadata.migration.KRaftMigrationDriver)"


def test_kafka_run_reads_each_controller_on_its_own(tmp_path):
    """The leader's driver is in DUAL_WRITE although a follower logged INACTIVE -> INACTIVE later, and the active
    controller is the one whose own last Raft transition made it leader (a follower's later line says nothing)."""
    run = _three_controllers(
        tmp_path,
        {
            3000: [
                "[RaftManager id=3000] Completed transition to Leader(localReplicaKey=x, epoch=1, y)",
                "[RaftManager id=3000] Completed transition to FollowerState(epoch=2, leader=3001)",
            ],
            3001: [
                "[RaftManager id=3001] Completed transition to Leader(localReplicaKey=x, epoch=2, y)",
                "[KRaftMigrationDriver id=3001] 3001 transitioning from KRAFT_CONTROLLER_TO_BROKER_COMM to DUAL_WRITE "
                f"state {DRIVER}",
            ],
            3002: [
                "[RaftManager id=3002] Completed transition to FollowerState(epoch=2, leader=3001)",
                f"[KRaftMigrationDriver id=3002] 3002 transitioning from INACTIVE to INACTIVE state {DRIVER}",
            ],
        },
    )
    assert run.in_dual_write()
    assert run.active_controller() == 3001
    run = _three_controllers(
        tmp_path / "b",
        {
            3000: [f"[KRaftMigrationDriver id=3000] 3000 transitioning from DUAL_WRITE to INACTIVE state {DRIVER}"],
        },
    )
    assert not run.in_dual_write()
    assert run.active_controller() is None


class _Registrations:
    """A stand-in for the observer's kazoo client: ``/brokers/ids/N`` exists while N is in ``ids``."""

    def __init__(self, ids: set[int]) -> None:
        self.ids = ids

    def exists_async(self, path: str):
        return _Answer(object() if int(path.rsplit("/", 1)[1]) in self.ids else None)


class _Answer:
    """A kazoo async result that has its answer."""

    def __init__(self, value) -> None:
        self.value = value

    def get(self, timeout=None):
        return self.value


class _PausedServer:
    """A stand-in for the observer's kazoo client while ZooKeeper's server is paused: a request is never answered
    (kazoo's get(timeout) raises KazooTimeoutError) until ``resumed``; then ``/brokers/ids/0`` is gone."""

    def __init__(self) -> None:
        self.resumed = False
        self.tries = 0

    def exists_async(self, path: str):
        from kazoo.handlers.threading import KazooTimeoutError

        server = self

        class Pending:
            def get(self, timeout=None):
                server.tries += 1
                if not server.resumed:
                    raise KazooTimeoutError("no answer")
                return None

        return Pending()


def test_kafka_wait_on_a_znode_heals_the_paused_zookeeper_it_waits_for(tmp_path, monkeypatch):
    """Seen in a real rollback run: ZooKeeper was paused, a broker's clean stop hung and it was killed, and the runbook
    waited for its /brokers/ids/N to go. kazoo's read of a paused server never returns, and the heal that resumes the
    server is the driver's own to fire: the run hung for good. Each read now waits a second and fires the heals due
    between tries, so the wait ends once the pause is healed."""
    import threading

    from properties.kafka.run import FaultPlan, Run

    run = Run(RealRunPlan(seed=0), KAFKA, tmp_path)
    run._operator = open(tmp_path / "operator.jsonl", "a")
    server = _PausedServer()
    run.observer = type("Observer", (), {"client": server})()
    zookeeper = run.cluster.node("zookeeper", {}, 64)
    monkeypatch.setattr(type(zookeeper), "resume", lambda self: setattr(server, "resumed", True))
    fault = FaultPlan("roll-broker-0-zk", 0.0, "pause-zookeeper", 0, 0.5)
    run.struck[id(fault)] = zookeeper
    run.pending.append((time.monotonic() + 0.5, "heal", fault))  # the pause's heal, due in half a second
    waiting = threading.Thread(target=run.wait, args=("gone", lambda: run.zk("exists", "/brokers/ids/0") is None),
                               daemon=True)
    waiting.start()
    waiting.join(timeout=30)
    run._operator.close()
    assert not waiting.is_alive(), "the wait never ended: the pause's heal did not fire"
    assert server.resumed and server.tries >= 2 and not run.pending


def test_kafka_admin_request_waiting_on_a_paused_broker_lets_the_pause_heal(tmp_path, monkeypatch):
    """Seed 9 of the dual-write runbook (3.9.2): a 7.6 s pause of broker-0 lasted 23 s, because the runbook's
    DeleteTopics waited on the paused broker until its 20 s request timeout, and the pause's heal, due meanwhile,
    fired only after. An admin request's answer is now awaited a second at a time, with the faults and heals due
    fired in between, so the heal comes when the plan says; the answer is the request's, once it comes."""
    from concurrent.futures import Future

    from properties.kafka.run import FaultPlan, Run

    run = Run(RealRunPlan(seed=9, runbook="dual-write"), KAFKA, tmp_path)
    run._operator = open(tmp_path / "operator.jsonl", "a")
    broker = run.cluster.node("broker-0", {"zookeeper.connect": "127.0.0.1:1"}, 64)
    request: Future = Future()
    monkeypatch.setattr(type(broker), "resume", lambda self: request.set_result("deleted"))
    fault = FaultPlan("roll-broker-2-migrating", 0.0, "pause-broker", 0, 0.5)
    run.struck[id(fault)] = broker
    run.pending.append((time.monotonic() + 0.5, "heal", fault))  # the pause's heal, due in half a second
    began = time.monotonic()
    assert run.answer(request, timeout_s=20) == "deleted"
    run._operator.close()
    assert time.monotonic() - began < 5 and not run.pending
    with pytest.raises(TimeoutError):
        run.answer(Future(), timeout_s=0.2)  # no answer within the request's own time: as future.result's timeout


def test_kafka_replicas_listed_waits_for_metadata_that_names_the_partition(tmp_path, monkeypatch):
    """A loaded CI machine (the real-Kafka tests beside the rest): just after orders grew to 4 partitions, the
    cluster's metadata for orders came back with an error and no partitions, and the reassignment's read of
    orders-0's replicas failed the run with a KeyError. Such an answer is now no answer yet (noted, tried again)."""
    from types import SimpleNamespace

    from properties.kafka.run import Run

    answers = [{}, {0: SimpleNamespace(replicas=[1, 0])}]

    class Admin:
        def list_topics(self, topic, timeout):
            partitions = answers.pop(0)
            error = None if partitions else "LEADER_NOT_AVAILABLE"
            return SimpleNamespace(topics={topic: SimpleNamespace(partitions=partitions, error=error)})

    run = Run(RealRunPlan(seed=6, runbook="dual-write"), KAFKA, tmp_path)
    run._operator = open(tmp_path / "operator.jsonl", "a")
    monkeypatch.setattr(Run, "admin", lambda self: Admin())
    assert run.replicas_listed("orders", 0) is None
    assert run.replicas_listed("orders", 0) == [1, 0]
    run._operator.close()
    notes = [json.loads(line) for line in (tmp_path / "operator.jsonl").read_text().splitlines()]
    assert [n["error"] for n in notes if n["kind"] == "admin-retry"] == [
        "no metadata for orders-0 (LEADER_NOT_AVAILABLE)"]


def test_kafka_metadata_read_waiting_on_a_paused_broker_lets_the_pause_heal(tmp_path, monkeypatch):
    """The admin client's metadata read (list_topics) waits on a paused broker until its own 20 s timeout, as an admin
    request's answer did in seed 9 of the dual-write runbook: the pause's heal, due meanwhile, would fire only after.
    The read is now made on a thread of its own and awaited a second at a time, with the heals due fired in between,
    so the heal comes when the plan says and the read returns once the broker answers."""
    import threading
    from types import SimpleNamespace

    from properties.kafka.run import FaultPlan, Run

    resumed = threading.Event()

    class Admin:
        def list_topics(self, topic, timeout):
            resumed.wait(timeout)  # a paused broker answers nothing until it resumes
            replicas = {0: SimpleNamespace(replicas=[1, 0])} if resumed.is_set() else {}
            return SimpleNamespace(topics={topic: SimpleNamespace(partitions=replicas, error=None)})

    run = Run(RealRunPlan(seed=9, runbook="dual-write"), KAFKA, tmp_path)
    run._operator = open(tmp_path / "operator.jsonl", "a")
    monkeypatch.setattr(Run, "admin", lambda self: Admin())
    broker = run.cluster.node("broker-0", {"zookeeper.connect": "127.0.0.1:1"}, 64)
    monkeypatch.setattr(type(broker), "resume", lambda self: resumed.set())
    fault = FaultPlan("roll-broker-2-migrating", 0.0, "pause-broker", 0, 0.5)
    run.struck[id(fault)] = broker
    run.pending.append((time.monotonic() + 0.5, "heal", fault))  # the pause's heal, due in half a second
    began = time.monotonic()
    assert run.replicas_listed("orders", 0) == [1, 0]
    run._operator.close()
    assert time.monotonic() - began < 5 and not run.pending


def test_kafka_tool_that_never_finishes_is_a_cluster_error(tmp_path, monkeypatch):
    """A Kafka tool waiting past its timeout on a cluster that does not answer (the reassignment's, a FeatureCommand)
    fails as the cluster's error, which the runbook's steps retry or report, not as kraftcheck's own (it had ended the
    run as interrupted by subprocess.TimeoutExpired)."""
    import subprocess

    from properties.kafka.cluster import Cluster, ClusterError

    def never_finishes(argv, **kwargs):
        raise subprocess.TimeoutExpired(argv, kwargs["timeout"], output=b"Current partition replica assignment")

    monkeypatch.setattr(subprocess, "run", never_finishes)
    with pytest.raises(ClusterError, match="ReassignPartitionsCommand did not finish within 120 s") as raised:
        Cluster(KAFKA, tmp_path).tool(["org.apache.kafka.tools.reassign.ReassignPartitionsCommand", "--execute"])
    assert raised.value.output == "Current partition replica assignment"


def test_kafka_roll_of_a_broker_a_fault_killed_waits_for_its_old_registration(tmp_path):
    """A fault killed broker-1 just before the runbook rolled it (3.9.2, dual-write, three controllers): its stop found
    no process, and the start that followed exited on its old /brokers/ids/1 ("node already exists and owner ... does
    not match current session"). The stop now waits for the old session's registration to go, as after a kill."""
    import threading

    from properties.kafka.run import Run

    run = Run(RealRunPlan(seed=0), KAFKA, tmp_path)
    run._operator = open(tmp_path / "operator.jsonl", "a")
    run.observer = type("Observer", (), {"client": _Registrations({1})})()
    process = run.cluster.node("broker-1", {"zookeeper.connect": "127.0.0.1:1"}, 64)
    assert not process.running  # killed
    stopping = threading.Thread(target=run.stop, args=(process, "zk-broker", 1), daemon=True)
    stopping.start()
    stopping.join(timeout=2)
    assert stopping.is_alive(), "the stop returned while the old registration was still there"
    run.observer.client.ids.clear()  # the old session expired
    stopping.join(timeout=30)
    run._operator.close()
    assert not stopping.is_alive()


def test_kafka_rollback_end_state_waits_for_every_broker_to_register_again(tmp_path, monkeypatch):
    """A rollback-before-brokers run (3.9.2, seed 20): a fault expired broker-0's session, the ZooKeeper controller,
    just after the rollback's election; the end state (a ZooKeeper controller, every broker running) held at once, and
    the final gauges, sampled 1.5 s later, had broker-0 (not yet in its new session, so not yet resigned) and the new
    controller both report ActiveControllerCount 1. The end state now also waits for every /brokers/ids/N."""
    from properties.kafka.run import Run

    run = Run(RealRunPlan(seed=20, runbook="rollback-before-brokers"), KAFKA, tmp_path)
    run.observer = type("Observer", (), {"client": _Registrations({1, 2})})()
    for b in range(3):
        run.cluster.node(f"broker-{b}", {"zookeeper.connect": "127.0.0.1:1"}, 64)
    monkeypatch.setattr(Run, "zk_controller", lambda self: True)
    monkeypatch.setattr(Run, "ready", lambda self, process, marker: lambda: True)
    goal, reached = run.end_state()
    assert goal == "a ZooKeeper controller and every broker running"
    assert not reached()
    run.observer.client.ids.add(0)  # broker-0 registered in its new session
    assert reached()


def test_kafka_heal_of_a_killed_zk_broker_waits_for_its_old_registration(tmp_path, monkeypatch):
    """A ZooKeeper-mode broker killed and started again before its session expired exits at start ("node
    already exists and owner ... does not match current session", KafkaZkClient's CheckedEphemeral): the heal
    waits for the old /brokers/ids/N to go, as an operator would, then starts it. A KRaft broker is started at
    once (it registers with the controllers)."""
    from properties.kafka.run import FaultPlan, Run

    run = Run(RealRunPlan(seed=0), KAFKA, tmp_path)
    run._operator = open(tmp_path / "operator.jsonl", "a")
    run.observer = type("Observer", (), {"client": _Registrations({0})})()
    process = run.cluster.node("broker-0", {"zookeeper.connect": "127.0.0.1:1"}, 64)
    started: list[str] = []
    monkeypatch.setattr(type(process), "start", lambda self: started.append(self.name))
    fault = FaultPlan("roll-broker-1-migrating", 0.0, "kill-broker", 0, 1.0)
    run.struck[id(fault)] = process
    run._heal(fault)
    assert started == [] and [(what, f) for _, what, f in run.pending] == [("heal", fault)]
    run.observer.client.ids.clear()  # the old session expired
    run.pending.clear()
    run._heal(fault)
    assert started == ["broker-0"]
    kraft = run.cluster.node("broker-1", {"process.roles": "broker"}, 64)
    run.observer.client.ids.add(1)  # a stale ephemeral a KRaft broker does not need
    fault = FaultPlan("roll-broker-1-kraft", 0.0, "kill-broker", 1, 1.0)
    run.struck[id(fault)] = kraft
    run._heal(fault)
    assert started == ["broker-0", "broker-1"]
    run._operator.close()


def test_kafka_campaign_report_shows_what_its_runs_covered():
    """The report's coverage: faults by the runbook step they struck (every step a run began is a row, so a step no
    fault struck shows as empty cells), and the model's witnesses by the runs whose explaining path reached them,
    those no run reached listed empty."""
    runs = [
        {"faults": "kill-controller@reach-dual-write", "steps": "start-zookeeper, reach-dual-write",
         "witnesses": "MigrationReachesDualWrite, ControllerFailover", "trace": "explained"},
        {"faults": "kill-controller@reach-dual-write, pause-zookeeper@start-zookeeper",
         "steps": "start-zookeeper, reach-dual-write, write-during-dual-write",
         "witnesses": "MigrationReachesDualWrite", "trace": "undecided"},
    ]
    faults = campaign_module.fault_coverage(runs)
    rows = faults.split("<tr>")[2:]
    assert [row.split("</td>")[0].removeprefix("<td>") for row in rows] == [
        "start-zookeeper", "reach-dual-write", "write-during-dual-write"]
    assert "<th>kill-controller</th><th>pause-zookeeper</th></tr>" in faults  # the kinds struck, in FAULT_KINDS order
    assert rows[1].count("<td class=''>2</td>") == 1 and rows[1].count("class='empty'") == 1
    assert rows[2].count("class='empty'") == 2
    witnesses = campaign_module.witness_coverage(runs)
    assert "(1 of 2 runs had one)" in witnesses
    assert "<tr><td>MigrationReachesDualWrite</td><td class=''>2</td></tr>" in witnesses
    assert "<tr><td>ControllerFailover</td><td class=''>1</td></tr>" in witnesses
    assert "<tr><td>MultiFails</td><td class='empty'></td></tr>" in witnesses
    assert witnesses.count("<tr><td>") == len(campaign_module.SOMETIMES_NAMES)


class _LedgerConsumer:
    """A stand-in for confluent_kafka's Consumer over ``ledger``'s three partitions, one record in each; its first
    ``stale`` metadata answers (all, if None) come from a broker that serves no topic (as after Kafka 3.9.2's aborted
    unfencing)."""

    stale: int | None = 0

    def __init__(self, config):
        self.assigned: list = []

    def list_topics(self, topic, timeout):
        from types import SimpleNamespace

        full = SimpleNamespace(error=None, partitions={p: None for p in range(3)})
        empty = SimpleNamespace(error="UNKNOWN_TOPIC_OR_PART", partitions={})
        if self.stale is None:
            return SimpleNamespace(topics={topic: empty})
        type(self).stale, answer = max(0, self.stale - 1), empty if self.stale else full
        return SimpleNamespace(topics={topic: answer})

    def get_watermark_offsets(self, partition, timeout):
        return (0, 1)

    def assign(self, partitions):
        self.assigned = [p.partition for p in partitions]

    def poll(self, timeout):
        if not self.assigned:
            return None
        p = self.assigned.pop(0)
        return type("Message", (), {"error": lambda s: None, "value": lambda s: str(p).encode(),
                                    "partition": lambda s: p, "offset": lambda s: 0})()

    def close(self):
        pass


@pytest.mark.parametrize("stale, complete", [(0, True), (2, True), (None, False)])
def test_kafka_ledger_read_is_complete_only_from_metadata_that_names_its_partitions(stale, complete, tmp_path,
                                                                                   monkeypatch):
    """A 3.9.2 run hit the aborted unfencing: the ledger reader's metadata came from the broker that served no topic,
    named no partition, and the read counted as complete with nothing in it, so every acknowledged write looked lost
    (AcknowledgedWritesSurvive, 587 times). The reader now asks again until an answer names the topic and every
    partition a write was acknowledged in, and says it did not finish when none does."""
    import confluent_kafka

    from properties.kafka import workload

    monkeypatch.setattr(confluent_kafka, "Consumer", _LedgerConsumer)
    monkeypatch.setattr(_LedgerConsumer, "stale", stale)
    monkeypatch.setattr(workload.time, "sleep", lambda s: None)
    path = tmp_path / "ledger.jsonl"
    assert workload.read_ledger("127.0.0.1:1", path, None, acknowledged={0, 2}, timeout=0.2) is complete
    if complete:
        assert sorted(json.loads(line)["partition"] for line in path.read_text().splitlines()) == [0, 1, 2]


class _Exited:
    """A stand-in for an exited process's Popen."""

    pid = 0
    returncode = 1

    def poll(self):
        return 1


SESSION_EXPIRED_AT_START = (
    "[2026-11-29 14:09:08,485] ERROR [KafkaServer id=1] Fatal error during KafkaServer startup. Prepare to shutdown "
    "(kafka.server.KafkaServer)\n"
    "org.apache.zookeeper.KeeperException$SessionExpiredException: KeeperErrorCode = Session expired for "
    "/kafka-acl-extended-changes\n"
)
CRASHED_AT_START = SESSION_EXPIRED_AT_START.replace(
    "org.apache.zookeeper.KeeperException$SessionExpiredException: KeeperErrorCode = Session expired for "
    "/kafka-acl-extended-changes",
    'java.lang.NullPointerException: Cannot invoke "org.apache.zookeeper.data.Stat.getEphemeralOwner()"',
)


@pytest.mark.parametrize("log, restarted", [(SESSION_EXPIRED_AT_START, True), (CRASHED_AT_START, False)])
def test_kafka_broker_whose_session_expired_at_startup_is_started_again(log, restarted, tmp_path, monkeypatch):
    """An aimed campaign (3.9.2, seed 12) paused broker-1 for 7.8 s as it started: its ZooKeeper session expired, its
    AclAuthorizer's next request failed with SessionExpiredException, and KafkaServer.startup took that as fatal and
    exited, as it is built to; the run ended stuck. A supervisor starts such a broker again, and so does the runbook
    now, noting why; a crash of another kind still ends the run."""
    from properties.kafka.run import Run, RunbookStuck

    run = Run(RealRunPlan(seed=12), KAFKA, tmp_path)
    run._operator = open(tmp_path / "operator.jsonl", "a")
    process = run.cluster.node("broker-1", {"zookeeper.connect": "127.0.0.1:1"}, 64)
    process.log.parent.mkdir(parents=True, exist_ok=True)
    process.log.write_text("[2026-11-29 14:09:01,000] INFO starting (kafka.server.KafkaServer)\n" + log)
    process.popen = _Exited()
    monkeypatch.setattr(type(process), "start", lambda self: setattr(self, "popen", _Alive()))

    def started() -> bool:
        return process.running

    started.process = process
    if restarted:
        run.wait("broker-1 started", started, bound=5)
    else:
        with pytest.raises(RunbookStuck, match="broker-1 exited on its own"):
            run.wait("broker-1 started", started, bound=5)
    run._operator.close()
    notes = [json.loads(line) for line in (tmp_path / "operator.jsonl").read_text().splitlines()]
    restarts = [n for n in notes if n["kind"] == "restart"]
    assert len(restarts) == restarted
    if restarted:
        assert restarts[0]["process"] == "broker-1" and "Fatal error during KafkaServer startup" in restarts[0]["why"]


# a stand-in for a Kafka process: on SIGTERM it shuts down for half a second (a controlled shutdown), then exits
SLOW_TO_STOP = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, lambda *a: (time.sleep(0.5), sys.exit(0)))\n"
    "print('up', flush=True)\n"
    "while True:\n"
    "    time.sleep(0.02)\n"
)


def test_kafka_faults_due_while_the_runbook_stops_a_process_fire_on_time_but_not_on_it(tmp_path):
    """An aimed campaign (3.9.2, seed 7 of dual-write --aimed): a pause aimed at broker 0's unfencing, which came as
    its roll's step ended, struck 11 s late, after the next step's controlled shutdown of broker 1, during which
    nothing fired. A stop now fires the faults due meanwhile, except those on the process it stops (struck after)."""
    import sys

    from properties.kafka.cluster import Process
    from properties.kafka.run import FaultPlan, Run

    run = Run(RealRunPlan(seed=7, runbook="dual-write"), KAFKA, tmp_path)
    run._operator = open(tmp_path / "operator.jsonl", "a")
    for b in (0, 1):
        process = run.cluster.processes[f"broker-{b}"] = Process(f"broker-{b}", [sys.executable, "-c", SLOW_TO_STOP],
                                                                 tmp_path / f"broker-{b}", log_name="stdout.log")
        process.start()
        process.wait_for("up", timeout=10)
    on_other = FaultPlan("roll-broker-1-migrating", 0.0, "pause-broker", 0, 30.0)
    on_stopped = FaultPlan("roll-broker-1-migrating", 0.0, "kill-broker", 1, 30.0)
    run.pending += [(time.monotonic() + 0.1, "fault", on_other), (time.monotonic() + 0.1, "fault", on_stopped)]
    try:
        run.stop(run.broker(1), "zk-broker", 1)
        notes = [json.loads(line) for line in (tmp_path / "operator.jsonl").read_text().splitlines()]
        assert [(n["kind"], n.get("process")) for n in notes] == [("fault", "broker-0"), ("step", "broker-1")]
        assert notes[1]["clean"] and notes[0]["time"] < notes[1]["time"]  # struck while broker-1 shut down
        assert [f for _, what, f in run.pending if what == "fault"] == [on_stopped]  # waits for the stop's end
        assert run.broker(0).paused
    finally:
        run._operator.close()
        for process in run.cluster.processes.values():
            process.kill()


def test_kafka_settle_waits_for_the_active_controllers_fenced_brokers_to_reach_zero(tmp_path, monkeypatch):
    """At rest every broker runs, so the settle waits, UNFENCE_BOUND_S at most, for the active controller's newest
    FencedBrokerCount over JMX (taken after the wait began) to be 0: a broker KRaft leaves fenced is then judged that
    long after the faults healed (MigratingZkBrokerEventuallyUnfenced). A wait that runs out is noted."""
    from properties.kafka import run as run_module
    from properties.kafka.run import Run

    run = Run(RealRunPlan(seed=6, runbook="dual-write"), KAFKA, tmp_path)
    run._operator = open(tmp_path / "operator.jsonl", "a")
    now = time.time() * 1000

    def sample(process, at, **metrics):
        return json.dumps({"channel": "jmx", "time": at, "process": process, "up": True, "metrics": metrics})

    samples = [
        sample("controller-3000", now - 5000, ActiveControllerCount=1, FencedBrokerCount=0),  # before the wait
        sample("controller-3001", now + 5000, ActiveControllerCount=0, FencedBrokerCount=0),  # not active
        sample("broker-0", now + 5000, ActiveControllerCount=1),
        sample("controller-3000", now + 5000, ActiveControllerCount=1, FencedBrokerCount=1),
    ]
    (tmp_path / "jmx.jsonl").write_text("\n".join(samples) + "\n")
    assert run.fenced_broker_count(now) == 1 and run.fenced_broker_count(now + 6000) is None
    monkeypatch.setattr(run_module, "UNFENCE_BOUND_S", 0.3)
    run.wait_for_brokers_unfenced()
    with open(tmp_path / "jmx.jsonl", "a") as jmx:
        jmx.write(sample("controller-3000", time.time() * 1000 + 5000, ActiveControllerCount=1, FencedBrokerCount=0))
    began = time.monotonic()
    run.wait_for_brokers_unfenced()
    run._operator.close()
    assert time.monotonic() - began < 0.2
    notes = [json.loads(line) for line in (tmp_path / "operator.jsonl").read_text().splitlines()]
    assert [(n["kind"], n["count"]) for n in notes] == [("brokers-fenced-at-rest", 1)]


@pytest.mark.parametrize("master", [None, pytest.param("local[2]", marks=pytest.mark.slow)])
def test_kafka_aimed_campaign_steers_later_seeds_to_cells_not_struck_yet(master, tmp_path):
    """An aimed campaign hands each seed the cells its lower seeds struck (their moments logged), so the faults aim
    elsewhere, and the report's moment table lists every cell the draw may aim at, those no run struck as empty. On
    Spark the seeds run in waves as wide as the cluster, each steered by the waves before."""
    from dataclasses import asdict

    from properties.kafka.run import plan_from_json, schedule_faults
    from properties.kafka.shrink import step_names

    def execute(plan: RealRunPlan, kafka: Installation, folder: Path) -> str:
        folder.mkdir(parents=True, exist_ok=True)
        faults = schedule_faults(plan, step_names(kafka)(plan))
        (folder / "run.json").write_text(json.dumps({"plan": {**asdict(plan), "schedule": None}, "kafka": "3.9.2",
                                                     "faults": [asdict(f) for f in faults]}))
        moments = [{"channel": "operator", "kind": "moment", "fault": f.kind, "after": f.after, "step": f.step,
                    "time": 1} for f in faults if f.after]
        end = {"channel": "operator", "kind": "end", "outcome": "completed", "seconds": 1.0, "time": 6}
        (folder / "operator.jsonl").write_text("".join(json.dumps(x) + "\n" for x in [*moments, end]))
        return "completed"

    plan = RealRunPlan(seed=0, runbook="dual-write", faults="all", fault_count=2, aimed=True)
    runs, _ = campaign_module.campaign(plan, KAFKA, tmp_path, 6, None, master, say=lambda line: None,
                                       execute=execute)
    plans = [plan_from_json(json.loads((tmp_path / "runs" / f"seed-{s}" / "run.json").read_text())) for s in range(6)]
    wave = 1 if master is None else 2
    struck = [set(campaign_module._split(r["moments"])) for r in runs]
    for seed in range(6):
        assert set(plans[seed].covered) == set().union(set(), *struck[:seed - seed % wave])
    cells = [c for r in struck for c in r]
    if master is None:
        assert len(set(cells)) == len(cells)  # each seed aimed at cells no lower seed had struck
    unsteered = [{f"{f.kind}@{f.after}" for f in schedule_faults(replace(p, schedule=None, covered=()),
                                                                    step_names(KAFKA)(p)) if f.after} for p in plans]
    assert len(set().union(*unsteered)) < len(set(cells))
    report = (tmp_path / "report.html").read_text()
    possible = len(campaign_module.aimable_cells(plan, step_names(KAFKA)(plan)))
    assert f"{len(set(cells))} of {possible} cells struck; {possible - len(set(cells))} empty." in report
    assert "<td class='empty'>0/0</td>" in report  # a cell no run aimed at is shown, empty
