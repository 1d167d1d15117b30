"""The whole gate as one JSON result: ready, smoke, the fresh long prompt, the benchmark, DFlash
acceptance, and the slower-release policy; `passed` only when every check did."""

from __future__ import annotations

import time
from urllib.parse import urlsplit

import httpx

from .bench import decode_figure
from .dflash import dflash_check, spec_counters
from .failure import GateFailure, log
from .listener import listener_check
from .policy import slower_check
from .probes import long_context, smoke, wait_ready


def run_gate(args) -> dict:
    result = {
        "release": args.release,
        "url": args.url,  # which endpoint (a box's replicas each have their own port)
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "started_unix": round(time.time(), 3),
        "passed": False,
    }
    try:
        result["ready_s"] = round(wait_ready(args.url, args.ready_timeout, args.unit), 1)
        if getattr(args, "container", None):  # on a box: the answers are the container's own
            listener_check(urlsplit(args.url).port or 80, args.container)
        result["smoke"] = smoke(args.url, args.model)
        log(f"smoke passed: {result['smoke']['reply']!r}")
        before = spec_counters(args.url) if args.dflash else None
        result["long_context"] = long_context(
            args.url, args.model, args.prompt_tokens, args.max_tokens, args.timeout
        )
        lc = result["long_context"]
        log(
            f"long-context passed: {lc['prompt_tokens']} prompt + {lc['completion_tokens']} "
            f"generated tokens in "
            f"{lc['elapsed_s']} s (prefill {lc['prefill_s']} s, decode {lc['decode_tok_s']} tok/s)"
        )
        if args.bench_tokens:
            result["benchmark"] = decode_figure(
                args.url, args.model, args.bench_tokens, args.timeout
            )
            bench = result["benchmark"]
            log(
                f"benchmark: {bench['output_tokens']} tokens in {bench['wall_s']} s = "
                f"{bench['decode_tok_s']} tok/s"
            )
        if before is not None:  # (--dflash)
            result["dflash"] = dflash_check(before, spec_counters(args.url), args.min_acceptance)
            log(f"DFlash acceptance {result['dflash']['acceptance']:.1%}")
        result["perf"] = {
            "decode_tok_s": (result.get("benchmark") or {}).get("decode_tok_s"),
            "ttft_s": lc["prefill_s"],
            "acceptance": (result.get("dflash") or {}).get("acceptance"),
            "mode": getattr(args, "mode", None),
        }
        slower = slower_check(
            result["perf"], args.baseline, args.min_decode_ratio, args.force_slower
        )
        if slower:
            result["baseline"] = args.baseline
            raise GateFailure(slower)
        result["passed"] = True
    except (GateFailure, httpx.HTTPError, ValueError, KeyError) as exc:
        result["error"] = str(exc) or type(exc).__name__
    return result
