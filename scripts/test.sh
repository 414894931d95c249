#!/usr/bin/env bash
# The tests, from a fresh machine: set up, then run pytest (extra arguments go to pytest).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest "$@"
