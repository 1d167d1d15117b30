"""The NVIDIA driver and the container runtime: loaded, seeing the GPUs, known to Docker."""

from __future__ import annotations

import time

from pyinfra import host
from pyinfra.api import OperationError, operation

from ..domain import hardware, images
from ..facts.docker import DockerImage
from ..facts.nvidia import NouveauInitramfs, NvidiaComputePieces, NvidiaSmiGpus
from ..facts.server import BoxBasics
from ..run import interrupt, memo, reboot
from .files import json_on_box


@operation()
def nouveau_out_of_initramfs(conf: str):
    """
    Rebuild the initramfs when nouveau is in it and the blacklist is not, judged from the initramfs
    itself, so a run killed after the blacklist was written still rebuilds on the next run.

    + conf: the blacklist's file name under /etc/modprobe.d

    **Example:**

    .. code:: python

        nouveau_out_of_initramfs(name="initramfs without nouveau",
        conf="laguna-blacklist-nouveau.conf")
    """
    st = host.get_fact(NouveauInitramfs, conf=conf)
    if st["initramfs"] is None:
        host.noop("no initramfs-tools initramfs for the running kernel")
    elif not st["nouveau_module"] or st["blacklisted"]:
        host.noop(f"{st['initramfs']} cannot load nouveau")
    else:
        yield "update-initramfs -u"


@operation()
def nvidia_driver_loaded(allow_reboot: bool, reboot_timeout: int = 600):
    """
    The installed driver must be the running one; that takes a reboot after a fresh install.

    + allow_reboot: reboot when needed; otherwise refuse, saying so
    + reboot_timeout: seconds to wait for the box to come back

    **Example:**

    .. code:: python

        nvidia_driver_loaded(name="Driver loaded", allow_reboot=True)
    """
    smi = memo.fact(host, NvidiaSmiGpus)
    if smi["ok"]:
        host.noop("NVIDIA driver loaded")
        return
    if not allow_reboot:
        raise OperationError(
            f"{host.name}: the NVIDIA driver is installed but not loaded "
            f"(nvidia-smi: {smi['message'] or 'not installed'}): reboot the box and re-run, "
            "or set nvidia_allow_reboot = true (the hosts file's [hosts.data], or --data "
            "nvidia_allow_reboot=true) to let the kit reboot it"
        )
    yield from reboot.commands(reboot_timeout)


def nvidia_smi_settled(settle_s: int) -> dict:
    """nvidia-smi polled until it answers or `settle_s` passed: right after a reboot the module may
    still be loading (or DKMS still building it for a new kernel) while sshd already answers."""
    deadline = time.monotonic() + settle_s
    while True:
        smi = host.get_fact(NvidiaSmiGpus)
        if smi["ok"] or time.monotonic() >= deadline:
            return smi
        interrupt.check()
        time.sleep(3)


@operation()
def nvidia_gpus_verified(
    gpu_count: int,
    gpu_min_memory_mib: int,
    driver_branch: str,
    settle_s: int = 180,
    replicas: int = 0,
):
    """
    After the driver is in: nvidia-smi must see the GPUs the pre-flight counted, with their memory.

    + gpu_count: GPUs wanted
    + gpu_min_memory_mib: memory each needs
    + driver_branch: the loaded driver's version must start with it (None: a kept driver)
    + settle_s: how long nvidia-smi may still fail right after a reboot
    + replicas: replicas_per_box (0: one per gpu_count cards)

    **Example:**

    .. code:: python

        nvidia_gpus_verified(name="GPUs", gpu_count=4, gpu_min_memory_mib=24000,
        driver_branch="580")
    """
    smi = memo.fact(host, NvidiaSmiGpus)
    if not smi["ok"]:  # then polled afresh
        if not host.state.is_executing:
            host.noop("checked once the driver is loaded")
            return
        smi = nvidia_smi_settled(settle_s)
    if not smi["ok"]:
        raise OperationError(
            f"{host.name}: nvidia-smi still fails {settle_s} s after the driver install and "
            f"reboot: {smi['message']}. Look at `dkms status` (the module built for the running "
            "kernel?), `journalctl -k | grep -i nvidia` (a module refused: Secure Boot needs an "
            "enrolled MOK, `mokutil --sb-state`) and TROUBLESHOOTING.md"
        )
    problems = hardware.gpu_problems(smi["gpus"], gpu_count, gpu_min_memory_mib, replicas)
    versions = {g.driver_version for g in smi["gpus"]}
    wrong = [v for v in versions if driver_branch and not v.startswith(f"{driver_branch}.")]
    if wrong:
        problems.append(
            f"driver {', '.join(sorted(wrong))} is loaded, nvidia_driver_branch is {driver_branch}"
        )
    if problems:
        raise OperationError(f"{host.name}: " + "; ".join(problems))
    host.noop(
        f"nvidia-smi sees {hardware.describe(smi['gpus'])}, driver {', '.join(sorted(versions))}"
    )
    yield from ()  # a check, never a change


@operation()
def nvidia_runtime_configured(config: str = "/etc/docker/daemon.json"):
    """
    ``nvidia-ctk runtime configure`` only when a read-only look at daemon.json says it is needed.

    + config: Docker's daemon.json

    **Example:**

    .. code:: python

        nvidia_runtime_configured(name="Docker knows the nvidia runtime")
    """
    current = json_on_box(config) or {}
    if (current.get("runtimes") or {}).get("nvidia"):
        host.noop("docker already has the nvidia runtime")
        return
    yield f"nvidia-ctk runtime configure --runtime=docker --config={config}"


@operation()
def nvidia_compute_present():
    """
    The driver's compute pieces are there, whatever installed them: nvidia-smi, the CUDA driver
    library (libcuda.so.1), NVML (libnvidia-ml.so.1) and the persistence daemon.

    **Example:**

    .. code:: python

        nvidia_compute_present(name="Compute pieces of the driver")
    """
    found = host.get_fact(NvidiaComputePieces)
    missing = [name for name, path in found.items() if not path]
    if missing and host.state.is_executing:
        raise OperationError(
            f"{host.name}: the NVIDIA driver lacks {', '.join(missing)} (found: "
            f"{', '.join(f'{k} {v}' for k, v in found.items() if v) or 'nothing'}): "
            "install the driver's compute packages (docs/reference.md, the driver table)"
        )
    host.noop(
        "compute pieces: " + ", ".join(f"{k} {v or 'after the install'}" for k, v in found.items())
    )
    yield from ()


@operation()
def image_cuda_checked(ref: str):
    """
    Before the serving unit starts: the pulled image's CUDA requirement (its NVIDIA_REQUIRE_CUDA)
    is met by the driver's CUDA version, as nvidia-container-toolkit will demand at start.

    + ref: the pulled image reference

    **Example:**

    .. code:: python

        image_cuda_checked(name="Driver runs the image", ref="vllm/vllm-openai:v0.25.1")
    """
    image = memo.fact(host, DockerImage, ref=ref)
    env = image["env"] if image else None
    smi = memo.fact(host, NvidiaSmiGpus)
    if env is None or not smi["ok"]:
        if host.state.is_executing:
            raise OperationError(
                f"{host.name}: cannot check {ref} against the driver: "
                + (
                    "the image is not pulled (its pull runs as a unit of its own: "
                    "journalctl -u 'laguna-pull:*' says why)"
                    if env is None
                    else smi["message"]
                )
            )
        host.noop("checked once the image is pulled and the driver loaded")
        return
    need = images.from_env(env)
    if not need.met_by(smi["cuda"]):
        version = ", ".join(sorted({g.driver_version for g in smi["gpus"]}))
        raise OperationError(
            f"{host.name}: {ref} requires {need.describe()}, the driver {version} supports CUDA "
            f"{smi['cuda'] or 'unknown'}: nvidia-container-toolkit would refuse the container "
            "(unsatisfied condition). Install the R580 driver or newer (nvidia_driver_replace = "
            "true lets the kit do it); the serving unit was not started"
        )
    host.noop(f"{ref} requires {need.describe()}; the driver supports CUDA {smi['cuda']}")
    yield from ()


@operation()
def dev_char_links_present():
    """
    Every NVIDIA device node has its /dev/char/MAJOR:MINOR link (``nvidia-ctk system
    create-dev-char-symlinks --create-all`` when one lacks it): with the systemd cgroup driver a
    `systemctl daemon-reload` (any package's postinst runs one) otherwise takes the GPUs from the
    running container ("Failed to initialize NVML: Unknown Error", NVIDIA/nvidia-docker#1730). A
    udev rule (files/71-laguna-nvidia-dev-char.rules) does the same at every boot.

    **Example:**

    .. code:: python

        dev_char_links_present(name="/dev/char links for the GPUs")
    """
    missing = memo.fact(host, BoxBasics).get("char_links_missing") or []
    if not missing:
        host.noop("every NVIDIA device node has its /dev/char link")
        return
    yield "nvidia-ctk system create-dev-char-symlinks --create-all"
