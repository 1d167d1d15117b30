"""systemd units: installed with their files (unit, drop-ins, configuration) by one operation
whose reactions (daemon-reload, restart, reload, re-enable) come from the box's state, so a run
cut between writing a file and reacting to it loses nothing; removed the same way; kept running.

The box's state, not an earlier operation's `did_change`: systemd's NeedDaemonReload for the unit
files it loaded, and whether the running unit entered active (or was last reloaded by the kit)
before its files last changed. A file written by this operation counts as changed now.
"""

from __future__ import annotations

import configparser
import os
import shlex
import time

from pyinfra import host
from pyinfra.api import operation

from ..boxtools.layout import RELOADED_DIR, UNIT_DIR
from ..facts.systemd import UnitFiles, UnitFilesState, UnitState, UnitStates
from ..run import memo
from .files import stale, writes


def unit_of(path: str) -> str | None:
    """The unit a file under UNIT_DIR defines or drops into (None: a configuration file)."""
    rel = os.path.relpath(path, UNIT_DIR)
    if rel.startswith(".."):
        return None
    top = rel.split("/", 1)[0]
    return top.removesuffix(".d") if "/" in rel else top


def install_links(unit: str, text: bytes) -> list[str]:
    """The .wants/.requires links `systemctl enable` makes for `unit` from its [Install]."""
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(text.decode())
    links = []
    for key, kind in (("WantedBy", "wants"), ("RequiredBy", "requires")):
        for target in parser.get("Install", key, fallback="").split():
            links.append(f"{UNIT_DIR}/{target}.{kind}/{unit}")
    return sorted(links)


def reactions(
    unit: str, files: list[tuple[bytes, str, str]], st: UnitFilesState, reload: bool, now: float
) -> list[str]:
    """What the unit needs after its files are in place, from the box's state (`st`, read before
    the files were written; those this run writes count as changed at `now`)."""
    written = {dest for _, dest, _ in stale(st["files"], files)}

    def changed(paths: list[str]) -> float:
        return max((now if p in written else st["files"][p]["mtime"] for p in paths), default=0)

    unit_files = [dest for _, dest, _ in files if unit_of(dest)]
    configs = [dest for _, dest, _ in files if not unit_of(dest)]
    loaded = [u for u in {unit_of(p) for p in unit_files} if u and "@." not in u]
    templates = [p for p in unit_files if "@." in (unit_of(p) or "")]
    out = []
    target = st["units"].get(unit)
    since = target["since"] if target and target["active"] else None
    stale_units = since is not None and changed(unit_files) > since
    if (
        any(p in written for p in unit_files)
        or any(st["units"][u]["need_daemon_reload"] for u in loaded if u in st["units"])
        # a template's change shows in no unit's NeedDaemonReload: its age against the unit's
        or (since is not None and changed(templates) > since)
    ):
        out.append("systemctl daemon-reload")
    if since is None:
        return out  # not running: it starts with these files (service_running)
    q = shlex.quote(unit)
    if stale_units or (not reload and changed(configs) > since):
        out.append(f"systemctl try-restart {q}")
    elif reload and changed(configs) > max(since, st["reloaded"].get(unit, 0)):
        marker = shlex.quote(f"{RELOADED_DIR}/{unit}")
        out.append(f"systemctl reload {q} && install -d {RELOADED_DIR} && touch {marker}")
    return out


@operation()
def unit_installed(
    unit: str,
    files: list[tuple[bytes, str, str]],
    reload: bool = False,
    enable: list[str] | tuple = (),
    validate: dict[str, str] | None = None,
    removed: list[str] | tuple = (),
):
    """
    A unit's files (its unit file, drop-ins, templates and the configuration it reads) put on the
    box as ``files_synced`` puts them, then what the unit needs for them, decided from the box:
    ``daemon-reload`` while systemd has not loaded a unit file as it is on disk; ``try-restart``
    while the running unit entered active before its unit files (or, without `reload`, any of
    its files) last changed; ``reload`` while it runs with configuration older than its files'.
    A run cut anywhere in between leaves these for the next run; a converged unit costs one
    command and changes nothing. Starting it is ``service_running``'s.

    + unit: the unit the files make up (a service, socket or timer)
    + files: (content, destination, mode) of each file (mode 600/400 goes on stdin)
    + reload: the unit takes new configuration with ``systemctl reload`` (its unit files still
      need a restart)
    + enable: units among the files kept enabled as their [Install] says (re-enabled when the
      links differ; never restarted for it)
    + validate: destination -> a command that must pass on the new file (``%s``)
    + removed: files of an earlier layout that must not be there

    **Example:**

    .. code:: python

        unit_installed(name="Router", unit="laguna-router.service", reload=True,
                       files=[(text, "/etc/laguna-kit/haproxy.cfg", "644")])
    """
    paths = [dest for _, dest, _ in files] + list(removed)
    units = sorted({unit, *enable, *(u for p in paths if (u := unit_of(p)) and "@." not in u)})
    st = host.get_fact(UnitFiles, paths=paths, units=units)
    commands = list(writes(st["files"], files, validate=validate, removed=removed))
    commands += reactions(unit, files, st, reload, time.time())
    if enable:
        text = next(data for data, dest, _ in files if dest == f"{UNIT_DIR}/{unit}")
        if install_links(unit, text) != [link for link in st["links"] if link.endswith(f"/{unit}")]:
            commands.append(f"systemctl reenable --quiet {shlex.quote(unit)}")
    if not commands:
        host.noop(f"{unit}: {len(files)} files current, running with them")
        return
    yield from commands


@operation()
def unit_removed(unit: str, paths: list[str], also: list[str] | tuple = ()):
    """
    A unit the kit no longer runs here: stopped and disabled, its files removed, systemd reloaded;
    each step again on the next run while the box shows it undone (a file still there, or systemd
    still holding the unit). `also`: files of the kit's that go with it (no unit of their own).

    + unit: the unit to remove (a service, socket or timer)
    + paths: its unit files and configuration
    + also: other files of the kit's that go with it

    **Example:**

    .. code:: python

        unit_removed(name="No metrics timer", unit="laguna-gpu-metrics.timer",
                     paths=["/etc/systemd/system/laguna-gpu-metrics.timer"])
    """
    units = sorted({unit, *(u for p in paths if (u := unit_of(p)) and "@." not in u)})
    st = host.get_fact(UnitFiles, paths=[*paths, *also], units=units)
    # its files, and the links `enable` made (a dangling one once the unit file is gone)
    present = sorted({*(p for p in [*paths, *also] if p in st["files"]), *st["links"]})
    held = [
        u for u in units if (s := st["units"].get(u)) and (s["active"] or s["need_daemon_reload"])
    ]
    if not present and not held:
        host.noop(f"{unit}: not here")
        return
    q = shlex.quote(unit)
    yield f"systemctl disable --now {q} 2>/dev/null || systemctl stop {q} 2>/dev/null; true"
    if present:
        yield "rm -f " + shlex.join(present)
    if any(unit_of(p) for p in present) or held:
        yield "systemctl daemon-reload"


UNKNOWN: UnitState = {"running": False, "enabled": False, "exists": False}
# The services the deploy keeps running: one `systemctl show` answers for all of them, so a
# converged run asks once (a service not listed here is asked with them).
KEPT_SERVICES = (
    "laguna-firewall.service",
    "laguna-firewall-watch.service",
    "docker.service",
    "tailscaled.service",
)


@operation()
def service_running(service: str, running: bool | None = True, enabled: bool = True):
    """
    A systemd service started and enabled at boot, as pyinfra's ``systemd.service`` does, judged
    by one command shared with the deploy's other services.

    + service: the unit's name
    + running: start it when it is not running (None: leave it as it is)
    + enabled: enable it at boot

    **Example:**

    .. code:: python

        service_running(name="Docker running and enabled", service="docker.service")
    """
    units = tuple(dict.fromkeys((*KEPT_SERVICES, service)))
    st = memo.fact(host, UnitStates, units=units).get(service) or UNKNOWN
    todo = []
    if running and not st.get("running"):
        todo.append(f"systemctl start {service}")
    if enabled and not st.get("enabled"):
        todo.append(f"systemctl enable {service}")
    if not todo:
        host.noop(f"{service} " + ("running and " if running else "") + "enabled")
    yield from todo
