"""One fetch run (`sync`): the manifest checked, the folder of its revision chosen, the files on
disk proven or hashed, the rest fetched from peers, the hub or the uploaded mirror, the record
saved as each file lands, the index checked last."""

from __future__ import annotations

import concurrent.futures
import errno
import json
import os
import re
import shutil
import time

from .. import names
from ..layout import PARTIAL
from . import peers, plan, records, revisions, tally
from .errors import FetchError, HashMismatch
from .folder import disk_full, link_unchanged_files, quarantine, sweep_strays
from .progress import Progress
from .transfer import Downloader, http, session
from .uploaded import Uploaded
from .verify import check_index, hashed_in_parallel


def read_manifest(args) -> tuple[list[dict], str]:
    """The control machine's manifest (files, revision), refused before anything is written when
    its revision is no commit or a name would leave the folder."""
    with open(args.manifest) as fh:
        doc = json.load(fh)
    manifest, revision = doc["files"], doc["revision"]
    if not isinstance(revision, str) or not re.fullmatch(r"[0-9a-f]{40}", revision):
        raise FetchError(f"the manifest for {args.repo}: revision {revision!r} is not a commit")
    for entry in manifest:
        try:
            names.safe_name(entry["path"])
        except names.UnsafeName as exc:
            raise FetchError(f"the manifest for {args.repo}: {exc}; nothing was written") from None
    return manifest, revision


def choose_folder(live: str, revision: str) -> tuple[str, list[str]]:
    """(the folder this revision goes into, other revisions' folders to link from). A new revision
    is fetched beside the live one (which the running release mounts), into the folder the release
    manager swaps in when that revision's release is activated: an interrupted fetch never leaves
    the current release other or partial weights."""
    have = revisions.recorded_revision(live)
    dest = live if have in (None, revision) else revisions.stash_path(live, revision)
    os.makedirs(dest, exist_ok=True)
    others = [live, *revisions.stashed(live)]
    return dest, [f for f in others if os.path.normpath(f) != os.path.normpath(dest)]


def read_token(path: str | None) -> str | None:
    """The hub token from its 0600 file, read once: gone even if no one waits for this run."""
    if not path or not os.path.exists(path):
        return None
    with open(path) as fh:
        token = fh.read().strip() or None
    os.unlink(path)
    return token


def proven_files(dest, manifest, revision, files_state, counter, rehash) -> tuple[int, list, list]:
    """(files proven, files to fetch, what was repaired): the record's proof where it holds, a
    hash of what is on disk where it does not (a mismatch is quarantined and fetched again)."""
    todo_plan = plan.classify(
        manifest, {"revision": revision, "files": files_state}, revision,
        plan.survey(dest, manifest), rehash,
    )  # fmt: skip
    verified, todo, repaired = len(todo_plan.verified), list(todo_plan.to_fetch), []
    hashed = hashed_in_parallel(dest, todo_plan.to_hash, counter)
    for entry, (ok, found) in zip(todo_plan.to_hash, hashed):
        path = os.path.join(dest, entry["path"])
        if ok:
            files_state[entry["path"]] = records.entry_record(path, entry)
            verified += 1
            continue
        quarantine(dest, path, entry["path"])
        repaired.append(
            f"{entry['path']} (found {found}, expected {records.wanted_hash(entry)}: "
            "quarantined, fetched again)"
        )
        todo.append(entry)
    return verified, todo, repaired


def space_checked(dest: str, todo: list[dict], margin_mib: int, uploaded: str | None) -> int:
    """The bytes still to download (pushed files are on this filesystem already), refused before
    the first byte when they and the margin do not fit."""
    need = 0 if uploaded else plan.bytes_needed(todo, plan.part_sizes(dest, todo))
    free = shutil.disk_usage(dest).free
    if need and free < need + (margin_mib << 20):
        raise FetchError(
            f"not enough space at {dest}: {free >> 20} MiB free, {need >> 20} MiB still to "
            f"download "
            f"plus {margin_mib} MiB margin; nothing was downloaded"
        )
    return need


def fleet_sources(args, revision: str, todo: list[dict]):
    """The fleet's peers for this checkpoint (None without a sources file), and `todo` in the
    order this box fetches it."""
    if not getattr(args, "sources", None) or getattr(args, "uploaded", None):
        return None, todo
    with open(args.sources) as fh:
        doc = json.load(fh)
    # (a peer on the tailnet answers a connection at once, or is not there)
    probe = http().Timeout(5, read=float(doc.get("stall_s", 15)))
    fleet = peers.Sources(doc, revision, session(), probe)
    return fleet, plan.fetch_order(todo, fleet.owners, fleet.me)


def source_of(args, revision, token, dest, counter, progress, fleet):
    """Where the files come from: the uploaded mirror offline, else the hub (and peers)."""
    uploaded = getattr(args, "uploaded", None)
    if uploaded:
        return Uploaded(uploaded, dest, counter)
    return Downloader(
        args.endpoint, args.repo, revision, token, dest, counter, progress,
        retries=getattr(args, "retries", 5),
        backoff_max_s=getattr(args, "backoff_max_s", 60),
        read_timeout_s=getattr(args, "read_timeout_s", 60),
        sources=fleet,
    )  # fmt: skip


def fetch_one(source, entry, dest, repaired: list, progress, record) -> None:
    """One file fetched and proven (a hash mismatch fetched once more from scratch: the bad
    download was quarantined), then recorded; an interrupted transfer keeps its bytes."""
    try:
        try:
            source.fetch(entry)
        except HashMismatch as first:
            try:
                source.fetch(entry)
            except HashMismatch as second:
                raise FetchError(
                    f"{entry['path']}: fetched twice, both wrong: got {first.found} then "
                    f"{second.found}, the hub's hash is {second.want}"
                ) from None
            repaired.append(f"{entry['path']} (download had {first.found}: fetched again)")
    except FetchError:
        raise
    except Exception as exc:  # an interrupted transfer: keep the bytes, say how to resume
        if getattr(exc, "errno", None) == errno.ENOSPC:
            raise disk_full(dest, entry) from None
        raise FetchError(
            f"{entry['path']}: transfer interrupted ({exc}); the bytes received are "
            "kept: re-run to resume"
        ) from None
    progress.note(file_done=True)
    record(entry)


def fetch_all(source, todo, dest, workers, repaired, progress, save) -> None:
    """Every file of `todo`, `workers` at a time; each landed file recorded as it lands (a reboot
    mid-fetch costs no re-hash of finished files); the failures named together."""
    files_state = save.files

    def record(entry):
        with tally.LOCK:
            files_state[entry["path"]] = records.entry_record(
                os.path.join(dest, entry["path"]), entry
            )
            save()

    errors = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        jobs = [pool.submit(fetch_one, source, e, dest, repaired, progress, record) for e in todo]
        for job in jobs:
            try:
                job.result()
            except (FetchError, OSError) as exc:
                errors.append(str(exc))
    try:
        save()
    except OSError:
        if not errors:
            raise
        # (a full disk cannot take the record either; each landed file recorded itself)
    if errors:
        progress.maybe_write(force=True, state="failed")
        raise FetchError("; ".join(errors))


class Saver:
    """The folder's record as this run builds it, saved whole each time."""

    def __init__(self, dest: str, repo: str, revision: str, files: dict):
        self.dest, self.repo, self.revision, self.files = dest, repo, revision, files

    def __call__(self, **extra) -> None:
        doc = {"repo": self.repo, "revision": self.revision, "files": self.files, **extra}
        records.save(self.dest, doc)


def sync(args) -> dict:
    manifest, revision = read_manifest(args)
    dest, others = choose_folder(args.dest, revision)
    token = read_token(args.token_file)
    counter, started = tally.new(), time.time()
    record = records.load(dest)
    # another revision's record proves nothing about this one
    files_state = record.get("files", {}) if record.get("revision") in (None, revision) else {}
    reused = link_unchanged_files(dest, others, manifest, files_state)
    repaired = sweep_strays(dest, {e["path"] for e in manifest})
    verified, todo, fixed = proven_files(
        dest, manifest, revision, files_state, counter, args.rehash
    )
    repaired += fixed
    uploaded = getattr(args, "uploaded", None)
    need = space_checked(dest, todo, args.margin_mib, uploaded)
    total = sum(e["size"] for e in todo)
    progress = Progress(
        getattr(args, "progress", None), args.repo, total=total,
        done=total - need if not uploaded else 0, files=len(todo),
    )  # fmt: skip
    progress.maybe_write(force=True)
    progress.beat()
    save = Saver(dest, args.repo, revision, files_state)
    try:
        fleet, todo = fleet_sources(args, revision, todo)
        if todo:
            source = source_of(args, revision, token, dest, counter, progress, fleet)
            fetch_all(source, todo, dest, args.workers, repaired, progress, save)
        else:
            save()
        shutil.rmtree(os.path.join(dest, PARTIAL), ignore_errors=True)
        if uploaded:
            shutil.rmtree(uploaded, ignore_errors=True)
        progress.refused = list(counter.get("refused_from_peers", []))
        progress.maybe_write(force=True, state="verified")
        check_index(dest, manifest)
        save(index_checked=True)  # only once the index matched: a failed check is never a no-op
        return dict(
            counter,
            files=len(manifest),
            verified_without_download=verified,
            fetched=len(todo),
            retries=progress.retries,
            repaired=repaired,
            reused_from_other_revisions=reused,
            folder=dest,
            started=round(started, 3),
            finished=round(time.time(), 3),
        )
    finally:
        progress.stop()
