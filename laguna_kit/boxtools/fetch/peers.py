"""Fleet peers as sources of checkpoint files, for laguna-fetch (run.py).

Each GPU box of a fleet serves its verified checkpoint folders read-only over the tailnet (the
distribution's nginx, tasks/peer_files.py: only fleet members get through the firewall). The
control machine gives a box's fetch a sources file (JSON):

    {"folder": "<checkpoint folder>", "progress": "<name of a fetch's progress record>",
     "peers": [{"name": "<host>", "url": "http://<tailnet address>:<port>"}],
     "owners": {"<file>": "<host>"}, "self": "<host>", "wait_s": 60, "stall_s": 15}

and for each file the fetch asks, in order: a peer whose verification record has this revision's
file with the hub's hash; else, when the file's owner (the box of this run that fetches it from the
hub) is another box still fetching, that box once it has it; else the hub. What a peer says only
chooses where to ask: every byte is hashed against the control machine's manifest (the hub's
metadata), so a peer cannot poison a box, and a peer that served a wrong file is not asked again.
"""

from __future__ import annotations

import threading
import time
from urllib.parse import quote

from ..layout import STASH, VERIFIED_RECORD

POLL_S = 1.0
DOWN_S = 60.0  # a peer that did not answer is not asked again for this long


class Peer:
    def __init__(self, name: str, url: str):
        self.name, self.url = name, url.rstrip("/")
        self.lock = threading.Lock()
        self.bad = False  # served bytes that failed the hash: never asked again in this run
        self.records: dict[str, dict] = {}  # base path -> its verification record
        self.read_at = 0.0
        self.progress_seen: tuple[int, float] | None = None  # (its done_bytes, when they grew)
        self.first_wait: float | None = None  # when this fetch first waited for it
        self.down_until = 0.0  # did not answer (a firewall that does not know this box yet)


class Sources:
    """Which fleet peer to ask for a file, best first; the hub when none fits (returns None)."""

    def __init__(self, doc: dict, revision: str, session, timeout):
        self.folder = doc["folder"]
        self.revision = revision
        self.progress_name = doc.get("progress", "")
        self.peers = [Peer(p["name"], p["url"]) for p in doc.get("peers", [])]
        self.owners = dict(doc.get("owners", {}))
        self.me = doc.get("self", "")
        self.wait_s = float(doc.get("wait_s", 60))
        self.stall_s = float(doc.get("stall_s", 15))
        # however it says it goes on, no owner is waited for longer than this: then the hub
        self.max_wait_s = float(doc.get("max_wait_s", 1800))
        self.session, self.timeout = session, timeout
        # Where a peer keeps this revision: its live folder, or the stash of kept revisions.
        self.bases = [quote(self.folder), f"{STASH}/{quote(self.folder)}@{revision}"]

    def by_name(self, name: str) -> Peer | None:
        return next((p for p in self.peers if p.name == name), None)

    def _get_json(self, url: str):
        """(status, document): status 0 when the peer does not answer at all."""
        try:
            resp = self.session.get(url, timeout=self.timeout)
        except Exception:  # noqa: BLE001 - a peer that does not answer is simply not a source
            return 0, None
        if resp.status_code != 200:
            return resp.status_code, None
        try:
            return 200, resp.json()
        except ValueError:
            return 200, None

    def _records(self, peer: Peer) -> dict[str, dict]:
        """The peer's verification records of this revision, read at most once a second (the
        fetch's threads share one read)."""
        with peer.lock:
            now = time.monotonic()
            if now < peer.down_until:
                return {}
            if now - peer.read_at >= POLL_S:
                records = {}
                for base in self.bases:
                    status, doc = self._get_json(f"{peer.url}/{base}/{VERIFIED_RECORD}")
                    if status == 0:
                        peer.down_until = time.monotonic() + DOWN_S
                        break
                    if isinstance(doc, dict) and doc.get("revision") == self.revision:
                        files = doc.get("files")
                        records[base] = files if isinstance(files, dict) else {}
                peer.records, peer.read_at = records, time.monotonic()
            return peer.records

    def holder(self, path: str, want: str, skip: set[str]) -> tuple[Peer, str] | None:
        """A peer (and the file's URL there) whose record says it has this file verified."""
        for peer in self.peers:
            if peer.bad or peer.name in skip:
                continue
            for base, files in self._records(peer).items():
                rec = files.get(path)
                if isinstance(rec, dict) and rec.get("hash") == want:
                    return peer, f"{peer.url}/{base}/{quote(path)}"
        return None

    def owner_fetching(self, owner: Peer) -> bool:
        """The owner still fetches this checkpoint: its progress record says "running" and its
        bytes grew within stall_s (a record kept fresh while no byte comes is a fetch that
        stalled); before its first record, for wait_s from the first time this fetch waited for
        it (it may start a moment after this box); never past max_wait_s of waiting for it. A
        peer that does not answer is not fetching."""
        if time.monotonic() < owner.down_until:
            return False
        status, doc = self._get_json(f"{owner.url}/_progress/{quote(self.progress_name)}")
        now = time.monotonic()
        with owner.lock:
            if owner.first_wait is None:
                owner.first_wait = now
        if status == 0 or now - owner.first_wait > self.max_wait_s:
            return False
        if not isinstance(doc, dict):
            return now - owner.first_wait < self.wait_s
        done = doc.get("done_bytes")
        if doc.get("state") != "running" or not isinstance(done, int):
            return False
        seen = owner.progress_seen
        if seen is None or done > seen[0]:
            owner.progress_seen = (done, now)
            return True
        return now - seen[1] < self.stall_s

    def pick(self, path: str, want: str, skip: set[str]):
        """(peer, url) to fetch `path` from, or None for the hub. Waits while the file's owner
        is another box still fetching it; `skip` holds peers that failed this file."""
        while True:
            found = self.holder(path, want, skip)
            if found:
                return found
            owner = self.by_name(self.owners.get(path, ""))
            if owner is None or owner.bad or owner.name in skip or owner.name == self.me:
                return None
            if not self.owner_fetching(owner):
                return None
            time.sleep(POLL_S)
