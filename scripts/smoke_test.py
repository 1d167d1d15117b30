#!/usr/bin/env python3
"""Smoke test any OpenAI-compatible endpoint like the recipe's: /v1/models lists the model, and a
short chat completion returns text.
usage: smoke_test.py [URL] [--model laguna] [--api-key KEY] [--session ID]"""

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.path.join(ROOT, ".venv", "bin", "python")
if os.path.exists(VENV) and os.path.realpath(sys.prefix) != os.path.realpath(
    os.path.join(ROOT, ".venv")
):
    # run as `scripts/smoke_test.py` (the system's python3): the checkout's venv has the kit's
    # dependencies
    os.execv(VENV, [VENV, os.path.abspath(__file__), *sys.argv[1:]])
sys.path.insert(0, ROOT)
import httpx  # noqa: E402

from laguna_kit.boxtools.gate.failure import GateFailure  # noqa: E402
from laguna_kit.boxtools.gate.probes import smoke  # noqa: E402
from laguna_kit.domain import api_clients  # noqa: E402

p = argparse.ArgumentParser(description=__doc__)
p.add_argument("url", nargs="?", default="http://localhost:8080/v1")
p.add_argument("--model", default="laguna")
api_clients.add_arguments(p)
a = p.parse_args()
hint = (
    ""
    if a.url.rstrip("/").endswith("/v1")
    else f" (an OpenAI base URL ends in /v1: {a.url.rstrip('/')}/v1?)"
)
try:
    print(json.dumps(smoke(a.url, a.model, headers=api_clients.headers(a)), indent=1))
except GateFailure as exc:
    sys.exit(f"smoke test failed: {exc}{hint}")
except (httpx.HTTPError, OSError) as exc:
    sys.exit(
        f"smoke test failed: cannot reach {a.url}: {type(exc).__name__} ({exc}){hint}. Is the "
        "address right, the box serving (tasks/status.py), and this machine on the tailnet "
        "(tailscale status)?"
    )
