"""The serving unit where systemd reads it: installed from a release (daemon-reload only on a real
change: a reload can detach GPUs from running containers), compared with the release's (a hand
edit is drift), restarted with its container settled, and the units of further replicas found."""

from __future__ import annotations

import difflib
import os
import re
import time

from ..layout import UNIT_DIR
from . import system
from .store import Store


def installed_unit(store: Store) -> str | None:
    try:
        with open(os.path.join(UNIT_DIR, store.unit)) as fh:
            return fh.read()
    except FileNotFoundError:
        return None


def install_unit(store: Store, text: str | None) -> None:
    """Put `text` (None: no unit) where systemd reads it; daemon-reload only on a real change."""
    if text == installed_unit(store):
        return
    dest = os.path.join(UNIT_DIR, store.unit)
    if text is None:
        os.unlink(dest)
    else:
        tmp = dest + ".laguna-tmp"
        with open(tmp, "w") as fh:
            fh.write(text)
        os.replace(tmp, dest)
    system.run("systemctl", "daemon-reload")


def unit_drift(store: Store) -> list[str]:
    """How the installed unit differs from the current release's (a hand edit): diff lines."""
    n = store.current()
    if n is None or n not in store.numbers():
        return []
    wanted, found = store.release_unit(n), installed_unit(store) or ""
    if wanted == found:
        return []
    diff = difflib.unified_diff(wanted.splitlines(), found.splitlines(), lineterm="", n=0)
    return [line for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---")][:12]


def replica_units(store: Store) -> list[str]:
    """Installed units of this unit's further replicas (`<unit>-n.service`, n > 1): what a
    box with fewer cards, or a lower replicas_per_box, has to retire."""
    stem = store.unit.removesuffix(".service")
    try:
        names = os.listdir(UNIT_DIR)
    except OSError:
        return []
    pattern = re.compile(re.escape(stem) + r"-([2-9]|[1-9][0-9]+)\.service")
    return sorted((n for n in names if pattern.fullmatch(n)), key=lambda n: (len(n), n))


def container_of(store: Store, n: int) -> str | None:
    """The container name release `n` runs (`--name` in its docker command line)."""
    try:
        argv = store.meta(n).get("spec", {}).get("argv") or []
    except (OSError, ValueError):
        return None
    return next((argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--name"), None)


def restart(store: Store, n: int, check: bool = True) -> None:
    """Stop the unit, let its container settle, start it. A `docker run` the stop killed
    before its container existed (a start seconds old: at boot, dockerd is slow) does not stop
    the daemon from creating that container a moment later, unowned: the new start's
    `docker rm -f` ran too early, its `docker run` then met "Conflict. The container name is
    already in use", and the gate passed against the orphan while the unit failed and came
    back 15 s later (seen after a power cut during a mode switch)."""
    system.run("systemctl", "stop", store.unit, check=check)
    name = container_of(store, n)
    if name:
        settle_container(name)
    system.run("systemctl", "start", store.unit, check=check)


def settle_container(name: str, quiet_s: float = 3.0, limit_s: float = 30.0) -> None:
    """No container `name` for `quiet_s` in a row (one a killed client still had the daemon create
    is removed as it appears), or `limit_s` passed."""
    deadline, quiet_since = time.monotonic() + limit_s, time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - quiet_since < quiet_s:
        if system.succeeds("docker", "container", "inspect", name):
            system.run("docker", "rm", "-f", name, check=False)
            quiet_since = time.monotonic()
        time.sleep(0.25)
