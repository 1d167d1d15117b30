# NVIDIA driver R580 or newer (the image is CUDA 13), from the one table in laguna_kit/sources.py:
# Debian 12 from NVIDIA's CUDA repository with its branch-pinning package first, Ubuntu from its
# archive (signed prebuilt modules under Secure Boot). A working driver that already meets the
# image's CUDA requirement is kept, whatever installed it. Otherwise: compute pieces named, the
# headers metapackage, every driver package held, nouveau kept out, a reboot when allowed; then
# nvidia-smi must agree.
import shlex

from pyinfra import host, logger
from pyinfra.facts.deb import DebPackages
from pyinfra.facts.server import Command, KernelVersion, LinuxDistribution
from pyinfra.operations import files

from laguna_kit import images, sources
from laguna_kit.facts.nvidia import NvidiaSmiGpus
from laguna_kit.facts.server import SecureBoot
from laguna_kit.operations.nvidia import (
    nouveau_out_of_initramfs,
    nvidia_compute_present,
    nvidia_driver_loaded,
    nvidia_gpus_verified,
)
from laguna_kit.operations.packages import apt_present

d = host.data
try:
    plan = sources.driver_plan(
        sources.distro_of(host.get_fact(LinuxDistribution)["release_meta"]),
        branch=d.nvidia_driver_branch,
        open_modules=d.nvidia_driver_open,
        secure_boot=host.get_fact(SecureBoot),
        kernel=host.get_fact(KernelVersion),
        cuda_repo=d.nvidia_cuda_repo,
    )
except sources.SourceError:
    plan = None  # the pre-flight refuses this distribution, naming it, before anything runs
smi = host.get_fact(NvidiaSmiGpus)
need, _ = images.requirement_or_reason(d.image_registry, d.vllm_image)
installed = host.get_fact(DebPackages)
ours = plan is not None and all(name in installed for name in plan.packages)  # kept managed
keep = not ours and smi["ok"] and (need is None or need.met_by(smi["cuda"]))  # unread: after pull
NOUVEAU_CONF = "laguna-blacklist-nouveau.conf"
CUDA_LIST = "/etc/apt/sources.list.d/laguna-cuda.list"

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
    if plan.repo and not theirs:
        files.download(
            name=f"Signing key of {plan.channel}",
            src=plan.key,
            dest=sources.CUDA_KEYRING,
            mode="644",
        )
        files.template(
            name=f"apt source: {plan.channel}",
            src="files/apt-source.list.j2",
            dest=CUDA_LIST,
            task="tasks/driver.py",
            what=plan.channel,
            url=plan.repo,
            suite="/",
            components="",
            keyring=sources.CUDA_KEYRING,
        )
    files.put(
        name="Blacklist nouveau",
        src="files/blacklist-nouveau.conf",
        dest=f"/etc/modprobe.d/{NOUVEAU_CONF}",
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
