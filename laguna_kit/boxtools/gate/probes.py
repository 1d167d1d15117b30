"""The gate's HTTP checks of an OpenAI-compatible vLLM endpoint: ready (/health), the smoke test
(/v1/models lists the model, a short chat answers) and a fresh near-limit prompt plus generation,
streamed (the recipe's rule: only that proves long context)."""

from __future__ import annotations

import json
import subprocess
import time
import uuid

import httpx

from .failure import GateFailure, log

SMOKE_PROMPT = "Reply with exactly: Laguna serving is healthy."


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
