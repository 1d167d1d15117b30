"""How the control side calls the box tools (laguna_kit/boxtools): their files, their launchers,
and the one builder of their command lines."""

from __future__ import annotations

import getpass
import os
import re
import shlex
import socket
import uuid
from pathlib import Path

from ..boxtools.layout import RUN_DIR

BOXTOOLS = Path(__file__).resolve().parent.parent / "boxtools"

# launcher in <kit_dir>/bin -> module of the package; fetch and gate need the venv (hub client,
# httpx)
BOX_TOOLS = {
    "laguna_fetch.py": "fetch",
    "laguna_release.py": "release",
    "laguna_gate.py": "gate",
    "laguna_firewall.py": "firewall",
    "laguna_lock.py": "lock",
    "laguna_gpu_metrics.py": "gpumetrics",
    "laguna_cache_warm.py": "cachewarm",
    "laguna_metrics_relay.py": "metricsrelay",
    "laguna_router_agent.py": "routeragent",
    "laguna_scrub.py": "fetch.scrub",
    "laguna_gpu_devices.py": "gpudevices",
}
VENV_TOOLS = {"laguna_fetch.py", "laguna_gate.py"}


# Who holds a box's deploy lock: this control machine's run (named in another run's refusal). The
# run id tells apart two control machines of the same host name whose runs have the same pid.
_RUN_ID = uuid.uuid4().hex[:12]
LOCK_HOLDER = f"{getpass.getuser()}@{socket.gethostname()} pyinfra pid {os.getpid()} run {_RUN_ID}"


def package_files() -> list[tuple[str, str]]:
    """(local path, path inside the package) of every module shipped to the box."""
    return [(str(p), str(p.relative_to(BOXTOOLS))) for p in sorted(BOXTOOLS.rglob("*.py"))]


# Modules of an earlier layout of the package (before fetch, release and gate were packages of
# their own): removed from a box the kit upgrades.
EARLIER_MODULES = ("fetch.py", "release.py", "gate.py", "peers.py", "revisions.py")


def earlier_files(kit_dir: str) -> list[str]:
    return [f"{kit_dir}/lib/boxtools/{name}" for name in EARLIER_MODULES]


LAUNCHER = """#!/usr/bin/env python3
# Managed by the laguna kit (tasks/box_tools.py): runs boxtools.{module} from {lib}.
import sys

sys.path.insert(0, "{lib}")
from boxtools.{module} import main  # noqa: E402

sys.exit(main())
"""


def box_tool_files(kit_dir: str) -> list[tuple[bytes, str, str]]:
    """(content, destination, mode) of the package's modules and of a launcher per tool."""
    lib = f"{kit_dir}/lib"
    out = [(Path(src).read_bytes(), f"{lib}/boxtools/{rel}", "644") for src, rel in package_files()]
    for launcher, module in BOX_TOOLS.items():
        text = LAUNCHER.format(module=module, lib=lib)
        out.append((text.encode(), f"{kit_dir}/bin/{launcher}", "755"))
    return out


def tool_command(kit_dir: str, launcher: str, *args) -> str:
    """The shell words that run one box tool with its interpreter, every argument quoted."""
    python = f"{kit_dir}/venv/bin/python" if launcher in VENV_TOOLS else "python3"
    return shlex.join(str(a) for a in (python, f"{kit_dir}/bin/{launcher}", *args))


def release_command(kit_dir: str, unit: str, *args, state_dir: str | None = None) -> str:
    """laguna_release.py for this kit_dir and unit (and a replica's own state folder), then its
    subcommand and arguments."""
    own = ["--state-dir", state_dir] if state_dir and state_dir != kit_dir else []
    return tool_command(
        kit_dir, "laguna_release.py", "--kit-dir", kit_dir, "--unit", unit, *own, *args
    )


# A transient unit's name is `<unit>:<start time, ns>`, a new one at each start. A fixed name is
# refused ("Unit X.service was already loaded or has a fragment file") while systemd still holds
# the previous run of it: until it collects it (seen in CI, and on a box under load: 5 of 60
# starts right after a `--wait` run of the same name) and for as long as a failed run of it is
# kept (one started without --collect). systemd issue 35190: a query of an ended transient unit
# loads it again from a stale path. ':' is in no checkpoint folder's name (hub repo names).
RUNNING_STATES = "active,activating,deactivating,reloading"


def running(unit: str) -> str:
    """A shell test: a run of transient `unit` (a name, or a shell variable such as "$u") is under
    way, of this kit or of one before it that named every run `unit` (a download an interrupted
    run left going). It lists loaded units only: a query by name loads a unit."""
    if not re.fullmatch(r"\$\w+|[\w:.-]+", unit):
        raise ValueError(f"not a unit name: {unit!r}")
    return (
        f"systemctl list-units --quiet --plain --no-legend --state={RUNNING_STATES} "
        f'"{unit}:*.service" "{unit}.service" | grep -q .'
    )


def systemd_run(unit: str, *props: str, wait: bool = False) -> str:
    """The quoted words that start a new run of transient service `unit` (collected when it ends,
    failed or not) with these properties; the command's words follow."""
    words = ["systemd-run", "--quiet", "--collect", *(["--wait"] if wait else [])]
    for prop in props:
        words += ["-p", prop]
    return f"{shlex.join(words)} --unit={shlex.quote(unit)}:$(date +%s%N) --"


def transient(unit: str, command: str, stdout: str = "null", stderr_file: str = "") -> str:
    """`command` as a transient systemd service that outlives this SSH session (a dropped
    connection or a killed run does not stop a download or a rollback half way). A run that finds
    one still going waits for it instead of starting a second one on the same files. Its stderr is
    shown when it ends (nothing of an earlier run's when it could not start); its exit status is
    the command's."""
    err = stderr_file or f"{RUN_DIR}/{unit}.err"
    run = systemd_run(unit, f"StandardOutput={stdout}", f"StandardError=truncate:{err}", wait=True)
    q = shlex.quote(err)
    return (
        f"while {running(unit)}; do sleep 5; done; mkdir -p {RUN_DIR}; rm -f {q}; "
        f"{run} {command}; rc=$?; cat {q} >&2 2>/dev/null; exit $rc"
    )
