#!/usr/bin/env bash
# The test command (README, .ci/run): set up, then run the whole suite on harness boxes.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/python -m pytest "$@"
