"""What a first deploy will need from the operator, judged from the facts before any change: the
pre-flight names each missing input with the knob or variable that gives it, instead of the step
that would need it failing halfway (after the driver, a reboot and Docker)."""

from __future__ import annotations

import os


def reboot_reason(smi: dict, need, replace_driver: bool, branch: str) -> str | None:
    """Why this run will reboot the box (None: it will not). A driver module the kit installs, or
    one installed but not yet loaded, serves only after a reboot; a working driver that meets the
    image's CUDA requirement (or whose requirement is unread) is kept and needs none."""
    if not smi.get("ok"):
        said = smi.get("message") or "not installed"
        return (
            f"no NVIDIA driver answers yet (nvidia-smi: {said}): the R{branch} driver the kit "
            "installs (or one installed and not yet loaded) serves only after a reboot"
        )
    if need is not None and not need.met_by(smi.get("cuda", "")) and replace_driver:
        return (
            f"the working driver (CUDA {smi.get('cuda')}) is replaced by R{branch} "
            "(nvidia_driver_replace), which loads only after a reboot"
        )
    return None


def reboot_problem(reason: str | None, allowed: bool) -> str | None:
    if reason and not allowed:
        return (
            f"this deploy must reboot the box: {reason}. Set nvidia_allow_reboot = true to let "
            "the kit reboot it (it waits for it and goes on), or install the driver and reboot "
            "by hand first"
        )
    return None


def tailnet_problem(status: dict, env_name: str, environ=os.environ) -> str | None:
    """A box not yet on the tailnet joins with an auth key from the control machine."""
    if status.get("BackendState") == "Running" or environ.get(env_name):
        return None
    return (
        f"the box is not on the tailnet and {env_name} is not set on the control machine: "
        f"export {env_name}=tskey-auth-... (an auth key from the Tailscale admin console, "
        "Settings > Keys) and re-run"
    )
