"""The recipe's benchmark shape: client-wall decode speed, non-streaming (prefill included), and
the streamed time to the first token."""

from __future__ import annotations

import time

import httpx


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
