"""The box itself: architecture, kernel, memory, Secure Boot, free space, its services."""

from __future__ import annotations

import shlex

from pyinfra.api import FactBase

from ..boxcli import tool_command


class FreeSpaceMiB(FactBase):
    """``{path: MiB}`` available to unprivileged writers at each of `paths`, or at its nearest
    existing parent."""

    def command(self, paths):
        return (
            "for p in "
            + shlex.join(paths)
            + (
                '; do q="$p"; while [ ! -e "$q" ]; do q=$(dirname "$q"); done; '
                'echo "$p $(df -Pm "$q" | tail -n 1 | awk \'{print $4}\')"; done'
            )
        )

    def process(self, output):
        return {path: int(mib) for path, mib in (line.rsplit(" ", 1) for line in output)}


class BoxBasics(FactBase):
    """What the pre-flight and the driver plan read of the box itself, in one command:
    ``{"arch": "x86_64", "kernel": "6.1.0-28-amd64", "mem_mib": total RAM, "secure_boot": bool}``
    (Secure Boot on: unsigned driver modules would not load)."""

    def command(self):
        return (
            'echo "arch=$(uname -m)"; echo "kernel=$(uname -r)"; '
            "awk '/^MemTotal:/ {print \"mem_kib=\" $2}' /proc/meminfo; "
            "v=$(ls /sys/firmware/efi/efivars/SecureBoot-* 2>/dev/null | head -n 1); "
            'if [ -n "$v" ]; then echo "secure_boot=$(od -An -t u1 "$v" | awk \'{print $NF}\')"; '
            "else echo secure_boot=0; fi"
        )

    def process(self, output):
        got = dict(line.strip().split("=", 1) for line in output if "=" in line)
        return {
            "arch": got.get("arch", ""),
            "kernel": got.get("kernel", ""),
            "mem_mib": int(got.get("mem_kib") or 0) // 1024,
            "secure_boot": got.get("secure_boot") == "1",
        }


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


class UnitStates(FactBase):
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

    def process(self, output):
        out, props = {}, {}
        for line in [*output, ""]:
            key, sep, value = line.strip().partition("=")
            if sep:
                props[key] = value
                continue
            if props.get("Id"):
                out[props["Id"]] = {
                    "running": props.get("SubState") in self.RUNNING,
                    "enabled": props.get("UnitFileState") in self.ENABLED,
                    "exists": props.get("LoadState") not in (None, "not-found"),
                }
            props = {}
        return out
