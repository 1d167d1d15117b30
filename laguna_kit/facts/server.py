"""The box itself: free space, memory, Secure Boot."""

from __future__ import annotations

import shlex

from pyinfra.api import FactBase

from ..boxcli import tool_command


class FreeSpaceMiB(FactBase):
    """MiB available to unprivileged writers at `path`, or at its nearest existing parent."""

    def command(self, path):
        return (
            f'p={shlex.quote(path)}; while [ ! -e "$p" ]; do p=$(dirname "$p"); done; '
            'df -Pm "$p" | tail -n 1'
        )

    def process(self, output):
        return int(output[-1].split()[3])


class SecureBoot(FactBase):
    """True when UEFI Secure Boot is on (unsigned driver modules would not load), False
    otherwise."""

    def command(self):
        return (
            "v=$(ls /sys/firmware/efi/efivars/SecureBoot-* 2>/dev/null | head -n 1); "
            'if [ -n "$v" ]; then od -An -t u1 "$v" | awk \'{print $NF}\'; else echo 0; fi'
        )

    def process(self, output):
        return output[-1].strip() == "1"


class MemTotalMiB(FactBase):
    """Total RAM in MiB (/proc/meminfo)."""

    def command(self):
        return "awk '/^MemTotal:/ {print int($2/1024)}' /proc/meminfo"

    def process(self, output):
        return int(output[-1])


class DeployLock(FactBase):
    """Takes (or confirms) the box's deploy lock for this run: ``{"held": bool, "busy": who holds
    it}``. Not a read-only fact: it is asked only while executing (never in --dry), by the
    operations that must not overlap with another deploy (laguna_kit/boxtools/lock.py)."""

    @staticmethod
    def default():
        return {"held": False, "busy": "", "tools": False}

    def command(self, kit_dir, holder, wait):
        launcher = shlex.quote(f"{kit_dir}/bin/laguna_lock.py")
        acquire = tool_command(
            kit_dir, "laguna_lock.py", "acquire", "--holder", holder, "--wait", int(wait)
        )
        return f"if [ -x {launcher} ]; then {acquire}; else echo no-tools; fi; true"

    def process(self, output):
        text = " ".join(output).strip()
        if text == "no-tools":
            return {"held": False, "busy": "", "tools": False}
        return {
            "held": text == "held",
            "busy": text.removeprefix("busy: ") if text != "held" else "",
            "tools": True,
        }
