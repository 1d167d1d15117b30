"""What the deploy reads to judge this box (`state --json`, laguna_kit/facts/releases.py): state,
the current release, drift of the installed unit, further replicas' units, the last gate, the
current release's figures, and whether and since when the unit runs."""

from __future__ import annotations

import os

from . import system, units
from .store import Store


def unit_status(unit: str) -> dict:
    """{"active": bool, "since": when it last entered active (unix s) or None}."""
    props = dict(
        line.split("=", 1)
        for line in system.capture(
            "systemctl",
            "show",
            unit,
            "-p",
            "ActiveState",
            "-p",
            "ActiveEnterTimestamp",
            "--timestamp=unix",
        ).splitlines()
        if "=" in line
    )
    since = props.get("ActiveEnterTimestamp", "").lstrip("@")
    return {
        "active": props.get("ActiveState") == "active",
        "since": int(since) if since.isdigit() else None,
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
