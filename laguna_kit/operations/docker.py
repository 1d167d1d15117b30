"""The Docker engine: running with its current daemon.json, and the pinned image present."""

from __future__ import annotations

import re
import shlex

from pyinfra import host
from pyinfra.api import OperationError, operation
from pyinfra.facts.server import Command

from ..boxcli import running, systemd_run
from ..facts import memo
from ..facts.docker import DockerEngine, DockerImage


@operation()
def docker_config_applied():
    """
    Restart dockerd when daemon.json changed after it started (by the kit's merge or nvidia-ctk).
    Derived from the box's state, so a run killed before the restart still restarts next time.

    **Example:**

    .. code:: python

        docker_config_applied(name="Docker restarted when daemon.json changed")
    """
    st = memo.fact(host, DockerEngine)
    if st["started"] is None or st["config_mtime"] is None or st["config_mtime"] <= st["started"]:
        host.noop("dockerd runs with the current daemon.json")
        return
    yield "systemctl restart docker.service"


@operation()
def image_present(ref: str):
    """
    Pull the pinned tag once; a re-run with the tag already present does nothing.

    + ref: the image reference (repository:tag)

    **Example:**

    .. code:: python

        image_present(name="vLLM image", ref="vllm/vllm-openai:v0.25.1")
    """
    if _present(ref):
        return
    # After image_pull_started's pull (if any) ended: a finished one leaves one manifest check to
    # do here; a failed one is tried once more, its error shown.
    wait = f"while {running(PULL_UNIT)}; do sleep 2; done"
    yield f"{wait}; docker pull -q {shlex.quote(ref)}"


PULL_UNIT = "laguna-pull"


def _present(ref: str) -> bool:
    """The tag is on the box (said as the operation's no-op)."""
    digest = (memo.fact(host, DockerImage, ref=ref) or {}).get("digest")
    if digest:
        host.noop(f"{ref} present ({digest})")
    return bool(digest)


@operation()
def image_pull_started(ref: str):
    """
    Start pulling the pinned tag box-side, not waiting for it: the pull runs while Tailscale is
    set up and the checkpoints finish; `image_present` waits for it.

    + ref: the image reference (repository:tag)

    **Example:**

    .. code:: python

        image_pull_started(name="vLLM image pull started", ref="vllm/vllm-openai:v0.25.1")
    """
    if _present(ref):
        return
    # Not there when this run last looked: a running pull first, then the image read afresh, so a
    # pull that ended since (or between the two checks) is seen as the image it brought (the
    # memory alone made a re-run start a second pull).
    pulling = host.get_fact(Command, command=f"{running(PULL_UNIT)} && echo running || true")
    if pulling == "running":
        host.noop(f"{ref}: the pull started earlier still runs ({PULL_UNIT})")
        return
    digest = (host.get_fact(DockerImage, ref=ref) or {}).get("digest")
    if digest:
        host.noop(f"{ref} present ({digest})")
        return
    pull = f"{systemd_run(PULL_UNIT)} docker pull -q {shlex.quote(ref)}"
    yield f"{running(PULL_UNIT)} || {pull}"


ENGINE_PACKAGES = ("docker-ce", "docker.io", "moby-engine", "docker-engine")
MIN_ENGINE = (19, 3)  # `docker run --gpus` (the toolkit's hook through Docker) needs 19.03+


def owner_engine(installed: dict) -> str | None:
    """The Docker engine package already on the box, if any (used as it is, never replaced)."""
    return next((name for name in ENGINE_PACKAGES if name in installed), None)


@operation()
def docker_engine_checked(package: str):
    """
    The engine is one the container toolkit supports: a docker.service and dockerd 19.03 or
    newer. An engine the owner installed is used as it is: when it does not qualify the deploy
    refuses, naming it, and replaces nothing.

    + package: the engine's package (the owner's, or the one the kit installed)

    **Example:**

    .. code:: python

        docker_engine_checked(name="Docker engine usable", package="docker-ce")
    """
    engine = memo.fact(host, DockerEngine)
    version = tuple(int(p) for p in re.findall(r"\d+", engine["version"])[:2])
    if engine["unit"] and version >= MIN_ENGINE:
        host.noop(f"{package}: dockerd {engine['version']}")
        return
    if not host.state.is_executing:
        host.noop("checked once the engine is installed")
        return
    found = (
        "no docker.service" if not engine["unit"] else f"dockerd {engine['version'] or 'not found'}"
    )
    raise OperationError(
        f"{host.name}: the Docker engine on this box ({package}) is not usable: {found}, the "
        "container toolkit needs docker.service with dockerd 19.03 or newer. The kit uses the "
        "engine you installed as it is and replaces nothing: repair or upgrade it, or remove it "
        "and re-run (the kit then installs docker_package)"
    )
    yield from ()
