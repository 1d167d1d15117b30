#!/usr/bin/env python3
"""Smoke test any OpenAI-compatible endpoint like the recipe's: /v1/models lists the model, and a
short chat completion returns text.
usage: smoke_test.py [URL] [--model laguna] [--api-key KEY] [--session ID]"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from laguna_kit.boxtools.gate.failure import GateFailure  # noqa: E402
from laguna_kit.boxtools.gate.probes import smoke  # noqa: E402
from laguna_kit.domain import api_clients  # noqa: E402

p = argparse.ArgumentParser(description=__doc__)
p.add_argument("url", nargs="?", default="http://localhost:8080/v1")
p.add_argument("--model", default="laguna")
api_clients.add_arguments(p)
a = p.parse_args()
try:
    print(json.dumps(smoke(a.url, a.model, headers=api_clients.headers(a)), indent=1))
except GateFailure as exc:
    sys.exit(f"smoke test failed: {exc}")
