"""The Docker engine: running with its current daemon.json, and the pinned image present."""

from __future__ import annotations

import io
import ipaddress
import json
import re
import shlex

from pyinfra import host, logger
from pyinfra.api import OperationError, operation
from pyinfra.facts.server import Command
from pyinfra.operations import files as pyinfra_files

from ..domain import fleet
from ..domain.box_commands import running, systemd_run
from ..facts.docker import RELOADED, DockerEngine, DockerImage, digest_of
from ..run import memo
from .files import deep_merge, json_on_box


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
    applied = max(st["started"] or 0, st.get("reloaded") or 0)
    if st["started"] is None or st["config_mtime"] is None or st["config_mtime"] <= applied:
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


@operation()
def image_digest_checked(ref: str, expected: str, registry: str):
    """
    The pulled image is the one the registry itself names for the tag: its digest (RepoDigests)
    equals the one this machine read from `registry`. A registry mirror (the fleet's image cache)
    serves the tag's manifest; Docker checks each layer against it, not the manifest against the
    registry, so this is what keeps a mirror from swapping the image. Refused, naming both.

    + ref: the image reference (repository:tag)
    + expected: the tag's digest at `registry` ("" when this run could not read it: not checked)
    + registry: where `expected` was read (image_registry)
    """
    got = digest_of(memo.fact(host, DockerImage, ref=ref))
    if not expected:
        host.noop(f"{ref}: {registry} was not readable from this machine; its digest not checked")
        return
    if got is None:
        return  # not pulled (a --dry plan): image_present pulls it first
    if got != expected:
        raise OperationError(
            f"{host.name}: the image pulled as {ref} is {got}, but {registry} names {expected} for "
            "that tag: a registry mirror (the fleet's image cache, or one in daemon.json) served "
            f"another image. Not serving it: remove it (docker rmi {ref}), check the mirror, and "
            "deploy again"
        )
    host.noop(f"{ref} is {got}, as {registry} names it")
    yield from ()  # an operation that only checks


def _present(ref: str) -> bool:
    """The tag is on the box (said as the operation's no-op)."""
    digest = digest_of(memo.fact(host, DockerImage, ref=ref))
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
    digest = digest_of(host.get_fact(DockerImage, ref=ref))
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


DAEMON_JSON = "/etc/docker/daemon.json"
MIRRORS = "registry-mirrors"


def kit_mirror(url: str, port: int) -> bool:
    """A registry mirror the kit wrote: http://<a tailnet address>:<the cache port>."""
    m = re.fullmatch(r"http://\[?([0-9A-Fa-f:.]+)\]?:(\d+)/?", str(url))
    if not m or int(m.group(2)) != port:
        return False
    try:
        address = ipaddress.ip_address(m.group(1))
    except ValueError:
        return False
    return any(address in net for net in fleet.TAILNET_RANGES)


@operation()
def daemon_config_merged(wanted: dict, cache_port: int, path: str = DAEMON_JSON):
    """
    Merge `wanted` into daemon.json (every key others wrote kept) and, with a fleet image cache in
    the hosts file (roles = ["cache"]), put its tailnet address first among registry-mirrors (read
    from the cache host now, parsed); a cache address the kit wrote before that is no longer the
    cache's goes, and so do all of them when the hosts file has no cache. Mirrors the owner listed
    stay, after the kit's. Docker falls back to the registry itself when a mirror fails.

    When registry-mirrors is the only change and dockerd runs with the file as it was, dockerd
    reloads it (SIGHUP: registry-mirrors is one of the options it reloads) instead of restarting
    with every container (`docker_config_applied` then sees it applied).

    + wanted: docker_daemon_config
    + cache_port: the cache's port (registry_cache_port)
    + path: daemon.json
    """
    cache = fleet.cache_of(host.state.inventory)
    ips = fleet.tailnet_ips(cache) if cache is not None else None
    ours = f"http://{fleet.host_port(ips[0], cache_port)}" if ips else None
    if cache is not None and not ips:
        logger.warning(
            f"{host.name}: the image cache {cache.name} is not on the tailnet or this run cannot "
            "reach it: this box pulls from the registry itself"
        )
    current = json_on_box(path)
    merged = deep_merge(current or {}, wanted)
    listed = merged[MIRRORS] if isinstance(merged.get(MIRRORS), list) else []
    mirrors = [m for m in listed if not kit_mirror(m, cache_port)]
    mirrors = ([ours] if ours else []) + mirrors
    if mirrors:
        merged[MIRRORS] = mirrors
    else:
        merged.pop(MIRRORS, None)
    if current is not None and merged == current:
        host.noop(
            f"{path} already holds {sorted(wanted)}" + (f" and the cache {ours}" if ours else "")
        )
        return
    yield from pyinfra_files.put._inner(
        src=io.StringIO(json.dumps(merged, indent=4) + "\n"), dest=path, mode="644"
    )
    st = memo.fact(host, DockerEngine)
    only_mirrors = current is not None and {k: v for k, v in merged.items() if k != MIRRORS} == {
        k: v for k, v in current.items() if k != MIRRORS
    }
    fresh = st["started"] is not None and (st["config_mtime"] or 0) <= max(
        st["started"], st.get("reloaded") or 0
    )
    if only_mirrors and fresh:
        marker = shlex.quote(RELOADED)
        yield f"systemctl reload docker.service && install -d /etc/laguna-kit && touch {marker}"
