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
- A session that cannot start (no Java, say) is a ``SparkStartError``: one line. A standalone
  master (``spark://HOST:PORT``) is first reached with a plain TCP connection
  (``check_reachable``), so an address nothing answers at is one line in seconds, before a JVM.
- The JVM's own output (log4j's lines, Java's stack traces) goes to the ``log`` file given to
  ``session``, not to the terminal: the JVM inherits a stderr pointing at the file.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import socket
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


def check_spark_master(master: str, others: str = ", serial or processes[N]") -> str:
    """A Spark master URL as given, or a one-line ValueError (``others``: what else the caller takes)."""
    local = _LOCAL.fullmatch(master)
    if local and local.group(1) == "0":
        raise ValueError(f"bad master {master!r}: local[N] needs N >= 1")
    if local and local.group(2) is not None and int(local.group(2)) < 2:
        raise ValueError(f"bad master {master!r}: local[N,F] gives a task F attempts, and a campaign needs F >= 2 "
                         "so that a task whose worker dies is retried")
    if local or _CLUSTER.fullmatch(master):
        return master
    raise ValueError(f"bad master {master!r}; expected local[N], local[*], local[N,F], spark://HOST:PORT{others}")


def check_reachable(master: str, timeout: float = 5.0) -> None:
    """A one-line ValueError unless some host of a ``spark://HOST:PORT[,HOST:PORT]`` master accepts a
    TCP connection; other masters are not checked."""
    if not master.startswith("spark://"):
        return
    reasons = []
    for address in master.removeprefix("spark://").split(","):
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"bad master {master!r}: expected spark://HOST:PORT")
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
            return
        except OSError as e:
            reasons.append(f"{address}: {e.strerror or e}" if not isinstance(e, socket.timeout)
                           else f"{address}: no answer in {timeout:g} s")
    raise ValueError(f"cannot reach the Spark master {master} ({'; '.join(reasons)})")


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


# Test-only: a directory; a task for partition p kills its own Python worker (after its first seed)
# when ``kill-partition-<p>`` is in it and ``killed-partition-<p>`` is not (which it then creates).
KILL_WORKER_ENV = "KRAFTCHECK_CAMPAIGN_TEST_KILL_DIR"


def session(master: str, app_name: str = "kraftcheck campaign", log: Path | None = None):
    """A SparkSession on ``master`` (made retrying when local), with the project shipped when not local;
    the JVM's output goes to ``log`` (appended) when one is given."""
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
    if os.environ.get(KILL_WORKER_ENV):
        # handed to the Python workers by the session: the JVM's own environment is the one this process had when
        # its first session started, which a test that set the hook later does not reach
        builder = builder.config(f"spark.executorEnv.{KILL_WORKER_ENV}", os.environ[KILL_WORKER_ENV])
    try:
        with _stderr_to(log):  # the JVM starts here and keeps the stderr it inherits
            spark = builder.getOrCreate()
    except Exception as e:  # noqa: BLE001 - py4j and pyspark raise many kinds; the reason is the first line
        lines = [line.strip() for line in str(e).splitlines() if line.strip()] or [type(e).__name__]
        reason = next((line.lstrip(": ") for line in lines if line.startswith(": ")), lines[0])  # py4j: Java's
        java = os.environ.get("JAVA_HOME") or shutil.which("java")
        hint = ("; Spark needs Java 17 or 21: --master processes[N] or serial run without it" if not java else
                f"; the JVM's log: {log}" if log is not None else "")
        raise SparkStartError(f"could not start Spark on {master} ({reason}){hint}") from None
    spark.sparkContext.setLogLevel("WARN")
    if not is_local(spark.sparkContext.master):
        ship_packages(spark.sparkContext)
    return spark


class _stderr_to:
    """File descriptor 2 pointed at ``path`` (appended) inside the block, so child processes inherit it."""

    def __init__(self, path: Path | None) -> None:
        self.path, self.saved = path, None

    def __enter__(self) -> None:
        if self.path is None:
            return
        sys.stderr.flush()
        self.saved = os.dup(2)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 2)
        os.close(fd)

    def __exit__(self, *exc) -> None:
        if self.saved is not None:
            sys.stderr.flush()
            os.dup2(self.saved, 2)
            os.close(self.saved)


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
