"""Where a campaign's partitions run: Spark (one small job a partition), a process pool, or this process.

Rules:
- A ``Runner`` is ``submit(fn, *args) -> Future`` with ``slots`` of them at once; the driver keeps
  that many partitions in flight.
- ``--master``: a Spark master (``properties.campaign.spark`` starts the session), or, without
  Java, ``serial`` or ``processes[N]``.
"""

from __future__ import annotations

import os
import re
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial

from properties.campaign.options import CampaignError

# ---- the driver: running partitions ----------------------------------------------------------

class Runner:
    """Where partitions run: ``submit(fn, *args) -> Future``, ``slots`` of them at once.

    This one is ``serial``: one at a time, in one driver thread (so the driver stays responsive)."""

    label = "serial"
    slots = 1

    def __init__(self) -> None:
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="campaign")

    def submit(self, fn, *args) -> Future:
        return self.pool.submit(fn, *args)

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


class ProcessRunner(Runner):
    """``processes[N]``: a pool of N Python processes (multiprocessing), for comparisons and without Java."""

    def __init__(self, workers: int) -> None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        self.label, self.slots = f"processes[{workers}]", workers
        # spawn: the driver has threads (the progress display), which a forked child must not inherit
        self.pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))


class SparkRunner(Runner):
    """Each submission is its own small Spark job of one task, run from a driver thread; as many
    threads as the cluster runs tasks at once (``sc.defaultParallelism``)."""

    def __init__(self, spark) -> None:
        self.sc = spark.sparkContext
        self.label = self.sc.master
        self.slots = max(1, self.sc.defaultParallelism)
        self.pool = ThreadPoolExecutor(self.slots, thread_name_prefix="campaign-spark")

    def submit(self, fn, *args) -> Future:
        return self.pool.submit(self._job, partial(fn, *args[:-1]), args[-1])

    def _job(self, fn, item):
        self.sc.setJobDescription(f"kraftcheck {getattr(fn.func, '__name__', 'task')} {item!r}")
        return self.sc.parallelize([item], 1).map(fn).collect()[0]

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.sc.cancelAllJobs()


_PROCESSES = re.compile(r"processes(?:\[(\d+)\])?")


def is_spark_master(master: str) -> bool:
    return not (master == "serial" or _PROCESSES.fullmatch(master))


def check_master(master: str) -> str:
    from properties.campaign.spark import check_spark_master

    m = _PROCESSES.fullmatch(master)
    if m and m.group(1) is not None and int(m.group(1)) < 1:
        raise CampaignError(f"bad master {master!r}: processes[N] needs N >= 1")
    if master == "serial" or m:
        return master
    try:
        return check_spark_master(master)
    except ValueError as e:
        raise CampaignError(str(e)) from None


def make_runner(master: str, spark=None) -> Runner:
    if spark is not None:
        return SparkRunner(spark)
    if master == "serial":
        return Runner()
    m = _PROCESSES.fullmatch(master)
    if m:
        return ProcessRunner(int(m.group(1) or os.cpu_count() or 1))
    raise CampaignError(f"master {master!r} needs a Spark session")
