"""Validation clients for an OpenAI-compatible vLLM endpoint (httpx): readiness, smoke test, the
long-context gate, the DFlash acceptance check, and the recipe's benchmark shape (decode tok/s),
which the gate records per release and holds against the previous release's figure.

Used three ways: by the deploy (uploaded to the box and run against 127.0.0.1, so the gate does not
depend on the firewall), by scripts/ against any URL, and by tests. As a program it runs the whole
gate and writes a JSON result; exit 0 only when every check passed.

The rule it encodes is the recipe's: a printed KV pool and a healthy /v1/models prove nothing about
long context; only a fresh near-limit prompt plus generation does. "Fresh" means a unique prefix
each run, so vLLM's prefix cache cannot answer it.

The package: probes.py (readiness, the smoke test, the fresh long prompt), dflash.py (the
acceptance between two scrapes), bench.py (the recipe's benchmark shape), policy.py (a slower
release refused), run.py (the whole gate as one result), cli.py (laguna_gate.py, reading the
current release's gate parameters from the release store on a box).
"""

from .cli import main

__all__ = ["main"]
