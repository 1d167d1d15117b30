"""DFlash acceptance during the gate: vLLM's spec-decode counters scraped before and after the
long prompt, and the share of draft tokens accepted held to a floor."""

from __future__ import annotations

import re

import httpx

from .failure import GateFailure
from .probes import root_of

SPEC_RE = re.compile(
    r"^vllm:spec_decode_num_(drafts|draft_tokens|accepted_tokens)_total(?:\{[^}]*\})?\s+([0-9.eE+]+)"
)


def spec_counters(base: str) -> dict:
    out = {"drafts": 0.0, "draft_tokens": 0.0, "accepted_tokens": 0.0}
    for line in httpx.get(f"{root_of(base)}/metrics", timeout=30).text.splitlines():
        m = SPEC_RE.match(line)
        if m:
            out[m.group(1)] += float(m.group(2))
    return out


def dflash_check(before: dict, after: dict, min_acceptance: float) -> dict:
    drafted = after["draft_tokens"] - before["draft_tokens"]
    accepted = after["accepted_tokens"] - before["accepted_tokens"]
    if drafted <= 0:
        raise GateFailure(
            "DFlash proposed no draft tokens during the gate (speculative decoding not running)"
        )
    rate = accepted / drafted
    if rate < min_acceptance:
        raise GateFailure(
            f"DFlash acceptance {rate:.1%} ({accepted:.0f} of {drafted:.0f} draft tokens) is below "
            f"{min_acceptance:.0%}: the drafter does not match the target (a stale or "
            f"other-precision "
            f"drafter decodes slower than none); pin both revisions together"
        )
    return {"draft_tokens": drafted, "accepted_tokens": accepted, "acceptance": round(rate, 4)}
