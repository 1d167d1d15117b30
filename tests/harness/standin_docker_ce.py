"""Stand-in Docker CE packages (Docker's own repository), with the real relations and no engine:
docker/docker-ce-packaging deb/common/control (docker-ce Depends containerd.io (>= 1.7.27),
docker-ce-cli, iptables, nftables; Conflicts docker (<< 1.5~), docker-engine, docker.io; Replaces
docker-engine, docker-ce-cli (<< 5:28.0.0); docker-ce-cli Conflicts the same). containerd.io's
Conflicts containerd, runc and Provides containerd, runc are containerd's packaging's. Installing
Debian's docker.io over them makes apt remove them: what the kit must never let happen."""

from __future__ import annotations

from pathlib import Path

from .nvidia_repos import build_deb

VERSION = "5:28.5.2-1~debian.12~bookworm"
CONFLICTS = "docker (<< 1.5~), docker-engine, docker.io"


def build(out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    return [
        build_deb(
            out,
            "containerd.io",
            "1.7.28-1~debian.12~bookworm",
            {
                "Section": "devel",
                "Conflicts": "containerd, runc",
                "Provides": "containerd, runc",
                "Replaces": "containerd, runc",
            },
            {},
        ),
        build_deb(
            out,
            "docker-ce-cli",
            VERSION,
            {
                "Section": "admin",
                "Conflicts": CONFLICTS,
                "Replaces": "docker-ce (<< 5:0)",
                "Breaks": "docker-ce (<< 5:0)",
            },
            {},
        ),
        build_deb(
            out,
            "docker-ce",
            VERSION,
            {
                "Section": "admin",
                "Depends": "containerd.io (>= 1.7.27), docker-ce-cli, iptables, nftables",
                "Conflicts": CONFLICTS,
                "Replaces": "docker-engine, docker-ce-cli (<< 5:28.0.0)",
            },
            {},
        ),
    ]
