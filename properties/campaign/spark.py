"""The Spark session a campaign runs on: local mode, a standalone cluster, or the one spark-submit set up.

Rules (from the environment notes on PySpark):
- Set before the JVM starts: ``PYSPARK_PYTHON`` is this interpreter (else the workers run
  ``python3`` from PATH, which lacks the project's dependencies); ``SPARK_LOCAL_IP`` is loopback
  (else Spark binds the first interface's address). The Python workers (only they, through
  ``spark.executorEnv``) get ``HYPOTHESIS_STORAGE_DIRECTORY``, a temporary directory unless it is
  set (else Hypothesis writes ``.hypothesis/`` into the workers' directory). No web UI, no
  console progress bars: the campaign draws its own progress.
- A local master gets task retries: Spark runs a local task once unless the master names how
  many failures it tolerates, so ``local``, ``local[N]`` and ``local[*]`` become ``local[N,4]``
  (N: the machine's CPUs for ``*``), as a cluster's ``spark.task.maxFailures`` default of 4.
- A master that is not local has executors that do not run in the project directory: the
  project's packages (model, impl, properties, bench) are zipped and shipped with ``addPyFile``.
- Under spark-submit the session is the one it configured, and its ``--master`` is the default.
- A session that cannot start (no Java, say) is a ``SparkStartError``: one line.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

TASK_ATTEMPTS = 4  # Spark's spark.task.maxFailures default on a cluster
PACKAGES = ("model", "impl", "properties", "bench")
ROOT = Path(__file__).resolve().parents[2]

_LOCAL = re.compile(r"local(?:\[\s*(\d+|\*)\s*(?:,\s*(\d+)\s*)?\])?")
_CLUSTER = re.compile(r"(spark://[^\s,]+(?:,[^\s,]+)*|yarn|k8s://\S+|mesos://\S+)")


class SparkStartError(RuntimeError):
    """Spark did not start (one line)."""


def is_local(master: str) -> bool:
    return _LOCAL.fullmatch(master) is not None


def check_spark_master(master: str) -> str:
    """A Spark master URL as given, or a one-line ValueError."""
    local = _LOCAL.fullmatch(master)
    if local and local.group(1) == "0":
        raise ValueError(f"bad master {master!r}: local[N] needs N >= 1")
    if local or _CLUSTER.fullmatch(master):
        return master
    raise ValueError(f"bad master {master!r}; expected local[N], local[*], local[N,F], spark://HOST:PORT, "
                     "serial or processes[N]")


def spark_master(master: str) -> str:
    """The master to start: a local one with task retries (``local[N,4]``), any other as it is."""
    local = _LOCAL.fullmatch(master)
    if local is None:
        return master
    threads, failures = local.group(1) or "1", local.group(2)
    if threads == "*":
        threads = str(os.cpu_count() or 1)
    return f"local[{threads},{failures or TASK_ATTEMPTS}]"


def submitted_master() -> str | None:
    """spark-submit's ``--master`` when this process runs under spark-submit, else None."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return None
    from pyspark import SparkConf

    return SparkConf().get("spark.master", None)


def _storage_directory() -> str:
    directory = tempfile.mkdtemp(prefix="kraftcheck-hypothesis-")
    atexit.register(shutil.rmtree, directory, True)
    return directory


def session(master: str, app_name: str = "kraftcheck campaign"):
    """A SparkSession on ``master`` (made retrying when local), with the project shipped when not local."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    storage = os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY") or _storage_directory()
    master = spark_master(master)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master).appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "1g")
        .config("spark.executorEnv.HYPOTHESIS_STORAGE_DIRECTORY", storage)
        .config("spark.task.maxFailures", str(TASK_ATTEMPTS))
    )
    try:
        spark = builder.getOrCreate()
    except Exception as e:  # noqa: BLE001 - py4j and pyspark raise many kinds; the reason is the first line
        lines = [line.strip() for line in str(e).splitlines() if line.strip()] or [type(e).__name__]
        reason = next((line.lstrip(": ") for line in lines if line.startswith(": ")), lines[0])  # py4j: Java's
        raise SparkStartError(f"could not start Spark on {master} ({reason}); Spark needs Java 17 or 21: "
                              "--master processes[N] or serial run without it") from None
    spark.sparkContext.setLogLevel("WARN")
    if not is_local(spark.sparkContext.master):
        ship_packages(spark.sparkContext)
    return spark


def ship_packages(sc) -> Path:
    """Zip the project's packages (as this driver has them) and add the zip to every executor's path."""
    directory = Path(tempfile.mkdtemp(prefix="kraftcheck-spark-"))
    atexit.register(shutil.rmtree, directory, True)
    archive = directory / "kraftcheck.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        for package in PACKAGES:
            for path in sorted((ROOT / package).rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                    z.write(path, path.relative_to(ROOT).as_posix())
    sc.addPyFile(str(archive))
    return archive
