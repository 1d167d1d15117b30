"""The fleet's image cache warmed with the pinned image once, and the boxes' pulls after it."""

from __future__ import annotations

import json
import shlex
import time

from pyinfra import host, logger
from pyinfra.api import FunctionCommand, operation
from pyinfra.facts.server import Command

from ..domain import fleet
from ..domain.box_commands import running, systemd_run, tool_command
from ..facts.docker import DockerImage, digest_of
from ..run import download_progress, interrupt, memo

WARM_UNIT = "laguna-cache-warm"


def warm_record(kit_dir: str) -> str:
    return f"{kit_dir}/state/cache-warm.json"


def _warm(record_text: str, image: str, digest: str) -> bool:
    """The record says `image` (and `digest`, when known) is in the cache."""
    try:
        rec = json.loads(record_text or "null")
    except ValueError:
        return False
    return (
        isinstance(rec, dict)
        and rec.get("image") == image
        and (not digest or rec.get("digest") == digest)
    )


@operation()
def cache_warm_started(kit_dir: str, image: str, digest: str, port: int, store: str):
    """
    On the image cache host: the pinned image is in the cache, or its warming runs box-side
    (laguna_cache_warm.py in a transient unit; not waited for here: the boxes' pulls wait).

    + kit_dir: the kit's folder on the host
    + image: vllm_image
    + digest: its digest at the registry itself ("" when this run could not read it)
    + port: the cache's port
    + store: the cache's storage root
    """
    record = warm_record(kit_dir)
    text = host.get_fact(Command, command=f"cat {shlex.quote(record)} 2>/dev/null; true")
    if _warm(text, image, digest):
        host.noop(f"{image} is in the cache")
        return
    cmd = tool_command(
        kit_dir, "laguna_cache_warm.py",
        "--cache", f"http://127.0.0.1:{port}", "--store", store, "--image", image,
        "--digest", digest, "--record", record,
    )  # fmt: skip
    log = f"{kit_dir}/state/cache-warm.log"
    unit = systemd_run(WARM_UNIT, f"StandardOutput=append:{log}", f"StandardError=append:{log}")
    start = f"{unit} {cmd}"
    yield f"install -d -m 755 {shlex.quote(kit_dir)}/state && ({running(WARM_UNIT)} || {start})"


@operation()
def cache_warm_waited(kit_dir: str, image: str, digest: str, grace_s: float = 120):
    """
    On a GPU box of a fleet with an image cache, before the image's pull: wait while the cache
    warms with it, so no layer is fetched from the registry for this box too (the distribution
    registry fetches a blob again for each request that comes while it stores it). Nothing to do
    when the image is on the box already. A cache that says nothing (not warming, no record) for
    `grace_s` is not waited for: the pull goes on (through the cache, or Docker's fallback).

    + kit_dir: the kit's folder on the cache host
    + image: vllm_image
    + digest: its digest at the registry itself ("" when unknown)
    + grace_s: how long a silent cache is waited for
    """
    cache = fleet.cache_of(host.state.inventory)
    if cache is None:
        host.noop("no image cache in the hosts file")
        return
    if "gpu" not in fleet.roles(host):
        host.noop("no pull here (the step orders the boxes' wait after the cache's warming)")
        return
    if digest_of(memo.fact(host, DockerImage, ref=image)):
        host.noop(f"{image} is on this box")
        return
    yield FunctionCommand(
        lambda state, host: _wait(host, cache, kit_dir, image, digest, grace_s), (), {}
    )


def _wait(box, cache, kit_dir, image, digest, grace_s) -> None:
    started = last_said = time.monotonic()
    while True:
        try:
            out = cache.get_fact(
                Command,
                command=f"if {running(WARM_UNIT)}; then echo running; else echo ended; fi; "
                f"cat {shlex.quote(warm_record(kit_dir))} 2>/dev/null; true",
            )
        except Exception as exc:  # noqa: BLE001 - an unreachable cache is not waited for
            logger.warning(f"[{box.name}] the image cache {cache.name} cannot be asked ({exc})")
            return
        state, _, record = (out or "").partition("\n")
        if _warm(record, image, digest):
            return
        waited = time.monotonic() - started
        if state.strip() != "running" and waited > grace_s:
            logger.warning(
                f"[{box.name}] the image cache {cache.name} is not warming {image} and has no "
                f"record of it after {waited:.0f} s: pulling now (see {kit_dir}/state/"
                "cache-warm.log there)"
            )
            return
        if time.monotonic() - last_said >= download_progress.PRINT_EVERY_S:
            logger.info(f"[{box.name}] waiting for the image cache {cache.name} to hold {image}")
            last_said = time.monotonic()
        interrupt.check()
        time.sleep(download_progress.POLL_S)
