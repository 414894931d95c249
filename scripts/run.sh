#!/usr/bin/env bash
# The main job, from a fresh machine: set up, then check the model. Until fuzzing campaigns land,
# the best check there is: every seeded bug must be caught, and a scope explored exhaustively.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/kraftcheck mutants
.venv/bin/kraftcheck explore --scope bounce
