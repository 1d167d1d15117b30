#!/usr/bin/env python3
"""Benchmark (prints figures, asserts nothing): what the fleet router adds to time to first token.

Brings up a sandbox GPU box and a router host, deploys both with `deploy.py`, then on the router
host streams chat completions (tests/harness/router_client.py, run by the kit's venv there) in
alternating rounds: straight to the box's API on its tailnet address, and through the router
(HAProxy on 127.0.0.1:router_port, key check, session hash, then the same box). Same client, same
box, same path to it: the difference is the router. Also from a tailnet peer through the router
(what a user sees; a peer cannot reach the box directly, by design).
Writes --json and prints a table. Needs root; uses the harness ports (not while the suite runs).
usage: sudo .venv/bin/python scripts/bench_router.py [--requests 40] [--rounds 5]
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from laguna_kit.knobs.declared import defaults  # noqa: E402
from tests.harness import box as boxmod  # noqa: E402
from tests.harness.deployrun import run_deploy  # noqa: E402
from tests.harness.sandbox import ROUTER_KEYS, Sandbox  # noqa: E402

CLIENT = os.path.join(ROOT, "tests/harness/router_client.py")


def ttfts(cmd: list[str]) -> list[float]:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        sys.exit(f"bench_router: client failed: {proc.stderr[-2000:]}")
    results = json.loads(proc.stdout)
    bad = [r for r in results if r["status"] != 200 or r["error"]]
    if bad:
        sys.exit(f"bench_router: failed requests: {bad[:3]}")
    return [r["ttft_s"] for r in results]


def summary(values: list[float]) -> dict:
    ms = sorted(v * 1000 for v in values)
    return {
        "n": len(ms),
        "median_ms": round(statistics.median(ms), 2),
        "p90_ms": round(ms[int(0.9 * (len(ms) - 1))], 2),
        "mean_ms": round(statistics.fmean(ms), 2),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=40, help="per round and path")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--json", default="bench_router.json")
    a = p.parse_args()
    knobs = defaults()
    sb = Sandbox().start()
    try:
        box = sb.add_box("benchbox")
        router = sb.add_box("benchrouter", roles=["router"])
        res = run_deploy(sb, [box, router], timeout=1500)
        if not res.ok:
            sys.exit(f"bench_router: deploy failed:\n{res.explain()}")
        with open(CLIENT, "rb") as fh:
            subprocess.run(
                router.ssh_argv("cat > /tmp/router_client.py"), input=fh.read(), check=True
            )
        python = "/opt/laguna-kit/venv/bin/python"
        body = ["--stream", "--count", str(a.requests), "--session", "bench"]
        direct_url = f"http://{box.tailnet_v4}:{knobs['api_port']}/v1/chat/completions"
        routed_url = f"http://127.0.0.1:{knobs['router_port']}/v1/chat/completions"
        peer_url = f"http://{router.tailnet_v4}:{knobs['router_port']}/v1/chat/completions"
        key = ["--key", ROUTER_KEYS[0]]
        direct, routed, peer = [], [], []
        for _ in range(a.rounds):
            direct += ttfts(
                router.ssh_argv(f"{python} /tmp/router_client.py {direct_url} " + " ".join(body))
            )
            routed += ttfts(
                router.ssh_argv(
                    f"{python} /tmp/router_client.py {routed_url} " + " ".join(body + key)
                )
            )
            peer += ttfts(
                [
                    "ip",
                    "netns",
                    "exec",
                    boxmod.TAILNET_NS,
                    sys.executable,
                    CLIENT,
                    peer_url,
                    *body,
                    *key,
                ]
            )
        out = {
            "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
            "direct_on_router_host": summary(direct),
            "through_router_on_router_host": summary(routed),
            "through_router_from_tailnet_peer": summary(peer),
        }
        out["router_adds_median_ms"] = round(
            out["through_router_on_router_host"]["median_ms"]
            - out["direct_on_router_host"]["median_ms"],
            2,
        )
        out["router_adds_p90_ms"] = round(
            out["through_router_on_router_host"]["p90_ms"] - out["direct_on_router_host"]["p90_ms"],
            2,
        )
        with open(a.json, "w") as fh:
            json.dump(out, fh, indent=1)
        print(f"time to first token, {a.rounds} x {a.requests} streamed requests per path:")
        for k in (
            "direct_on_router_host",
            "through_router_on_router_host",
            "through_router_from_tailnet_peer",
        ):
            s = out[k]
            print(f"  {k:34s} median {s['median_ms']:7.2f} ms  p90 {s['p90_ms']:7.2f} ms")
        print(
            f"  the router adds: median {out['router_adds_median_ms']} ms, "
            f"p90 {out['router_adds_p90_ms']} ms"
        )
    finally:
        sb.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
