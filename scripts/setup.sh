#!/usr/bin/env bash
# Set up kraftcheck on a fresh machine: a virtual environment in .venv with the project and its
# test and docs extras, the Debian packages the tests need, and the docs site's Mermaid. Safe to run
# again: it only installs what is missing or out of date. Exit 2: the Python is too old; exit 3:
# a Debian package is missing and this user cannot install it.
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

# Debian packages the tests need: ZooKeeper 3.8's server for the real-ZooKeeper tests (tests/test_zk_port.py,
# fixture tests/zk_server.py; its jar carries a Class-Path to its dependencies, so one jar is enough);
# Chromium, headless, for the docs site's test that its diagrams draw; npm, to fetch Mermaid (below);
# Maven, for Kafka's jars.
MERMAID_VERSION=11.12.0
mermaid_js=docs/assets/javascripts/mermaid.min.js
mermaid_stamp=docs/assets/javascripts/.mermaid-$MERMAID_VERSION
missing=()
[ -f /usr/share/java/zookeeper.jar ] || missing+=(zookeeper)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v mvn >/dev/null 2>&1 || missing+=(maven)  # resolves Kafka's jars for the real-Kafka runs (below)
if [ ! -f "$mermaid_stamp" ] && ! command -v npm >/dev/null 2>&1; then
    missing+=(npm)
fi
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -eq 0 ]; then
        as_root=()
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        as_root=(sudo -n)
    else
        echo "the tests need the Debian packages ${missing[*]} (apt-get install ${missing[*]}) and this user cannot install them" >&2
        exit 3
    fi
    "${as_root[@]}" apt-get update -qq
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The docs site serves Mermaid itself, so that its diagrams draw without a network (mkdocs.yml's
# extra_javascript; Material for MkDocs uses a Mermaid already on the page rather than its CDN). The
# pinned release's bundle comes from the npm registry once, and is not committed (.gitignore).
if [ ! -f "$mermaid_stamp" ] || [ ! -f "$mermaid_js" ]; then
    tmp=$(mktemp -d)
    (cd "$tmp" && npm pack --silent "mermaid@$MERMAID_VERSION" >/dev/null)
    tar -xzf "$tmp/mermaid-$MERMAID_VERSION.tgz" -C "$tmp" package/dist/mermaid.min.js
    mkdir -p "$(dirname "$mermaid_js")"
    mv "$tmp/package/dist/mermaid.min.js" "$mermaid_js"
    rm -rf "$tmp" docs/assets/javascripts/.mermaid-*
    touch "$mermaid_stamp"
fi

# The real-Kafka runs (tests/test_kafka_real.py, `kraftcheck kafka run`) use Kafka's released jars,
# resolved with Maven from Maven Central into ~/.cache/kraftcheck (or $KRAFTCHECK_CACHE) once.
.venv/bin/kraftcheck kafka install >/dev/null
