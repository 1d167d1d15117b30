"""The fleet router's view of one replica: drained (its agent answers "drain" while the marker
exists) before a restart, until the router has asked since and the running requests ended;
undrained by a passing gate, or by an operator."""

from __future__ import annotations

import json
import os
import time
import urllib.request

from . import system
from .store import Store

# The longest wait for the router's two checks: each check starts a process on this box, and a
# loaded box (a deploy of four boxes on two cores) took over 5 s for two of them.
ROUTER_WAIT_S = 15


def drain(store: Store, reason: str, by: str = "kit") -> None:
    """Ask the router for no new requests and wait until it has asked since and the running
    ones have ended (without a router in this box's fleet: nothing to do)."""
    agent = store.agent()
    if agent is None:
        return
    before = store.drained()
    if before is None or by == "operator":
        mark_drained(store, reason, by)
    if before is None:
        wait_for_the_router(agent)
    deadline = time.monotonic() + agent.get("drain_timeout_s", 300)
    busy = in_flight(agent["api_port"])
    while busy and time.monotonic() < deadline:
        time.sleep(0.2)
        busy = in_flight(agent["api_port"])
    if busy:
        system.say(f"{busy} request(s) still running after the drain timeout: restarting anyway")


def wait_for_the_router(agent: dict) -> None:
    """Two of the router's own checks of this replica after the marker (a check may have read
    the file just before it was written): then the router has seen "drain". Counted by the agent
    from remote addresses alone, so a local user connecting to the agent cannot cut the wait
    short (an agent of an earlier kit, without the count: its socket's accepted connections,
    two rounds of every replica's checks)."""
    interval = agent.get("check_interval_ms", 1000) / 1000
    if agent.get("checks"):
        need, count = 2, lambda: router_checks(agent["checks"])
    else:
        need, count = 2 * int(agent.get("replicas") or 1), lambda: accepted(agent["socket"])
    start, deadline = count(), time.monotonic() + max(ROUTER_WAIT_S, 8 * interval)
    while count() < start + need and time.monotonic() < deadline:
        time.sleep(0.1)
    if count() < start + need:
        system.say("the fleet router did not ask this box's agent (down?): not waiting for it")


def router_checks(path: str) -> int:
    """The router's checks of one replica so far (boxtools/routeragent.py counts them)."""
    try:
        with open(path) as fh:
            text = fh.read().strip()
    except OSError:
        return 0
    return int(text) if text.isdigit() else 0


def mark_drained(store: Store, reason: str, by: str = "kit") -> None:
    marker = {"by": by, "reason": reason, "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    tmp = store.drain_marker() + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(marker, fh)
    os.replace(tmp, store.drain_marker())


def undrain(store: Store, by: str = "kit") -> None:
    """End the kit's drain (or with by="operator", any drain)."""
    marker = store.drained()
    if marker is None:
        return
    if marker.get("by") == "operator" and by != "operator":
        system.say(
            f"still drained at the fleet router by an operator ({marker.get('reason')}): "
            "tasks/undrain.py (or `laguna_release.py undrain` on the box) ends it"
        )
        return
    try:
        os.remove(store.drain_marker())
    except FileNotFoundError:
        pass


def accepted(socket_unit: str) -> int:
    """Connections the socket unit has accepted since it started."""
    value = system.capture("systemctl", "show", "-p", "NAccepted", "--value", socket_unit).strip()
    return int(value) if value.isdigit() else 0


def in_flight(api_port: int) -> int:
    """vLLM's running + waiting requests (its /metrics gauges); 0 when nothing answers."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{api_port}/metrics", timeout=5) as resp:
            text = resp.read().decode(errors="replace")
    except OSError:
        return 0
    total = 0.0
    for line in text.splitlines():
        if line.startswith(("vllm:num_requests_running", "vllm:num_requests_waiting")):
            try:
                total += float(line.rsplit(" ", 1)[1])
            except (IndexError, ValueError):
                pass
    return int(total)
