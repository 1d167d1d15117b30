"""What the NVIDIA driver and the PCI bus say about the GPUs, and whether nouveau can still load."""

from __future__ import annotations

from pyinfra.api import FactBase

from .. import hardware


class NvidiaSmiGpus(FactBase):
    """The GPUs nvidia-smi sees: ``{"ok": bool, "gpus": [Gpu], "message": str, "installed": bool}``.

    ``ok`` is False with nvidia-smi's own words when the driver is not loaded; without nvidia-smi
    the
    fact is its default, ``installed`` False.
    """

    def requires_command(self):
        return "nvidia-smi"

    @staticmethod
    def default():
        return {"ok": False, "gpus": [], "message": "nvidia-smi not installed", "installed": False}

    def command(self):
        return (
            f"nvidia-smi --query-gpu={hardware.QUERY_FIELDS} --format=csv,noheader,nounits 2>&1; "
            "echo __rc=$?"
        )

    def process(self, output):
        rc_line = output[-1] if output and output[-1].startswith("__rc=") else "__rc=1"
        lines = [line for line in output if not line.startswith("__rc=")]
        if rc_line != "__rc=0":
            return {"ok": False, "gpus": [], "message": " ".join(lines).strip(), "installed": True}
        return {
            "ok": True,
            "gpus": hardware.parse_query_gpu(lines),
            "message": "",
            "installed": True,
        }


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
        return (
            "f=/boot/initrd.img-$(uname -r); if command -v lsinitramfs >/dev/null 2>&1 && "
            'command -v update-initramfs >/dev/null 2>&1 && [ -e "$f" ]; then echo "initramfs=$f"; '
            f"lsinitramfs \"$f\" 2>/dev/null | grep -e '/nouveau\\.ko' -e "
            f"'etc/modprobe\\.d/{conf}$'; "
            "else echo initramfs=; fi; true"
        )

    def process(self, output):
        path = next((line.split("=", 1)[1] for line in output if line.startswith("initramfs=")), "")
        listed = [line for line in output if not line.startswith("initramfs=")]
        return {
            "initramfs": path or None,
            "nouveau_module": any("/nouveau.ko" in line for line in listed),
            "blacklisted": any("etc/modprobe.d/" in line for line in listed),
        }
