"""A client of the fleet router, like a user on the tailnet: chat completions with an API key.

Run inside the tailnet peers' namespace
(``ip netns exec lgk-tailnet python -m tests.harness.router_client``).

- ``--count N``: N requests one after another, then the results on stdout;
- otherwise ``--workers W`` clients send requests back to back until SIGTERM, then write the
  results to ``--out``.

A result is ``{"t": s, "status": HTTP status or 0, "error": text or null, "ttft_s": s}``; a
request failed unless its status is 200 and its body (or its stream, up to ``[DONE]``) is a
complete completion.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time

import httpx


def one(client: httpx.Client, url: str, key: str | None, session: str | None, stream: bool):
    headers = {}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    if session:
        headers["X-Session-Id"] = session
    body = {
        "model": "laguna",
        "messages": [{"role": "user", "content": "Reply with exactly: fleet ok"}],
        "max_tokens": 24,
        "stream": stream,
    }
    t0 = time.monotonic()
    out = {"t": round(t0, 3), "status": 0, "error": None, "ttft_s": None}
    try:
        if not stream:
            r = client.post(url, json=body, headers=headers, timeout=60)
            out["status"] = r.status_code
            out["ttft_s"] = round(time.monotonic() - t0, 4)
            if r.status_code == 200 and not r.json().get("choices"):
                out["error"] = "no choices"
            elif r.status_code != 200:
                out["error"] = r.text[:300]
            return out
        with client.stream("POST", url, json=body, headers=headers, timeout=60) as r:
            out["status"] = r.status_code
            done = False
            for line in r.iter_lines():
                if line.startswith("data: ") and out["ttft_s"] is None:
                    out["ttft_s"] = round(time.monotonic() - t0, 4)
                if line.strip() == "data: [DONE]":
                    done = True
            if r.status_code == 200 and not done:
                out["error"] = "stream ended before [DONE]"
            elif r.status_code != 200:
                out["error"] = r.read().decode(errors="replace")[:300]
    except httpx.HTTPError as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("url")
    p.add_argument("--key")
    p.add_argument("--session")
    p.add_argument("--stream", action="store_true")
    p.add_argument("--count", type=int)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--out")
    a = p.parse_args(argv)
    if a.count:
        with httpx.Client() as client:
            results = [one(client, a.url, a.key, a.session, a.stream) for _ in range(a.count)]
        print(json.dumps(results))
        return 0
    results, lock, running = [], threading.Lock(), threading.Event()
    running.set()
    signal.signal(signal.SIGTERM, lambda *_: running.clear())

    def worker(i):
        with httpx.Client() as client:
            while running.is_set():
                r = one(client, a.url, a.key, f"{a.session or 'w'}-{i}", a.stream)
                with lock:
                    results.append(r)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(a.workers)]
    for t in threads:
        t.start()
    while running.is_set():
        time.sleep(0.1)
    for t in threads:
        t.join(70)
    with open(a.out, "w") as fh:
        json.dump(results, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
