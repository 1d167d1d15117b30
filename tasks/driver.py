# NVIDIA driver R580 or newer (the image is CUDA 13), from the one table in
# laguna_kit/domain/package_sources.py: Debian 12 from NVIDIA's CUDA repository with its
# branch-pinning package first, Ubuntu from its archive (signed prebuilt modules under Secure Boot).
# A working driver that already meets the image's CUDA requirement is kept, whatever installed it.
# Otherwise: compute pieces named, the headers metapackage, every driver package held, nouveau kept
# out, a reboot when allowed; then nvidia-smi must agree.

from pyinfra import host, logger
from pyinfra.facts.deb import DebPackages
from pyinfra.facts.server import LinuxDistribution

from laguna_kit.domain import images, package_sources
from laguna_kit.facts.nvidia import NvidiaSmiGpus
from laguna_kit.facts.packages import AptSourceURLs, files_naming
from laguna_kit.facts.server import BoxBasics
from laguna_kit.operations.files import files_synced, kit_file
from laguna_kit.operations.nvidia import (
    nouveau_out_of_initramfs,
    nvidia_compute_present,
    nvidia_driver_loaded,
    nvidia_gpus_verified,
)
from laguna_kit.operations.packages import apt_present, packages_held
from laguna_kit.run import memo

d = host.data
box = memo.fact(host, BoxBasics)
installed = memo.fact(host, DebPackages)
try:
    distro = package_sources.distro_of(memo.fact(host, LinuxDistribution)["release_meta"])
    plan = package_sources.driver_plan(
        distro,
        branch=d.nvidia_driver_branch,
        open_modules=d.nvidia_driver_open,
        secure_boot=box["secure_boot"],
        kernel=box["kernel"],
        cuda_repo=d.nvidia_cuda_repo,
        installed=installed,
    )
except package_sources.SourceError:
    plan = None  # the pre-flight refuses this distribution, naming it, before anything runs
smi = memo.fact(host, NvidiaSmiGpus)
need, _ = images.requirement_or_reason(d.image_registry, d.vllm_image)
ours = plan is not None and all(name in installed for name in plan.packages)  # kept managed
keep = not ours and smi["ok"] and (need is None or need.met_by(smi["cuda"]))  # unread: after pull
NOUVEAU_CONF = "laguna-blacklist-nouveau.conf"
CUDA_LIST = package_sources.CUDA_LIST.format(distro=distro.key if plan else "")


def cuda_source(plan) -> bytes:
    """The list line exactly as NVIDIA's cuda-keyring writes it (its cuda-REPO.list.in), so a
    cuda-keyring installed later finds the same file and the same Signed-By."""
    return f"deb [signed-by={package_sources.CUDA_KEYRING}] {plan.repo} /\n".encode()


if keep:
    version = ", ".join(sorted({g.driver_version for g in smi["gpus"]}))
    logger.info(
        f"{host.name}: keeping the working NVIDIA driver {version} (CUDA {smi['cuda']}, "
        f"{smi['path']}): no driver package is installed over it"
    )
elif plan is not None:
    # The same repository configured by the owner (cuda-keyring, or a list of their own) with
    # another Signed-By would break every `apt-get update`: use theirs then. The kit's own list and
    # key are where cuda-keyring puts them, so a cuda-keyring installed later agrees with them.
    others = (
        files_naming(
            memo.fact(host, AptSourceURLs),
            plan.repo,
            but=(CUDA_LIST, package_sources.OLD_CUDA_FILES[0]),
        )
        if plan.repo
        else []
    )
    theirs = bool(plan.repo) and ("cuda-keyring" in installed or bool(others))
    if theirs:
        where = "cuda-keyring" if "cuda-keyring" in installed else others[0]
        logger.info(f"{host.name}: {plan.channel} is already configured ({where}): using it")
    our_list = bool(plan.repo) and not theirs
    files_synced(
        name="Blacklist nouveau" + (f"; apt source and key: {plan.channel}" if our_list else ""),
        fetched=[(plan.key, package_sources.CUDA_KEYRING, "644")] if our_list else [],
        files=[
            (kit_file("files/blacklist-nouveau.conf"), f"/etc/modprobe.d/{NOUVEAU_CONF}", "644"),
            *([(cuda_source(plan), CUDA_LIST, "644")] if our_list else []),
        ],
        # what kits before 2026-12-05 wrote instead (a second Signed-By for the same URL)
        removed=list(package_sources.OLD_CUDA_FILES) if our_list else [],
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
    if plan.flavour_unknown:
        logger.warning(
            f"{host.name}: Secure Boot is on and no generic kernel metapackage is installed "
            "(linux-generic, linux-generic-hwe-22.04, ...): only the running kernel gets a signed "
            "module; after a kernel upgrade run deploy.py again before rebooting "
            "(TROUBLESHOOTING.md)"
        )
    apt_present(
        name=f"NVIDIA driver R{d.nvidia_driver_branch} from {plan.channel} "
        f"({', '.join(plan.packages)})",
        packages=plan.packages,
    )
    packages_held(
        name="The driver as dpkg installed it, held against unattended upgrades",
        packages=plan.hold,
        same_version_as=plan.version_of,
        family=package_sources.NVIDIA_PACKAGE,
    )
    if plan.headers:
        apt_present(
            name=f"Kernel headers metapackage {plan.headers} (the next kernel gets a module too)",
            packages=[plan.headers],
        )
    nvidia_driver_loaded(
        name="NVIDIA driver loaded (reboot when allowed)",
        allow_reboot=d.nvidia_allow_reboot,
        reboot_timeout=d.nvidia_reboot_timeout_s,
    )

nvidia_gpus_verified(
    name="nvidia-smi sees the GPUs the recipe needs",
    gpu_count=d.gpu_count,
    gpu_min_memory_mib=d.gpu_min_memory_mib,
    driver_branch=None if keep else d.nvidia_driver_branch,
    replicas=d.replicas_per_box,
)
nvidia_compute_present(name="The driver's compute pieces: nvidia-smi, libcuda, NVML, persistenced")
