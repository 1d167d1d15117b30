# Pre-flight: refuse a box that cannot serve the champion, before anything on it changes; and name
# every input a later step needs (the tailnet's auth key, leave to reboot) now, not halfway.
from pyinfra import host, logger
from pyinfra.facts.server import LinuxDistribution

from laguna_kit.domain import images, package_sources, replicas
from laguna_kit.domain.hub import HubError, source_checkpoint
from laguna_kit.domain.profiles import COMPILE_CACHE_MIB, ProfileError, profile_of, render
from laguna_kit.facts.checkpoints import FileSizes
from laguna_kit.facts.docker import DockerImage
from laguna_kit.facts.network import TailscaleStatus
from laguna_kit.facts.nvidia import NvidiaSmiGpus
from laguna_kit.knobs.declared import checkpoint_pairs, knobs_of
from laguna_kit.operations.server import preflight
from laguna_kit.run import memo, operator_inputs

d = host.data
# Reasons to refuse found before the operation runs (hub, serving flags), refused with the rest.
problems = []
# Space still needed = what the hub says the pinned checkpoints are, less what is already on disk.
need_mib = 0
try:
    ckpts = [source_checkpoint(d, repo, rev) for repo, rev in checkpoint_pairs(d)]
    folders = [f"{d.model_dir}/{ckpt.folder}" for ckpt in ckpts]
    on_disk = host.get_fact(FileSizes, paths=folders)
    for ckpt, folder in zip(ckpts, folders):
        have = on_disk.get(folder, {})
        need_mib += sum(f.size for f in ckpt.files if have.get(f.path) != f.size) // (1 << 20)
except HubError as exc:
    problems.append(str(exc))
try:
    render(knobs_of(d))  # a bad serving_mode or a flag the recipe saw crash: refuse now
except ProfileError as exc:
    problems.append(str(exc))

# The image's CUDA requirement and size, read from its registry: a working driver is judged
# against it, and Docker's root must hold it unless it is pulled already.
info, unread = images.info_or_reason(d.image_registry, d.vllm_image)
need = info[0] if info else None
pulled = bool((memo.fact(host, DockerImage, ref=d.vllm_image) or {}).get("digest"))
unpinned = images.unpinnable_problem(d.vllm_image, d.image_registry, unread)
if unpinned and not pulled:
    # no expected digest, no pull (fail closed): tasks/image.py checks the pull against it
    problems.append(unpinned)
elif unread:
    logger.warning(f"{host.name}: {unread}; a driver already on the box is judged after the pull")
reboot = operator_inputs.reboot_reason(
    memo.fact(host, NvidiaSmiGpus), need, d.nvidia_driver_replace, d.nvidia_driver_branch
)
if reboot and d.nvidia_allow_reboot:
    logger.warning(f"{host.name}: this deploy will reboot the box: {reboot}")
for problem in (
    operator_inputs.reboot_problem(reboot, d.nvidia_allow_reboot),
    operator_inputs.tailnet_problem(memo.fact(host, TailscaleStatus), d.tailscale_auth_key_env),
):
    if problem:
        problems.append(problem)
image_mib = 0 if pulled or not info else int(info[1] * images.UNPACK_FACTOR) >> 20
docker_root = (d.docker_daemon_config or {}).get("data-root") or "/var/lib/docker"
try:
    distro = package_sources.distro_of(memo.fact(host, LinuxDistribution)["release_meta"])
    channel = package_sources.driver_plan(
        distro, d.nvidia_driver_branch, d.nvidia_driver_open, False, "", d.nvidia_cuda_repo
    ).channel
except package_sources.SourceError:
    channel = "its driver table"  # the OS check below names the unsupported distribution

preflight(
    name="Pre-flight: OS, GPUs, driver vs the image's CUDA, disk, RAM, /dev/shm",
    image_ref=d.vllm_image,
    image_need={"cuda_version": need.cuda_version, "require": need.require} if need else None,
    replace_driver=d.nvidia_driver_replace,
    driver_source=channel,
    gpu_count=d.gpu_count,
    gpu_min_memory_mib=d.gpu_min_memory_mib,
    model_dir=d.model_dir,
    need_mib=need_mib + d.checkpoint_free_margin_gib * 1024,
    min_ram_mib=d.min_ram_mib,
    min_shm_mib=d.min_shm_mib,
    early_problem="; ".join(problems) or None,
    image_mib=image_mib,
    docker_root=docker_root,
    replicas=d.replicas_per_box,
    compile_cache_dir=d.compile_cache_dir,
    compile_cache_mib=COMPILE_CACHE_MIB * max(1, d.replicas_per_box),
    gpu_memory_utilization=profile_of(d).get("gpu_memory_utilization") or 0.92,  # vLLM's default
    serving_units=tuple(r.unit for r in replicas.of(host)),
)
