"""Where the kit's packages come from, per distribution (its os-release), as data.

One table for the NVIDIA driver (DRIVERS), one list for the container toolkit, one rule for
Tailscale's repository. The facts behind them and their sources:
- Debian 12 has no R580 driver (bookworm and its backports stop at 535): it comes from NVIDIA's
  CUDA repository for debian12, with NVIDIA's branch-pinning package installed before the driver
  (NVIDIA Driver Installation Guide, "Version locking"). The package names follow Debian's own
  split (nvidia-smi, libcuda1, libnvidia-ml1, nvidia-persistenced: `apt-cache show` on bookworm
  non-free); that NVIDIA's repository uses exactly these names for the 580 branch is not confirmed
  here, so they are data in this one table, and what they must provide is checked after install.
- Ubuntu 22.04/24.04: the archive's nvidia-driver-<branch>-server[-open] (restricted); under
  Secure Boot, Canonical's signed prebuilt modules (linux-modules-nvidia-<branch>-server[-open]-*)
  and no DKMS (packages.ubuntu.com).
- Tailscale: pkgs.tailscale.com/stable/<ID>/<codename> (tailscale/tailscale scripts/installer.sh).
- Toolkit: four packages whose versions move together (NVIDIA/nvidia-container-toolkit
  packaging/debian/control at v1.17.8; libnvidia-container pkg/deb/control).
"""

from __future__ import annotations

from dataclasses import dataclass, field


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


CUDA_KEYRING = "/usr/share/keyrings/laguna-cuda-archive-keyring.asc"

# {branch}: the driver branch; {open}: "-open" for the open kernel modules, else "";
# {kopen}: Debian-style "-open" infix of the kernel module package; {kernel}: uname -r.
DRIVERS = {
    "debian12": {
        "channel": "NVIDIA's CUDA repository for debian12",
        "repo": "{cuda_repo}/debian12/x86_64/",
        "key": "{cuda_repo}/debian12/x86_64/3bf863cc.pub",
        "first": ["nvidia-driver-pinning-{branch}"],
        "packages": [
            "nvidia-kernel{kopen}-dkms",
            "nvidia-driver-cuda",
            "nvidia-smi",
            "libcuda1",
            "libnvidia-ml1",
            "nvidia-persistenced",
        ],
        "secure_boot": None,  # the same packages: DKMS modules signed with an enrolled MOK
        "headers": "linux-headers-amd64",
    },
    "ubuntu22.04": {
        "channel": "Ubuntu's archive (restricted)",
        "packages": [
            "nvidia-driver-{branch}-server{open}",
            "nvidia-utils-{branch}-server",
            "libnvidia-compute-{branch}-server",
            "nvidia-compute-utils-{branch}-server",
        ],
        "secure_boot": [
            "linux-modules-nvidia-{branch}-server{open}-generic",
            "linux-modules-nvidia-{branch}-server{open}-{kernel}",
            "nvidia-headless-no-dkms-{branch}-server{open}",
            "nvidia-utils-{branch}-server",
            "libnvidia-compute-{branch}-server",
            "nvidia-compute-utils-{branch}-server",
        ],
        "headers": "linux-headers-generic",
    },
}
DRIVERS["ubuntu24.04"] = DRIVERS["ubuntu22.04"]


@dataclass(frozen=True)
class DriverPlan:
    channel: str
    repo: str | None  # an apt source line's URL to add (None: the distribution's own archive)
    key: str | None
    first: list[str] = field(default_factory=list)  # installed before the driver (branch pinning)
    packages: list[str] = field(default_factory=list)
    headers: str | None = None  # the headers metapackage: the next kernel gets a module too

    @property
    def hold(self) -> list[str]:
        return [*self.first, *self.packages]


def driver_plan(
    distro: Distro, branch: str, open_modules: bool, secure_boot: bool, kernel: str, cuda_repo: str
) -> DriverPlan:
    """What installs the R<branch> driver on this distribution, from its one table row."""
    row = DRIVERS.get(distro.key)
    if row is None:
        raise SourceError(
            f"no driver source for {distro.id} {distro.version}: the kit supports "
            f"{', '.join(sorted(DRIVERS))}"
        )
    names = {
        "branch": branch,
        "open": "-open" if open_modules else "",
        "kernel": kernel,
        "kopen": "-open" if open_modules else "",
        "cuda_repo": cuda_repo.rstrip("/"),
    }
    signed = secure_boot and row.get("secure_boot")
    packages = [p.format(**names) for p in (row["secure_boot"] if signed else row["packages"])]
    return DriverPlan(
        channel=row["channel"],
        repo=row["repo"].format(**names) if row.get("repo") else None,
        key=row["key"].format(**names) if row.get("key") else None,
        first=[p.format(**names) for p in row.get("first", [])],
        packages=packages,
        headers=None if signed else row["headers"],
    )
