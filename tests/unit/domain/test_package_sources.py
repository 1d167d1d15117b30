"""laguna_kit/domain/package_sources.py: what the kit would install, and from where, on each
supported distribution (Ubuntu cannot be booted here: its branches are tested as data)."""

import pytest

from laguna_kit.domain import package_sources
from laguna_kit.knobs import declared

DEBIAN12 = {"ID": "debian", "VERSION_ID": "12", "VERSION_CODENAME": "bookworm"}
DEBIAN13 = {"ID": "debian", "VERSION_ID": "13", "VERSION_CODENAME": "trixie"}
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
CUDA = declared.defaults()["nvidia_cuda_repo"]


def plan(meta, open_modules=False, secure_boot=False, kernel="6.8.0-45-generic", installed=()):
    return package_sources.driver_plan(
        package_sources.distro_of(meta), "580", open_modules, secure_boot, kernel, CUDA, installed
    )


def test_debian12_gets_the_documented_pair_from_nvidias_cuda_repository_pinned_first():
    p = plan(DEBIAN12, kernel="6.1.0-28-amd64")
    assert p.repo == "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/"
    assert (
        p.key
        == "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/3bf863cc.pub"
    )
    assert p.first == ["nvidia-driver-pinning-580"]
    # what NVIDIA documents, and nothing that may be a virtual package of nvidia-driver-cuda
    assert p.packages == ["nvidia-kernel-dkms", "nvidia-driver-cuda"]
    assert not {"nvidia-smi", "libcuda1", "libnvidia-ml1", "nvidia-persistenced"} & set(p.hold)
    assert p.version_of == "nvidia-driver-cuda"  # what dpkg installed at its version is held
    assert "nvidia-driver" not in p.packages  # Debian's own (535 at most, X server) never
    assert (
        "dkms" not in p.packages
    )  # never pinned to Debian's 3.0.10 (nvidia-kernel-dkms wants more)
    assert p.headers == "linux-headers-amd64"
    assert p.hold == ["nvidia-driver-pinning-580", *p.packages]
    assert plan(DEBIAN12, open_modules=True).packages[0] == "nvidia-kernel-open-dkms"
    assert plan(DEBIAN12, secure_boot=True).packages == p.packages  # DKMS signed with a MOK


def test_the_cuda_list_and_key_are_where_cuda_keyring_puts_them():
    assert package_sources.CUDA_KEYRING == "/usr/share/keyrings/cuda-archive-keyring.gpg"
    assert (
        package_sources.CUDA_LIST.format(distro="debian12")
        == "/etc/apt/sources.list.d/cuda-debian12-x86_64.list"
    )


@pytest.mark.parametrize("meta", [UBUNTU2204, UBUNTU2404])
def test_ubuntu_without_secure_boot_gets_the_headless_compute_driver(meta):
    p = plan(meta, installed={"linux-generic"})
    assert p.repo is None and p.key is None and p.first == []
    # headless (DKMS): not nvidia-driver-580-server, which pulls X (xserver-xorg-video-nvidia)
    assert p.packages == ["nvidia-headless-580-server", "nvidia-utils-580-server"]
    assert p.version_of == "nvidia-utils-580-server" and p.not_held == []
    assert p.headers == "linux-headers-generic"
    assert plan(meta, open_modules=True).packages[0] == "nvidia-headless-580-server-open"


@pytest.mark.parametrize(
    "meta,installed,headers",
    [
        (UBUNTU2204, {"linux-generic-hwe-22.04"}, "linux-headers-generic-hwe-22.04"),
        (UBUNTU2404, {"linux-image-generic-hwe-24.04"}, "linux-headers-generic-hwe-24.04"),
        (UBUNTU2204, {"linux-generic"}, "linux-headers-generic"),
        (UBUNTU2404, set(), "linux-headers-generic"),
    ],
)
def test_ubuntu_headers_follow_the_kernels_flavour(meta, installed, headers):
    """Issue 38 #9: on an HWE kernel linux-headers-generic is the GA kernel's: the next HWE
    kernel would get no module."""
    assert plan(meta, installed=installed).headers == headers


@pytest.mark.parametrize(
    "meta, installed, kernel, flavour",
    [
        (UBUNTU2204, {"linux-generic", "linux-image-generic"}, "5.15.0-126-generic", "generic"),
        (UBUNTU2204, {"linux-generic-hwe-22.04", "linux-generic"}, "6.8.0-45-generic",
         "generic-hwe-22.04"),
        (UBUNTU2404, {"linux-image-generic-hwe-24.04"}, "6.11.0-19-generic", "generic-hwe-24.04"),
    ],
)  # fmt: skip
def test_ubuntu_under_secure_boot_follows_the_kernels_flavour_and_holds_no_flavour_meta(
    meta, installed, kernel, flavour
):
    p = plan(meta, open_modules=True, secure_boot=True, kernel=kernel, installed=installed)
    meta_pkg = f"linux-modules-nvidia-580-server-open-{flavour}"
    assert p.packages[:3] == [
        meta_pkg,
        f"linux-modules-nvidia-580-server-open-{kernel}",
        "nvidia-headless-no-dkms-580-server-open",
    ]
    # installed, so the next kernel gets a signed module, and never held, or it would not
    assert meta_pkg in p.packages and meta_pkg not in p.hold
    assert f"linux-modules-nvidia-580-server-open-{kernel}" in p.hold
    assert not any("dkms" in name and "no-dkms" not in name for name in p.packages)
    assert p.headers is None and not p.flavour_unknown


def test_ubuntu_under_secure_boot_without_a_generic_kernel_meta_says_so():
    p = plan(UBUNTU2404, secure_boot=True, installed={"linux-image-6.8.0-45-generic"})
    assert p.flavour_unknown
    assert p.packages[0] == "linux-modules-nvidia-580-server-6.8.0-45-generic"


def test_debian13_gets_debian12s_packages_from_the_debian13_repository_with_either_key():
    p, twelve = plan(DEBIAN13, kernel="6.12.48+deb13-amd64"), plan(DEBIAN12)
    repo = "https://developer.download.nvidia.com/compute/cuda/repos/debian13/x86_64/"
    assert p.repo == repo and p.channel == "NVIDIA's CUDA repository for debian13"
    assert p.key == (f"{repo}3bf863cc.pub", f"{repo}8793F200.pub")  # whichever signs it
    assert (p.first, p.packages, p.headers) == (twelve.first, twelve.packages, twelve.headers)
    assert package_sources.CUDA_LIST.format(distro="debian13").endswith("cuda-debian13-x86_64.list")


@pytest.mark.parametrize(
    "meta, said",
    [
        ({"ID": "ubuntu", "VERSION_ID": "26.04"}, "found ubuntu 26.04"),
        ({"ID": "ubuntu", "VERSION_ID": "22.10"}, "found ubuntu 22.10"),
        ({"ID": "debian", "VERSION_ID": "14"}, "found debian 14"),
        ({"ID": "debian"}, "found debian"),  # testing/sid has no VERSION_ID
        ({}, "found an unknown system"),
    ],
)
def test_a_distribution_the_kit_does_not_know_is_refused_naming_the_four_it_supports(meta, said):
    problem = package_sources.supported_problem(package_sources.distro_of(meta))
    assert problem.startswith(said)
    assert problem.endswith("supports Debian 12, Debian 13, Ubuntu 22.04 and Ubuntu 24.04")
    for known in (DEBIAN12, DEBIAN13, UBUNTU2204, UBUNTU2404):
        assert package_sources.supported_problem(package_sources.distro_of(known)) is None
    assert set(package_sources.SUPPORTED) == set(package_sources.DRIVERS)


def test_an_unsupported_distribution_is_named():
    with pytest.raises(package_sources.SourceError, match="no driver source for debian 11"):
        plan({"ID": "debian", "VERSION_ID": "11", "VERSION_CODENAME": "bullseye"})


@pytest.mark.parametrize(
    "meta, repo, codename",
    [
        (DEBIAN12, "https://pkgs.tailscale.com/stable/debian", "bookworm"),
        (DEBIAN13, "https://pkgs.tailscale.com/stable/debian", "trixie"),
        (UBUNTU2204, "https://pkgs.tailscale.com/stable/ubuntu", "jammy"),
        (UBUNTU2404, "https://pkgs.tailscale.com/stable/ubuntu", "noble"),
    ],
)
def test_tailscale_repository_follows_os_release(meta, repo, codename):
    src = package_sources.tailscale_source(
        declared.defaults()["tailscale_pkgs_url"], package_sources.distro_of(meta)
    )
    assert src == {"repo": repo, "codename": codename, "key": f"{repo}/{codename}.noarmor.gpg"}


def test_the_toolkit_is_four_packages_at_one_version():
    assert package_sources.toolkit_packages("1.17.8-1") == [
        "nvidia-container-toolkit=1.17.8-1",
        "nvidia-container-toolkit-base=1.17.8-1",
        "libnvidia-container-tools=1.17.8-1",
        "libnvidia-container1=1.17.8-1",
    ]
