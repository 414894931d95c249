#!/usr/bin/env bash
# Set up kraftcheck on a fresh machine: a virtual environment in .venv with the project and its
# test and docs extras. Safe to run again: it only installs what is missing or out of date.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "kraftcheck needs Python >= 3.11; $PYTHON is $("$PYTHON" --version 2>&1)" >&2
    exit 2
fi
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
stamp=.venv/.kraftcheck-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install --quiet -e ".[test,docs]"
    touch "$stamp"
fi

# The real-ZooKeeper tests (tests/test_zk_port.py, fixture tests/zk_server.py) run Debian's
# ZooKeeper 3.8 server; its jar carries a Class-Path to its dependencies, so one jar is enough.
if [ ! -f /usr/share/java/zookeeper.jar ]; then
    if [ "$(id -u)" -eq 0 ]; then
        as_root=()
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        as_root=(sudo -n)
    else
        echo "the real-ZooKeeper tests need the Debian package zookeeper (apt-get install zookeeper) and this user cannot install it" >&2
        exit 3
    fi
    "${as_root[@]}" apt-get update -qq
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq zookeeper >/dev/null
fi

# The real-Kafka runs (tests/test_kafka_real.py, `kraftcheck kafka run`) use Kafka's released jars,
# resolved with Maven from Maven Central into ~/.cache/kraftcheck (or $KRAFTCHECK_CACHE) once.
if ! command -v mvn >/dev/null 2>&1; then
    echo "the real-Kafka runs need Maven (mvn) on the PATH to fetch Kafka's jars" >&2
    exit 3
fi
.venv/bin/kraftcheck kafka install >/dev/null
