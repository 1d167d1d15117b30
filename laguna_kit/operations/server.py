"""The box as a whole: the pre-flight refusal and a reboot that waits for the box to be back."""

from __future__ import annotations

from collections.abc import Mapping

from pyinfra import host, logger
from pyinfra.api import OperationError, operation
from pyinfra.facts.server import LinuxDistribution

from ..domain import hardware, images, package_sources
from ..domain.replicas import gpus_seen
from ..facts.nvidia import NvidiaSmiGpus
from ..facts.server import BoxBasics, FreeSpaceMiB
from ..facts.systemd import UnitStates
from ..run import deploy_lock, memo, reboot


@operation()
def preflight(
    image_ref: str,
    image_need: dict | None,
    replace_driver: bool,
    driver_source: str,
    gpu_count: int,
    gpu_min_memory_mib: int,
    model_dir: str,
    need_mib: int,
    min_ram_mib: int,
    min_shm_mib: int,
    early_problem: str | None = None,
    image_mib: int = 0,
    docker_root: str = "/var/lib/docker",
    replicas: int = 0,
    compile_cache_dir: str = "",
    compile_cache_mib: int = 0,
    gpu_memory_utilization: float = 0.0,
    serving_units: tuple[str, ...] = (),
):
    """
    Refuse the box, before anything on it changes, when it cannot serve the champion.

    + gpu_count: GPUs the serving mode shards over
    + gpu_min_memory_mib: memory each of them needs
    + model_dir: where the checkpoints go (its free space is checked)
    + need_mib: MiB still to download there, margin included
    + min_ram_mib: RAM floor
    + min_shm_mib: free /dev/shm floor
    + early_problem: a reason found before the operation ran (hub, serving flags), refused together
    + image_mib: MiB the image's pull still needs in Docker's root (0: pulled, or size unknown)
    + docker_root: Docker's data root (its free space is checked; shared when on model_dir's disk)
    + image_ref: the pinned image
    + image_need: its CUDA requirement ({"cuda_version", "require"}; None when it could not be read)
    + replace_driver: a working driver too old for the image may be replaced (else refused)
    + driver_source: where the kit's driver would come from (named in the refusal)
    + replicas: replicas_per_box (0: one per gpu_count cards the box has)
    + gpu_memory_utilization: what vLLM takes of each card (another process holding more of it
      is refused), judged while none of `serving_units` (the kit's own) runs
    + compile_cache_dir, compile_cache_mib: vLLM's compile caches and what they may take (counted
      on whichever disk they share, else on their own)

    **Example:**

    .. code:: python

        preflight(name="Pre-flight", gpu_count=4, gpu_min_memory_mib=24000, model_dir="/models",
                  need_mib=90000, min_ram_mib=16384, min_shm_mib=2048)
    """
    problems = [early_problem] if early_problem else []
    box = memo.fact(host, BoxBasics)
    distro = memo.fact(host, LinuxDistribution)
    unsupported = os_problem(distro)
    if unsupported:
        problems.append(unsupported)
    if box["arch"] != "x86_64":
        problems.append(f"found {box['arch']}, need x86_64")
    gpus, source = gpus_seen(host)
    problems += hardware.gpu_problems(gpus, gpu_count, gpu_min_memory_mib, replicas)
    idle = hardware.idle_gpus(gpus, gpu_count, replicas)
    if idle:
        logger.warning(f"{host.name}: {idle}")
    problems += busy_cards(gpus, gpu_memory_utilization, serving_units)
    problems += driver_problems(image_ref, image_need, replace_driver, driver_source)
    space = host.get_fact(FreeSpaceMiB, paths=[model_dir, "/dev/shm", docker_root])
    cache_need = None
    if compile_cache_dir and compile_cache_mib:
        cache = host.get_fact(FreeSpaceMiB, paths=[compile_cache_dir])[compile_cache_dir]
        cache_need = (compile_cache_dir, cache, compile_cache_mib)
    free, shm, ram = space[model_dir]["mib"], space["/dev/shm"]["mib"], box["mem_mib"]
    problems += space_problems(space, model_dir, docker_root, need_mib, image_mib, cache_need)
    if ram < min_ram_mib:
        problems.append(f"found {ram} MiB RAM, need {min_ram_mib} MiB")
    problems += clock_problems(box.get("clock_skew_s"))
    if shm < min_shm_mib:
        problems.append(
            f"found {shm} MiB free in /dev/shm, need {min_shm_mib} MiB (the container shares the "
            f"host's IPC; NCCL needs it): enlarge /dev/shm (tmpfs size= in /etc/fstab)"
        )
    if problems:
        raise OperationError(
            f"pre-flight refused {host.name}: "
            + "; ".join(problems)
            + ". Nothing on the box was changed."
        )
    if box["secure_boot"]:
        logger.warning(
            f"{host.name}: UEFI Secure Boot is on: the NVIDIA kernel module must be signed "
            "(Ubuntu: precompiled signed modules; Debian: DKMS with an enrolled MOK, "
            'once at the console: docs/howto.md, "Debian under Secure Boot")'
        )
    host.noop(
        f"pre-flight passed: {hardware.describe(gpus)} (from the {source}), {free} MiB free at "
        f"{model_dir}, {ram} MiB RAM, {shm} MiB /dev/shm"
    )
    yield from ()  # a check, never a change


CLOCK_SKEW_MAX_S = 300  # NTP keeps a box within a second; five minutes off is no rounding


@operation()
def distribution_supported():
    """
    Refuse a host without GPUs (a router, monitor or cache host: no pre-flight) whose distribution
    the kit does not support, before anything on it changes, naming the ones it does.

    **Example:**

    .. code:: python

        distribution_supported(name="A distribution the kit supports")
    """
    distro = memo.fact(host, LinuxDistribution)
    problem = os_problem(distro)
    if problem:
        raise OperationError(f"refused {host.name}: {problem}. Nothing on the box was changed.")
    host.noop(f"{distro.get('name')} {distro.get('major')} is supported")
    yield from ()


def os_problem(distro: Mapping) -> str | None:
    """The refusal of a distribution the kit does not support (None when it does), from
    os-release (pyinfra's LinuxDistribution; its name and version where os-release is silent)."""
    meta = dict(distro.get("release_meta") or {})
    name, major, minor = (distro.get(k) for k in ("name", "major", "minor"))
    if not meta.get("VERSION_ID"):
        ubuntu = minor is not None and name == "Ubuntu"
        meta["VERSION_ID"] = f"{major}.{minor:02d}" if ubuntu else ("" if major is None else major)
    meta.setdefault("ID", (name or "").lower())
    return package_sources.supported_problem(package_sources.distro_of(meta), name or "")


def busy_cards(gpus: list, utilization: float, serving_units: tuple[str, ...]) -> list[str]:
    """Cards another process holds too much of to start vLLM (refused), or some of (said), while
    none of the kit's own serving units runs (its vLLM holds them on every run after the first)."""
    busy, warnings = hardware.memory_in_use(gpus, utilization)
    if not (busy or warnings) or any(
        s.get("running") for s in memo.fact(host, UnitStates, units=serving_units).values()
    ):
        return []
    for warning in warnings:
        logger.warning(f"{host.name}: {warning}")
    return busy


def clock_problems(skew: int | None) -> list[str]:
    """A box whose clock is far from this machine's: apt refuses a repository whose Release file
    is "not valid yet" half-way through a run (after changes), and TLS certificates fail."""
    if skew is None or abs(skew) <= CLOCK_SKEW_MAX_S:
        return []
    days, rest = divmod(abs(skew), 86400)
    said = f"{days} days {rest // 3600} h" if days else f"{abs(skew) // 60} min"
    return [
        f"the box's clock is {said} {'behind' if skew < 0 else 'ahead of'} this machine's (apt "
        "would refuse its repositories' Release files as not valid yet, TLS would fail): set it "
        "(timedatectl set-ntp true, then timedatectl status says 'System clock synchronized: "
        "yes'; or timedatectl set-time 'YYYY-MM-DD HH:MM:SS')"
    ]


def space_problems(
    space: dict, model_dir: str, docker_root: str, need_mib: int, image_mib: int, cache_need=None
) -> list[str]:
    """The checkpoints' disk and Docker's root (one disk or two) against what they still need,
    and vLLM's compile caches (`cache_need`: folder, its space, MiB) on the disk they share or
    their own."""
    problems = []
    if cache_need:
        folder, cache, mib = cache_need
        if cache["mount"] == space[model_dir]["mount"]:
            need_mib += mib
        elif cache["mount"] == space[docker_root]["mount"]:
            image_mib += mib
        elif cache["mib"] < mib:
            problems.append(
                f"found {cache['mib']} MiB free at {folder}, need {mib} MiB for vLLM's compile "
                "cache (compile_cache_dir): free space there or point it elsewhere"
            )
    free = space[model_dir]["mib"]
    shared = space[docker_root]["mount"] == space[model_dir]["mount"]
    if shared and free < need_mib + image_mib:
        problems.append(
            f"found {free} MiB free at {model_dir}, need {need_mib + image_mib} MiB: {need_mib} "
            f"for the checkpoints not yet on disk plus margin, and {image_mib} for the image in "
            f"Docker's root {docker_root} on the same disk: free space or point model_dir "
            "elsewhere"
        )
    elif free < need_mib:
        problems.append(
            f"found {free} MiB free at {model_dir}, need {need_mib} MiB (checkpoints not yet on "
            f"disk plus margin): free space or point model_dir elsewhere"
        )
    if not shared and space[docker_root]["mib"] < image_mib:
        problems.append(
            f"found {space[docker_root]['mib']} MiB free at Docker's root {docker_root}, need "
            f"{image_mib} MiB to pull the image (its registry manifest's size, unpacked): free "
            "space there (`docker image prune` removes images no container uses)"
        )
    return problems


def driver_problems(
    image_ref: str, image_need: dict | None, replace: bool, source: str
) -> list[str]:
    """A working driver whose CUDA is older than the image needs: refused unless replaceable."""
    smi = memo.fact(host, NvidiaSmiGpus)
    if not smi["ok"] or not image_need:
        return []
    need = images.CudaRequirement(**image_need)
    if need.met_by(smi["cuda"]) or replace:
        return []
    version = ", ".join(sorted({g.driver_version for g in smi["gpus"]}))
    return [
        f"found NVIDIA driver {version} (CUDA {smi['cuda'] or 'unknown'}) at {smi['path']}, the "
        f"image "
        f"{image_ref} requires {need.describe()}: the R580 driver or newer (GeForce cards have no "
        f"CUDA "
        "forward compatibility). Set nvidia_driver_replace = true to let the kit install its "
        "driver "
        f"from {source}, or upgrade the driver yourself"
    ]


@operation()
def deploy_locked(kit_dir: str, wait_s: int):
    """
    One deploy at a time on a box: this run takes the box's lock (held until its SSH connection
    ends, so a killed run frees it) or waits `wait_s` seconds, then fails naming the holder. Before
    the box tools are installed (a first deploy) there is no lock yet.

    + kit_dir: the kit's folder on the box (laguna_lock.py)
    + wait_s: how long to wait for another deploy to finish

    **Example:**

    .. code:: python

        deploy_locked(name="One deploy at a time", kit_dir="/opt/laguna-kit", wait_s=600)
    """
    if not host.state.is_executing:
        host.noop("taken when the run executes")
        return
    deploy_lock.hold(host, kit_dir, wait_s)
    host.noop("this run holds the box's deploy lock")
    yield from ()


@operation(is_idempotent=False)
def reboot_and_wait(timeout: int = 600):
    """
    Reboot and wait until the box is back *after* a reboot.

    pyinfra's server.reboot confirms by /proc/uptime, which a container (and so the test harness)
    does not reset; a marker in /run is gone after any reboot.

    + timeout: seconds to wait for the box to come back

    **Example:**

    .. code:: python

        reboot_and_wait(name="Reboot for the driver", timeout=600)
    """
    yield from reboot.commands(timeout)
