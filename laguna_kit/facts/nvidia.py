"""What the NVIDIA driver and the PCI bus say about the GPUs, and whether nouveau can still load."""

from __future__ import annotations

import re

from pyinfra.api import FactBase, QuoteString, StringCommand

from ..domain import hardware


class NvidiaSmiGpus(FactBase):
    """The GPUs nvidia-smi sees: ``{"ok": bool, "gpus": [Gpu], "message": str, "installed": bool,
    "cuda": the CUDA version the driver supports (its header's "CUDA Version") or "",
    "path": where nvidia-smi is}``.

    nvidia-smi is looked for on PATH and where a driver installed by no package keeps it
    (/usr/local/nvidia/bin). ``ok`` is False with nvidia-smi's own words when the driver is not
    loaded; without nvidia-smi ``installed`` is False.
    """

    SEARCH = ("/usr/local/nvidia/bin/nvidia-smi",)

    @staticmethod
    def default():
        return {
            "ok": False,
            "gpus": [],
            "message": "nvidia-smi not installed",
            "installed": False,
            "cuda": "",
            "path": "",
        }

    def command(self):
        search = " ".join(self.SEARCH)
        return (
            f"smi=$(command -v nvidia-smi || ls {search} 2>/dev/null | head -n 1); "
            'if [ -z "$smi" ]; then echo __absent; exit 0; fi; '
            f'"$smi" --query-gpu={hardware.QUERY_FIELDS} --format=csv,noheader,nounits 2>&1; '
            'echo __rc=$?; echo "__cuda=$("$smi" 2>/dev/null | grep -m 1 -o \'CUDA Version: '
            "[0-9.]*' "
            '| cut -d \' \' -f 3)"; echo "__path=$smi"'
        )

    def process(self, output):
        if "__absent" in output:
            return self.default()
        tagged = {
            line.split("=", 1)[0]: line.split("=", 1)[1]
            for line in output
            if line.startswith(("__rc=", "__cuda=", "__path=")) and "=" in line
        }
        lines = [line for line in output if not line.startswith(("__rc=", "__cuda=", "__path="))]
        base = {
            "installed": True,
            "cuda": tagged.get("__cuda", ""),
            "path": tagged.get("__path", ""),
        }
        if tagged.get("__rc") != "0":
            return dict(base, ok=False, gpus=[], message=" ".join(lines).strip())
        return dict(base, ok=True, gpus=hardware.parse_query_gpu(lines), message="")


class PciGpus(FactBase):
    """NVIDIA display controllers on the PCI bus (from sysfs; works before any driver is in)."""

    def command(self):
        return (
            'for d in /sys/bus/pci/devices/*; do [ -r "$d/vendor" ] || continue; '
            'printf \'%s %s %s %s\\n\' "${d##*/}" "$(cat $d/vendor)" "$(cat $d/device)" '
            '"$(cat $d/class)"; done'
        )

    def process(self, output):
        return hardware.parse_sysfs_pci(output)


class NouveauInitramfs(FactBase):
    """Whether the running kernel's initramfs can still load nouveau before the blacklist applies:
    ``{"initramfs": path or None, "nouveau_module": bool, "blacklisted": bool}``.

    ``initramfs`` is None where there is nothing to rebuild (no initramfs-tools, or no initramfs for
    the running kernel). `conf` is the blacklist file's name under /etc/modprobe.d.
    """

    @staticmethod
    def default():
        return {"initramfs": None, "nouveau_module": False, "blacklisted": False}

    def command(self, conf):
        # the file's name matched as itself (grep's basic regular expressions)
        blacklist = "etc/modprobe\\.d/" + re.sub(r"([.\[\]*^$\\])", r"\\\1", conf) + "$"
        return StringCommand(
            "f=/boot/initrd.img-$(uname -r); if command -v lsinitramfs >/dev/null 2>&1 &&",
            'command -v update-initramfs >/dev/null 2>&1 && [ -e "$f" ]; then echo "initramfs=$f";',
            "lsinitramfs \"$f\" 2>/dev/null | grep -e '/nouveau\\.ko' -e",
            QuoteString(blacklist),
            "; else echo initramfs=; fi; true",
        )

    def process(self, output):
        path = next((line.split("=", 1)[1] for line in output if line.startswith("initramfs=")), "")
        listed = [line for line in output if not line.startswith("initramfs=")]
        return {
            "initramfs": path or None,
            "nouveau_module": any("/nouveau.ko" in line for line in listed),
            "blacklisted": any("etc/modprobe.d/" in line for line in listed),
        }


class NvidiaComputePieces(FactBase):
    """Where the driver's compute pieces are: ``{"nvidia-smi": path, "nvidia-persistenced": path,
    "libcuda.so.1": path, "libnvidia-ml.so.1": path}``, "" for each one missing (programs on
    PATH or in /usr/local/nvidia/bin, libraries as the dynamic linker finds them)."""

    PROGRAMS = ("nvidia-smi", "nvidia-persistenced")
    LIBRARIES = ("libcuda.so.1", "libnvidia-ml.so.1")

    def command(self):
        return (
            f"for c in {' '.join(self.PROGRAMS)}; do "
            'echo "$c=$(command -v $c || ls /usr/local/nvidia/bin/$c 2>/dev/null | head -n 1)"; '
            "done; "
            f"for l in {' '.join(self.LIBRARIES)}; do "
            'echo "$l=$(ldconfig -p 2>/dev/null | grep -m 1 -E "^[[:space:]]+$l " | sed \'s/.*=> '
            "//')\"; "
            "done"
        )

    def process(self, output):
        found = dict(line.split("=", 1) for line in output if "=" in line)
        return {name: found.get(name, "").strip() for name in (*self.PROGRAMS, *self.LIBRARIES)}
