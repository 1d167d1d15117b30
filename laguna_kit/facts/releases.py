"""The box's releases, as its release manager reports them (it alone reads its on-disk layout)."""

from __future__ import annotations

import shlex
from typing import Any, TypedDict, cast

from pyinfra.api import FactBase

from ..domain.box_commands import release_command
from . import multipart


class UnitRun(TypedDict):
    active: bool
    since: float | None  # seconds since the epoch of its last start


class BoxReleases(TypedDict, total=False):
    state: dict[str, Any]  # state.json: current, previous, history, failed
    current: dict[str, Any]  # the current release.json
    gate: dict[str, Any]  # the last gate's result
    perf: dict[str, Any] | None  # the current release's figures (perf.json)
    unit: UnitRun
    unit_drift: list[str]
    replica_units: list[str]
    drain: dict[str, Any] | None  # the router drain marker, while it exists


class ReleaseState(FactBase[BoxReleases]):
    """``{"state": state.json, "current": the current release.json, "gate": the last gate result,
    "perf": the current release's figures (perf.json) or None, "unit": {"active": bool, "since":
    unix seconds of its last start or None}, "unit_drift": diff lines between the installed unit
    and the current release's}``, from
    ``laguna_release.py state --json``; the default before the box tools are installed."""

    @staticmethod
    def default() -> BoxReleases:
        return {
            "state": {},
            "current": {},
            "gate": {},
            "perf": None,
            "unit": {"active": False, "since": None},
            "unit_drift": [],
            "replica_units": [],
        }

    def command(self, kit_dir, unit, state_dir=None):
        launcher = shlex.quote(f"{kit_dir}/bin/laguna_release.py")
        state = release_command(kit_dir, unit, "state", "--json", state_dir=state_dir)
        return f"if [ -x {launcher} ]; then {state}; fi"

    def process(self, output) -> BoxReleases:
        return cast(BoxReleases, {**self.default(), **multipart.load_json(output)})
