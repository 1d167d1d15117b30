#!/usr/bin/env python3
"""The recipe's long-context gate against any OpenAI-compatible endpoint: a fresh ~190K-token prompt
(unique prefix, so the prefix cache cannot answer) plus generation; the API's usage is
authoritative.
usage: long_context_gate.py [URL] [--prompt-tokens 190000] [--max-tokens 32] [--timeout 300]
[--api-key KEY] [--session ID] (through the router)"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from laguna_kit.boxtools.gate.failure import GateFailure  # noqa: E402
from laguna_kit.boxtools.gate.probes import long_context  # noqa: E402
from laguna_kit.domain import api_clients  # noqa: E402

p = argparse.ArgumentParser(description=__doc__)
p.add_argument("url", nargs="?", default="http://localhost:8080/v1")
p.add_argument("--model", default="laguna")
p.add_argument("--prompt-tokens", type=int, default=190000)
p.add_argument("--max-tokens", type=int, default=32)
p.add_argument("--timeout", type=float, default=300)
api_clients.add_arguments(p)
a = p.parse_args()
try:
    print(
        json.dumps(
            long_context(
                a.url,
                a.model,
                a.prompt_tokens,
                a.max_tokens,
                a.timeout,
                headers=api_clients.headers(a),
            ),
            indent=1,
        )
    )
except GateFailure as exc:
    sys.exit(f"long-context gate failed: {exc}")
