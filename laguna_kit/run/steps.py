"""The deploy's steps (its tasks/*.py files) and how long each took on each host.

`include(path)` is pyinfra's `local.include` that also notes which operations the file added;
a state callback times them as they run, and at the end of the run a per-step summary is printed
(stderr, so `--json` stays parseable) and, with LAGUNA_KIT_STEP_TIMES=<file>, written as JSON
for scripts/benchmarks.py. A step's wall time runs from its first operation's start to its last
one's end on that host, so overlapping work (a download running box-side) shows as it is.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import time

from pyinfra import local, state
from pyinfra.api.state import BaseStateCallback

from . import interrupt, ssh_connection

STEP_OF: dict[str, str] = {}  # operation hash -> task file
ORDER: list[str] = []
SPANS: dict[tuple[str, str], list[float]] = {}  # (host, step) -> [first start, last end]
STARTED: dict[tuple[str, str], float] = {}  # (host, op hash) -> start
RUN_START = time.time()


def include(path: str, label: str = "") -> None:
    """local.include(path), its operations timed as the step `label` (default: the path)."""
    step = f"{path} {label}".strip()
    before = set(state.op_meta)
    local.include(path)
    for op_hash in set(state.op_meta) - before:
        STEP_OF.setdefault(op_hash, step)
    if step not in ORDER:
        ORDER.append(step)
    _install()


class Timer(BaseStateCallback):
    @staticmethod
    def operation_host_start(state, host, op_hash):
        STARTED[(host.name, op_hash)] = time.time()

    @staticmethod
    def operation_host_success(state, host, op_hash, retry_count=0):
        Timer._ended(host, op_hash)

    @staticmethod
    def operation_host_error(state, host, op_hash, retry_count=0, max_retries=0):
        Timer._ended(host, op_hash)

    @staticmethod
    def _ended(host, op_hash):
        step = STEP_OF.get(op_hash)
        start = STARTED.pop((host.name, op_hash), None)
        if step is None or start is None:
            return
        span = SPANS.setdefault((host.name, step), [start, start])
        span[0], span[1] = min(span[0], start), max(span[1], time.time())


def table() -> dict:
    """{host: {"steps": {step: wall s}, "spans": {step: [start, end]}, "first_start": t,
    "last_end": t}} (times as time.time())."""
    out: dict = {}
    for (host, step), (start, end) in SPANS.items():
        h = out.setdefault(host, {"steps": {}, "spans": {}, "first_start": start, "last_end": end})
        h["steps"][step] = round(end - start, 2)
        h["spans"][step] = [round(start, 3), round(end, 3)]
        h["first_start"], h["last_end"] = min(h["first_start"], start), max(h["last_end"], end)
    return out


def _report() -> None:
    from . import summary

    times = table()
    if not times:
        return
    lines = ["--> Time per step (wall, from the step's first operation to its last):"]
    for host, h in sorted(times.items()):
        lines.append(f"    {host}: {h['last_end'] - h['first_start']:.1f} s in all")
        for step in ORDER:
            if step in h["steps"]:
                lines.append(f"      {h['steps'][step]:8.1f} s  {step}")
    print("\n".join(lines), file=sys.stderr)
    path = os.environ.get("LAGUNA_KIT_STEP_TIMES")
    if path:
        with open(path, "w") as fh:
            json.dump({"order": ORDER, "hosts": times}, fh, indent=1)
    summary.report(sorted(set(times) | set(summary.RECORDS)))


def _install() -> None:
    interrupt.install()  # Ctrl-C ends the run within seconds, saying what goes on box-side
    ssh_connection.install(state)  # the deploy's many small commands: no Nagle delay on each
    if not any(isinstance(h, Timer) for h in state.callback_handlers):
        state.add_callback_handler(Timer())
        atexit.register(_report)
