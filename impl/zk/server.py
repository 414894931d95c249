"""Start and stop a real standalone ZooKeeper 3.8 server for tests (Debian's ``zookeeper`` package).

How it works (reference: /work/shared/reference/environment.md §3):
- One JVM per server: ``java -cp zookeeper.jar:slf4j-simple.jar ZooKeeperServerMain zoo.cfg``.
  Debian's jar carries a Class-Path to its dependencies, so one jar is enough; slf4j-simple only
  makes the server log (to ``zk.log`` in the server's directory).
- zoo.cfg, not the ``PORT DATADIR`` short form: the short form listens on every interface and
  starts the Jetty AdminServer on :8080. Here the server listens on 127.0.0.1 only, on a free
  port, with the admin server off and the four-letter words ``srvr``, ``ruok``, ``mntr``.
- tickTime=100 ms and minSessionTimeout=200 ms make session expiry fast in tests. The
  maxSessionTimeout is raised to 60 s (the default, 20 ticks, would be 2 s): a test that wants a
  session to live must be able to ask for a timeout longer than a GC pause on a busy 2-core box.
- ``forceSync=no`` by default: about twice the write throughput; a test server needs no fsync.
- Ready when ``srvr`` answers ``Mode: standalone``: ``ruok`` answers ``imok`` before the server
  serves requests, so it is not a readiness check.
- Stop: SIGTERM to the pid (ZooKeeper exits in about 0.4 s), SIGKILL if it is still there after
  ``timeout``. A port taken between choosing and binding it is retried with another port.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["ZOOKEEPER_JAR", "ZkServer", "ZooKeeperNotInstalled", "four_letter_word", "start_server"]

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
SLF4J_SIMPLE_JAR = Path("/usr/share/java/slf4j-simple.jar")
_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"

_running: set[ZkServer] = set()


class ZooKeeperNotInstalled(RuntimeError):
    """The Debian ``zookeeper`` package (its jar) is not on this machine."""


@dataclass(eq=False)
class ZkServer:
    """A running ZooKeeper server process and its directory."""

    port: int
    workdir: Path
    process: subprocess.Popen[bytes]
    _stopped: bool = field(default=False, repr=False)

    @property
    def hosts(self) -> str:
        """The connect string, ``127.0.0.1:PORT``."""
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.workdir / "zk.log"

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, timeout: float = 5.0, *, keep_dir: bool = False) -> int:
        """SIGTERM, then SIGKILL after ``timeout`` seconds; returns the exit status."""
        if not self._stopped:
            self._stopped = True
            _running.discard(self)
            if self.process.poll() is None:
                os.kill(self.process.pid, signal.SIGTERM)
                try:
                    self.process.wait(timeout)
                except subprocess.TimeoutExpired:
                    os.kill(self.process.pid, signal.SIGKILL)
                    self.process.wait(timeout)
            if not keep_dir:
                shutil.rmtree(self.workdir, ignore_errors=True)
        rc = self.process.returncode
        assert rc is not None
        return rc

    def __enter__(self) -> ZkServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def four_letter_word(port: int, word: str, timeout: float = 1.0) -> str:
    """Send a four-letter word (``srvr``, ``ruok``, ``mntr``) and return the whole answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(word.encode())
        chunks = []
        while chunk := sock.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _config(port: int, data_dir: Path, tick_ms: int, min_session_ms: int, max_session_ms: int, force_sync: bool) -> str:
    return "\n".join(
        [
            f"tickTime={tick_ms}",
            f"dataDir={data_dir}",
            f"clientPort={port}",
            "clientPortAddress=127.0.0.1",
            "admin.enableServer=false",
            "4lw.commands.whitelist=srvr,ruok,mntr",
            "maxClientCnxns=0",
            f"minSessionTimeout={min_session_ms}",
            f"maxSessionTimeout={max_session_ms}",
            f"forceSync={'yes' if force_sync else 'no'}",
            "",
        ]
    )


def start_server(
    *,
    tick_ms: int = 100,
    min_session_timeout_ms: int = 200,
    max_session_timeout_ms: int = 60_000,
    force_sync: bool = False,
    ready_timeout: float = 30.0,
    java: str = "java",
    attempts: int = 3,
) -> ZkServer:
    """Start a standalone server on a free loopback port and wait until it serves requests."""
    if not ZOOKEEPER_JAR.is_file():
        raise ZooKeeperNotInstalled(
            f"{ZOOKEEPER_JAR} is missing: install the Debian package zookeeper (scripts/setup.sh does)"
        )
    if shutil.which(java) is None:
        raise ZooKeeperNotInstalled(f"no {java!r} on PATH: the ZooKeeper server needs a Java runtime")
    classpath = ":".join(str(jar) for jar in (ZOOKEEPER_JAR, SLF4J_SIMPLE_JAR) if jar.is_file())
    failure = ""
    for _ in range(attempts):
        port = _free_port()
        workdir = Path(tempfile.mkdtemp(prefix="kraftcheck-zk-"))
        (workdir / "data").mkdir()
        cfg = workdir / "zoo.cfg"
        cfg.write_text(
            _config(port, workdir / "data", tick_ms, min_session_timeout_ms, max_session_timeout_ms, force_sync)
        )
        with open(workdir / "zk.log", "wb") as log:
            process = subprocess.Popen(
                [java, "-Xmx256m", "-XX:+UseSerialGC", "-cp", classpath, _MAIN, str(cfg)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=workdir,
            )
        server = ZkServer(port=port, workdir=workdir, process=process)
        _running.add(server)
        if _wait_ready(server, ready_timeout):
            return server
        failure = server.log_tail()
        server.stop()
        if "Address already in use" not in failure:
            break
    raise RuntimeError(f"ZooKeeper did not become ready; last log lines:\n{failure}")


def _wait_ready(server: ZkServer, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            return False
        try:
            if "Mode: standalone" in four_letter_word(server.port, "srvr"):
                return True
        except OSError:
            pass
        time.sleep(0.05)
    return False


@atexit.register
def _stop_leftovers() -> None:
    for server in list(_running):
        server.stop()
