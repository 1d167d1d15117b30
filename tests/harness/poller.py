"""A client that polls several endpoints' /v1/models until stopped, like a user of the fleet.

Run inside the tailnet peers' namespace
(``ip netns exec lgk-tailnet python -m tests.harness.poller``) so it reaches the boxes the way a
tailnet user does. On SIGTERM it writes every sample to --out:
``[{"t": seconds, "up": [bool per url]}, ...]``; an endpoint is up when it answers 200 and lists
laguna.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time

import httpx


def up(client: httpx.Client, url: str) -> bool:
    try:
        r = client.get(url, timeout=2)
        return r.status_code == 200 and any(
            m.get("id") == "laguna" for m in r.json().get("data", [])
        )
    except (httpx.HTTPError, ValueError):
        return False


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--interval", type=float, default=0.25)
    p.add_argument("urls", nargs="+")
    a = p.parse_args(argv)
    samples, running = [], [True]
    signal.signal(signal.SIGTERM, lambda *_: running.__setitem__(0, False))
    t0 = time.monotonic()
    with httpx.Client() as client:
        while running[0]:
            samples.append(
                {"t": round(time.monotonic() - t0, 3), "up": [up(client, u) for u in a.urls]}
            )
            time.sleep(a.interval)
    with open(a.out, "w") as fh:
        json.dump(samples, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())


class OnTheTailnet:
    """A harness client module (this one, router_client) run in the tailnet peers' namespace
    until stop(): then SIGTERM, and its results are the JSON it wrote to its --out file."""

    def __init__(self, module: str, *args: str, out: str, stop_timeout: float = 30):
        import subprocess

        from laguna_kit import KIT_ROOT

        from .box import TAILNET_NS
        from .paths import run_dir

        self.out, self.stop_timeout = run_dir() / out, stop_timeout
        self.out.unlink(missing_ok=True)
        cmd = ["ip", "netns", "exec", TAILNET_NS, sys.executable, "-m", module]
        self.proc = subprocess.Popen([*cmd, *args, "--out", str(self.out)], cwd=KIT_ROOT)

    def stop(self) -> list:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=self.stop_timeout)
        with open(self.out) as fh:
            return json.load(fh)
