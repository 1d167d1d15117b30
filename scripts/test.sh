#!/usr/bin/env bash
# The test command (README, .ci/run): set up, then the fast tier (no root, no box, seconds; a
# failure there stops before any box boots), then the harness tier on nspawn boxes.
# Extra arguments go to the harness tier: scripts/test.sh -k docker -x
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
.venv/bin/python -m pytest -q tests/unit
# The harness tier in parallel: its tests mostly wait (boots, reboots, installs, gates), so four
# workers share the two cores; each has its own servers, boxes and tailnet (tests/harness/paths.py),
# and tests that share a served box or a fleet stay on one worker (tests/conftest.py).
# LAGUNA_HARNESS_WORKERS=0 runs it in this one process. The 15 slowest tests are printed at the
# end, so the tier's growth shows in every run.
workers="${LAGUNA_HARNESS_WORKERS:-4}"
parallel=()
if [ "$workers" != 0 ]; then
  parallel=(-n "$workers" --dist loadgroup)
fi
exec .venv/bin/python -m pytest --ignore=tests/unit --durations=15 "${parallel[@]}" "$@"
