"""Debian root filesystems for the harness, built with debootstrap and cached.

Three artefacts, each cached under a key made of its inputs, so a changed package list rebuilds
only what it touches:

- the *box* rootfs: a bare server (systemd, sshd, nftables) that pyinfra deploys to, one per
  Debian release a box may run (SUITES: bookworm, Debian 12, for most tests; trixie, Debian 13,
  for the tests that run on both);
- the *image* rootfs: python3 only, the base of the stand-in vLLM image (bookworm);
- the *distro debs*: the real Debian packages the kit installs from the distribution (docker.io,
  python3-venv, ...), per release, downloaded with the box's own apt so their dependencies match
  the box exactly. The box has no route out; these are served to it from the harness's local
  mirror.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

from .errors import HarnessError
from .paths import build_lock, cache_dir

# The Debian releases a harness box runs, as debootstrap and the archive name them; the first is
# every box's unless a test asks for another (Box.suite).
SUITES = ("bookworm", "trixie")
SUITE = SUITES[0]

# What a freshly installed minimal Debian/Ubuntu server has: the kit must install everything else.
BOX_PACKAGES = [
    "systemd",
    "systemd-sysv",
    "dbus",
    "openssh-server",
    "sudo",
    "iproute2",
    "nftables",
    "ca-certificates",
    "gnupg",
    "curl",
    "python3",
    "procps",
    "kmod",
    "pciutils",
    "sudo",
    "iputils-ping",
    "less",
]
IMAGE_PACKAGES = ["python3"]
# Packages the kit installs from the distribution's own archive; the harness mirrors them.
DISTRO_DEBS = [
    "docker.io",
    "python3-venv",
    "netbase",
    "haproxy",
    "prometheus",
    "prometheus-alertmanager",
    "prometheus-node-exporter",
    "nginx",
    "docker-registry",
]
# What a release packages apart and the kit installs where it exists: trixie's docker.io (26.1.5)
# only Recommends docker-cli, the `docker` command (its control file in trixie's index).
SUITE_DEBS = {"trixie": ["docker-cli"]}


def debs_of(suite: str) -> list[str]:
    return DISTRO_DEBS + SUITE_DEBS.get(suite, [])


def _key(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:12]


def _run(cmd: list[str], log: Path, **kw) -> None:
    with log.open("ab") as fh:
        fh.write(("\n$ " + " ".join(cmd) + "\n").encode())
        fh.flush()
        proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, **kw)
    if proc.returncode != 0:
        tail = log.read_text(errors="replace")[-2000:]
        raise HarnessError(f"{cmd[0]} failed (exit {proc.returncode}); log {log}:\n{tail}")


def _debootstrap(dest: Path, packages: list[str], suite: str = SUITE) -> Path:
    """Build into a temporary folder and rename at the end, so an interrupted build never looks
    done."""
    if (dest / ".complete").exists():
        return dest
    with build_lock():
        return _debootstrap_locked(dest, packages, suite)


def _debootstrap_locked(dest: Path, packages: list[str], suite: str) -> Path:
    if (dest / ".complete").exists():  # another worker built it while this one waited
        return dest
    tmp = dest.with_name(dest.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    log = dest.with_name(dest.name + ".log")
    log.write_text("")
    _run(
        ["debootstrap", "--variant=minbase", "--include=" + ",".join(packages), suite, str(tmp)],
        log,
    )
    (tmp / ".complete").write_text(" ".join(packages) + "\n")
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    return dest


def box_rootfs(suite: str = SUITE) -> Path:
    dest = cache_dir() / f"rootfs-box-{_key(suite, BOX_PACKAGES)}"
    return _debootstrap(dest, BOX_PACKAGES, suite)


def image_rootfs() -> Path:
    return _debootstrap(cache_dir() / f"rootfs-image-{_key(SUITE, IMAGE_PACKAGES)}", IMAGE_PACKAGES)


def distro_debs(suite: str = SUITE) -> Path:
    """Download debs_of(suite) and whatever they need beyond the bare box, through a throw-away copy
    of it."""
    base, debs = box_rootfs(suite), debs_of(suite)
    dest = cache_dir() / f"debs-{_key(suite, BOX_PACKAGES, debs)}"
    if (dest / ".complete").exists():
        return dest
    with build_lock():
        return _distro_debs_locked(base, dest, debs)


def _distro_debs_locked(base: Path, dest: Path, debs: list[str]) -> Path:
    if (dest / ".complete").exists():
        return dest
    work = dest.with_name(dest.name + ".chroot.partial")
    shutil.rmtree(work, ignore_errors=True)
    log = dest.with_name(dest.name + ".log")
    log.write_text("")
    _run(["cp", "-a", "--reflink=auto", str(base), str(work)], log)
    shutil.copy("/etc/resolv.conf", work / "etc/resolv.conf")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    _run(["chroot", str(work), "apt-get", "update", "-q"], log, env=env)
    _run(
        [
            "chroot",
            str(work),
            "apt-get",
            "install",
            "-y",
            "-q",
            "--download-only",
            "--no-install-recommends",
            *debs,
        ],
        log,
        env=env,
    )
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for deb in (work / "var/cache/apt/archives").glob("*.deb"):
        shutil.copy(deb, dest / deb.name)
    shutil.rmtree(work, ignore_errors=True)
    if not any(dest.glob("*.deb")):
        raise HarnessError(f"no .deb downloaded for {debs}; see {log}")
    (dest / ".complete").write_text("\n")
    return dest
