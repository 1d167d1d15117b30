"""Running a release: a new one numbered from the deploy's upload, an earlier one by number, the
previous good one (rollback), or (a replica past the first) this replica's release of the version
replica 1's release N runs. Each activation is one transaction: a release that does not start puts
the one before it back."""

from __future__ import annotations

import json
import os
import time

from ..fetch import revisions
from ..layout import STASH
from . import drain, system, units
from .store import Store, previous_of
from .system import ReleaseError


def install_incoming(store: Store) -> int:
    """Number the release the deploy uploaded (releases/incoming) and activate it."""
    incoming = os.path.join(store.root, "incoming")
    if not os.path.isdir(incoming):
        raise ReleaseError("no incoming release to install")
    n = (store.numbers() or [0])[-1] + 1
    meta_path = os.path.join(incoming, "release.json")
    with open(meta_path) as fh:
        meta = json.load(fh)
    meta.update(number=n, created=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    with open(meta_path, "w") as fh:
        json.dump(meta, fh, indent=1)
    unit_path = os.path.join(incoming, store.unit)
    with open(unit_path) as fh:
        text = fh.read().replace("@RELEASE@", str(n))
    with open(unit_path, "w") as fh:
        fh.write(text)
    os.rename(incoming, store.folder(n))
    activate(store, n)
    return n


def select_checkpoints(store: Store, n: int, check_only: bool = False) -> None:
    checkpoints = store.meta(n).get("spec", {}).get("checkpoints", [])
    for ck in checkpoints:  # refuse before anything moves when a needed revision is gone
        if not revisions.available(ck["dest"], ck["revision"]):
            raise ReleaseError(
                f"release {n} needs {ck['dest']} at {ck['revision']}, which is not on "
                "this box (pruned, or never fetched here): run deploy.py with that "
                "revision pinned to fetch it"
            )
    if check_only:
        return
    for ck in checkpoints:
        if revisions.select_revision(ck["dest"], ck["revision"]) == "restored":
            print(f"{ck['dest']}: revision {ck['revision'][:12]} restored from {STASH}")


def activate(store: Store, n: int) -> None:
    """Run release `n`, as one transaction: if it does not start, the unit, the checkpoints
    and the service of the release that ran before are put back, and state.json still names
    it."""
    if n not in store.numbers():
        raise ReleaseError(f"no release {n}; have {store.numbers()}")
    select_checkpoints(store, n, check_only=True)
    drain.drain(store, f"release {n} starting")
    before = store.current()
    old_unit = units.installed_unit(store)
    select_checkpoints(store, n)
    units.install_unit(store, store.release_unit(n))
    system.run("systemctl", "enable", "--quiet", store.unit)
    system.run("systemctl", "reset-failed", store.unit, check=False)
    try:
        units.restart(store, n)
    except ReleaseError as exc:
        if before is not None and before != n and before in store.numbers():
            select_checkpoints(store, before)
            units.install_unit(store, old_unit)
            system.run("systemctl", "reset-failed", store.unit, check=False)
            units.restart(store, before, check=False)
            raise ReleaseError(
                f"release {n} did not start ({exc}); release {before} is back in place"
            ) from None
        raise
    state = store.state()
    state["current"] = n
    state.setdefault("history", []).append(
        {"release": n, "activated": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    )
    state["previous"] = previous_of(state)
    store.save(state)
    print(f"release {n} active ({store.meta(n).get('mode')}, {store.meta(n).get('image')})")


def rollback(store: Store, to: int | None) -> int:
    """Activate release `to` (re-activating the current one restarts it), or the previous one
    that did not fail its gate."""
    state = store.state()
    if to is not None:
        activate(store, to)
        print(f"rolled back to release {to}")
        return to
    target = previous_of(state)
    if target is None:
        current, failed = state.get("current"), set(state.get("failed", []))
        older = [
            n
            for n in store.numbers()
            if n != current and n not in failed and (current is None or n < current)
        ]
        target = older[-1] if older else None
    if target is None:
        skipped = sorted(state.get("failed", []))
        raise ReleaseError(
            "no previous release to roll back to"
            + (
                f" (releases that failed their gate are skipped: {skipped}; name one with --to N)"
                if skipped
                else ""
            )
        )
    activate(store, target)
    print(f"rolled back to release {target}")
    return target


def like(store: Store, n: int) -> int | None:
    """`rollback_to` on a box with several replicas: this replica's newest release that runs
    what replica 1's release `n` runs (one that passed its gate before one that failed), and
    None when it has none (a replica the box gained later) or already runs it."""
    try:
        wanted = version_of(Store(store.kit_dir, "").meta(n)["spec"])
    except (OSError, ValueError, KeyError):
        raise ReleaseError(f"replica 1 has no release {n} (see: laguna_release.py list)")
    state = store.state()
    failed = set(state.get("failed", []))
    matches = [m for m in store.numbers() if version_of(store.spec(m)) == wanted]
    if not matches:
        print(
            f"no release of {store.unit} runs what replica 1's release {n} runs: it stays on "
            f"release {state.get('current')}"
        )
        return None
    target = max(matches, key=lambda m: (m not in failed, m))
    if target == state.get("current"):
        print(f"{store.unit} runs release {target}, as replica 1's release {n}: left serving")
        return None
    activate(store, target)
    print(f"rolled back to release {target} (replica 1's release {n})")
    return target


# A replica's own name, port and cards in the vLLM command line: what else it runs is its version.
OWN_FLAGS = ("--name", "--port")
OWN_ENV = "CUDA_VISIBLE_DEVICES="


# a replica's own compile cache (domain/profiles.py compile_cache: per replica and image)
OWN_MOUNTS = (":/root/.cache/vllm",)


def version_of(spec: dict) -> dict:
    """What a release runs, less what makes it one replica and not another (its container name,
    port and cards; the gate's URL): two replicas' releases with the same version run the same."""
    argv, out, skip = list(spec.get("argv") or []), [], False
    for i, a in enumerate(argv):
        if skip:
            skip = False
            continue
        value = argv[i + 1] if i + 1 < len(argv) else ""
        if (
            a in OWN_FLAGS
            or (a == "-e" and value.startswith(OWN_ENV))
            or (a == "-v" and value.endswith(OWN_MOUNTS))
        ):
            skip = True
            continue
        out.append(a)
    keys = ("mode", "image_digest", "target_revision", "drafter_revision", "checkpoints")
    return {"argv": out, **{k: spec.get(k) for k in keys}}
