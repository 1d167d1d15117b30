"""Facts pyinfra lacks. Each runs one cheap, side-effect-free command (facts are not cached)."""

from __future__ import annotations

import shlex

from pyinfra.api import FactBase

from . import hardware


class NvidiaSmiGpus(FactBase):
    """The GPUs nvidia-smi sees: ``{"ok": bool, "gpus": [...], "message": str}``.

    ``ok`` is False with nvidia-smi's own words when the driver is not loaded; the fact's default
    (nvidia-smi absent) is ``{"ok": False, "gpus": [], "message": "nvidia-smi not installed"}``.
    """

    def requires_command(self):
        return "nvidia-smi"

    @staticmethod
    def default():
        return {"ok": False, "gpus": [], "message": "nvidia-smi not installed", "installed": False}

    def command(self):
        return (f"nvidia-smi --query-gpu={hardware.QUERY_FIELDS} --format=csv,noheader,nounits 2>&1; "
                "echo __rc=$?")

    def process(self, output):
        rc_line = output[-1] if output and output[-1].startswith("__rc=") else "__rc=1"
        lines = [line for line in output if not line.startswith("__rc=")]
        if rc_line != "__rc=0":
            return {"ok": False, "gpus": [], "message": " ".join(lines).strip(), "installed": True}
        return {"ok": True, "gpus": hardware.parse_query_gpu(lines), "message": "", "installed": True}


class PciGpus(FactBase):
    """NVIDIA display controllers on the PCI bus (from sysfs; works before any driver is in)."""

    def command(self):
        return ("for d in /sys/bus/pci/devices/*; do [ -r \"$d/vendor\" ] || continue; "
                "printf '%s %s %s %s\\n' \"${d##*/}\" \"$(cat $d/vendor)\" \"$(cat $d/device)\" \"$(cat $d/class)\"; "
                "done")

    def process(self, output):
        return hardware.parse_sysfs_pci(output)


class FreeSpaceMiB(FactBase):
    """MiB available to unprivileged writers at `path`, or at its nearest existing parent."""

    def command(self, path):
        return (f"p={shlex.quote(path)}; while [ ! -e \"$p\" ]; do p=$(dirname \"$p\"); done; "
                "df -Pm \"$p\" | tail -n 1")

    def process(self, output):
        return int(output[-1].split()[3])


class SecureBoot(FactBase):
    """True when UEFI Secure Boot is on (unsigned driver modules would not load), False otherwise."""

    def command(self):
        return ("v=$(ls /sys/firmware/efi/efivars/SecureBoot-* 2>/dev/null | head -n 1); "
                "if [ -n \"$v\" ]; then od -An -t u1 \"$v\" | awk '{print $NF}'; else echo 0; fi")

    def process(self, output):
        return output[-1].strip() == "1"


class MemTotalMiB(FactBase):
    def command(self):
        return "awk '/^MemTotal:/ {print int($2/1024)}' /proc/meminfo"

    def process(self, output):
        return int(output[-1])


class DockerConfigState(FactBase):
    """``{"config_mtime": int|None, "started": int|None}``: daemon.json's mtime and when dockerd last started."""

    def command(self):
        return ("stat -c %Y /etc/docker/daemon.json 2>/dev/null || echo none; "
                "ts=$(systemctl show docker.service -p ActiveEnterTimestamp --value 2>/dev/null); "
                "if [ -n \"$ts\" ] && [ \"$(systemctl is-active docker.service)\" = active ]; "
                "then date -d \"$ts\" +%s; else echo none; fi")

    def process(self, output):
        values = [None if v.strip() == "none" else int(v) for v in output[-2:]]
        return {"config_mtime": values[0], "started": values[1]}


class FileSizes(FactBase):
    """``{relative path: size}`` of the regular files under a folder (empty when it is missing)."""

    @staticmethod
    def default():
        return {}

    def command(self, path):
        return f"[ -d {shlex.quote(path)} ] && cd {shlex.quote(path)} && find . -type f -printf '%s %P\\n' || true"

    def process(self, output):
        out = {}
        for line in output:
            size, _, rel = line.partition(" ")
            if rel:
                out[rel] = int(size)
        return out


class CheckpointState(FactBase):
    """``{"stats": {path: {size, mtime_ns, inode}}, "state": dict}`` for a checkpoint folder.

    Only stat and the small verification record are read: judging a converged box hashes nothing.
    """

    def command(self, path):
        q = shlex.quote(path)
        return (f"if [ -d {q} ]; then cd {q} && find . -type f -not -path './.laguna-*' "
                f"-printf '%s %T@ %i %P\\n'; fi; echo __STATE__; cat {q}/.laguna-verified.json 2>/dev/null; true")

    @staticmethod
    def default():
        return {"stats": {}, "state": {}}

    def process(self, output):
        import json

        stats, state_lines, in_state = {}, [], False
        for line in output:
            if line == "__STATE__":
                in_state = True
            elif in_state:
                state_lines.append(line)
            else:
                size, mtime, inode, rel = line.split(" ", 3)
                sec, _, frac = mtime.partition(".")
                stats[rel] = {"size": int(size), "mtime_ns": int(sec) * 10**9 + int((frac + "0" * 9)[:9]),
                              "inode": int(inode)}
        try:
            state = json.loads("\n".join(state_lines)) if state_lines else {}
        except ValueError:
            state = {}
        return {"stats": stats, "state": state}


class DockerImageDigest(FactBase):
    """The registry digest (``sha256:...``) of a pulled image reference, or None when not pulled."""

    def requires_command(self, ref):
        return "docker"

    def command(self, ref):
        return f"docker image inspect --format '{{{{json .RepoDigests}}}}' {shlex.quote(ref)} 2>/dev/null || echo null"

    def process(self, output):
        import json

        digests = json.loads(output[-1]) or []
        return digests[0].split("@", 1)[1] if digests else None


class ReleaseState(FactBase):
    """``{"state": releases/state.json, "current": its release.json, "gate": state/last-gate.json,
    "unit": {"active": bool, "since": unix seconds of its last start or None}}`` (unit: when asked)."""

    def command(self, kit_dir, unit=None):
        k = shlex.quote(kit_dir)
        unit_part = (f"printf '\\n__UNIT__\\n'; systemctl show {shlex.quote(unit)} -p ActiveState "
                     "-p ActiveEnterTimestamp --timestamp=unix 2>/dev/null; " if unit else "")
        return (f"echo __STATE__; cat {k}/releases/state.json 2>/dev/null; "
                f"cur=$(grep -o '\"current\": *[0-9]*' {k}/releases/state.json 2>/dev/null | grep -o '[0-9]*$'); "
                f"printf '\\n__CURRENT__\\n'; [ -n \"$cur\" ] && cat {k}/releases/$(printf %04d \"$cur\")/release.json 2>/dev/null; "
                f"printf '\\n__GATE__\\n'; cat {k}/state/last-gate.json 2>/dev/null; {unit_part}true")

    @staticmethod
    def default():
        return {"state": {}, "current": {}, "gate": {}, "unit": {"active": False, "since": None}}

    def process(self, output):
        import json

        parts, key = {"__STATE__": [], "__CURRENT__": [], "__GATE__": [], "__UNIT__": []}, None
        for line in output:
            if line in parts:
                key = line
            elif key:
                parts[key].append(line)

        def load(lines):
            try:
                return json.loads("\n".join(lines)) if lines else {}
            except ValueError:
                return {}

        props = dict(line.split("=", 1) for line in parts["__UNIT__"] if "=" in line)
        since = props.get("ActiveEnterTimestamp", "").lstrip("@")
        return {"state": load(parts["__STATE__"]), "current": load(parts["__CURRENT__"]),
                "gate": load(parts["__GATE__"]),
                "unit": {"active": props.get("ActiveState") == "active",
                         "since": int(since) if since.isdigit() else None}}


class ServingStatus(FactBase):
    """What an operator asks first: unit state, endpoint health, GPU memory in use."""

    def command(self, unit, port):
        return (f"echo unit=$(systemctl is-active {shlex.quote(unit)} 2>/dev/null); "
                f"echo health=$(curl -s -o /dev/null -m 5 -w '%{{http_code}}' http://127.0.0.1:{int(port)}/health); "
                "echo gpu_mem=$(nvidia-smi --query-gpu=memory.used,memory.total --format=csv,noheader,nounits "
                "2>/dev/null | tr '\\n' ';')")

    def process(self, output):
        return dict(line.split("=", 1) for line in output if "=" in line)


class TailscaleStatus(FactBase):
    """``tailscale status --json`` (BackendState, Self.TailscaleIPs), or {} when tailscaled is not up."""

    def requires_command(self):
        return "tailscale"

    @staticmethod
    def default():
        return {}

    def command(self):
        return "tailscale status --json 2>/dev/null || echo '{}'"

    def process(self, output):
        import json

        try:
            return json.loads("\n".join(output))
        except ValueError:
            return {}
