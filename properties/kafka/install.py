"""Kafka's jars, resolved from Maven Central with Maven into a cache that later runs and CI reuse.

Rules:
- A release is ``org.apache.kafka:kafka_2.13:V`` with everything it needs at runtime, plus the
  logging binding that Kafka's POM leaves out (3.x declares reload4j only at compile time, so
  without ``slf4j-reload4j`` a broker logs nothing and dies in ``Log4jControllerRegistration``;
  4.x logs through Log4j 2) and ``kafka-tools`` (TopicCommand, FeatureCommand,
  MetadataQuorumCommand).
- Releases 3.4.0 to 3.9.x run ZooKeeper mode and the migration; 4.x runs KRaft alone (ZooKeeper
  mode was deleted in 4.0). Older releases have no migration and are refused.
- The cache is ``$KRAFTCHECK_CACHE`` or ``~/.cache/kraftcheck``; one folder per version, written
  to a temporary folder and renamed into place, so an interrupted install leaves nothing half-done.
- A user's own build is a folder of jars (``--kafka-dir``); its version is read from the
  ``kafka/kafka-version.properties`` inside its kafka-clients jar.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

DEFAULT_VERSION = "3.9.2"  # the latest 3.9.x on Maven Central, the last line with ZooKeeper mode
FIRST_MIGRATION_RELEASE = (3, 4, 0)
METADATA_URL = "https://repo.maven.apache.org/maven2/org/apache/kafka/kafka_2.13/maven-metadata.xml"
_DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1"  # pinned: older ones pull Maven 2
_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")


class InstallError(Exception):
    """A one-line reason why Kafka cannot be installed or used: the CLI prints it and exits 2."""


@dataclass(frozen=True)
class Installation:
    """A runnable Kafka: where its jars are and what it can run."""

    version: str
    lib: Path  # a folder of jars: the classpath is lib/*

    @property
    def release(self) -> tuple[int, int, int]:
        return parse_version(self.version)

    @property
    def has_zookeeper_mode(self) -> bool:
        """ZooKeeper-mode brokers and the KIP-866 migration (3.4 to 3.9)."""
        return FIRST_MIGRATION_RELEASE <= self.release < (4, 0, 0)

    @property
    def log4j2(self) -> bool:
        return self.release >= (4, 0, 0)

    @property
    def classpath(self) -> str:
        return f"{self.lib}/*"


def parse_version(text: str) -> tuple[int, int, int]:
    match = _VERSION.match(text)
    if not match:
        raise InstallError(f"Kafka version {text!r} is not of the form MAJOR.MINOR.PATCH (say {DEFAULT_VERSION})")
    return (int(match[1]), int(match[2]), int(match[3]))


def check_supported(version: str) -> None:
    """Refuse, in one line, a release without the migration or KRaft."""
    if parse_version(version) < FIRST_MIGRATION_RELEASE:
        raise InstallError(
            f"Kafka {version} has no ZooKeeper-to-KRaft migration (KIP-866 shipped in 3.4.0): use 3.4.0 or later"
        )


def cache_root() -> Path:
    return Path(os.environ.get("KRAFTCHECK_CACHE") or Path.home() / ".cache" / "kraftcheck")


def cached(version: str) -> Installation | None:
    lib = cache_root() / "kafka" / version / "lib"
    return Installation(version, lib) if (lib.parent / "installed.json").is_file() else None


def require_tools() -> None:
    """Java and Maven must be on the PATH (Java 17: Kafka 4.x brokers need it)."""
    for tool, why in (("java", "Kafka runs on Java 17 or later"), ("mvn", "Kafka's jars come from Maven Central")):
        if shutil.which(tool) is None:
            raise InstallError(f"{tool} not found on the PATH: {why}")


def released_versions(timeout: float = 30.0) -> list[str]:
    """Every kafka_2.13 release Maven Central lists."""
    try:
        with urllib.request.urlopen(METADATA_URL, timeout=timeout) as response:
            root = ElementTree.fromstring(response.read())
    except (urllib.error.URLError, OSError, ElementTree.ParseError) as e:
        raise InstallError(f"cannot read Kafka's release list from Maven Central: {e}") from None
    return [v.text for v in root.iter("version") if v.text and _VERSION.match(v.text)]


def _pom(version: str) -> str:
    major = parse_version(version)[0]
    binding = (
        [  # kafka-clients 4.x still resolves slf4j-api 1.7: Log4j 2's binding for slf4j 1.x
            ("org.apache.logging.log4j", "log4j-slf4j-impl", "2.24.3"),
            ("org.apache.logging.log4j", "log4j-core", "2.24.3"),
        ]
        if major >= 4
        else [("org.slf4j", "slf4j-reload4j", "1.7.36"), ("ch.qos.reload4j", "reload4j", "1.2.25")]
    )
    deps = [("org.apache.kafka", "kafka_2.13", version), ("org.apache.kafka", "kafka-tools", version), *binding]
    body = "".join(
        f"<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version></dependency>"
        for g, a, v in deps
    )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>kraftcheck</groupId><artifactId>kafka-jars</artifactId><version>1</version>"
        f"<packaging>pom</packaging><dependencies>{body}</dependencies></project>"
    )


def install(version: str = DEFAULT_VERSION, *, progress=lambda line: None) -> Installation:
    """The jars of ``version`` in the cache, resolved with Maven the first time."""
    check_supported(version)
    found = cached(version)
    if found is not None:
        return found
    require_tools()
    if version not in released_versions():
        raise InstallError(f"Kafka {version} is not on Maven Central (see {METADATA_URL})")
    home = cache_root() / "kafka" / version
    home.parent.mkdir(parents=True, exist_ok=True)
    progress(f"resolving org.apache.kafka:kafka_2.13:{version} with Maven into {home}")
    work = Path(tempfile.mkdtemp(dir=home.parent, prefix=f".{version}-"))
    try:
        (work / "pom.xml").write_text(_pom(version))
        result = subprocess.run(
            [
                "mvn",
                "-B",
                "-q",
                "-f",
                str(work / "pom.xml"),
                f"{_DEPENDENCY_PLUGIN}:copy-dependencies",
                "-DincludeScope=runtime",
                f"-DoutputDirectory={work / 'lib'}",
            ],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        if result.returncode != 0:
            last = next((line for line in reversed(result.stdout.splitlines()) if "ERROR" in line), "no detail")
            raise InstallError(f"Maven could not resolve Kafka {version}: {last.strip()}")
        jars = sorted(p.name for p in (work / "lib").glob("*.jar"))
        (work / "installed.json").write_text(json.dumps({"version": version, "jars": jars}, indent=1) + "\n")
        if not home.exists():  # else another install won the race, and its folder serves
            os.rename(work, home)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    progress(f"installed Kafka {version}: {len(jars)} jars")
    return Installation(version, home / "lib")


def local(folder: str | Path) -> Installation:
    """A user's own build: a folder of jars holding kafka_2.13 and kafka-clients."""
    lib = Path(folder).resolve()
    if not lib.is_dir():
        raise InstallError(f"--kafka-dir {folder}: not a folder")
    clients = sorted(lib.glob("kafka-clients-*.jar"))
    if not clients or not list(lib.glob("kafka_2.13-*.jar")):
        raise InstallError(f"--kafka-dir {folder}: no kafka_2.13-*.jar and kafka-clients-*.jar in it")
    try:
        with zipfile.ZipFile(clients[0]) as jar:
            properties = jar.read("kafka/kafka-version.properties").decode()
    except (KeyError, zipfile.BadZipFile, OSError):
        raise InstallError(f"--kafka-dir {folder}: {clients[0].name} has no kafka/kafka-version.properties") from None
    version = next(
        (line.split("=", 1)[1].strip() for line in properties.splitlines() if line.startswith("version=")), ""
    )
    release = re.match(r"\d+\.\d+\.\d+", version)
    if not release:
        raise InstallError(f"--kafka-dir {folder}: cannot read a version from {clients[0].name} ({version!r})")
    check_supported(release[0])
    return Installation(release[0], lib)
