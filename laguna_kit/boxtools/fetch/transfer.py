"""Bytes over HTTP from the hub or a fleet peer: Range resumes from the bytes on disk, retries with
backoff for what is transient, the hash fed as the bytes arrive, nothing written past a file's
size."""

from __future__ import annotations

import os
import re
import time

from . import tally
from .errors import FetchError, HashMismatch
from .folder import part_path, place_hashed
from .progress import Progress
from .records import wanted_hash
from .verify import feed_from_file, hasher_for

# A stalled or cut transfer, a reset, a 5xx: worth resuming in the same run (huggingface_hub's
# http_get retries ConnectError, TimeoutException and RemoteProtocolError the same way).
RETRY_STATUS = {408, 429, 500, 502, 503, 504}


class Retryable(Exception):
    pass


def http():
    """The HTTP library of the venv's huggingface_hub (httpx2 from 2.x on, httpx before)."""
    import importlib

    try:
        return importlib.import_module("httpx2")
    except ImportError:  # pragma: no cover - the venv's hub client brings one of them
        return importlib.import_module("httpx")


def is_transient(exc: BaseException) -> bool:
    if isinstance(exc, Retryable):
        return True
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True  # the network's, unwrapped; a local write error (disk full, read-only) is not
    return isinstance(exc, http().TransportError)


def describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if type(exc).__name__ not in text else text


def session():
    from huggingface_hub.utils import get_session

    return get_session()


def timeout(read_s: float):
    return http().Timeout(connect=min(read_s, 30), read=read_s, write=read_s, pool=read_s)


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
        from huggingface_hub.utils import build_hf_headers

        self.url = lambda path: hf_hub_url(repo, path, revision=revision, endpoint=endpoint)
        self.headers = build_hf_headers(token=token or False, library_name="laguna-kit")
        self.session = session()
        self.dest = dest
        self.counter = counter
        self.progress = progress or Progress(None, repo, 0, 0, 0)
        self.retries, self.backoff_max_s = retries, backoff_max_s
        self.read_timeout_s = read_timeout_s
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
                    raise  # the hub's own bytes: the run decides
                names = ", ".join(sorted(used))
                for name in used:
                    self.sources.by_name(name).bad = True
                self.progress.again(entry["size"])
                self.progress.note(
                    error=f"{entry['path']}: hash {exc.found} from fleet peer(s) {names}: "
                    "refused, fetched again without them"
                )
                tally.note(self.counter, "refused_from_peers", f"{entry['path']} (from {names})")

    def _fetch(self, entry: dict, used: set[str]) -> None:
        part = part_path(self.dest, entry)
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
                failures = self._retry_or_fail(entry, part, have, failures, exc)
        got = os.path.getsize(part)
        if got != entry["size"]:
            raise FetchError(
                f"{entry['path']}: transfer ended at {got} of {entry['size']} bytes; re-run to "
                f"resume"
            )
        if fed["n"] != got:  # a part left by an older run, already complete: hash it once
            fed["n"] = feed_from_file(part, fed["n"], fed["h"], self.counter)
        place_hashed(self.dest, part, entry, fed["h"].hexdigest())

    def _retry_or_fail(self, entry, part, have: int, failures: int, exc: Exception) -> int:
        """After a failed attempt from the hub: the failures without progress so far (the count
        starts again when bytes arrived), after the backoff; a permanent error or exhausted
        retries fail the file."""
        if not is_transient(exc):
            raise exc
        now = os.path.getsize(part) if os.path.exists(part) else 0
        failures = 1 if now > have else failures + 1
        self.progress.note(error=f"{entry['path']}: {describe(exc)}")
        if failures > self.retries:
            raise FetchError(
                f"{entry['path']}: {now} of {entry['size']} bytes on disk after "
                f"{failures} attempts without progress; last error: {describe(exc)}; "
                "the bytes are kept: re-run to resume"
            ) from None
        time.sleep(min(self.backoff_max_s, 2 ** (failures - 1)))
        return failures

    def _leave(self, entry: dict, skip: set[str], source, exc: BaseException) -> None:
        """This file goes on from another source than this peer (from the bytes on disk)."""
        skip.add(source[0].name)
        tally.note(
            self.counter, "left_peers", f"{entry['path']} ({source[0].name}: {describe(exc)})"
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
        wait = timeout(self.sources.stall_s if peer else self.read_timeout_s)
        url = source[1] if source else self.url(entry["path"])
        who = f"fleet peer {peer.name}" if peer else "the hub"
        with self.session.stream(
            "GET", url, headers=headers, follow_redirects=not peer, timeout=wait
        ) as resp:
            have = self._judge(resp, entry, have, part, who, peer is not None)
            if fed["n"] != have:  # bytes on disk this process has not hashed yet: read them once
                fed["h"] = hasher_for(entry)
                fed["n"] = feed_from_file(part, 0, fed["h"], self.counter, upto=have)
            self._append(resp, entry, part, have, fed, who, "peer_bytes" if peer else "hub_bytes")
        got = os.path.getsize(part)
        if got < entry["size"]:
            raise Retryable(f"the transfer from {who} ended at {got} of {entry['size']} bytes")

    @staticmethod
    def _judge(resp, entry: dict, have: int, part: str, who: str, peer: bool) -> int:
        """The byte the answer starts at (0: the server ignored Range), or why it is refused."""
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
            return 0  # the server ignored Range: start over
        if resp.status_code not in (200, 206):
            raise FetchError(f"{entry['path']}: HTTP {resp.status_code} from the hub")
        if resp.status_code == 206:
            check_range(entry, have, resp.headers.get("content-range", ""), part)
        return have

    def _append(self, resp, entry: dict, part: str, have: int, fed: dict, who: str, kind: str):
        with open(part, "r+b" if have else "wb") as fh:
            fh.seek(have)
            fh.truncate()
            try:
                for block in resp.iter_bytes():  # as received: a cut transfer keeps every byte
                    # More than the file has (a broken server, a lying peer) is never written
                    # past its size; the part's hash decides the rest.
                    extra = fed["n"] + len(block) - entry["size"]
                    if extra > 0:
                        block = block[: len(block) - extra]
                    fh.write(block)
                    fed["h"].update(block)
                    fed["n"] += len(block)
                    tally.add(
                        self.counter,
                        downloaded_bytes=len(block),
                        hashed_bytes=len(block),
                        **{kind: len(block)},
                    )
                    self.progress.add(len(block))
                    if extra > 0:
                        raise Retryable(f"{who} sent more than the file's {entry['size']} bytes")
            finally:
                fh.flush()
                os.fsync(fh.fileno())
