#!/usr/bin/env python3
"""Benchmark (prints figures, asserts nothing): a fleet's first deploy against a single box's,
under the same slowed hub link (issue 27).

Two shapes, each run as one box alone and then as three fresh boxes in one run:
1. the bytes from outside alone (tests/deploys/fleet_first.py: pre-flight, tools, firewall,
   tailnet, peer file servers, download and verification, Docker and the image's pull; boxes
   with a driver already): what the peer distribution changes;
2. the whole deploy.py (driver, Docker, image, service, gate) with an image cache host
   (roles = ["cache"]) for the fleet: what a first deploy costs end to end on this machine (its
   CPU is shared by every box: on 2 cores three boxes' driver, Docker and gate steps compete).
For each: wall time, the bytes the stand-in hub served and their ratio to the checkpoints, the
bytes of image blobs the stand-in Docker Hub sent. Writes --json and prints a table. Needs root and
the packages scripts/setup.sh installs; uses the harness ports, so not while the test suite runs.
usage: sudo .venv/bin/python scripts/bench_fleet.py [--hub-rate 262144] [--json bench_fleet.json]
"""

import argparse
import json
import os
import re
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import httpx  # noqa: E402

from tests.harness.deployrun import run_deploy  # noqa: E402
from tests.harness.paths import run_dir  # noqa: E402
from tests.harness.sandbox import HARNESS_DOCKER, Sandbox  # noqa: E402
from tests.harness.servers import HUB_PORT  # noqa: E402

HUB = f"http://127.0.0.1:{HUB_PORT}"


def registry_blob_bytes(text: str) -> int:
    total = 0
    for line in text.splitlines():
        if "response completed" in line and "http.request.method=GET" in line and "/blobs/" in line:
            m = re.search(r"http.response.written=(\d+)", line)
            total += int(m.group(1)) if m else 0
    return total


def run(sb, boxes, deploy, data, rate, size) -> dict:
    httpx.post(f"{HUB}/_standin/reset")
    httpx.post(f"{HUB}/_standin/rate", json={"bytes_per_second": rate})
    log = run_dir() / "registry.log"
    mark = log.stat().st_size if log.exists() else 0
    started = time.monotonic()
    res = run_deploy(sb, boxes, deploy, data=data, timeout=3600)
    wall = time.monotonic() - started
    httpx.post(f"{HUB}/_standin/rate", json={"bytes_per_second": 0})
    if not res.ok:
        sys.exit(f"bench_fleet: {deploy} failed:\n{res.explain()}")
    served = sum(httpx.get(f"{HUB}/_standin/stats").json()["served"].values())
    with log.open("rb") as fh:
        fh.seek(mark)
        image = registry_blob_bytes(fh.read().decode(errors="replace"))
    return {
        "boxes": len([b for b in boxes if "gpu" in b.roles]),
        "wall_s": round(wall, 1),
        "hub_bytes": served,
        "hub_ratio": round(served / size, 3),
        "docker_hub_blob_bytes": image,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hub-rate", type=int, default=256 << 10, help="stand-in hub link, bytes/s")
    p.add_argument("--json", default=os.path.join(ROOT, "bench_fleet.json"))
    p.add_argument("--skip-full", action="store_true", help="the checkpoint path alone")
    a = p.parse_args()
    out = {"hub_bytes_per_second": a.hub_rate, "cpus": os.cpu_count()}
    sb = Sandbox().start()
    try:
        size = sum(len(d) for r in sb.servers.hub.repos.values() for d in r.files.values())
        out["checkpoint_bytes"] = size
        shapes = [("checkpoints", "tests/deploys/fleet_first.py")]
        if not a.skip_full:
            shapes.append(("full", "deploy.py"))
        for shape, deploy in shapes:
            # the checkpoint path skips the driver step: its boxes come with a working driver
            kw = {"driver": {"version": "580.95.05", "cuda": "13.0"}} if shape != "full" else {}
            one = [sb.add_box(f"bf{shape[0]}0", **kw)]
            single = run(sb, one, deploy, {}, a.hub_rate, size)
            for b in one:
                sb.remove_box(b)
            fleet = [sb.add_box(f"bf{shape[0]}{i}", **kw) for i in (1, 2, 3)]
            data = {}
            if shape == "full":
                cache = sb.add_box(f"bf{shape[0]}c", roles=["cache"])
                fleet.append(cache)
                data = {
                    "docker_daemon_config": HARNESS_DOCKER,
                    "registry_cache_upstream": sb.servers.urls(cache)["registry_mirror"],
                }
            three = run(sb, fleet, deploy, data, a.hub_rate, size)
            for b in fleet:
                sb.remove_box(b)
            out[shape] = {
                "single": single,
                "fleet_of_3": three,
                "wall_ratio": round(three["wall_s"] / single["wall_s"], 2),
            }
    finally:
        sb.stop()
    with open(a.json, "w") as fh:
        json.dump(out, fh, indent=1)
    for shape in ("checkpoints", "full"):
        if shape not in out:
            continue
        s, f = out[shape]["single"], out[shape]["fleet_of_3"]
        print(
            f"{shape:12} single {s['wall_s']:7.1f} s hub {s['hub_ratio']:.2f}x | fleet of 3 "
            f"{f['wall_s']:7.1f} s hub {f['hub_ratio']:.2f}x, image blobs from Docker Hub "
            f"{f['docker_hub_blob_bytes']} B | wall ratio {out[shape]['wall_ratio']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
