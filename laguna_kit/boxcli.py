"""How the control side calls the box tools (laguna_kit/boxtools): their files, their launchers,
and the one builder of their command lines."""

from __future__ import annotations

import getpass
import os
import shlex
import socket
from pathlib import Path

BOXTOOLS = Path(__file__).resolve().parent / "boxtools"

# launcher in <kit_dir>/bin -> module of the package; fetch and gate need the venv (hub client,
# httpx)
BOX_TOOLS = {
    "laguna_fetch.py": "fetch",
    "laguna_release.py": "release",
    "laguna_gate.py": "gate",
    "laguna_firewall.py": "firewall",
    "laguna_lock.py": "lock",
}
VENV_TOOLS = {"laguna_fetch.py", "laguna_gate.py"}


# Who holds a box's deploy lock: this control machine's run (named in another run's refusal).
LOCK_HOLDER = f"{getpass.getuser()}@{socket.gethostname()} pyinfra pid {os.getpid()}"


def package_files() -> list[tuple[str, str]]:
    """(local path, path inside the package) of every module shipped to the box."""
    return [(str(p), p.name) for p in sorted(BOXTOOLS.glob("*.py"))]


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


def release_command(kit_dir: str, unit: str, *args) -> str:
    """laguna_release.py for this kit_dir and unit, then its subcommand and arguments."""
    return tool_command(kit_dir, "laguna_release.py", "--kit-dir", kit_dir, "--unit", unit, *args)


def systemd_run(unit: str, *props: str, wait: bool = False) -> str:
    """The quoted words that start a transient service `unit` (collected when it ends, failed or
    not) with these properties; the command's words follow."""
    words = ["systemd-run", "--quiet", "--collect", *(["--wait"] if wait else []), f"--unit={unit}"]
    for prop in props:
        words += ["-p", prop]
    return shlex.join([*words, "--"])


def transient(unit: str, command: str, stdout: str = "null", stderr_file: str = "") -> str:
    """`command` as a transient systemd service that outlives this SSH session (a dropped
    connection or a killed run does not stop a download or a rollback half way). A run that finds
    it still going waits for it instead of starting a second one on the same files. Its stderr is
    shown when it ends; its exit status is the command's."""
    u = shlex.quote(unit)
    err = stderr_file or f"/run/laguna-kit/{unit}.err"
    run = systemd_run(unit, f"StandardOutput={stdout}", f"StandardError=truncate:{err}", wait=True)
    return (
        f"while systemctl is-active -q {u}; do sleep 5; done; mkdir -p /run/laguna-kit; "
        f"{run} {command}; rc=$?; cat {shlex.quote(err)} >&2 2>/dev/null; exit $rc"
    )
