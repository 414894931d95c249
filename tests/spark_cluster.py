"""pytest fixtures for a Spark standalone cluster on 127.0.0.1 (registered in tests/conftest.py).

- ``spark_cluster``: ``(url, processes)``, a standalone master and one one-core worker started
  from the pyspark installation's jars (the pip package ships no start-master.sh), one per test
  module, stopped by pid at the end. The worker runs outside the project directory and without
  PYTHONPATH, so its executors import the project from the zip the driver ships
  (``properties.campaign.spark.ship_packages``).
- ``wait_for_log(text, process, log)``: until a daemon's log says ``text`` (a session must wait for
  "Registering worker" in the master's log, else its jobs wait for executors forever).
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import time
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_log(text: str, process: subprocess.Popen, log: Path, seconds: float = 90) -> None:
    """Until the daemon's log says ``text``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert process.poll() is None, f"{log.stem} exited:\n{log.read_text()[-2000:]}"
        if text in log.read_text():
            return
        time.sleep(0.1)
    raise AssertionError(f"{log.stem} did not log {text!r} in {seconds} s:\n{log.read_text()[-2000:]}")


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory):
    """``spark://127.0.0.1:PORT``: a standalone master and a one-core worker, stopped by pid at the end."""
    import pyspark

    spark_home = Path(pyspark.__file__).resolve().parent
    base = tmp_path_factory.mktemp("cluster")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # The worker builds its executors' command from SPARK_HOME; a pip installation has no RELEASE file
    # or build directories to read the Scala version from (bin/load-spark-env.sh would export it).
    core = next((spark_home / "jars").glob("spark-core_*.jar")).name
    scala = re.match(r"spark-core_([\d.]+)-", core).group(1)
    env.update(SPARK_HOME=str(spark_home), SPARK_LOCAL_IP="127.0.0.1", SPARK_SCALA_VERSION=scala)
    # no REST submission server: it would take the fixed port 6066
    java = ["java", "-Xmx256m", "-Dspark.master.rest.enabled=false", "-cp", f"{spark_home / 'jars'}/*"]
    url = f"spark://127.0.0.1:{port}"
    commands = {
        "master": [*java, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                   "--webui-port", "0"],
        "worker": [*java, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--webui-port", "0",
                   "--cores", "1", "--memory", "1g", "--work-dir", str(base / "work")],
    }
    processes = {}
    try:
        for name, command in commands.items():
            log = base / f"{name}.log"
            processes[name] = (subprocess.Popen(command, cwd=base, env=env, stdout=log.open("w"),
                                                stderr=subprocess.STDOUT), log)
        # an application that registers before the master leads is ignored (and retried only 20 s later)
        wait_for_log("I have been elected leader", *processes["master"])
        yield url, processes
    finally:
        for process, _ in processes.values():
            process.terminate()
        for process, _ in processes.values():
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextlib.contextmanager
def cluster_session(spark_cluster, app_name: str):
    """A Spark session on ``spark_cluster``, once the worker has registered (else jobs would wait for
    executors forever); stopped at the end."""
    from properties.campaign import spark

    url, processes = spark_cluster
    s = spark.session(url, app_name=app_name)
    try:
        wait_for_log("Registering worker", *processes["master"])
        yield s
    finally:
        s.stop()
