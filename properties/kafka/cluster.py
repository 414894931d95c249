"""Real processes on 127.0.0.1: a ZooKeeper server, Kafka brokers and KRaft controllers.

Rules:
- Every port is chosen at run time by binding port 0 on 127.0.0.1; every process gets its own
  data and log folder under the run's folder and its configuration as a file there, so a run's
  folder says exactly what ran.
- Nothing outlives kraftcheck: each process runs in its own process group, asks the kernel to
  kill it when kraftcheck dies (``PR_SET_PDEATHSIG``, so even a SIGKILL of kraftcheck stops the
  cluster), and is killed at exit and on SIGTERM or SIGINT. Only pids that kraftcheck started are
  signalled.
- A process is ready when its own log says so (the markers below, checked against Kafka 3.9's
  ``KafkaServer``, ``KafkaRaftServer`` and ``BrokerLifecycleManager``), never after a fixed sleep.
- Faults act on whole processes: SIGKILL, SIGSTOP and SIGCONT, a clean SIGTERM.
"""

from __future__ import annotations

import atexit
import ctypes
import fcntl
import os
import random
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from properties.kafka.install import Installation

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")  # Debian's zookeeper: its manifest names its dependencies
SLF4J_SIMPLE = Path("/usr/share/java/slf4j-simple.jar")
ZK_SESSION_TIMEOUT_MS = 6000  # brokers' zookeeper.session.timeout.ms: a pause longer than this makes a zombie
BROKER_SESSION_TIMEOUT_MS = 9000  # KRaft's broker.session.timeout.ms (the default)

READY = {
    "zk-broker": "started (kafka.server.KafkaServer)",  # "[KafkaServer id=N] started"
    "controller": "Kafka Server started",  # KafkaRaftServer.startup
    "kraft-broker": "Transitioning from RECOVERY to RUNNING",  # BrokerLifecycleManager: unfenced
}
FAILED = ("Exiting Kafka due to fatal exception", "Fatal error during", "Address already in use")

JMX_TARGETS = "jmx-targets.txt"  # "name port" per Kafka process, in the run's folder
JMX_INTERVAL_MS = 500

_LIVE: dict[int, str] = {}  # pid -> name: every process started and not yet reaped


class ClusterError(Exception):
    """A process that would not start or stop: its name and the line of its log that says why.

    A tool that failed keeps its whole ``output`` (stdout, then stderr): its last line alone may not
    say whether Kafka answered or the tool never reached it."""

    def __init__(self, message: str, output: str = "") -> None:
        super().__init__(message)
        self.output = output


def _stop_everything(*_args) -> None:
    for pid in list(_LIVE):
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _LIVE.pop(pid, None)


def _on_signal(signum, frame) -> None:
    _stop_everything()
    raise KeyboardInterrupt if signum == signal.SIGINT else SystemExit(128 + signum)


atexit.register(_stop_everything)


def install_signal_handlers() -> None:
    """SIGTERM and SIGINT kill the cluster before kraftcheck exits (the main thread only)."""
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)


def _die_with_parent() -> None:  # runs in the child between fork and exec
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


# Listening ports come from below the kernel's ephemeral range (32768-60999 here). A port bind(("127.0.0.1", 0))
# hands out is an ephemeral one: while its process is down (a controller killed and not yet restarted) any outgoing
# connection on the machine may take it as its source port, and the restarted process then fails to bind ("Address
# already in use"), which made a loaded test run stuck. Each port is also held by a lock file for as long as its
# run lasts, so that two runs at once (test workers, campaigns) never hand out the same one; the kernel drops a
# dead process's locks.
LISTEN_PORTS = range(20000, 32768)
PORT_LOCKS = Path(tempfile.gettempdir()) / "kraftcheck-ports"
_port_locks: dict[int, int] = {}  # port -> the open lock file that holds it, in this process


def free_port(taken: set[int]) -> int:
    """A port on 127.0.0.1, below the ephemeral range, that nothing listens on now, no other kraftcheck process
    holds and this run has not handed out; held until ``release_ports``."""
    PORT_LOCKS.mkdir(exist_ok=True)
    start = random.randrange(len(LISTEN_PORTS))  # runs at once start apart, so they seldom try the same ports
    for i in range(len(LISTEN_PORTS)):
        port = LISTEN_PORTS[(start + i) % len(LISTEN_PORTS)]
        if port in taken or port in _port_locks:
            continue
        lock = os.open(PORT_LOCKS / str(port), os.O_CREAT | os.O_RDWR, 0o666)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(lock)
            continue
        if not _can_listen(port):
            fcntl.flock(lock, fcntl.LOCK_UN)
            os.close(lock)
            continue
        _port_locks[port] = lock
        taken.add(port)
        return port
    raise ClusterError(f"no free port on 127.0.0.1 in {min(LISTEN_PORTS)}-{max(LISTEN_PORTS)}: every one is in use")


def _can_listen(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Kafka's and ZooKeeper's servers bind
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def release_ports(ports: set[int]) -> None:
    """Give back the ports of a run whose processes have stopped."""
    for port in ports:
        lock = _port_locks.pop(port, None)
        if lock is not None:
            os.close(lock)  # closing the file drops its lock


def jmx_flags(port: int) -> list[str]:
    """Remote JMX on loopback only, without authentication: the RMI port pinned to the registry's, and
    the stub's host named, so that a client on 127.0.0.1 reaches it (reference real-kafka.md §2.1, the JMX poller)."""
    return [
        f"-Dcom.sun.management.jmxremote.port={port}",
        f"-Dcom.sun.management.jmxremote.rmi.port={port}",
        "-Dcom.sun.management.jmxremote.host=127.0.0.1",
        "-Djava.rmi.server.hostname=127.0.0.1",
        "-Dcom.sun.management.jmxremote.authenticate=false",
        "-Dcom.sun.management.jmxremote.ssl=false",
    ]


def write_properties(path: Path, values: dict[str, object]) -> None:
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))


@dataclass
class Process:
    """One OS process of the cluster, started and signalled only through this object."""

    name: str
    argv: list[str]
    folder: Path  # its logs and data live here
    log_name: str = "server.log"
    popen: subprocess.Popen | None = None
    paused: bool = False
    starts: int = 0
    start_offset: int = 0  # the log's size when it last started: readiness is read after it

    @property
    def log(self) -> Path:
        return self.folder / "logs" / self.log_name

    @property
    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def start(self) -> None:
        if self.running:
            raise ClusterError(f"{self.name} is already running")
        (self.folder / "logs").mkdir(parents=True, exist_ok=True)
        self.start_offset = self.log_offset()
        with open(self.folder / "logs" / "stdout.log", "ab") as out:
            self.popen = subprocess.Popen(
                self.argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=_die_with_parent,
                cwd=self.folder,
            )
        _LIVE[self.popen.pid] = self.name
        self.paused = False
        self.starts += 1

    def signal(self, signum: int) -> None:
        if self.popen is not None and self.popen.poll() is None:
            os.killpg(self.popen.pid, signum)

    def kill(self) -> None:
        """kill -9: no shutdown hook, no controlled shutdown, sessions left to expire."""
        self.signal(signal.SIGKILL)
        self._reap(10)

    def stop(self, timeout: float = 60, meanwhile: Callable[[], None] | None = None) -> bool:
        """SIGTERM: the shutdown hook runs (a broker's controlled shutdown); SIGKILL after ``timeout``.
        ``meanwhile`` is called every 20 ms while the process shuts down (a run fires its faults due then).

        True when the process stopped by itself, False when it had to be killed."""
        if self.paused:
            self.resume()
        self.signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._reap(max(0.0, deadline - time.monotonic()) if meanwhile is None else 0.02)
                return True
            except subprocess.TimeoutExpired:
                if time.monotonic() >= deadline:
                    self.kill()
                    return False
                if meanwhile is not None:
                    meanwhile()

    def fatal_line(self) -> str | None:
        """The line of its log since its last start that says why it exited, if one does."""
        lines = self.log_since(self.start_offset).splitlines()
        return next((line.strip()[:300] for line in lines if any(f in line for f in FAILED)), None)

    def pause(self) -> None:
        self.signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        self.signal(signal.SIGCONT)
        self.paused = False

    def _reap(self, timeout: float) -> None:
        if self.popen is not None:
            self.popen.wait(timeout)
            _LIVE.pop(self.popen.pid, None)

    def log_offset(self) -> int:
        return self.log.stat().st_size if self.log.exists() else 0

    def wait_for(self, marker: str, timeout: float, since: int = 0, alive: bool = True) -> None:
        """Until ``marker`` appears in the log after byte ``since``; fails fast if the process dies."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.log_since(since)
            if marker in text:
                return
            failure = next((line for line in text.splitlines() if any(f in line for f in FAILED)), None)
            if failure is not None:
                raise ClusterError(f"{self.name} failed to start: {failure.strip()[:300]}")
            if alive and not self.running:
                raise ClusterError(
                    f"{self.name} exited with code {self.popen.returncode} before {marker!r} ({self.log})"
                )
            if time.monotonic() > deadline:
                raise ClusterError(f"{self.name}: no {marker!r} in its log within {timeout:.0f} s ({self.log})")
            time.sleep(0.1)

    def log_since(self, offset: int) -> str:
        try:
            with open(self.log, "rb") as f:
                f.seek(offset)
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""


def java_argv(install: Installation, folder: Path, main: list[str], heap_mb: int, jmx_port: int) -> list[str]:
    """As bin/kafka-run-class.sh builds it, tuned for a 2-core machine: small heaps, SerialGC, C1 only;
    with remote JMX on ``jmx_port``, as kafka-run-class.sh's JMX_PORT gives it."""
    if install.log4j2:
        logging = [f"-Dlog4j2.configurationFile=file:{folder / 'log4j2.properties'}"]
    else:
        logging = [f"-Dlog4j.configuration=file:{folder / 'log4j.properties'}"]
    return [
        "java",
        f"-Xms{heap_mb // 2}m",
        f"-Xmx{heap_mb}m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-XX:+ExitOnOutOfMemoryError",
        "-Djava.awt.headless=true",
        f"-Dkafka.logs.dir={folder / 'logs'}",
        *jmx_flags(jmx_port),
        *logging,
        "-cp",
        install.classpath,
        *main,
    ]


LOG4J = """\
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File=${kafka.logs.dir}/server.log
log4j.appender.file.Append=true
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.org.apache.kafka.metadata.migration=TRACE
log4j.logger.kafka.zk.migration=DEBUG
log4j.logger.org.apache.zookeeper=WARN
log4j.logger.kafka.request.logger=WARN
log4j.logger.state.change.logger=WARN
log4j.logger.kafka.log.LogCleaner=WARN
log4j.logger.org.apache.kafka.storage.internals.log=WARN
log4j.logger.kafka.log=WARN
"""

LOG4J2 = """\
appender.file.type=File
appender.file.name=file
appender.file.fileName=${sys:kafka.logs.dir}/server.log
appender.file.append=true
appender.file.layout.type=PatternLayout
appender.file.layout.pattern=[%d] %p %m (%c)%n
rootLogger.level=INFO
rootLogger.appenderRef.file.ref=file
logger.zk.name=org.apache.zookeeper
logger.zk.level=WARN
logger.log.name=kafka.log
logger.log.level=WARN
logger.storage.name=org.apache.kafka.storage.internals.log
logger.storage.level=WARN
"""


@dataclass
class Cluster:
    """The processes of one run, all under ``root``; a context manager that stops them all."""

    install: Installation
    root: Path
    ports: set[int] = field(default_factory=set)
    processes: dict[str, Process] = field(default_factory=dict)
    zk_port: int = 0
    zk_jmx_port: int = 0
    controller_ports: dict[int, int] = field(default_factory=dict)  # node id -> CONTROLLER port
    broker_ports: dict[int, int] = field(default_factory=dict)  # broker id -> PLAINTEXT port
    jmx_ports: dict[str, int] = field(default_factory=dict)  # Kafka process -> its JMX port, kept across restarts
    jmx_poller: subprocess.Popen | None = None
    on_event: Callable[[str, dict], None] = lambda kind, detail: None  # every start, stop and signal

    def __enter__(self) -> Cluster:
        self.root.mkdir(parents=True, exist_ok=True)
        return self

    def __exit__(self, *exc) -> None:
        self.stop_all()
        release_ports(self.ports)

    def stop_all(self) -> None:
        if self.jmx_poller is not None:
            self.jmx_poller.kill()
            self.jmx_poller.wait()
            _LIVE.pop(self.jmx_poller.pid, None)
            self.jmx_poller = None
        for process in self.processes.values():
            if process.running:
                process.kill()

    # ---- ZooKeeper ----------------------------------------------------------------------------

    def add_zookeeper(self) -> Process:
        if not ZOOKEEPER_JAR.is_file():
            raise ClusterError(f"{ZOOKEEPER_JAR} not found: install Debian's zookeeper package")
        folder = self.root / "zookeeper"
        (folder / "data").mkdir(parents=True, exist_ok=True)
        self.zk_port = free_port(self.ports)
        write_properties(
            folder / "zoo.cfg",
            {
                "tickTime": 200,
                "dataDir": folder / "data",
                "clientPort": self.zk_port,
                "clientPortAddress": "127.0.0.1",
                "admin.enableServer": "false",
                "maxClientCnxns": 0,
                "minSessionTimeout": 400,
                "maxSessionTimeout": 60000,  # the default cap, 20 ticks, would cut Kafka's sessions to 4 s
                "4lw.commands.whitelist": "srvr,ruok,mntr",
            },
        )
        self.zk_jmx_port = free_port(self.ports)
        argv = [
            "java",
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            f"-Dzookeeper.log.dir={folder / 'logs'}",
            *jmx_flags(self.zk_jmx_port),  # for the forced session expiry (ExpireSession.java)
            "-cp",
            f"{ZOOKEEPER_JAR}:{SLF4J_SIMPLE}",
            "org.apache.zookeeper.server.ZooKeeperServerMain",
            str(folder / "zoo.cfg"),
        ]
        process = Process("zookeeper", argv, folder, log_name="stdout.log")
        self.processes[process.name] = process
        return process

    @property
    def zk_connect(self) -> str:
        return f"127.0.0.1:{self.zk_port}"

    def wait_zookeeper(self, timeout: float = 60) -> None:
        """Until the server answers ``srvr`` as a serving standalone server."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.zk_port), timeout=2) as s:
                    s.sendall(b"srvr")
                    if b"Mode: standalone" in s.recv(4096):
                        return
            except OSError:
                pass
            if not self.processes["zookeeper"].running:
                raise ClusterError(f"zookeeper exited ({self.processes['zookeeper'].log})")
            time.sleep(0.1)
        raise ClusterError(f"zookeeper did not serve on 127.0.0.1:{self.zk_port} within {timeout:.0f} s")

    # ---- Kafka nodes --------------------------------------------------------------------------

    def controller_voters(self) -> str:
        return ",".join(f"{node}@127.0.0.1:{port}" for node, port in sorted(self.controller_ports.items()))

    def node(self, name: str, config: dict[str, object], heap_mb: int) -> Process:
        """A Kafka process (broker or controller) whose configuration is ``config``, (re)written now."""
        folder = self.root / name
        folder.mkdir(parents=True, exist_ok=True)
        if self.install.log4j2:
            (folder / "log4j2.properties").write_text(LOG4J2)
        else:
            (folder / "log4j.properties").write_text(LOG4J)
        write_properties(folder / "server.properties", config)
        if name not in self.jmx_ports:
            self.jmx_ports[name] = free_port(self.ports)
            with open(self.root / JMX_TARGETS, "a") as targets:  # the poller reads it again every round
                targets.write(f"{name} {self.jmx_ports[name]}\n")
        argv = java_argv(
            self.install, folder, ["kafka.Kafka", str(folder / "server.properties")], heap_mb, self.jmx_ports[name]
        )
        process = self.processes.get(name)
        if process is None:
            process = self.processes[name] = Process(name, argv, folder)
        else:
            process.argv = argv
        return process

    def start_jmx_poller(self, out: Path) -> None:
        """One JVM that samples every Kafka process's gauges over JMX into ``out`` (JmxPoll.java)."""
        source = Path(__file__).with_name("JmxPoll.java")
        argv = [
            "java",
            "-Xmx48m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            # a paused process answers nothing: give up on it after a second, and sample it again later
            "-Dsun.rmi.transport.tcp.responseTimeout=1000",
            "-Dsun.rmi.transport.connectionTimeout=1000",
            str(source),
            str(self.root / JMX_TARGETS),
            str(JMX_INTERVAL_MS),
        ]
        with open(out, "ab") as sink:
            self.jmx_poller = subprocess.Popen(
                argv,
                stdout=sink,
                stderr=subprocess.DEVNULL,
                stdin=subprocess.PIPE,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        _LIVE[self.jmx_poller.pid] = "jmx-poller"

    def stop_jmx_poller(self, timeout: float = 30) -> None:
        """Closes the poller's stdin: it samples every process once more ("final") and exits."""
        poller, self.jmx_poller = self.jmx_poller, None
        if poller is None:
            return
        try:
            poller.stdin.close()
            poller.wait(timeout)
        except (subprocess.TimeoutExpired, OSError):
            poller.kill()
            poller.wait()
        _LIVE.pop(poller.pid, None)

    def read_zk_txn_log(self, out: Path) -> str | None:
        """ZooKeeper's transaction log, every write with its session, into ``out`` as JSON lines (ZkTxnLog.java,
        ZooKeeper's own reader), whole or not at all; read once the server has stopped, so that it is complete.
        None, or why the log is missing or cut short (what could be read is kept)."""
        data = self.root / "zookeeper" / "data"
        if not (data / "version-2").is_dir():
            return "ZooKeeper never started: no transaction log"
        source = Path(__file__).with_name("ZkTxnLog.java")
        try:
            result = subprocess.run(
                ["java", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", str(ZOOKEEPER_JAR),
                 str(source), str(data)],
                capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            return "ZooKeeper's transaction log was not read within 120 s"
        partial = out.with_name(out.name + ".tmp")
        partial.write_text(result.stdout)
        partial.replace(out)
        if result.returncode != 0:
            lines = [line for line in result.stderr.splitlines() if not line.startswith("SLF4J")]
            return lines[-1] if lines else f"ZkTxnLog exited {result.returncode}"
        return None

    def sample_broker_metadata(self, out: Path, brokers: list[int], rounds: int = 10, interval_ms: int = 1000) -> None:
        """What each of ``brokers`` serves clients, asked of it alone (BrokerMetadata.java, Kafka's own Metadata
        request), appended to ``out`` as JSON lines: a round a second until a round answers as the one before it,
        at most ``rounds``."""
        source = Path(__file__).with_name("BrokerMetadata.java")
        targets = [f"{b}=127.0.0.1:{self.broker_ports[b]}" for b in brokers]
        try:
            result = subprocess.run(
                ["java", "-Xmx64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", str(self.install.lib / "*"),
                 str(source), str(rounds), str(interval_ms), *targets],
                capture_output=True, text=True, timeout=60 + rounds * (interval_ms / 1000 + 10),
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as e:
            raise ClusterError(f"asking the brokers for their metadata took more than {e.timeout:.0f} s") from e
        if result.returncode != 0:
            raise ClusterError(f"BrokerMetadata exited {result.returncode}: {result.stderr.strip()[-300:]}")
        with open(out, "a") as sink:
            sink.write(result.stdout)

    def expire_session(self, session: int) -> None:
        """Ends a ZooKeeper session at the server, as its timeout would, while its process runs on."""
        source = Path(__file__).with_name("ExpireSession.java")
        result = subprocess.run(
            ["java", "-Xmx64m", str(source), str(self.zk_jmx_port), f"0x{session:x}"],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        if result.returncode != 0:
            raise ClusterError(f"expiring ZooKeeper session 0x{session:x} failed: {result.stderr.strip()[-300:]}")

    def tool(self, main: list[str], timeout: float = 120, heap_mb: int = 160) -> str:
        """One run of a Kafka tool (StorageTool, DumpLogSegments, ...): its output, or ClusterError."""
        argv = [
            "java",
            f"-Xmx{heap_mb}m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Xshare:auto",
            "-Dlog4j.configuration=file:/dev/null",
            "-cp",
            self.install.classpath,
            *main,
        ]
        try:
            result = subprocess.run(
                argv,
                capture_output=True,
                text=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        except subprocess.TimeoutExpired as e:  # a tool waiting on a cluster that does not answer: as its failure
            streams = (e.stdout, e.stderr)
            output = "".join(x.decode(errors="replace") if isinstance(x, bytes) else x or "" for x in streams)
            raise ClusterError(f"{main[0]} did not finish within {timeout:.0f} s", output) from None
        if result.returncode != 0:
            detail = (result.stderr.strip() or result.stdout.strip()).splitlines()
            raise ClusterError(
                f"{main[0]} failed: {detail[-1] if detail else 'no output'}", result.stdout + result.stderr
            )
        return result.stdout
