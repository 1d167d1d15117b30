"""The box itself: free space, memory, Secure Boot."""

from __future__ import annotations

import shlex

from pyinfra.api import FactBase


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
