"""A client's view of the run: writes acknowledged while the runbook and its faults go on, read back at the end.

KIP-866 §Motivation asks for the migration "without impact to partition availability and with
minimal impact to ... client applications". The model says nothing about records in topics, so
this is the one check that does not come from it (Jepsen's lesson: look at what clients see).

Rules:
- One idempotent producer with ``acks=all`` writes sequence numbers, a few dozen a second, to the
  topic ``ledger`` (replicated to three brokers when there are three, ``min.insync.replicas`` 2),
  from the moment the topic exists to the end of the run. Each acknowledgement (or error) is a
  line of ``client.jsonl``: the sequence number, the partition and the offset Kafka gave it.
- At the end, once the cluster has settled, a consumer reads every partition from the start to
  its end offset into ``ledger.jsonl``. A run whose read could not finish says so in
  ``operator.jsonl``, and the check then judges nothing.
- The producer runs on a thread of its own: the runbook's thread never waits on it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Collection
from pathlib import Path

TOPIC = "ledger"


class LedgerWriter(threading.Thread):
    """Produces sequence numbers to ``ledger`` until stopped; appends each acknowledgement to ``path``."""

    def __init__(self, servers: str, path: Path, logger, rate_per_s: float = 25.0) -> None:
        super().__init__(name="ledger-writer", daemon=True)
        from confluent_kafka import Producer

        self.producer = Producer(
            {
                "bootstrap.servers": servers,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 120_000,
                "logger": logger,
            }
        )
        self.path = path
        self.interval = 1.0 / rate_per_s
        self.stopping = threading.Event()
        self.sent = 0
        self.refused = 0  # produce calls the client refused before sending anything
        self._file = open(path, "a", buffering=1)
        self._lock = threading.Lock()

    def _delivered(self, error, message) -> None:
        seq = int(message.value())
        line = {"seq": seq, "time": int(time.time() * 1000)}
        if error is None:
            line |= {"partition": message.partition(), "offset": message.offset()}
        else:
            line |= {"error": error.name()}
        with self._lock:
            self._file.write(json.dumps(line) + "\n")

    def run(self) -> None:
        from confluent_kafka import KafkaException

        while not self.stopping.wait(self.interval):
            try:
                self.producer.produce(TOPIC, value=str(self.sent).encode(), on_delivery=self._delivered)
                self.sent += 1
            except (BufferError, KafkaException):
                # the local queue is full while brokers are away, or the client's metadata does not know
                # the topic yet (or again): nothing was sent, so nothing is owed; try again later
                self.refused += 1
            self.producer.poll(0)

    def finish(self, timeout: float = 60.0) -> int:
        """Stops writing and waits for the outstanding acknowledgements; the number still unknown."""
        self.stopping.set()
        self.join()
        left = self.producer.flush(timeout)
        with self._lock:
            self._file.close()
        return left


def read_ledger(servers: str, path: Path, logger, acknowledged: Collection[int] = (), timeout: float = 90.0) -> bool:
    """Every record of ``ledger``, partition by partition, to ``path``; False if the end was not reached in time.

    The partitions are those a broker's metadata names, asked again until an answer names the topic, without an
    error, with every partition a write was ``acknowledged`` in: a broker whose metadata is stale or empty (Kafka
    3.9.2's aborted unfencing leaves a ZooKeeper-mode broker serving no topic at all) would otherwise make an empty
    read look complete, and every acknowledged write look lost."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": "kraftcheck-ledger-reader",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "logger": logger,
        }
    )
    deadline = time.monotonic() + timeout
    try:
        while True:
            topic = consumer.list_topics(TOPIC, timeout=30).topics.get(TOPIC)
            if topic is not None and topic.error is None and topic.partitions and set(acknowledged) <= set(
                topic.partitions
            ):
                break
            if time.monotonic() >= deadline:
                return False
            time.sleep(1.0)
        partitions = sorted(topic.partitions)
        ends = {p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)[1] for p in partitions}
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in partitions])
        done = {p for p, end in ends.items() if end == 0}
        with open(path, "w") as out:
            while len(done) < len(partitions) and time.monotonic() < deadline:
                message = consumer.poll(1.0)
                if message is None or message.error():
                    continue
                out.write(
                    json.dumps(
                        {"seq": int(message.value()), "partition": message.partition(), "offset": message.offset()}
                    )
                    + "\n"
                )
                if message.offset() + 1 >= ends[message.partition()]:
                    done.add(message.partition())
        return len(done) == len(partitions)
    except Exception:  # noqa: BLE001 - any client error means the read did not finish: said, not raised
        return False
    finally:
        consumer.close()
