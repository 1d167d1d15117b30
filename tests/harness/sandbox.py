"""A sandbox: the harness servers plus one or more boxes, and the hosts file that points the kit at
them.

The hosts file's per-host data holds the *only* differences from production: repository and hub
addresses and keys, the harness's Docker daemon settings (vfs storage, no iptables: the box's
/proc/sys is read-only under nspawn), and reboot permission.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from . import box as boxmod
from .errors import HarnessError
from .paths import box_numbers, cache_dir, run_dir, tag, worker
from .servers import HUB_TOKEN, Servers

SANDBOX_HOSTS = run_dir() / "sandbox-hosts.toml"
# The fleet router's API keys in the harness (the kit reads them from LAGUNA_API_KEYS).
ROUTER_KEYS = ("lgk-harness-key-one-0123456789abcdef", "lgk-harness-key-two-fedcba9876543210")
REQUIRED_TOOLS = {
    "systemd-nspawn": "systemd-container",
    "debootstrap": "debootstrap",
    "ip": "iproute2",
    "dockerd": "docker.io",
    "docker-registry": "docker-registry",
    "apt-ftparchive": "apt-utils",
    "dpkg-deb": "dpkg",
    "gpg": "gnupg",
    "ssh": "openssh-client",
    "nft": "nftables",
}

# Docker settings that only the harness needs (nspawn box without iptables or a writable /proc/sys).
HARNESS_DOCKER = {
    "storage-driver": "vfs",
    "iptables": False,
    "ip6tables": False,
    "bridge": "none",
    "ip-forward": False,
}


def check_prerequisites() -> None:
    """Say exactly what is missing before anything is started."""
    problems = []
    if os.geteuid() != 0:
        problems.append(
            "must run as root (network namespaces, overlay mounts and systemd-nspawn need it)"
        )
    missing = sorted({pkg for tool, pkg in REQUIRED_TOOLS.items() if not shutil.which(tool)})
    if missing:
        problems.append(
            f"missing tools; install the Debian packages: apt-get install {' '.join(missing)} "
            f"(scripts/setup.sh does this)"
        )
    if not any(
        Path("/sys/fs/cgroup", p).exists() for p in ("cgroup.controllers", "systemd", "unified")
    ):
        problems.append(
            "no cgroup hierarchy for systemd under /sys/fs/cgroup (systemd in the box needs one)"
        )
    if problems:
        raise HarnessError("the test harness cannot run here:\n  - " + "\n  - ".join(problems))


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return (
            "{ " + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
        )
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


@dataclass
class Sandbox:
    servers: Servers = field(default_factory=Servers)
    boxes: list = field(default_factory=list)
    started: bool = False

    def start(self) -> "Sandbox":
        check_prerequisites()
        cleanup_stale()
        self.servers.start()
        self.started = True
        return self

    def add_box(self, name: str | None = None, **kw) -> boxmod.Box:
        used = {b.number for b in self.boxes}
        number = next(n for n in box_numbers() if n not in used)
        # A worker's box names are its own (namespaces and state folders are named after them).
        b = boxmod.Box(tag(name or f"box{number}"), number, **kw)
        b.create(self.servers.urls(b))
        self.boxes.append(b)
        return b

    def remove_box(self, b: boxmod.Box) -> None:
        b.destroy()
        if b in self.boxes:
            self.boxes.remove(b)

    def host_data(self, b: boxmod.Box) -> dict:
        u = self.servers.urls(b)
        return {
            "nvidia_cuda_repo": u["cuda_repo"],
            "nvidia_toolkit_repo": u["nvidia_repo"],
            "nvidia_toolkit_key_url": u["nvidia_key"],
            "tailscale_pkgs_url": u["tailscale_pkgs"],
            "image_registry": u["registry"],
            "pip_index_url": u["pip_index"],
            "pip_trusted_host": b.control_address,
            "hf_endpoint": u["hf_endpoint"],
            "docker_daemon_config": dict(
                HARNESS_DOCKER, **{"registry-mirrors": [u["registry_mirror"]]}
            ),
            "nvidia_allow_reboot": True,
            # a host with roles = ["cache"] caches the stand-in Docker Hub (the lab's upstream)
            "registry_cache_upstream": u["registry_mirror"],
        }

    def write_hosts(
        self, path: Path, boxes=None, data: dict | None = None, via_tailnet: bool = False
    ) -> Path:
        """A hosts file (laguna_kit/knobs/hostsfile.py format) for `boxes`, with harness data and
        `data` on top.

        `via_tailnet`: the boxes' tailnet addresses, for a control machine that is a tailnet peer.
        """
        lines = ["# Written by the laguna-kit test harness: the sandbox boxes on this machine."]
        for b in boxes or self.boxes:
            address = b.tailnet_v4 if via_tailnet else b.address
            lines += [
                "",
                "[[hosts]]",
                f"name = {_toml_value(b.name)}",
                f"address = {_toml_value(address)}",
                f"user = {_toml_value(b.login_user)}",
                *(["sudo = true"] if b.login_user != "root" else []),
                f"port = {b.ssh_port}",
                *([f"roles = {_toml_value(b.roles)}"] if b.roles != ["gpu"] else []),
                f"key = {_toml_value(str(boxmod.harness_ssh_key()))}",
                f"known_hosts = {_toml_value(str(run_dir() / 'known_hosts'))}",
                "[hosts.data]",
            ]
            host_data = self.host_data(b)
            host_data.update(data or {})
            lines += [f"{k} = {_toml_value(v)}" for k, v in host_data.items()]
        path.write_text("\n".join(lines) + "\n")
        # Boxes get fresh host keys each time they are made; forget the old ones.
        (run_dir() / "known_hosts").unlink(missing_ok=True)
        return path

    def env(self) -> dict:
        """Environment for a pyinfra run against the sandbox: the secrets the kit reads from env."""
        return {
            "HF_TOKEN": HUB_TOKEN,
            "TS_AUTHKEY": boxmod.Box.tailscale_auth_key,
            "LAGUNA_API_KEYS": ",".join(ROUTER_KEYS),
        }

    def stop(self) -> None:
        for b in list(self.boxes):
            b.destroy()
        self.boxes.clear()
        if self.started:
            self.servers.stop()
        SANDBOX_HOSTS.unlink(missing_ok=True)
        if boxmod.TAILNET_NS in boxmod.sh("ip", "netns", "list").stdout.split():
            boxmod.sh("ip", "netns", "del", boxmod.TAILNET_NS, check=False)
        self.started = False


def cleanup_stale() -> None:
    """Remove boxes left by a run that was killed: their processes, mounts, namespaces, overlays.
    A worker of a parallel run removes only its own (named with its tag); a run that is not
    parallel removes every one.

    Deleting a box's namespace destroys its veth ends and so their peers, whatever its number was.
    """
    mine = (lambda name: name.endswith(f"-{worker()}")) if worker() else (lambda name: True)
    names = {
        ns.split()[0][4:]
        for ns in boxmod.sh("ip", "netns", "list").stdout.splitlines()
        if ns.startswith("lgk-") and ns.split()[0] != boxmod.TAILNET_NS
    }
    boxes_dir = cache_dir() / "boxes"
    names |= {p.name for p in boxes_dir.glob("*")} if boxes_dir.exists() else set()
    names = {name for name in names if mine(name)}
    for name in sorted(names):
        boxmod.Box(name, 0).destroy()
    registry_pid = run_dir() / "registry.pid"
    if registry_pid.exists():
        try:
            os.killpg(int(registry_pid.read_text()), signal.SIGTERM)
        except (ProcessLookupError, ValueError):
            pass
        registry_pid.unlink()


def run_in_sandbox(cmd: list[str], extra_env: dict | None = None) -> int:
    sb = Sandbox().start()
    try:
        sb.add_box("sandbox1")
        sb.write_hosts(SANDBOX_HOSTS)
        return subprocess.call(
            cmd,
            env=dict(os.environ, LAGUNA_HOSTS=str(SANDBOX_HOSTS), **sb.env(), **(extra_env or {})),
        )
    finally:
        sb.stop()
