"""Start a replica's container with its GPU device nodes named to docker one by one.

`laguna_gpu_devices.py --cards 0,1,2,3 -- /usr/bin/docker run ARGS...` adds `--device=` for
/dev/nvidiactl, each listed card's /dev/nvidia<minor>, and /dev/nvidia-uvm, -uvm-tools and
-modeset where present, then execs docker (same PID: the unit still runs docker attached).

Why: `--gpus` alone has the NVIDIA hook grant the devices behind runc's back, and under the systemd
cgroup driver a `systemctl daemon-reload` (the kit's own, or any package's postinst) re-applies
the container's device list without them: CUDA and NVML then fail with "Unknown Error" until the
container is recreated. Devices docker itself was asked for survive the reload. This is the
second way out NVIDIA's container toolkit troubleshooting page documents ("Containers losing
access to GPUs", NVIDIA/cloud-native-docs container-toolkit/troubleshooting.md); CDI needs
Docker 25 (Debian 12 ships 20.10) and the cgroupfs driver would change the owner's containers.

Resolved at each start, not at deploy: a first deploy renders the unit before the driver loads,
and a card's minor number (the driver's, nvidia-smi's `minor_number`) need not be its index.
"""

from __future__ import annotations

import argparse
import os
import shutil
import stat
import subprocess
import sys

# The query the real driver answers (driver 580's `nvidia-smi -q` has <minor_number>; the field is
# in `nvidia-smi --help-query-gpu`): /dev/nvidia<minor_number> is the card's node.
MINOR_QUERY = ("--query-gpu=index,minor_number", "--format=csv,noheader,nounits")
# The driver's device nodes: the control node, each card's /dev/nvidia<minor>, and the
# unified-memory and modeset nodes (uvm, uvm-tools first) where the driver made them.
NVIDIA_CONTROL_NODES = ("/dev/nvidiactl",)
NVIDIA_NODE_PREFIX = "/dev/nvidia"
NVIDIA_OPTIONAL_NODES = ("/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset")
NVIDIA_SMI = ("/usr/bin/nvidia-smi", "/usr/local/nvidia/bin/nvidia-smi")


class Refused(Exception):
    pass


def parse_cards(text: str) -> list[int]:
    try:
        cards = [int(c) for c in text.split(",")]
    except ValueError:
        raise Refused(f"--cards {text!r} is not a list of GPU indices") from None
    if not cards or any(c < 0 for c in cards):
        raise Refused(f"--cards {text!r} is not a list of GPU indices")
    return cards


def parse_minors(lines: list[str]) -> dict[int, int]:
    """index -> minor number from nvidia-smi's `index, minor_number` rows."""
    out = {}
    for line in lines:
        if not line.strip():
            continue
        cols = [c.strip() for c in line.split(",")]
        if len(cols) != 2 or not all(c.isdigit() for c in cols):
            raise Refused(f"nvidia-smi gave no index and minor number: {line.strip()!r}")
        out[int(cols[0])] = int(cols[1])
    return out


def read_minors() -> dict[int, int]:
    smi = shutil.which("nvidia-smi") or next((p for p in NVIDIA_SMI if os.path.exists(p)), None)
    if smi is None:
        raise Refused("no nvidia-smi: is the NVIDIA driver installed?")
    done = subprocess.run([smi, *MINOR_QUERY], capture_output=True, text=True)
    said = " ".join((done.stdout + done.stderr).split())
    if done.returncode != 0 and "not a valid field" in said:
        # a driver whose nvidia-smi lacks the field: the driver numbers its nodes in the order
        # nvidia-smi lists the cards (PCI order) unless told otherwise
        count = subprocess.run(
            [smi, "--query-gpu=index", "--format=csv,noheader"], capture_output=True, text=True
        )
        indices = [int(x) for x in count.stdout.split() if x.isdigit()]
        print(
            f"laguna: nvidia-smi has no minor_number ({said}): /dev/nvidiaN by index",
            file=sys.stderr,
        )
        return {i: i for i in indices}
    if done.returncode != 0:
        raise Refused(f"nvidia-smi cannot read the GPUs: {said}")
    return parse_minors(done.stdout.splitlines())


def make_uvm_nodes() -> None:
    """The unified-memory nodes exist only once something loaded nvidia-uvm (CUDA's first use does,
    through nvidia-modprobe): make them before docker looks, where nvidia-modprobe is installed."""
    if all(os.path.exists(n) for n in NVIDIA_OPTIONAL_NODES[:2]):
        return
    modprobe = shutil.which("nvidia-modprobe")
    if modprobe:
        subprocess.run([modprobe, "-u", "-c=0"], capture_output=True)


def is_char(path: str) -> bool:
    try:
        return stat.S_ISCHR(os.stat(path).st_mode)
    except OSError:
        return False


def nodes_for(cards: list[int], minors: dict[int, int]) -> list[str]:
    """The nodes to name: the control node and each card's (refused when absent), then those
    present of the optional ones."""
    missing = [c for c in cards if c not in minors]
    if missing:
        raise Refused(f"GPU {missing[0]} is not among the cards nvidia-smi sees ({sorted(minors)})")
    wanted = [*NVIDIA_CONTROL_NODES, *(f"{NVIDIA_NODE_PREFIX}{minors[c]}" for c in cards)]
    absent = [n for n in wanted if not is_char(n)]
    if absent:
        raise Refused(f"{absent[0]} is not a character device (is the driver loaded?)")
    return wanted + [n for n in NVIDIA_OPTIONAL_NODES if is_char(n)]


def with_devices(command: list[str], nodes: list[str]) -> list[str]:
    if len(command) < 2 or command[1] != "run":
        raise Refused(f"expected `docker run ...` after --, got {' '.join(command[:2])!r}")
    return [command[0], "run", *(f"--device={n}" for n in nodes), *command[2:]]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if "--" not in args:
        print("usage: laguna_gpu_devices.py --cards 0,1,2,3 -- docker run ...", file=sys.stderr)
        return 2
    split = args.index("--")
    parser = argparse.ArgumentParser(prog="laguna_gpu_devices.py")
    parser.add_argument("--cards", required=True)
    opts = parser.parse_args(args[:split])
    try:
        cards = parse_cards(opts.cards)
        make_uvm_nodes()
        command = with_devices(args[split + 1 :], nodes_for(cards, read_minors()))
    except Refused as exc:
        print(f"laguna: not starting the container: {exc}", file=sys.stderr)
        return 1
    absent = [n for n in NVIDIA_OPTIONAL_NODES[:2] if not is_char(n)]
    if absent:  # CUDA still starts (the hook loads nvidia-uvm) but a reload would cut it off
        print(
            f"laguna: {', '.join(absent)} absent before the start (no nvidia-modprobe?): a "
            "systemctl daemon-reload can cut this container off unified memory",
            file=sys.stderr,
        )
    os.execv(command[0], command)
    return 0  # not reached
