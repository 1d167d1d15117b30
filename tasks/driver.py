# NVIDIA driver R580 or newer (the image is CUDA 13), from the one table in laguna_kit/sources.py:
# Debian 12 from NVIDIA's CUDA repository with its branch-pinning package first, Ubuntu from its
# archive (signed prebuilt modules under Secure Boot). A working driver that already meets the
# image's CUDA requirement is kept, whatever installed it. Otherwise: compute pieces named, the
# headers metapackage, every driver package held, nouveau kept out, a reboot when allowed; then
# nvidia-smi must agree.
import shlex

from pyinfra import host, logger
from pyinfra.facts.deb import DebPackages
from pyinfra.facts.server import Command, LinuxDistribution

from laguna_kit import images, sources
from laguna_kit.facts import memo
from laguna_kit.facts.nvidia import NvidiaSmiGpus
from laguna_kit.facts.server import BoxBasics
from laguna_kit.operations.files import files_synced, kit_file
from laguna_kit.operations.nvidia import (
    nouveau_out_of_initramfs,
    nvidia_compute_present,
    nvidia_driver_loaded,
    nvidia_gpus_verified,
)
from laguna_kit.operations.packages import apt_present

d = host.data
box = memo.fact(host, BoxBasics)
try:
    plan = sources.driver_plan(
        sources.distro_of(memo.fact(host, LinuxDistribution)["release_meta"]),
        branch=d.nvidia_driver_branch,
        open_modules=d.nvidia_driver_open,
        secure_boot=box["secure_boot"],
        kernel=box["kernel"],
        cuda_repo=d.nvidia_cuda_repo,
    )
except sources.SourceError:
    plan = None  # the pre-flight refuses this distribution, naming it, before anything runs
smi = memo.fact(host, NvidiaSmiGpus)
need, _ = images.requirement_or_reason(d.image_registry, d.vllm_image)
installed = memo.fact(host, DebPackages)
ours = plan is not None and all(name in installed for name in plan.packages)  # kept managed
keep = not ours and smi["ok"] and (need is None or need.met_by(smi["cuda"]))  # unread: after pull
NOUVEAU_CONF = "laguna-blacklist-nouveau.conf"
CUDA_LIST = "/etc/apt/sources.list.d/laguna-cuda.list"


def cuda_source(plan) -> bytes:
    return kit_file(
        "files/apt-source.list.j2",
        task="tasks/driver.py",
        what=plan.channel,
        url=plan.repo,
        suite="/",
        components="",
        keyring=sources.CUDA_KEYRING,
    )


if keep:
    version = ", ".join(sorted({g.driver_version for g in smi["gpus"]}))
    logger.info(
        f"{host.name}: keeping the working NVIDIA driver {version} (CUDA {smi['cuda']}, "
        f"{smi['path']}): no driver package is installed over it"
    )
elif plan is not None:
    # The same repository configured by the owner (cuda-keyring) with another Signed-By would
    # break every `apt-get update`: use theirs then.
    theirs = plan.repo and host.get_fact(
        Command,
        command=f"grep -rlsF {shlex.quote(plan.repo.rstrip('/'))} /etc/apt/sources.list "
        f"/etc/apt/sources.list.d | grep -vx {CUDA_LIST} || true",
    )
    if theirs:
        logger.info(
            f"{host.name}: {plan.channel} is already configured ({theirs.split()[0]}): using it"
        )
    our_list = bool(plan.repo) and not theirs
    files_synced(
        name="Blacklist nouveau" + (f"; apt source and key: {plan.channel}" if our_list else ""),
        fetched=[(plan.key, sources.CUDA_KEYRING, "644")] if our_list else [],
        files=[
            (kit_file("files/blacklist-nouveau.conf"), f"/etc/modprobe.d/{NOUVEAU_CONF}", "644"),
            *([(cuda_source(plan), CUDA_LIST, "644")] if our_list else []),
        ],
    )
    nouveau_out_of_initramfs(
        name="Initramfs without nouveau (rebuilt while it could still load it)", conf=NOUVEAU_CONF
    )
    if plan.first:
        apt_present(
            name=f"Driver branch {d.nvidia_driver_branch} pinned first ({', '.join(plan.first)})",
            packages=plan.first,
            hold=True,
        )
    apt_present(
        name=f"NVIDIA driver R{d.nvidia_driver_branch} from {plan.channel} "
        f"({', '.join(plan.packages)}), held against unattended upgrades",
        packages=plan.packages,
        hold=True,
    )
    if plan.headers:
        apt_present(
            name=f"Kernel headers metapackage {plan.headers} (the next kernel gets a module too)",
            packages=[plan.headers],
        )
    nvidia_driver_loaded(
        name="NVIDIA driver loaded (reboot when allowed)",
        allow_reboot=d.nvidia_allow_reboot,
    )

nvidia_gpus_verified(
    name="nvidia-smi sees the GPUs the recipe needs",
    gpu_count=d.gpu_count,
    gpu_min_memory_mib=d.gpu_min_memory_mib,
    driver_branch=None if keep else d.nvidia_driver_branch,
)
nvidia_compute_present(name="The driver's compute pieces: nvidia-smi, libcuda, NVML, persistenced")
