"""laguna_kit/sources.py: what the kit would install, and from where, on each supported
distribution (Ubuntu cannot be booted here: its branches are tested as data)."""

import pytest

from laguna_kit import settings, sources

DEBIAN12 = {"ID": "debian", "VERSION_ID": "12", "VERSION_CODENAME": "bookworm"}
UBUNTU2204 = {
    "ID": "ubuntu",
    "VERSION_ID": "22.04",
    "VERSION_CODENAME": "jammy",
    "UBUNTU_CODENAME": "jammy",
}
UBUNTU2404 = {
    "ID": "ubuntu",
    "VERSION_ID": "24.04",
    "VERSION_CODENAME": "noble",
    "UBUNTU_CODENAME": "noble",
}
CUDA = settings.defaults()["nvidia_cuda_repo"]


def plan(meta, open_modules=False, secure_boot=False, kernel="6.8.0-45-generic"):
    return sources.driver_plan(
        sources.distro_of(meta), "580", open_modules, secure_boot, kernel, CUDA
    )


def test_debian12_gets_r580_from_nvidias_cuda_repository_pinned_first():
    p = plan(DEBIAN12, kernel="6.1.0-28-amd64")
    assert p.repo == "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/"
    assert (
        p.key
        == "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/3bf863cc.pub"
    )
    assert p.first == ["nvidia-driver-pinning-580"]
    assert p.packages == [
        "nvidia-kernel-dkms",
        "nvidia-driver-cuda",
        "nvidia-smi",
        "libcuda1",
        "libnvidia-ml1",
        "nvidia-persistenced",
    ]
    assert "nvidia-driver" not in p.packages  # Debian's own (535 at most, X server) never
    assert p.headers == "linux-headers-amd64"
    assert p.hold == ["nvidia-driver-pinning-580", *p.packages]
    assert plan(DEBIAN12, open_modules=True).packages[0] == "nvidia-kernel-open-dkms"
    assert plan(DEBIAN12, secure_boot=True).packages == p.packages  # DKMS signed with a MOK


@pytest.mark.parametrize("meta", [UBUNTU2204, UBUNTU2404])
def test_ubuntu_gets_the_archives_580_server_driver(meta):
    p = plan(meta)
    assert p.repo is None and p.key is None and p.first == []
    assert p.packages == [
        "nvidia-driver-580-server",
        "nvidia-utils-580-server",
        "libnvidia-compute-580-server",
        "nvidia-compute-utils-580-server",
    ]
    assert p.headers == "linux-headers-generic"
    assert plan(meta, open_modules=True).packages[0] == "nvidia-driver-580-server-open"


@pytest.mark.parametrize("meta", [UBUNTU2204, UBUNTU2404])
def test_ubuntu_under_secure_boot_gets_canonicals_signed_modules_and_no_dkms(meta):
    p = plan(meta, open_modules=True, secure_boot=True)
    assert p.packages[:3] == [
        "linux-modules-nvidia-580-server-open-generic",
        "linux-modules-nvidia-580-server-open-6.8.0-45-generic",
        "nvidia-headless-no-dkms-580-server-open",
    ]
    assert not any("dkms" in name and "no-dkms" not in name for name in p.packages)
    assert p.headers is None


def test_an_unsupported_distribution_is_named():
    with pytest.raises(sources.SourceError, match="no driver source for debian 11"):
        plan({"ID": "debian", "VERSION_ID": "11", "VERSION_CODENAME": "bullseye"})


@pytest.mark.parametrize(
    "meta, repo, codename",
    [
        (DEBIAN12, "https://pkgs.tailscale.com/stable/debian", "bookworm"),
        (UBUNTU2204, "https://pkgs.tailscale.com/stable/ubuntu", "jammy"),
        (UBUNTU2404, "https://pkgs.tailscale.com/stable/ubuntu", "noble"),
    ],
)
def test_tailscale_repository_follows_os_release(meta, repo, codename):
    src = sources.tailscale_source(
        settings.defaults()["tailscale_pkgs_url"], sources.distro_of(meta)
    )
    assert src == {"repo": repo, "codename": codename, "key": f"{repo}/{codename}.noarmor.gpg"}


def test_the_toolkit_is_four_packages_at_one_version():
    assert sources.toolkit_packages("1.17.8-1") == [
        "nvidia-container-toolkit=1.17.8-1",
        "nvidia-container-toolkit-base=1.17.8-1",
        "libnvidia-container-tools=1.17.8-1",
        "libnvidia-container1=1.17.8-1",
    ]
