"""The Docker engine: running with its current daemon.json, and the pinned image present."""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import operation

from ..facts.docker import DockerConfigState, DockerImageDigest


@operation()
def docker_config_applied():
    """
    Restart dockerd when daemon.json changed after it started (by the kit's merge or nvidia-ctk).
    Derived from the box's state, so a run killed before the restart still restarts next time.

    **Example:**

    .. code:: python

        docker_config_applied(name="Docker restarted when daemon.json changed")
    """
    st = host.get_fact(DockerConfigState)
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
    digest = host.get_fact(DockerImageDigest, ref=ref)
    if digest:
        host.noop(f"{ref} present ({digest})")
        return
    yield f"docker pull -q {ref}"
