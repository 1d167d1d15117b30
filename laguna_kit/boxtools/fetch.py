"""laguna-fetch: put one pinned checkpoint into a folder, every file checked against the hub's
hashes.

Installed on the box by tasks/box_tools.py, started by tasks/download.py (waited for by
tasks/models.py) in a transient unit, in the kit's venv (huggingface_hub). The control machine
sends the manifest it read from the hub's own metadata (path, size, LFS sha256 or git blob id per
file); this script:

- skips files whose verified-state record still matches their stat (size, mtime, inode): a
  converged re-run hashes nothing;
- hashes present files without a matching record;
- downloads missing or wrong files with HTTP Range into ``.laguna-partial/<file>.part``, resuming a
  killed transfer from the bytes on disk, and renames a file into place only after its hash
  matched, so a half file never looks complete;
- hashes bytes as they arrive (a resumed part's existing bytes once), so a download needs no second
  read pass;
- resumes a timeout, a reset or an HTTP 5xx within the same run, with bounded retries and backoff
  (as huggingface_hub's own ``http_get`` does: the count starts again whenever bytes arrived); only
  exhausted retries fail, naming the file, the bytes on disk and the last error;
- writes its progress (bytes done / total, rate, ETA) to ``--progress`` every few seconds, read by
  the deploy while it waits and by tasks/status.py;
- quarantines a mismatching file (``.laguna-quarantine/``) and fetches it once more; a second
  mismatch fails with the file name and both hashes;
- checks that model.safetensors.index.json names exactly the shards present;
- checks free space before the first byte;
- keeps another revision's folder whole for rollback (revisions.py) and hard-links the files
  a new revision did not change;
- offline (``--uploaded DIR``): verifies the files the control machine pushed from its mirror the
  same way, instead of downloading.

Prints one JSON summary line on stdout; errors go to stderr with exit code 2. The hub token is read
from a 0600 file (``--token-file``), never from argv or the environment of another process.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import errno
import hashlib
import json
import os
import re
import shutil
import sys
import threading
import time

from . import names, peers, revisions
from .layout import PARTIAL, QUARANTINE, VERIFIED_RECORD

CHUNK = 1 << 20
LOCK = threading.Lock()


class FetchError(Exception):
    pass


HASH_CHUNK = 8 << 20  # reads of a file on disk: large enough that Python's overhead vanishes


def hasher_for(entry: dict):
    """The hub's kind of hash for this file, ready to be fed its bytes in order."""
    if entry.get("sha256"):
        return hashlib.sha256()
    return hashlib.sha1(b"blob %d\0" % entry["size"])


def wanted_hash(entry: dict) -> str:
    """The hub's hash of this file: its LFS sha256, else its git blob id."""
    return entry.get("sha256") or entry["blob_id"]


def content_ok(path: str, entry: dict, counter: dict) -> tuple[bool, str]:
    """(matches, the hash found) for the hub's kind of hash: LFS sha256, else git blob sha1."""
    if os.path.getsize(path) != entry["size"]:
        return False, f"size {os.path.getsize(path)}"
    h = hasher_for(entry)
    feed_from_file(path, 0, h, counter)
    return h.hexdigest() == wanted_hash(entry), h.hexdigest()


def hashed_in_parallel(dest: str, entries: list[dict], counter: dict) -> list[tuple[bool, str]]:
    """content_ok for files on disk, a file per core: hashlib (OpenSSL, SHA-NI where the CPU has
    it) lets go of the GIL while it hashes."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        return list(
            pool.map(lambda e: content_ok(os.path.join(dest, e["path"]), e, counter), entries)
        )


def stat_record(path: str) -> dict:
    st = os.stat(path)
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "inode": st.st_ino}


def load_state(dest: str) -> dict:
    try:
        with open(os.path.join(dest, VERIFIED_RECORD)) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return {}


def save_state(dest: str, state: dict) -> None:
    tmp = os.path.join(dest, VERIFIED_RECORD + ".tmp")
    with open(tmp, "w") as fh:
        json.dump(state, fh, indent=1, sort_keys=True)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, os.path.join(dest, VERIFIED_RECORD))


def recorded_ok(state: dict, revision: str, dest: str, entry: dict) -> bool:
    rec = state.get("files", {}).get(entry["path"])
    path = os.path.join(dest, entry["path"])
    if not rec or state.get("revision") != revision or not os.path.isfile(path):
        return False
    want = wanted_hash(entry)
    return rec.get("hash") == want and {
        k: rec.get(k) for k in ("size", "mtime_ns", "inode")
    } == stat_record(path)


# A stalled or cut transfer, a reset, a 5xx: worth resuming in the same run (huggingface_hub's
# http_get retries ConnectError, TimeoutException and RemoteProtocolError the same way).
RETRY_STATUS = {408, 429, 500, 502, 503, 504}


class Retryable(Exception):
    pass


def is_transient(exc: BaseException) -> bool:
    if isinstance(exc, Retryable):
        return True
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True  # the network's, unwrapped; a local write error (disk full, read-only) is not
    return isinstance(exc, _http().TransportError)


def _http():
    """The HTTP library of the venv's huggingface_hub (httpx2 from 2.x on, httpx before)."""
    try:
        import httpx2 as http
    except ImportError:  # pragma: no cover - the venv's hub client brings one of them
        import httpx as http
    return http


def describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if type(exc).__name__ not in text else text


class Progress:
    """Bytes done / total for the whole checkpoint, written as JSON to a file every 2 s whether or
    not bytes arrive (atomically: a reader never sees half a record). A fresh record with an old
    `last_byte` is a silent transfer; a stale record is a fetch that no longer runs."""

    def __init__(self, path: str | None, repo: str, total: int, done: int, files: int):
        self.path, self.repo = path, repo
        self.total, self.done, self.files, self.files_done = total, done, files, 0
        self.retries, self.last_error = 0, ""
        self.started = time.time()
        self.window = [(time.monotonic(), done)]  # (time, done) samples for the rate
        self.written = 0.0
        self.last_byte = time.time()
        self.state = "running"
        self._beating = threading.Event()

    def beat(self, every: float = 2.0) -> None:
        """Write the record every `every` seconds until stop(): while every transfer is silent
        (a stalled CDN, a slow hub) the record stays fresh and says how long no byte came."""
        if not self.path:
            return

        def loop():
            while not self._beating.wait(every):
                self.maybe_write(force=True)

        threading.Thread(target=loop, daemon=True, name="progress").start()

    def stop(self) -> None:
        self._beating.set()

    def add(self, n: int) -> None:
        with LOCK:
            self.done += n
            self.last_byte = time.time()
        self.maybe_write()

    def note(self, *, file_done: bool = False, error: str = "") -> None:
        with LOCK:
            self.files_done += file_done
            if error:
                self.retries += 1
                self.last_error = error
        self.maybe_write(force=True)

    def rate(self) -> float:
        now = time.monotonic()
        with LOCK:
            self.window.append((now, self.done))
            while len(self.window) > 2 and now - self.window[0][0] > 20:
                self.window.pop(0)
            (t0, d0), (t1, d1) = self.window[0], self.window[-1]
        return (d1 - d0) / (t1 - t0) if t1 > t0 else 0.0

    def record(self, state: str = "running") -> dict:
        rate = self.rate()
        left = max(self.total - self.done, 0)
        return {
            "repo": self.repo,
            "state": state,
            "done_bytes": self.done,
            "total_bytes": self.total,
            "rate_bps": round(rate),
            "eta_s": round(left / rate) if rate > 0 else None,
            "files_done": self.files_done,
            "files": self.files,
            "retries": self.retries,
            "last_error": self.last_error,
            "started": round(self.started, 3),
            "updated": round(time.time(), 3),
            "last_byte": round(self.last_byte, 3),
            "pid": os.getpid(),
        }

    def maybe_write(self, force: bool = False, state: str | None = None) -> None:
        if state:  # the heartbeat writes whatever the fetch last said (never "running" again)
            self.state = state
        if not self.path or (not force and time.monotonic() - self.written < 2):
            return
        self.written = time.monotonic()
        tmp = f"{self.path}.{threading.get_ident()}.tmp"
        try:
            with open(tmp, "w") as fh:
                json.dump(self.record(self.state), fh)
            os.replace(tmp, self.path)
        except OSError:
            pass  # progress is for people; a full /run never fails the download


class Downloader:
    def __init__(
        self,
        endpoint: str,
        repo: str,
        revision: str,
        token: str | None,
        dest: str,
        counter: dict,
        progress: Progress | None = None,
        retries: int = 5,
        backoff_max_s: float = 60,
        read_timeout_s: float = 60,
        sources=None,
    ):
        from huggingface_hub import hf_hub_url
        from huggingface_hub.utils import build_hf_headers, get_session

        self.url = lambda path: hf_hub_url(repo, path, revision=revision, endpoint=endpoint)
        self.headers = build_hf_headers(token=token or False, library_name="laguna-kit")
        self.session = get_session()
        self.dest = dest
        self.counter = counter
        self.progress = progress or Progress(None, repo, 0, 0, 0)
        self.retries, self.backoff_max_s, self.read_timeout_s = (
            retries,
            backoff_max_s,
            read_timeout_s,
        )
        self.sources = sources

    def fetch(self, entry: dict) -> None:
        """Download (resuming, retrying transient errors) into the partial folder, hashing as the
        bytes arrive, then move into place if the hash matched. With fleet peers (peers.py) the
        bytes come from a peer that has the file verified where one does; a peer that stops
        answering is left for the next source, which resumes from the bytes on disk; a file a peer
        contributed to that fails its hash is quarantined and fetched again without that peer."""
        while True:
            used: set[str] = set()  # the fleet peers whose bytes went into this attempt
            try:
                return self._fetch(entry, used)
            except HashMismatch as exc:
                if not used:
                    raise  # the hub's own bytes: fetch_once decides
                names = ", ".join(sorted(used))
                for name in used:
                    self.sources.by_name(name).bad = True
                self.progress.note(
                    error=f"{entry['path']}: hash {exc.found} from fleet peer(s) {names}: "
                    "refused, fetched again without them"
                )
                with LOCK:
                    self.counter.setdefault("refused_from_peers", []).append(
                        f"{entry['path']} (from {names})"
                    )

    def _fetch(self, entry: dict, used: set[str]) -> None:
        part = os.path.join(self.dest, PARTIAL, entry["path"] + ".part")
        os.makedirs(os.path.dirname(part), exist_ok=True)
        if os.path.exists(part) and os.path.getsize(part) > entry["size"]:
            os.unlink(part)
        # The hash so far and how many of the part's bytes it has seen, kept across attempts.
        fed = {"h": hasher_for(entry), "n": 0}
        failures = 0
        skip: set[str] = set()  # peers that failed this file: the next source resumes
        while True:
            have = os.path.getsize(part) if os.path.exists(part) else 0
            source = None
            try:
                if have < entry["size"]:
                    source = self.source_for(entry, skip)
                    if source:
                        used.add(source[0].name)
                    self.transfer(entry, part, have, fed, source)
                break
            except FetchError as exc:
                if source is None:
                    raise
                self._leave(entry, skip, source, exc)  # a peer's bad answer never fails the file
            except Exception as exc:  # noqa: BLE001 - judged by is_transient below
                if source is not None:  # a peer that died, stalled or lost the file
                    self._leave(entry, skip, source, exc)
                    continue
                if not is_transient(exc):
                    raise
                now = os.path.getsize(part) if os.path.exists(part) else 0
                failures = 1 if now > have else failures + 1  # bytes arrived: count afresh
                self.progress.note(error=f"{entry['path']}: {describe(exc)}")
                if failures > self.retries:
                    raise FetchError(
                        f"{entry['path']}: {now} of {entry['size']} bytes on disk after "
                        f"{failures} attempts without progress; last error: {describe(exc)}; "
                        "the bytes are kept: re-run to resume"
                    ) from None
                time.sleep(min(self.backoff_max_s, 2 ** (failures - 1)))
        got = os.path.getsize(part)
        if got != entry["size"]:
            raise FetchError(
                f"{entry['path']}: transfer ended at {got} of {entry['size']} bytes; re-run to "
                f"resume"
            )
        if fed["n"] != got:  # a part left by an older run, already complete: hash it once
            fed["n"] = feed_from_file(part, fed["n"], fed["h"], self.counter)
        place_hashed(self.dest, part, entry, fed["h"].hexdigest())

    def _leave(self, entry: dict, skip: set[str], source, exc: BaseException) -> None:
        """This file goes on from another source than this peer (from the bytes on disk)."""
        skip.add(source[0].name)
        with LOCK:
            self.counter.setdefault("left_peers", []).append(
                f"{entry['path']} ({source[0].name}: {describe(exc)})"
            )
        self.progress.note(
            error=f"{entry['path']}: fleet peer {source[0].name}: {describe(exc)}; "
            "going on from another source"
        )

    def source_for(self, entry: dict, skip: set[str]):
        """(peer, url) or None (the hub)."""
        if self.sources is None:
            return None
        return self.sources.pick(entry["path"], wanted_hash(entry), skip)

    def transfer(self, entry: dict, part: str, have: int, fed: dict, source=None) -> None:
        """One HTTP request from byte `have`, appending to the part and feeding `fed` as the
        bytes arrive. A peer gets no hub token and a shorter silence before it is left."""
        peer = source[0] if source else None
        headers = {} if peer else dict(self.headers)
        if have:
            headers["Range"] = f"bytes={have}-"
        timeout = _timeout(self.sources.stall_s if peer else self.read_timeout_s)
        url = source[1] if source else self.url(entry["path"])
        who = f"fleet peer {peer.name}" if peer else "the hub"
        with self.session.stream(
            "GET", url, headers=headers, follow_redirects=not peer, timeout=timeout
        ) as resp:
            if peer and resp.status_code not in (200, 206):
                raise Retryable(f"HTTP {resp.status_code} from {who}")
            if resp.status_code in (401, 403):
                raise FetchError(
                    f"{entry['path']}: the hub refused the download (HTTP {resp.status_code}); "
                    "check the token's access to this repository"
                )
            if resp.status_code in RETRY_STATUS:
                raise Retryable(f"HTTP {resp.status_code} from the hub")
            if resp.status_code == 200 and have:
                have = 0  # the server ignored Range: start over
            elif resp.status_code not in (200, 206):
                raise FetchError(f"{entry['path']}: HTTP {resp.status_code} from the hub")
            elif resp.status_code == 206:
                check_range(entry, have, resp.headers.get("content-range", ""), part)
            if fed["n"] != have:  # bytes on disk this process has not hashed yet: read them once
                fed["h"] = hasher_for(entry)
                fed["n"] = feed_from_file(part, 0, fed["h"], self.counter, upto=have)
            kind = "peer_bytes" if peer else "hub_bytes"
            with open(part, "r+b" if have else "wb") as fh:
                fh.seek(have)
                fh.truncate()
                try:
                    for block in resp.iter_bytes():  # as received: a cut transfer keeps every byte
                        # More than the file has (a broken server, a lying peer) is never
                        # written past its size; the part's hash decides the rest.
                        extra = fed["n"] + len(block) - entry["size"]
                        if extra > 0:
                            block = block[: len(block) - extra]
                        fh.write(block)
                        fed["h"].update(block)
                        fed["n"] += len(block)
                        with LOCK:
                            self.counter["downloaded_bytes"] += len(block)
                            self.counter["hashed_bytes"] += len(block)
                            self.counter[kind] = self.counter.get(kind, 0) + len(block)
                        self.progress.add(len(block))
                        if extra > 0:
                            raise Retryable(
                                f"{who} sent more than the file's {entry['size']} bytes"
                            )
                finally:
                    fh.flush()
                    os.fsync(fh.fileno())
        got = os.path.getsize(part)
        if got < entry["size"]:
            raise Retryable(f"the transfer from {who} ended at {got} of {entry['size']} bytes")


def _http_session():
    from huggingface_hub.utils import get_session

    return get_session()


def _timeout(read_s: float):
    return _http().Timeout(connect=min(read_s, 30), read=read_s, write=read_s, pool=read_s)


def feed_from_file(path: str, start: int, h, counter: dict, upto: int | None = None) -> int:
    """Feed h the file's bytes from `start` (to `upto`); returns the position reached."""
    pos = start
    with open(path, "rb") as fh:
        fh.seek(start)
        while upto is None or pos < upto:
            block = fh.read(HASH_CHUNK if upto is None else min(HASH_CHUNK, upto - pos))
            if not block:
                break
            h.update(block)
            pos += len(block)
            with LOCK:
                counter["hashed_bytes"] += len(block)
    return pos


def check_range(entry: dict, have: int, content_range: str, part: str) -> None:
    """A 206 must continue exactly where the part ends, for this file's size: anything else
    would splice other bytes in (a proxy's range, another file's length)."""
    m = re.fullmatch(r"bytes (\d+)-(\d+)/(\d+|\*)", content_range.strip())
    if m and int(m.group(1)) == have and m.group(3) in ("*", str(entry["size"])):
        return
    os.unlink(part)
    raise FetchError(
        f"{entry['path']}: asked to resume at byte {have}, the hub answered Content-Range "
        f"{content_range!r} (size {entry['size']} expected): the part was discarded; "
        "re-run to fetch it whole"
    )


class Uploaded:
    """Offline: the files the control machine pushed from its mirror, verified exactly like
    downloads."""

    def __init__(self, upload_dir: str, dest: str, counter: dict):
        self.upload_dir, self.dest, self.counter = upload_dir, dest, counter

    def fetch(self, entry: dict) -> None:
        src = os.path.join(self.upload_dir, entry["path"])
        if not os.path.isfile(src):
            raise FetchError(f"{entry['path']}: not among the files pushed from the mirror")
        if os.path.getsize(src) != entry["size"]:
            raise FetchError(
                f"{entry['path']}: the mirror's copy is {os.path.getsize(src)} bytes, the hub "
                f"recorded "
                f"{entry['size']}: fix the mirror (scripts/mirror_checkpoints.py checks it)"
            )
        try:
            place(self.dest, src, entry, self.counter)
        except HashMismatch as exc:
            want = wanted_hash(entry)
            raise FetchError(
                f"{entry['path']}: the mirror's copy has hash {exc.found}, the hub recorded "
                f"{want}: "
                "quarantined; fix the mirror (scripts/mirror_checkpoints.py checks it)"
            ) from None


def place(dest: str, part: str, entry: dict, counter: dict) -> None:
    """Move a complete file into place only after its hash matched: a bad one is quarantined."""
    place_hashed(dest, part, entry, content_ok(part, entry, counter)[1])


def place_hashed(dest: str, part: str, entry: dict, found: str) -> None:
    """As place(), for a file hashed while it arrived."""
    if found != wanted_hash(entry):
        quarantine(dest, part, entry["path"] + ".download")
        raise HashMismatch(entry, found)
    move_into_place(dest, part, entry)


def move_into_place(dest: str, part: str, entry: dict) -> None:
    final = os.path.join(dest, entry["path"])
    os.makedirs(os.path.dirname(final), exist_ok=True)
    os.chmod(part, 0o644)
    os.replace(part, final)


class HashMismatch(FetchError):
    def __init__(self, entry, found):
        self.entry, self.found = entry, found
        want = wanted_hash(entry)
        super().__init__(f"{entry['path']}: hash {found} does not match the hub's {want}")


def quarantine(dest: str, path: str, name: str) -> str:
    qdir = os.path.join(dest, QUARANTINE)
    os.makedirs(qdir, exist_ok=True)
    target = os.path.join(qdir, f"{name.replace('/', '__')}.{int(time.time())}")
    os.replace(path, target)
    return target


def disk_full(dest: str, entry: dict) -> FetchError:
    """ENOSPC mid-transfer, with the numbers: the part file stays where it never looks complete."""
    part = os.path.join(dest, PARTIAL, entry["path"] + ".part")
    got = os.path.getsize(part) if os.path.exists(part) else 0
    free = shutil.disk_usage(dest).free
    return FetchError(
        f"{entry['path']}: disk full at {dest} ({free >> 20} MiB free) after {got} of "
        f"{entry['size']} "
        f"bytes; the part stays in {PARTIAL}/ and is never taken for the file: free at least "
        f"{(entry['size'] - got + (1 << 20) - 1) >> 20} MiB more and re-run to resume"
    )


def check_index(dest: str, manifest: list[dict]) -> None:
    listed = {e["path"] for e in manifest}
    index_name = "model.safetensors.index.json"
    shards = {n for n in listed if n.endswith(".safetensors")}
    if index_name not in listed:
        return
    with open(os.path.join(dest, index_name)) as fh:
        referenced = set(json.load(fh).get("weight_map", {}).values())
    for name in referenced:
        try:
            names.inside(dest, name)
        except names.UnsafeName as exc:
            raise FetchError(f"{index_name}: {exc}") from None
    missing = sorted(referenced - {n for n in shards if os.path.isfile(os.path.join(dest, n))})
    if missing:
        raise FetchError(f"{index_name} names shards that are not present: {', '.join(missing)}")
    unreferenced = sorted(shards - referenced)
    if unreferenced:
        raise FetchError(f"{index_name} does not name these shards: {', '.join(unreferenced)}")


def link_unchanged_files(
    dest: str, sources: list[str], manifest: list[dict], files_state: dict
) -> int:
    """Hard-link files whose hash is unchanged from another revision's folder (the live one, the
    kept ones): a new revision downloads only what really changed. Files are only ever replaced by
    rename, never written in place, so sharing an inode is safe; a changed stat means a re-hash."""
    linked = 0
    for old in sources:
        old_state = load_state(old)
        by_hash = {rec.get("hash"): name for name, rec in old_state.get("files", {}).items()}
        for entry in manifest:
            want = wanted_hash(entry)
            path = os.path.join(dest, entry["path"])
            name = by_hash.get(want)
            if name is None or entry["path"] in files_state or os.path.exists(path):
                continue
            src = os.path.join(old, name)
            if not recorded_ok(old_state, old_state.get("revision"), old, dict(entry, path=name)):
                continue
            os.makedirs(os.path.dirname(path), exist_ok=True)
            os.link(src, path)
            files_state[entry["path"]] = dict(stat_record(path), hash=want)
            linked += 1
    return linked


def sync(args) -> dict:
    with open(args.manifest) as fh:
        manifest_doc = json.load(fh)
    manifest, revision = manifest_doc["files"], manifest_doc["revision"]
    if not isinstance(revision, str) or not re.fullmatch(r"[0-9a-f]{40}", revision):
        raise FetchError(f"the manifest for {args.repo}: revision {revision!r} is not a commit")
    for entry in manifest:  # before anything is written: a name must stay inside dest
        try:
            names.safe_name(entry["path"])
        except names.UnsafeName as exc:
            raise FetchError(f"the manifest for {args.repo}: {exc}; nothing was written") from None
    # A new revision is fetched beside the live one (which the running release mounts), into the
    # folder the release manager swaps in when that revision's release is activated: an
    # interrupted fetch never leaves the current release other or partial weights.
    live = args.dest
    have = revisions.recorded_revision(live)
    dest = live if have in (None, revision) else revisions.stash_path(live, revision)
    os.makedirs(dest, exist_ok=True)
    sources = [
        f for f in [live, *revisions.stashed(live)] if os.path.normpath(f) != os.path.normpath(dest)
    ]
    token = None
    if args.token_file and os.path.exists(args.token_file):
        with open(args.token_file) as fh:
            token = fh.read().strip() or None
        os.unlink(args.token_file)  # read once: gone even if no one waits for this run
    counter = {"downloaded_bytes": 0, "hashed_bytes": 0, "hub_bytes": 0, "peer_bytes": 0}
    started = time.time()
    state = load_state(dest)
    if state.get("revision") not in (None, revision):
        state = {}  # another revision's record proves nothing about this one
    files_state = state.get("files", {})
    state = {"revision": revision, "files": files_state}
    todo, verified, repaired = [], 0, []
    reused = link_unchanged_files(dest, sources, manifest, files_state)

    # Stray shards (another revision's, a renamed copy) would confuse the loader: move them aside.
    wanted = {e["path"] for e in manifest}
    for name in sorted(os.listdir(dest)):
        if (
            name.endswith(".safetensors")
            and name not in wanted
            and os.path.isfile(os.path.join(dest, name))
        ):
            quarantine(dest, os.path.join(dest, name), name)
            repaired.append(f"{name} (not in this revision: quarantined)")

    to_hash = []
    for entry in manifest:
        if not args.rehash and recorded_ok(state, revision, dest, entry):
            verified += 1
        elif os.path.isfile(os.path.join(dest, entry["path"])):
            to_hash.append(entry)
        else:
            todo.append(entry)
    for entry, (ok, found) in zip(to_hash, hashed_in_parallel(dest, to_hash, counter)):
        path = os.path.join(dest, entry["path"])
        if ok:
            files_state[entry["path"]] = dict(stat_record(path), hash=wanted_hash(entry))
            verified += 1
            continue
        quarantine(dest, path, entry["path"])
        repaired.append(
            f"{entry['path']} (found {found}, expected {wanted_hash(entry)}: quarantined, "
            "fetched again)"
        )
        todo.append(entry)

    uploaded = getattr(args, "uploaded", None)
    need = 0
    for entry in todo if not uploaded else ():  # pushed files are on this filesystem already
        part = os.path.join(dest, PARTIAL, entry["path"] + ".part")
        need += entry["size"] - (
            min(os.path.getsize(part), entry["size"]) if os.path.exists(part) else 0
        )
    free = shutil.disk_usage(dest).free
    margin = args.margin_mib << 20
    if need and free < need + margin:
        raise FetchError(
            f"not enough space at {dest}: {free >> 20} MiB free, {need >> 20} MiB still to "
            f"download "
            f"plus {args.margin_mib} MiB margin; nothing was downloaded"
        )

    progress = Progress(
        getattr(args, "progress", None),
        args.repo,
        total=sum(e["size"] for e in todo),
        done=sum(e["size"] for e in todo) - need if not uploaded else 0,
        files=len(todo),
    )
    progress.maybe_write(force=True)
    progress.beat()
    fleet = None
    if getattr(args, "sources", None) and not uploaded:
        with open(args.sources) as fh:
            doc = json.load(fh)
        # (a peer on the tailnet answers a connection at once, or is not there)
        probe = _http().Timeout(5, read=float(doc.get("stall_s", 15)))
        fleet = peers.Sources(doc, revision, _http_session(), probe)
        # The files this box fetches from the hub first: a file another box of the run owns is
        # waited for, and by then it is usually on that box.
        mine = {p for p, owner in fleet.owners.items() if owner in ("", fleet.me)}
        todo.sort(key=lambda e: e["path"] not in mine and e["path"] in fleet.owners)
    try:
        if todo:
            dl = (
                Uploaded(uploaded, dest, counter)
                if uploaded
                else Downloader(
                    args.endpoint,
                    args.repo,
                    revision,
                    token,
                    dest,
                    counter,
                    progress,
                    retries=getattr(args, "retries", 5),
                    backoff_max_s=getattr(args, "backoff_max_s", 60),
                    read_timeout_s=getattr(args, "read_timeout_s", 60),
                    sources=fleet,
                )
            )

            def one(entry):
                try:
                    fetch_once(entry)
                except FetchError:
                    raise
                except (
                    Exception
                ) as exc:  # an interrupted transfer: keep the bytes, say how to resume
                    if getattr(exc, "errno", None) == errno.ENOSPC:
                        raise disk_full(dest, entry) from None
                    raise FetchError(
                        f"{entry['path']}: transfer interrupted ({exc}); the bytes received are "
                        "kept: re-run to resume"
                    ) from None

            def fetch_once(entry):
                try:
                    dl.fetch(entry)
                except HashMismatch as first:
                    try:
                        dl.fetch(
                            entry
                        )  # once more, from scratch (the bad download was quarantined)
                    except HashMismatch as second:
                        want = wanted_hash(entry)
                        raise FetchError(
                            f"{entry['path']}: fetched twice, both wrong: got {first.found} then "
                            f"{second.found}, the hub's hash is {want}"
                        ) from None
                    repaired.append(f"{entry['path']} (download had {first.found}: fetched again)")
                path = os.path.join(dest, entry["path"])
                progress.note(file_done=True)
                with LOCK:
                    files_state[entry["path"]] = dict(stat_record(path), hash=wanted_hash(entry))
                    # Recorded as each file lands: a reboot mid-fetch costs no re-hash of finished
                    # files.
                    save_state(
                        dest, {"repo": args.repo, "revision": revision, "files": files_state}
                    )

            errors = []
            with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.workers)) as pool:
                for fut in [pool.submit(one, e) for e in todo]:
                    try:
                        fut.result()
                    except (FetchError, OSError) as exc:
                        errors.append(str(exc))
            try:
                save_state(dest, {"repo": args.repo, "revision": revision, "files": files_state})
            except OSError:
                if not errors:
                    raise
                # (a full disk cannot take the record either; each landed file recorded itself)
            if errors:
                progress.maybe_write(force=True, state="failed")
                raise FetchError("; ".join(errors))
        else:
            save_state(dest, {"repo": args.repo, "revision": revision, "files": files_state})
        shutil.rmtree(os.path.join(dest, PARTIAL), ignore_errors=True)
        if uploaded:
            shutil.rmtree(uploaded, ignore_errors=True)
        progress.maybe_write(force=True, state="verified")
        check_index(dest, manifest)
        # Recorded only once the index matched: a failed index check is never a no-op next run.
        save_state(
            dest,
            {"repo": args.repo, "revision": revision, "files": files_state, "index_checked": True},
        )
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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repo", required=True)
    p.add_argument(
        "--manifest", required=True, help="JSON from the control machine: revision + files"
    )
    p.add_argument("--dest", required=True)
    p.add_argument("--endpoint", help="the hub (or a mirror of its HTTP API)")
    p.add_argument(
        "--uploaded",
        help="offline: verify the files pushed into this folder instead of downloading",
    )
    p.add_argument("--token-file")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--margin-mib", type=int, default=1024)
    p.add_argument("--progress", help="write bytes done / total, rate and ETA here as JSON")
    p.add_argument(
        "--retries", type=int, default=5, help="attempts per file without progress before failing"
    )
    p.add_argument("--backoff-max-s", type=float, default=60, help="longest wait between attempts")
    p.add_argument(
        "--read-timeout-s", type=float, default=60, help="a stall longer than this is retried"
    )
    p.add_argument(
        "--sources",
        help="JSON from the control machine: fleet peers to fetch verified files from first",
    )
    p.add_argument(
        "--rehash", action="store_true", help="ignore the verification record: hash every file"
    )
    args = p.parse_args(argv)
    try:
        summary = sync(args)
    except FetchError as exc:
        print(f"laguna-fetch: {args.repo}: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        where = exc.filename or args.dest
        if exc.errno == errno.ENOSPC:
            free = shutil.disk_usage(args.dest).free >> 20 if os.path.isdir(args.dest) else "?"
            print(
                f"laguna-fetch: {args.repo}: disk full at {args.dest} ({free} MiB free) writing "
                f"{where}: free "
                "space and re-run (verified files are kept)",
                file=sys.stderr,
            )
        else:
            print(f"laguna-fetch: {args.repo}: {exc.strerror or exc} ({where})", file=sys.stderr)
        return 2
    print(json.dumps(dict(summary, repo=args.repo)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
