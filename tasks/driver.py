# NVIDIA driver: the distribution's packages (Debian non-free / Ubuntu's -server branch), held,
# nouveau blacklisted, a reboot when the fresh driver is not yet loaded, then nvidia-smi must agree.
from pyinfra import host
from pyinfra.facts.server import KernelVersion, LinuxDistribution
from pyinfra.operations import files

from laguna_kit.operations.nvidia import (
    nouveau_out_of_initramfs,
    nvidia_driver_loaded,
    nvidia_gpus_verified,
)
from laguna_kit.operations.packages import apt_present

d = host.data
distro = host.get_fact(LinuxDistribution)
kernel_headers = (
    f"linux-headers-{host.get_fact(KernelVersion)}"  # DKMS builds against the running kernel
)

if distro["name"] == "Debian":
    files.template(
        name="Debian non-free components (NVIDIA driver)",
        src="files/debian-nonfree.list.j2",
        dest="/etc/apt/sources.list.d/laguna-debian-nonfree.list",
        mirror=d.debian_mirror,
        keyring=d.debian_mirror_keyring,
        codename=distro["release_meta"].get("VERSION_CODENAME", "bookworm"),
    )
    driver_packages = [kernel_headers, "nvidia-driver"]
else:
    driver_packages = [kernel_headers, f"nvidia-driver-{d.nvidia_driver_branch}-server"]

NOUVEAU_CONF = "laguna-blacklist-nouveau.conf"
files.put(
    name="Blacklist nouveau",
    src="files/blacklist-nouveau.conf",
    dest=f"/etc/modprobe.d/{NOUVEAU_CONF}",
)
nouveau_out_of_initramfs(
    name="Initramfs without nouveau (rebuilt while it could still load it)", conf=NOUVEAU_CONF
)

apt_present(
    name=f"NVIDIA driver packages ({', '.join(driver_packages)}), held against unattended upgrades",
    packages=driver_packages,
    hold=True,
)

nvidia_driver_loaded(
    name="NVIDIA driver loaded (reboot when allowed)",
    allow_reboot=d.nvidia_allow_reboot,
)

nvidia_gpus_verified(
    name="nvidia-smi sees the GPUs the recipe needs",
    gpu_count=d.gpu_count,
    gpu_min_memory_mib=d.gpu_min_memory_mib,
    driver_branch=d.nvidia_driver_branch,
)
