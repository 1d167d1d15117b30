"""Where the kit's packages come from, per distribution (its os-release), as data.

One table for the NVIDIA driver (DRIVERS), one list for the container toolkit, one rule for
Tailscale's repository. The facts behind them and their sources:
- Debian 12 has no R580 driver (bookworm and its backports stop at 535): it comes from NVIDIA's
  CUDA repository for debian12, with NVIDIA's branch-pinning package installed before the driver
  (NVIDIA Driver Installation Guide, "Version locking"), then the compute-only pair NVIDIA
  documents, `nvidia-driver-cuda` with `nvidia-kernel[-open]-dkms` (the guide; also
  GoogleCloudDataproc/initialization-actions PR #1400 on Debian 12). Whether nvidia-smi, libcuda1,
  libnvidia-ml1 and nvidia-persistenced are packages of their own beside nvidia-driver-cuda or
  provided by it (one public installer reports `nvidia-driver-cuda Conflicts: nvidia-smi`) is not
  confirmed: the kit asks for the pair only, checks the compute pieces by their files, and holds
  every NVIDIA package dpkg installed at the pair's version, whichever shape the repository has.
- Ubuntu 22.04/24.04 (canonical/nvidia-graphics-drivers, 580-server-jammy / -noble
  debian/control): without Secure Boot the headless compute driver (DKMS), not the desktop
  metapackage that pulls X; under Secure Boot Canonical's signed prebuilt modules
  (linux-restricted-modules): the versioned `linux-modules-nvidia-<branch>-server[-open]-$(uname
  -r)` and the flavour metapackage of the installed kernel (`-generic`, `-generic-hwe-22.04`,
  `-generic-hwe-24.04`: the one that brings a module for the next kernel, so it is installed and
  never held), with `nvidia-headless-no-dkms-<branch>-server[-open]`.
- Tailscale: pkgs.tailscale.com/stable/<ID>/<codename> (tailscale/tailscale scripts/installer.sh).
- Toolkit: four packages whose versions move together (NVIDIA/nvidia-container-toolkit
  packaging/debian/control at v1.17.8; libnvidia-container pkg/deb/control).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any


class SourceError(ValueError):
    pass


@dataclass(frozen=True)
class Distro:
    id: str  # os-release ID: debian, ubuntu
    version: str  # VERSION_ID: 12, 22.04, 24.04
    codename: str  # UBUNTU_CODENAME or VERSION_CODENAME

    @property
    def key(self) -> str:
        return f"{self.id}{self.version}"


def distro_of(release_meta: dict) -> Distro:
    """The distribution from os-release fields (pyinfra's LinuxDistribution release_meta)."""
    os_id = (release_meta.get("ID") or "").lower()
    codename = release_meta.get("UBUNTU_CODENAME") or release_meta.get("VERSION_CODENAME") or ""
    return Distro(os_id, str(release_meta.get("VERSION_ID") or ""), codename)


def tailscale_source(pkgs_url: str, distro: Distro) -> dict:
    """Tailscale's repository and key for this distribution and codename."""
    base = f"{pkgs_url.rstrip('/')}/{distro.id}"
    return {
        "repo": base,
        "codename": distro.codename,
        "key": f"{base}/{distro.codename}.noarmor.gpg",
    }


# The toolkit's four packages: nvidia-container-toolkit Depends nvidia-container-toolkit-base (= V)
# and libnvidia-container-tools (>= V, << 2.0.0), which depends on libnvidia-container1 (>= V).
# Installing only the first at an older version than the repository's newest does not resolve.
TOOLKIT_PACKAGES = (
    "nvidia-container-toolkit",
    "nvidia-container-toolkit-base",
    "libnvidia-container-tools",
    "libnvidia-container1",
)


def toolkit_packages(version: str) -> list[str]:
    return [f"{name}={version}" for name in TOOLKIT_PACKAGES]


# Where NVIDIA's cuda-keyring package puts the repository's key and list (NVIDIA/apt-packaging-
# cuda-keyring debian/templates): the kit writes the same two, so an owner installing cuda-keyring
# later gets the identical Signed-By (two values for one URL break every `apt-get update`).
CUDA_KEYRING = "/usr/share/keyrings/cuda-archive-keyring.gpg"
CUDA_LIST = "/etc/apt/sources.list.d/cuda-{distro}-x86_64.list"
# What kits before 2026-12-05 wrote instead (removed when the kit writes the above).
OLD_CUDA_FILES = (
    "/etc/apt/sources.list.d/laguna-cuda.list",
    "/usr/share/keyrings/laguna-cuda-archive-keyring.asc",
)
# The driver's own packages (what the by-version hold may take): never a kernel or anything else.
NVIDIA_PACKAGE = r"(nvidia-|libnvidia-|libcuda|firmware-nvidia-|xserver-xorg-video-nvidia).*"

# {branch}: the driver branch; {open}: "-open" for the open kernel modules, else "";
# {kopen}: Debian-style "-open" infix of the kernel module package; {kernel}: uname -r;
# {flavour}: the installed kernel's flavour (generic, generic-hwe-22.04, ...).
DRIVERS: dict[str, dict[str, Any]] = {
    "debian12": {
        "channel": "NVIDIA's CUDA repository for debian12",
        "repo": "{cuda_repo}/debian12/x86_64/",
        "key": "{cuda_repo}/debian12/x86_64/3bf863cc.pub",
        "first": ["nvidia-driver-pinning-{branch}"],
        "packages": ["nvidia-kernel{kopen}-dkms", "nvidia-driver-cuda"],
        "version_of": "nvidia-driver-cuda",
        "secure_boot": None,  # the same packages: DKMS modules signed with an enrolled MOK
        "headers": "linux-headers-amd64",
    },
    "ubuntu22.04": {
        "channel": "Ubuntu's archive (restricted)",
        "packages": ["nvidia-headless-{branch}-server{open}", "nvidia-utils-{branch}-server"],
        "version_of": "nvidia-utils-{branch}-server",
        "secure_boot": [
            "linux-modules-nvidia-{branch}-server{open}-{flavour}",
            "linux-modules-nvidia-{branch}-server{open}-{kernel}",
            "nvidia-headless-no-dkms-{branch}-server{open}",
            "nvidia-utils-{branch}-server",
        ],
        # the flavour metapackage follows the kernel: holding it would leave the next kernel
        # without a signed module
        "not_held": ["linux-modules-nvidia-{branch}-server{open}-{flavour}"],
        # the headers of the kernel's own flavour: an HWE kernel's next ones come with
        # linux-headers-generic-hwe-22.04, not linux-headers-generic (the GA kernel's)
        "headers": "linux-headers-{flavour}",
    },
}
DRIVERS["ubuntu24.04"] = DRIVERS["ubuntu22.04"]
# Debian 13 as Debian 12, from NVIDIA's repository for debian13 (it exists with cuda-keyring 1.1-1;
# public installers use nvidia-driver-pinning-<branch> and nvidia-driver-cuda / nvidia-open there,
# and its index holds libcuda1 as a package of its own). Its signing key's file name is not
# confirmed here (3bf863cc.pub, as debian12's, or 8793F200.pub, which one public installer
# fetches for debian13): the box keeps every one of the two the repository serves, so apt trusts
# whichever signs it.
DRIVERS["debian13"] = dict(
    DRIVERS["debian12"],
    channel="NVIDIA's CUDA repository for debian13",
    repo="{cuda_repo}/debian13/x86_64/",
    key=("{cuda_repo}/debian13/x86_64/3bf863cc.pub", "{cuda_repo}/debian13/x86_64/8793F200.pub"),
)
# What the kit supports, as the pre-flight names it (a distribution without a driver row is refused
# before any change).
SUPPORTED = {
    "debian12": "Debian 12",
    "debian13": "Debian 13",
    "ubuntu22.04": "Ubuntu 22.04",
    "ubuntu24.04": "Ubuntu 24.04",
}


def supported_problem(distro: Distro, shown: str = "") -> str | None:
    """None for a distribution the kit supports, else the refusal naming the ones it does
    (`shown`: the distribution's name as the box gives it, else its os-release ID)."""
    if distro.key in SUPPORTED:
        return None
    found = f"{shown or distro.id or 'an unknown system'} {distro.version}".strip()
    names = list(SUPPORTED.values())
    return f"found {found}, the kit supports {', '.join(names[:-1])} and {names[-1]}"


def kernel_flavour(installed) -> str | None:
    """The flavour of the kernel metapackage installed (linux-generic-hwe-22.04 ->
    generic-hwe-22.04; an HWE kernel before the GA one), None when there is none of the generic
    family."""
    found = set()
    for name in installed:
        m = re.fullmatch(r"linux-(?:image-)?(generic(?:-hwe-\d\d\.\d\d)?)", name)
        if m:
            found.add(m.group(1))
    return max(found, key=lambda f: (f != "generic", f)) if found else None


@dataclass(frozen=True)
class DriverPlan:
    channel: str
    repo: str | None  # an apt source line's URL to add (None: the distribution's own archive)
    key: str | tuple[str, ...] | None  # candidates: every one the repository serves is kept
    first: list[str] = field(default_factory=list)  # installed before the driver (branch pinning)
    packages: list[str] = field(default_factory=list)
    headers: str | None = None  # the headers metapackage: the next kernel gets a module too
    version_of: str = ""  # every NVIDIA package installed at this one's version is held too
    not_held: list[str] = field(default_factory=list)  # installed, never held (kernel followers)
    flavour_unknown: bool = False  # Secure Boot on Ubuntu without a generic kernel metapackage

    @property
    def hold(self) -> list[str]:
        return [p for p in [*self.first, *self.packages] if p not in self.not_held]


def _format_key(key, names: dict) -> str | tuple[str, ...] | None:
    if not key:
        return None
    if isinstance(key, str):
        return key.format(**names)
    return tuple(k.format(**names) for k in key)


def driver_plan(
    distro: Distro,
    branch: str,
    open_modules: bool,
    secure_boot: bool,
    kernel: str,
    cuda_repo: str,
    installed=(),
) -> DriverPlan:
    """What installs the R<branch> driver on this distribution, from its one table row;
    `installed`: the box's package names (the kernel's flavour is read from them)."""
    row = DRIVERS.get(distro.key)
    if row is None:
        raise SourceError(
            f"no driver source for {distro.id} {distro.version}: the kit supports "
            f"{', '.join(sorted(DRIVERS))}"
        )
    flavour = kernel_flavour(installed)
    names = {
        "branch": branch,
        "open": "-open" if open_modules else "",
        "kernel": kernel,
        "kopen": "-open" if open_modules else "",
        "cuda_repo": cuda_repo.rstrip("/"),
        "flavour": flavour or "",
    }
    signed = bool(secure_boot and row.get("secure_boot"))
    wanted = row["secure_boot"] if signed else row["packages"]
    if signed and not flavour:  # only the running kernel's module: said by the driver task
        wanted = [p for p in wanted if "{flavour}" not in p]
    packages = [p.format(**names) for p in wanted]
    return DriverPlan(
        channel=row["channel"],
        repo=row["repo"].format(**names) if row.get("repo") else None,
        key=_format_key(row.get("key"), names),
        first=[p.format(**names) for p in row.get("first", [])],
        packages=packages,
        headers=None
        if signed
        else row["headers"].format(**dict(names, flavour=flavour or "generic")),
        version_of=row["version_of"].format(**names),
        not_held=[p.format(**names) for p in row.get("not_held", []) if flavour] if signed else [],
        flavour_unknown=signed and not flavour,
    )
