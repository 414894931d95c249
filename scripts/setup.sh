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
