"""The box itself: architecture, kernel, memory, Secure Boot, free space, its services."""

from __future__ import annotations

import re
import shlex
import time

from pyinfra.api import FactBase


class FreeSpaceMiB(FactBase):
    """``{path: {"mib": MiB available to unprivileged writers, "mount": its filesystem's mount
    point}}`` at each of `paths`, or at its nearest existing parent (two paths on one filesystem
    share its free space)."""

    def command(self, paths):
        return (
            "for p in "
            + shlex.join(paths)
            + (
                '; do q="$p"; while [ ! -e "$q" ]; do q=$(dirname "$q"); done; '
                'echo "$p $(df -Pm "$q" | tail -n 1 | awk \'{print $4 " " $6}\')"; done'
            )
        )

    def process(self, output):
        out = {}
        for line in output:
            path, mib, mount = line.rsplit(" ", 2)
            out[path] = {"mib": int(mib), "mount": mount}
        return out


class BoxBasics(FactBase):
    """What the pre-flight and the driver plan read of the box itself, in one command:
    ``{"arch": "x86_64", "kernel": "6.1.0-28-amd64", "mem_mib": total RAM, "secure_boot": bool,
    "char_links_missing": ["195:255", ...], "clock_skew_s": seconds}`` (Secure Boot on: unsigned
    driver modules would not load; the NVIDIA device nodes without their /dev/char/MAJOR:MINOR
    link, which runc needs to keep a container's GPUs across a `systemctl daemon-reload`; the
    box's clock less this machine's)."""

    def command(self):
        return (
            'echo "arch=$(uname -m)"; echo "kernel=$(uname -r)"; '
            "awk '/^MemTotal:/ {print \"mem_kib=\" $2}' /proc/meminfo; "
            "v=$(ls /sys/firmware/efi/efivars/SecureBoot-* 2>/dev/null | head -n 1); "
            'if [ -n "$v" ]; then echo "secure_boot=$(od -An -t u1 "$v" | awk \'{print $NF}\')"; '
            "else echo secure_boot=0; fi; "
            'for d in /dev/nvidia*; do [ -c "$d" ] || continue; m=$(stat -c %Hr:%Lr "$d"); '
            '[ -e "/dev/char/$m" ] || echo "char_link_missing=$m"; done; echo "clock=$(date +%s)"; '
            "true"
        )

    def process(self, output):
        got = dict(line.strip().split("=", 1) for line in output if "=" in line)
        missing = [
            line.strip().split("=", 1)[1]
            for line in output
            if line.startswith("char_link_missing=")
        ]
        return {
            "arch": got.get("arch", ""),
            "kernel": got.get("kernel", ""),
            "mem_mib": int(got.get("mem_kib") or 0) // 1024,
            "secure_boot": got.get("secure_boot") == "1",
            "char_links_missing": sorted(m for m in missing if re.fullmatch(r"\d+:\d+", m)),
            # the box's clock less this machine's, as the answer came (None: not said)
            "clock_skew_s": (
                int(got["clock"]) - round(time.time())
                if re.fullmatch(r"\d{1,12}", got.get("clock", ""))
                else None
            ),
        }
