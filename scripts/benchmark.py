#!/usr/bin/env python3
"""Client-wall chat benchmark like the recipe's (500 tokens, temperature 0, non-streaming, so the
wall includes prefill) plus streamed time to first token; prints a table and writes JSON.
usage: benchmark.py [URL] [--max-tokens 500] [--runs 3] [--json out.json]
                    [--api-key KEY] [--session ID]"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from laguna_kit.boxtools.gate.bench import benchmark  # noqa: E402
from laguna_kit.domain import api_clients  # noqa: E402

p = argparse.ArgumentParser(description=__doc__)
p.add_argument("url", nargs="?", default="http://localhost:8080/v1")
p.add_argument("--model", default="laguna")
p.add_argument("--max-tokens", type=int, default=500)
p.add_argument("--runs", type=int, default=3)
p.add_argument("--json", help="also write the rows here")
api_clients.add_arguments(p)
a = p.parse_args()
rows = benchmark(a.url, a.model, a.max_tokens, a.runs, headers=api_clients.headers(a))
print(f"{'run':>3} {'output tokens':>13} {'wall s':>8} {'tok/s':>8} {'TTFT s':>7}")
for r in rows:
    print(
        f"{r['run']:>3} {r['output_tokens']:>13} {r['wall_s']:>8} {r['tok_s']:>8} "
        f"{r['ttft_s']!s:>7}"
    )
if a.json:
    with open(a.json, "w") as fh:
        json.dump({"url": a.url, "model": a.model, "rows": rows}, fh, indent=1)
