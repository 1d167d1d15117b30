#!/usr/bin/env bash
# The demo: set up, bring up a local sandbox box, run the real deploy against it, tear it down.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/python scripts/sandbox.py run -- .venv/bin/pyinfra -y inventory.py deploy.py "$@"
