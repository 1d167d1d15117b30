"""Validation clients for an OpenAI-compatible vLLM endpoint (httpx): readiness, smoke test, the
long-context gate, the DFlash acceptance check, and the recipe's benchmark shape (decode tok/s),
which the gate records per release and holds against the previous release's figure.

Used three ways: by the deploy (uploaded to the box and run against 127.0.0.1, so the gate does not
depend on the firewall), by scripts/ against any URL, and by tests. As a program it runs the whole
gate and writes a JSON result; exit 0 only when every check passed.

The rule it encodes is the recipe's: a printed KV pool and a healthy /v1/models prove nothing about
long context; only a fresh near-limit prompt plus generation does. "Fresh" means a unique prefix
each run, so vLLM's prefix cache cannot answer it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import uuid

import httpx

SMOKE_PROMPT = "Reply with exactly: Laguna serving is healthy."


class GateFailure(Exception):
    pass


def log(msg: str) -> None:
    print(f"[gate {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def root_of(base: str) -> str:
    return base.rstrip("/").removesuffix("/v1")


def wait_ready(base: str, timeout: float, unit: str | None = None, every: float = 15.0) -> float:
    """Poll /health until 200 (vLLM opens its port only once the engine is loaded). Returns
    seconds."""
    start = last = time.monotonic()
    while True:
        waited = time.monotonic() - start
        try:
            if httpx.get(f"{root_of(base)}/health", timeout=5).status_code == 200:
                log(f"ready after {waited:.0f} s")
                return waited
        except httpx.HTTPError:
            pass
        if unit:
            state = subprocess.run(
                ["systemctl", "is-active", unit], capture_output=True, text=True
            ).stdout.strip()
            if state in ("failed", "inactive"):
                raise GateFailure(
                    f"{unit} is {state} after {waited:.0f} s (crash loop stopped?): "
                    f"journalctl -u {unit} shows the first failure"
                )
        if waited > timeout:
            raise GateFailure(
                f"not ready after {timeout:.0f} s (/health never answered 200): vLLM's own log "
                f"says where it stopped: `pyinfra inventory.py tasks/logs.py` or journalctl -u "
                f"{unit or 'laguna-vllm.service'} (ready_timeout_s if it was still loading)"
            )
        if time.monotonic() - last >= every:
            log(f"waiting for the engine: {waited:.0f} s of {timeout:.0f} s")
            last = time.monotonic()
        time.sleep(1)


def smoke(base: str, model: str, timeout: float = 120, headers: dict | None = None) -> dict:
    """`headers`: the router's (Authorization, the session header); a box's own port needs none."""
    r = httpx.get(f"{base}/models", timeout=30, headers=headers)
    if r.status_code != 200:
        raise GateFailure(f"/v1/models failed: HTTP {r.status_code} {r.text[:300]}")
    models = r.json()
    ids = [m["id"] for m in models.get("data", [])]
    if model not in ids:
        raise GateFailure(f"/v1/models lists {ids}, not {model!r}")
    r = httpx.post(
        f"{base}/chat/completions",
        timeout=timeout,
        headers=headers,
        json={
            "model": model,
            "messages": [{"role": "user", "content": SMOKE_PROMPT}],
            "max_tokens": 32,
            "temperature": 0,
            # The recipe serves with thinking on: 32 tokens can end inside the thinking, leaving
            # content null. The smoke asks for an answer, so it turns thinking off for itself.
            "chat_template_kwargs": {"enable_thinking": False},
        },
    )
    if r.status_code != 200:
        raise GateFailure(f"chat completion failed: HTTP {r.status_code} {r.text[:300]}")
    message = r.json()["choices"][0]["message"]
    # content, else what the reasoning parser put aside (a server that ignores the kwarg)
    text = (message.get("content") or message.get("reasoning") or "").strip()
    if not text:
        raise GateFailure(f"chat completion returned no text: {json.dumps(message)[:300]}")
    return {
        "models": ids,
        "max_model_len": models["data"][ids.index(model)].get("max_model_len"),
        "reply": text,
    }


def long_context(
    base: str,
    model: str,
    prompt_tokens: int,
    max_tokens: int,
    timeout: float,
    headers: dict | None = None,
) -> dict:
    """A fresh ~prompt_tokens prompt ("x " is about one token each) plus generation, streamed."""
    prefix = f"[laguna-kit gate {uuid.uuid4().hex}] "
    prompt = prefix + "x " * max(prompt_tokens - len(prefix.split()), 1)
    body = {
        "model": model,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    start = time.monotonic()
    first = end = None
    usage, finish, text = None, None, ""
    try:
        with httpx.stream(
            "POST", f"{base}/completions", json=body, timeout=timeout, headers=headers
        ) as r:
            if r.status_code != 200:
                r.read()
                raise GateFailure(f"long prompt failed: HTTP {r.status_code} {r.text[:300]}")
            for line in r.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                if chunk.get("usage"):
                    usage = chunk["usage"]
                for c in chunk.get("choices", []):
                    if c.get("text"):
                        first = first or time.monotonic()
                        text += c["text"]
                    finish = c.get("finish_reason") or finish
            end = time.monotonic()
    except httpx.HTTPError as exc:
        raise GateFailure(
            f"long prompt failed after {time.monotonic() - start:.1f} s: {type(exc).__name__} "
            f"(engine died? look for CUDA out of memory in the log)"
        ) from None
    if not usage:
        raise GateFailure("long prompt: the API returned no usage")
    got = usage["prompt_tokens"]
    if got < 0.95 * prompt_tokens:
        raise GateFailure(
            f"long prompt: the API counted {got} prompt tokens, wanted ~{prompt_tokens}"
        )
    if not usage.get("completion_tokens"):
        raise GateFailure("long prompt: no tokens generated")
    prefill = (first or end) - start
    decode_s = end - (first or end)
    decode = (
        (usage["completion_tokens"] - 1) / decode_s
        if decode_s > 0 and usage["completion_tokens"] > 1
        else None
    )
    return {
        "prompt_tokens": got,
        "completion_tokens": usage["completion_tokens"],
        "finish_reason": finish,
        "elapsed_s": round(end - start, 3),
        "prefill_s": round(prefill, 3),
        "decode_tok_s": round(decode, 1) if decode else None,
    }


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


def benchmark(
    base: str,
    model: str,
    max_tokens: int = 500,
    runs: int = 3,
    timeout: float = 300,
    headers: dict | None = None,
) -> list[dict]:
    """Client-wall decode speed like the recipe's (non-streaming, includes prefill) plus streamed
    TTFT."""
    rows = []
    for i in range(runs):
        body = {
            "model": model,
            "messages": [{"role": "user", "content": "Write a small HTML page about lagoons."}],
            "max_tokens": max_tokens,
            "temperature": 0,
        }
        t0 = time.monotonic()
        r = httpx.post(f"{base}/chat/completions", json=body, timeout=timeout, headers=headers)
        wall = time.monotonic() - t0
        r.raise_for_status()
        out = r.json()["usage"]["completion_tokens"]
        t0 = time.monotonic()
        ttft = None
        with httpx.stream(
            "POST",
            f"{base}/chat/completions",
            json=dict(body, stream=True, max_tokens=8),
            timeout=timeout,
            headers=headers,
        ) as s:
            for line in s.iter_lines():
                # the first token, an answer's or the thinking's (the recipe serves with thinking)
                if line.startswith("data: ") and (
                    '"content":"' in line.replace(" ", "")
                    or '"reasoning":"' in line.replace(" ", "")
                ):
                    ttft = time.monotonic() - t0
                    break
        rows.append(
            {
                "run": i + 1,
                "output_tokens": out,
                "wall_s": round(wall, 3),
                "tok_s": round(out / wall, 1) if wall else None,
                "ttft_s": round(ttft, 3) if ttft else None,
            }
        )
    return rows


def decode_figure(base: str, model: str, max_tokens: int, timeout: float) -> dict:
    """The recipe's benchmark shape, once: a short prompt, `max_tokens` output tokens, temperature
    0, client wall, non-streaming (282.5 tok/s for the champion: 500 tokens in 1.770 s)."""
    row = benchmark(base, model, max_tokens=max_tokens, runs=1, timeout=timeout)[0]
    return {
        "output_tokens": row["output_tokens"],
        "wall_s": row["wall_s"],
        "decode_tok_s": row["tok_s"],
        "short_ttft_s": row["ttft_s"],
    }


def slower_check(perf: dict, baseline: dict | None, ratio: float, force: bool) -> str | None:
    """None when this release is not slower than `ratio` × the baseline's decode (the previous
    passing release on this box, same mode); else what is wrong. `force`: accepted, and said."""
    if not baseline or not baseline.get("decode_tok_s") or perf.get("decode_tok_s") is None:
        return None
    floor = ratio * baseline["decode_tok_s"]
    if perf["decode_tok_s"] >= floor:
        return None
    said = (
        f"decode {perf['decode_tok_s']} tok/s is below {ratio} x {baseline['decode_tok_s']} "
        f"tok/s of release {baseline['release']} (the previous passing release on this box, mode "
        f"{baseline.get('mode')}) = {floor:.1f} tok/s"
    )
    if force:
        log(f"{said}: accepted (force_slower)")
        return None
    return (
        f"{said}: a slower release is refused (min_decode_ratio); find why (tasks/logs.py, "
        "nvidia-smi clocks and temperature), or accept it with force_slower=True"
    )


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
        if args.dflash:
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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description="readiness + smoke + fresh long-context gate (+ DFlash check)"
    )
    p.add_argument("--url", default="http://127.0.0.1:8080/v1")
    p.add_argument("--model", default="laguna")
    p.add_argument("--prompt-tokens", dest="prompt_tokens", type=int, default=190000)
    p.add_argument("--max-tokens", dest="max_tokens", type=int, default=32)
    p.add_argument("--timeout", type=float, default=300)
    p.add_argument("--ready-timeout", dest="ready_timeout", type=float, default=900)
    p.add_argument("--unit", help="systemd unit to watch while waiting (on the box)")
    p.add_argument("--dflash", action="store_true", help="check speculative-decoding acceptance")
    p.add_argument("--min-acceptance", dest="min_acceptance", type=float, default=0.2)
    p.add_argument(
        "--bench-tokens",
        dest="bench_tokens",
        type=int,
        default=500,
        help="the recipe's benchmark: a short prompt, this many output tokens (0: none)",
    )
    p.add_argument(
        "--min-decode-ratio",
        dest="min_decode_ratio",
        type=float,
        default=0.8,
        help="fail when decode is below this x the baseline's",
    )
    p.add_argument(
        "--baseline",
        type=json.loads,
        default=None,
        help='JSON {"release": N, "decode_tok_s": X, "mode": M}: the figure to hold (with '
        "--kit-dir: the previous passing release of the same mode on this box)",
    )
    p.add_argument(
        "--force-slower",
        dest="force_slower",
        action="store_true",
        help="accept a release slower than min_decode_ratio allows",
    )
    p.add_argument("--release", type=int)
    p.add_argument(
        "--kit-dir", help="on a box: take the URL and every gate parameter from the current release"
    )
    p.add_argument("--state-dir", help="with --kit-dir: a replica's own releases")
    p.add_argument("--result", help="write the JSON result here")
    args = p.parse_args(argv)
    if args.kit_dir:
        from .release import Releases  # the release manager reads its own layout

        rel = Releases(args.kit_dir, args.unit or "", args.state_dir)
        current = rel.current_meta()
        if not (current.get("spec") or {}).get("gate"):
            log(f"GATE FAILED: no current release to validate under {args.kit_dir}")
            return 1
        args.release = current.get("number")
        args.mode = current["spec"].get("mode")
        for key, value in current["spec"]["gate"].items():
            setattr(args, key, value)
        if args.baseline is None:
            args.baseline = rel.perf_baseline(args.release)
    result = run_gate(args)
    if args.result:
        os.makedirs(os.path.dirname(args.result) or ".", exist_ok=True)  # a new replica's first
        with open(args.result, "w") as fh:
            json.dump(result, fh, indent=1)
    print(json.dumps(result))
    if not result["passed"]:
        log(
            f"GATE FAILED{' on release ' + str(args.release) if args.release else ''}: "
            f"{result['error']}"
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
