"""What the deploy reads to judge this box (`state --json`, laguna_kit/facts/releases.py): state,
the current release, drift of the installed unit, further replicas' units, the last gate, the
current release's figures, and whether and since when the unit runs."""

from __future__ import annotations

import os

from .. import unitclock
from . import system, units
from .store import Store


def unit_status(unit: str) -> dict:
    """{"active": bool, "since": when it last entered active (seconds) or None}."""
    show = system.capture(
        "systemctl", "show", unit, "-p", "ActiveState", "-p", "ActiveEnterTimestamp",
        *unitclock.SHOW_ARGS,
    )  # fmt: skip
    props = dict(line.split("=", 1) for line in show.splitlines() if "=" in line)
    return {
        "active": props.get("ActiveState") == "active",
        "since": unitclock.since_epoch(props.get("ActiveEnterTimestamp", "")),
    }


def snapshot(store: Store) -> dict:
    return {
        "drain": store.drained(),
        "state": store.state() if os.path.exists(store.state_path) else {},
        "current": store.current_meta(),
        "unit_drift": units.unit_drift(store),
        "replica_units": units.replica_units(store),
        "gate": store.gate_result(),
        "perf": store.perf(store.current()),
        "unit": unit_status(store.unit),
    }
