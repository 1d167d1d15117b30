#!/usr/bin/env bash
# The test command (README, .ci/run): set up, then the fast tier (no root, no box, seconds; a
# failure there stops before any box boots), then the harness tier on nspawn boxes.
# Extra arguments go to the harness tier: scripts/test.sh -k docker -x
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
.venv/bin/python -m pytest -q tests/unit
# The 15 slowest tests are printed at the end, so the tier's growth shows in every run.
exec .venv/bin/python -m pytest --ignore=tests/unit --durations=15 "$@"
