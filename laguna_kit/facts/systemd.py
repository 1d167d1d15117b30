"""systemd units on the box: whether they run and are enabled, and what installing a unit's files
needs to decide its reactions (daemon-reload, restart, reload) from the box alone."""

from __future__ import annotations

import shlex
from typing import TypedDict

from pyinfra.api import FactBase

from ..boxtools.layout import RELOADED_DIR, UNIT_DIR
from ..boxtools.unitclock import since_epoch
from . import multipart
from .files import access


class UnitState(TypedDict):
    running: bool
    enabled: bool
    exists: bool


class UnitStates(FactBase[dict[str, UnitState]]):
    """``{unit: {"running": bool, "enabled": bool, "exists": bool}}`` for `units`, from one
    ``systemctl show`` (running and enabled as pyinfra's SystemdStatus and SystemdEnabled judge
    them)."""

    RUNNING = ("running", "waiting", "exited", "listening", "mounted")
    ENABLED = ("enabled", "static")

    @staticmethod
    def default():
        return {}

    def requires_command(self, units):
        return "systemctl"

    def command(self, units):
        names = shlex.join(units)
        return f"systemctl show -p Id -p LoadState -p SubState -p UnitFileState {names}"

    def process(self, output) -> dict[str, UnitState]:
        out: dict[str, UnitState] = {}
        for props in show_blocks(output):
            out[props["Id"]] = {
                "running": props.get("SubState") in self.RUNNING,
                "enabled": props.get("UnitFileState") in self.ENABLED,
                "exists": props.get("LoadState") not in (None, "not-found"),
            }
        return out


def show_blocks(output: list[str]) -> list[dict[str, str]]:
    """`systemctl show` of several units: one {property: value} per unit (blocks end at a blank
    line), those without an Id left out."""
    blocks, props = [], {}
    for line in [*output, ""]:
        key, sep, value = line.strip().partition("=")
        if sep:
            props[key] = value
            continue
        if props.get("Id"):
            blocks.append(props)
        props = {}
    return blocks


class FileState(TypedDict):
    sha256: str
    mode: str
    mtime: float


class UnitStatus(TypedDict):
    loaded: bool
    active: bool
    need_daemon_reload: bool
    since: float | None


class UnitFilesState(TypedDict):
    files: dict[str, FileState]
    units: dict[str, UnitStatus]
    links: list[str]
    reloaded: dict[str, float]


class UnitFiles(FactBase[UnitFilesState]):
    """What installing a unit's files needs to know, in one command::

        {"files": {path: {"sha256", "mode": "644", "mtime": seconds}} (the regular files of
                   `paths`),
         "units": {unit: {"loaded": bool, "active": bool, "need_daemon_reload": bool,
                          "since": when it last entered active (seconds) or None}},
         "links": the .wants/.requires links to `units` under /etc/systemd/system,
         "reloaded": {unit: when the kit last reloaded it (seconds)}}

    Times are the box's own clock with sub-second precision, so "the service started before its
    files last changed" is decided on the box's terms (systemd's NeedDaemonReload for the unit
    files it loaded)."""

    @staticmethod
    def default() -> UnitFilesState:
        return {"files": {}, "units": {}, "links": [], "reloaded": {}}

    def requires_command(self, paths, units):
        return "systemctl"

    def command(self, paths, units):
        q_paths, q_units = shlex.join(paths), shlex.join(units)
        links = " ".join(
            f"{UNIT_DIR}/*.{kind}/{shlex.quote(u)}" for u in units for kind in ("wants", "requires")
        )
        reloaded = " ".join(shlex.quote(f"{RELOADED_DIR}/{u}") for u in units)
        return (
            f'echo __FILES__; for f in {q_paths}; do [ -f "$f" ] && '
            'echo "$(find "$f" -maxdepth 0 -printf \'%m %g %T@\') '
            '$(sha256sum < "$f" | cut -d" " -f1) $f"; done; '
            f"echo __UNITS__; systemctl show --timestamp=us+utc -p Id -p LoadState "
            f"-p ActiveState -p NeedDaemonReload -p ActiveEnterTimestamp {q_units}; "
            f'echo __LINKS__; for l in {links}; do [ -L "$l" ] && echo "$l"; done; '
            f'echo __RELOADED__; for r in {reloaded}; do [ -e "$r" ] && '
            "find \"$r\" -maxdepth 0 -printf '%T@ %f\\n'; done; true"
        )

    def process(self, output) -> UnitFilesState:
        parts = multipart.split(output, ["__FILES__", "__UNITS__", "__LINKS__", "__RELOADED__"])
        files: dict[str, FileState] = {}
        for line in parts["__FILES__"]:
            mode, group, mtime, digest, path = line.split(" ", 4)
            files[path] = {"sha256": digest, "mode": access(mode, group), "mtime": float(mtime)}
        units: dict[str, UnitStatus] = {}
        for props in show_blocks(parts["__UNITS__"]):
            units[props["Id"]] = {
                "loaded": props.get("LoadState") == "loaded",
                "active": props.get("ActiveState") == "active",
                "need_daemon_reload": props.get("NeedDaemonReload") == "yes",
                "since": since_epoch(props.get("ActiveEnterTimestamp", "")),
            }
        reloaded = {}
        for line in parts["__RELOADED__"]:
            stamp, _, name = line.partition(" ")
            reloaded[name] = float(stamp)
        return {
            "files": files,
            "units": units,
            "links": sorted(line.strip() for line in parts["__LINKS__"] if line.strip()),
            "reloaded": reloaded,
        }
