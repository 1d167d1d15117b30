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


def tool_command(kit_dir: str, launcher: str, *args) -> str:
    """The shell words that run one box tool with its interpreter, every argument quoted."""
    python = f"{kit_dir}/venv/bin/python" if launcher in VENV_TOOLS else "python3"
    return " ".join(shlex.quote(str(a)) for a in (python, f"{kit_dir}/bin/{launcher}", *args))


def release_command(kit_dir: str, unit: str, *args) -> str:
    """laguna_release.py for this kit_dir and unit, then its subcommand and arguments."""
    return tool_command(kit_dir, "laguna_release.py", "--kit-dir", kit_dir, "--unit", unit, *args)
