#!/usr/bin/env bash
# The tests, from a fresh machine: set up, then run pytest (extra arguments go to pytest).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Two workers (pytest-xdist) by default, the machines' cores; KRAFTCHECK_TEST_WORKERS=0 runs in one process.
exec .venv/bin/python -m pytest -n "${KRAFTCHECK_TEST_WORKERS:-2}" "$@"
