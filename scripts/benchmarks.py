#!/usr/bin/env python3
"""Benchmark (prints figures, asserts nothing): the kit's own costs on a sandbox box.

1. First converge of a bare box (`pyinfra -y inventory.py deploy.py`): wall time, changed
   operations, wall time per step, and critical_path_ratio (first converge / max(download,
   everything else)) with the stand-in hub's link and the stand-in driver's DKMS build slowed to
   real proportions (--hub-rate, --dkms-s).
2. Converged re-run: wall time, ratio to the first, remote commands (pyinfra's "Running command"
   debug lines: facts and operations), file uploads, bytes re-hashed by the box's verifier.
3. scripts/bench_verify.py: verification throughput against `sha256sum` on the same files, fetch and
   re-run bytes, and a resumed download's overhead over the bytes that were missing.
Writes everything to --json (default benchmarks.json) and prints a short table. Needs root and the
packages scripts/setup.sh installs; uses the harness ports, so not while the test suite runs.
usage: sudo .venv/bin/python scripts/benchmarks.py [--json benchmarks.json]
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import httpx  # noqa: E402

from tests.harness.deployrun import PYINFRA  # noqa: E402
from tests.harness.sandbox import SANDBOX_HOSTS, Sandbox  # noqa: E402
from tests.harness.servers import HUB_PORT  # noqa: E402

FETCH_LOG = "/opt/laguna-kit/state/fetch-log.jsonl"
HUB = f"http://127.0.0.1:{HUB_PORT}"


def timed_deploy(sb, log: str = "") -> dict:
    times = tempfile.NamedTemporaryFile(suffix=".json", delete=False).name
    env = dict(os.environ, LAGUNA_HOSTS=str(SANDBOX_HOSTS), LAGUNA_KIT_STEP_TIMES=times, **sb.env())
    t = time.monotonic()
    proc = subprocess.run(
        [PYINFRA, "-y", "--debug", "inventory.py", "deploy.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    seconds = time.monotonic() - t
    out = proc.stdout + proc.stderr
    if log:
        os.makedirs(os.path.dirname(log), exist_ok=True)
        with open(log, "w") as fh:
            fh.write(out)
    if proc.returncode != 0:
        sys.exit(f"benchmarks: deploy failed (exit {proc.returncode}):\n{out[-3000:]}")
    # pyinfra's own results table ends with: Grand total | hosts | success (changed) | error | no
    # change
    total = next(
        (
            line.split()
            for line in reversed(out.splitlines())
            if line.strip().startswith("Grand total")
        ),
        [],
    )
    counts = [0 if x == "-" else int(x) for x in total[2:6]] if len(total) >= 6 else None
    summary = (
        f"{counts[0]} operations: {counts[1]} changed, {counts[2]} failed, {counts[3]} unchanged"
        if counts
        else ""
    )
    with open(times) as fh:
        step_times = json.load(fh)
    os.unlink(times)
    return {
        "step_times": step_times,
        "seconds": round(seconds, 1),
        "remote_commands": out.count("Running command on "),
        "uploads": out.count("Attempting upload of "),
        "summary": summary,
    }


def fetch_records(box) -> list[dict]:
    text = box.run(f"cat {FETCH_LOG} 2>/dev/null || true").stdout
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def critical_path(first: dict, fetches: list[dict], host: str) -> dict:
    """first converge wall / max(checkpoint download wall, wall of everything else): 1.0 when the
    download and the host steps overlap perfectly, 2.0 when they run one after the other."""
    h = first["step_times"]["hosts"][host]
    spans, steps = h["spans"], h["steps"]
    started = min(v[0] for k, v in spans.items() if k.startswith("tasks/download.py"))
    download = max(r["finished"] for r in fetches) - started
    waiting = {k for k in steps if k.startswith("tasks/download.py") or k == "tasks/models.py"}
    others = sum(v for k, v in steps.items() if k not in waiting)
    return {
        "step_wall_s": steps,
        "download_wall_s": round(download, 1),
        "other_steps_wall_s": round(others, 1),
        "critical_path_ratio": round(first["seconds"] / max(download, others), 3),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", default=os.path.join(ROOT, "benchmarks.json"))
    p.add_argument(
        "--hub-rate", type=int, default=256 << 10, help="stand-in hub link, bytes/s (0: unlimited)"
    )
    p.add_argument("--logs", default="", help="keep each run's pyinfra --debug output here")
    p.add_argument("--dkms-s", type=int, default=30, help="stand-in driver's module build time")
    a = p.parse_args()
    out = {
        "machine": {
            "cpus": os.cpu_count(),
            "kernel": platform.release(),
            "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
    }
    sb = Sandbox().start()
    try:
        box = sb.add_box("bench1")
        sb.write_hosts(SANDBOX_HOSTS)
        # Real proportions, scaled down: 80 GB at 1 Gbit/s is ~11 min, two to three times a
        # driver's DKMS build plus reboot; here ~17 MiB of stand-in checkpoints at this rate.
        box.run(
            "mkdir -p /etc/standin-nvidia && "
            f"echo {a.dkms_s} > /etc/standin-nvidia/dkms-build-seconds"
        )
        httpx.post(f"{HUB}/_standin/rate", json={"bytes_per_second": a.hub_rate})
        out["stand_ins"] = {"hub_bytes_per_second": a.hub_rate, "dkms_build_s": a.dkms_s}
        out["first_converge"] = timed_deploy(sb, a.logs and f"{a.logs}/first-converge.log")
        httpx.post(f"{HUB}/_standin/rate", json={"bytes_per_second": 0})
        first_fetches = fetch_records(box)
        before = len(fetch_records(box))
        out["converged_rerun"] = timed_deploy(sb, a.logs and f"{a.logs}/converged-rerun.log")
        new = fetch_records(box)[before:]
        out["converged_rerun"]["rehashed_bytes"] = sum(r["hashed_bytes"] for r in new)
        out["converged_rerun"]["downloader_runs"] = len(new)
        out["rerun_to_first_ratio"] = round(
            out["converged_rerun"]["seconds"] / out["first_converge"]["seconds"], 3
        )
        out.update(critical_path(out["first_converge"], first_fetches, box.name))
        out["first_converge_s"] = out["first_converge"]["seconds"]
        out["rerun_s"] = out["converged_rerun"]["seconds"]
        out["rerun_remote_commands"] = out["converged_rerun"]["remote_commands"]
    finally:
        sb.stop()
    with tempfile.NamedTemporaryFile(suffix=".json") as tmp:
        subprocess.run(
            [sys.executable, os.path.join(ROOT, "scripts", "bench_verify.py"), "--json", tmp.name],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        out["verify"] = json.load(open(tmp.name))
    with open(a.json, "w") as fh:
        json.dump(out, fh, indent=1)

    f, r, v = out["first_converge"], out["converged_rerun"], out["verify"]
    rows = [
        ("first converge, bare box", f"{f['seconds']} s", f["summary"]),
        ("converged re-run", f"{r['seconds']} s", r["summary"]),
        ("re-run / first", f"{out['rerun_to_first_ratio']}", ""),
        (
            "critical_path_ratio",
            f"{out['critical_path_ratio']}",
            f"download {out['download_wall_s']} s, other steps {out['other_steps_wall_s']} s",
        ),
        ("remote commands on re-run", str(r["remote_commands"]), f"{r['uploads']} uploads"),
        (
            "bytes re-hashed on re-run",
            str(r["rehashed_bytes"]),
            f"{r['downloader_runs']} downloader runs",
        ),
        (
            "verify throughput",
            f"{v['hash']['kit_MiB_s']} MiB/s",
            f"sha256sum {v['hash']['sha256sum_MiB_s']} MiB/s on {v['hash']['bytes'] >> 20} MiB",
        ),
        (
            "resumed download",
            f"{v['resume']['overhead']}x",
            f"{v['resume']['fetched']} B fetched for {v['resume']['missing']} B missing",
        ),
    ]
    for name, value, note in rows:
        print(f"{name:<28} {value:>14}  {note}")
    print(f"written to {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
