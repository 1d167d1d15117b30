"""Keeping the disk: the releases beyond keep_releases go, and the images, checkpoint revisions
and vLLM compile caches only they used; never the current release, the one a rollback would run,
or what any kept release (of any replica of the box) names."""

from __future__ import annotations

import os
import shutil

from ..fetch import revisions
from . import system
from .store import Store, previous_of


def kept_numbers(store: Store, keep: int) -> set:
    numbers, state = store.numbers(), store.state()
    return set(numbers[-keep:] if keep > 0 else []) | {
        state.get("current"),
        previous_of(state) if state.get("current") is not None else None,
    }


def plan(store: Store, keep: int) -> dict:
    """{"releases": numbers to remove, "revisions": stashed checkpoint folders only they used,
    "images": image digests only they ran}: the newest `keep` releases stay, and always the
    current one and the one a rollback would run; what a kept release names is never in it."""
    kept = kept_numbers(store, keep)
    gone = [n for n in store.numbers() if n not in kept]
    if not gone:
        return {"releases": [], "revisions": [], "images": [], "compile_caches": []}
    # Replicas share the box's images and checkpoint revisions: what any release of another
    # replica names stays too.
    kept_specs = [store.spec(n) for n in store.numbers() if n in kept] + store.sibling_specs()
    kept_revisions = {
        (c["dest"], c["revision"]) for sp in kept_specs for c in sp.get("checkpoints") or []
    }
    kept_digests = {sp.get("image_digest") for sp in kept_specs}
    kept_caches = {sp.get("compile_cache") for sp in kept_specs}
    revisions_gone, images_gone, caches_gone = set(), set(), set()
    for n in gone:
        sp = store.spec(n)
        for c in sp.get("checkpoints") or []:
            if (c["dest"], c["revision"]) in kept_revisions:
                continue
            folder = revisions.stash_path(c["dest"], c["revision"])
            if os.path.isdir(folder) and revisions.recorded_revision(c["dest"]) != c["revision"]:
                revisions_gone.add(folder)
        cache = sp.get("compile_cache")
        if cache and cache not in kept_caches and os.path.isdir(cache):
            caches_gone.add(cache)
        digest = sp.get("image_digest")
        if digest and digest not in kept_digests and sp.get("image"):
            images_gone.add(f"{sp['image'].rsplit(':', 1)[0]}@{digest}")
    return {
        "releases": gone,
        "revisions": sorted(revisions_gone),
        "images": sorted(images_gone & present_images()),
        "compile_caches": sorted(caches_gone),
    }


def present_images() -> set:
    try:
        listing = system.capture(
            "docker", "image", "ls", "--digests", "--format", "{{.Repository}}@{{.Digest}}"
        )
    except OSError:  # no docker: no image to remove
        return set()
    return set(listing.split())


def prune(store: Store, keep: int) -> dict:
    gone = plan(store, keep)
    for folder in gone["revisions"] + gone["compile_caches"]:
        shutil.rmtree(folder, ignore_errors=True)
    for ref in gone["images"]:  # never forced: an image a container still uses stays
        system.run("docker", "image", "rm", ref, check=False)
    for n in gone["releases"]:
        shutil.rmtree(store.folder(n), ignore_errors=True)
    state = store.state()
    state["failed"] = [n for n in state.get("failed", []) if n not in gone["releases"]]
    if "failed" in state:
        store.save(state)
    for what, items in gone.items():
        if items:
            print(f"pruned {what}: {', '.join(map(str, items))}")
    return gone
