"""STAND-IN Hugging Face hub endpoint (laguna-kit test harness).

Speaks the part of the hub's HTTP API that the real ``huggingface_hub`` client uses when pointed at
it with ``HF_ENDPOINT``: model info (``blobs=true`` gives sizes and LFS sha256), the recursive tree,
``paths-info``, and ``resolve`` with ``X-Repo-Commit`` / ``ETag`` / ``X-Linked-*`` headers and HTTP
Range. Repos are small generated stand-ins named like the real ones, pinned at the real commits.

Test controls (not part of the hub API), under ``/_standin/``:
- ``GET stats``        bytes served per file since the last reset; ``POST reset`` (faults and
                       the link's rate too);
- ``POST faults``      JSON ``{"cut": {"<path>": bytes}}``: the next download of that file is cut
                       after that many bytes (a killed transfer), ``{"corrupt": {"<path>": true}}``:
                       served bytes are flipped while the metadata stays right (a bad mirror),
                       ``{"slow": {"<path>": bytes_per_second}}``: that file is served slowly until
                       the next reset (a long transfer to interrupt),
                       ``{"stall": {"<path>": [bytes, seconds]}}``: the next download of that file
                       stops sending after that many bytes and keeps the connection open, silent,
                       for that long, then closes it (a hub or proxy that hangs mid-shard),
                       ``{"status": {"<path>": [code, times]}}``: the next `times` downloads of that
                       file answer that HTTP status (a 503 from an overloaded CDN node),
                       ``{"hold": {"<path>": true}}``: that file trickles (1 KiB each half second,
                       so no read timeout fires) until ``{"hold": {"<path>": false}}`` or a reset (a
                       download a test lets finish when it has seen what it waits for);
- ``POST rate``        JSON ``{"bytes_per_second": N}`` (0 = unlimited): every file download is
                       paced to N bytes/s shared by all downloads, like one link of that speed.
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlparse

TARGET_REPO = "poolside/Laguna-S-2.1-INT4"
TARGET_COMMIT = "4bbfc285f2f8b3b6b526274c133b7b17aae6c8cb"
DRAFTER_REPO = "poolside/Laguna-S-2.1-DFlash-INT4"
DRAFTER_COMMIT = "5e07c246915c86dc6920fead03d019989224f2ba"
LFS_SUFFIXES = (".safetensors", ".bin", ".gguf")


def safetensors_bytes(tensors: dict[str, bytes]) -> bytes:
    """A valid safetensors file: u64 header length, JSON header, then the raw tensor data (U8)."""
    header, offset, data = {}, 0, b""
    for name, raw in tensors.items():
        header[name] = {
            "dtype": "U8",
            "shape": [len(raw)],
            "data_offsets": [offset, offset + len(raw)],
        }
        offset += len(raw)
        data += raw
    header["__metadata__"] = {"format": "pt"}
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    return struct.pack("<Q", len(head)) + head + data


def _pseudo_random(seed: str, size: int) -> bytes:
    out, counter = bytearray(), 0
    while len(out) < size:
        out += hashlib.sha256(f"{seed}:{counter}".encode()).digest() * 64
        counter += 1
    return bytes(out[:size])


def make_target(shards: int = 15, shard_bytes: int = 1 << 20) -> dict[str, bytes]:
    files, weight_map = {}, {}
    for i in range(1, shards + 1):
        name = f"model-{i:05d}-of-{shards:05d}.safetensors"
        tensor = f"model.layers.{i - 1}.mlp.experts.weight_packed"
        files[name] = safetensors_bytes({tensor: _pseudo_random(f"target-{i}", shard_bytes)})
        weight_map[tensor] = name
    total = sum(len(v) for v in files.values())
    files["model.safetensors.index.json"] = json.dumps(
        {"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2
    ).encode()
    files["config.json"] = json.dumps(
        {
            "architectures": ["LagunaForCausalLM"],
            "model_type": "laguna",
            # its own code (trust_remote_code): transformers caches it under HF_MODULES_CACHE
            "auto_map": {"AutoConfig": "configuration_laguna.LagunaConfig"},
            "standin": True,
            "quantization_config": {"bits": 4},
        }
    ).encode()
    files["tokenizer.json"] = b'{"version": "1.0", "standin": true}'
    files["README.md"] = b"# STAND-IN Laguna-S-2.1-INT4 (laguna-kit test harness)\n"
    return files


def make_drafter(shard_bytes: int = 1 << 19) -> dict[str, bytes]:
    return {
        "model.safetensors": safetensors_bytes(
            {"dflash.weight_packed": _pseudo_random("drafter", shard_bytes)}
        ),
        "config.json": json.dumps(
            {"architectures": ["DFlashDraftModel"], "standin": True, "target_commit": TARGET_COMMIT}
        ).encode(),
        "README.md": b"# STAND-IN Laguna-S-2.1-DFlash-INT4 (laguna-kit test harness)\n",
    }


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Repo:
    repo_id: str
    commit: str
    files: dict[str, bytes]
    gated_token: str | None = None
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        for path, data in self.files.items():
            lfs = path.endswith(LFS_SUFFIXES)
            self.meta[path] = {
                "size": len(data),
                "oid": git_blob_sha1(data),
                "sha256": hashlib.sha256(data).hexdigest() if lfs else None,
            }

    def entry(self, path: str) -> dict:
        m = self.meta[path]
        out = {"type": "file", "path": path, "size": m["size"], "oid": m["oid"]}
        if m["sha256"]:
            out["lfs"] = {"oid": m["sha256"], "size": m["size"], "pointerSize": 134}
        return out

    def sibling(self, path: str) -> dict:
        m = self.meta[path]
        out = {"rfilename": path, "size": m["size"], "blobId": m["oid"]}
        if m["sha256"]:
            out["lfs"] = {"sha256": m["sha256"], "size": m["size"], "pointerSize": 134}
        return out


class Hub:
    def __init__(self, repos: list[Repo]):
        self.repos = {r.repo_id: r for r in repos}
        self.lock = threading.Lock()
        self.served: dict[str, int] = {}
        self.requests: list[str] = []
        self.auth_seen: list[str] = []
        self.cut: dict[str, int] = {}
        self.corrupt: set[str] = set()
        self.slow: dict[str, int] = {}
        self.hold: set[str] = set()
        self.stall: dict[str, tuple[int, float]] = {}
        self.status: dict[str, list[int]] = {}
        self.link = Link(0)
        self.other_commits: dict[tuple[str, str], Repo] = {}

    def replace_file(self, repo_id: str, path: str, data: bytes | None) -> bytes | None:
        """Change (or with None, delete) a file of a stand-in repo; returns the old content."""
        repo = self.repos[repo_id]
        with self.lock:
            old = repo.files.pop(path, None)
            repo.meta.pop(path, None)
            if data is not None:
                repo.files[path] = data
                repo.__post_init__()
        return old

    def add_revision(self, repo_id: str, commit: str, files: dict[str, bytes]) -> Repo:
        """Another commit of a repo (a re-upload); "main" keeps naming the original one."""
        main = self.repos[repo_id]
        repo = Repo(repo_id, commit, files, main.gated_token)
        with self.lock:
            self.other_commits[(repo_id, commit)] = repo
        return repo

    def resolve(self, repo: Repo, revision: str) -> str | None:
        if (repo.repo_id, revision) in self.other_commits:
            return revision
        return repo.commit if revision in (repo.commit, "main") else None

    def at(self, repo: Repo, commit: str) -> Repo:
        return self.other_commits.get((repo.repo_id, commit), repo)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    hub: Hub

    def log_message(self, *args):  # quiet: tests read /_standin/stats instead
        pass

    def _json(self, obj, status=200, extra=None):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _error(self, status, code, message):
        self._json({"error": message}, status, {"X-Error-Code": code, "X-Error-Message": message})

    def _repo(self, repo_id: str) -> Repo | None:
        repo = self.hub.repos.get(repo_id)
        if repo is None:
            self._error(404, "RepoNotFound", "Repository Not Found")
            return None
        auth = self.headers.get("Authorization", "")
        with self.hub.lock:
            self.hub.auth_seen.append(auth)
        if repo.gated_token and auth != f"Bearer {repo.gated_token}":
            self._error(401, "GatedRepo", "Access to this repository is restricted: token required")
            return None
        return repo

    # --- routing ---------------------------------------------------------------------------
    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        url = urlparse(self.path)
        path, query = unquote(url.path), parse_qs(url.query)
        with self.hub.lock:
            self.hub.requests.append(f"{self.command} {path}")
        if path == "/_standin/stats":
            with self.hub.lock:
                return self._json({"served": self.hub.served, "requests": len(self.hub.requests)})
        m = re.fullmatch(r"/api/models/([^/]+/[^/]+)(?:/revision/([^/]+))?", path)
        if m:
            return self.model_info(m.group(1), m.group(2) or "main", query)
        m = re.fullmatch(r"/api/models/([^/]+/[^/]+)/tree/([^/]+)(/.*)?", path)
        if m:
            return self.tree(m.group(1), m.group(2), (m.group(3) or "").strip("/"))
        m = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
        if m:
            return self.resolve_file(m.group(1), m.group(2), m.group(3))
        self._error(404, "EntryNotFound", f"no route for {path}")

    def do_POST(self):
        url = urlparse(self.path)
        path = unquote(url.path)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if path == "/_standin/reset":
            with self.hub.lock:
                self.hub.served.clear()
                self.hub.requests.clear()
                self.hub.auth_seen.clear()
                self.hub.cut.clear()
                self.hub.corrupt.clear()
                self.hub.slow.clear()
                self.hub.hold.clear()
                self.hub.stall.clear()
                self.hub.status.clear()
                self.hub.link = Link(0)
            return self._json({"ok": True})
        if path == "/_standin/rate":
            self.hub.link = Link(int(json.loads(body or b"{}").get("bytes_per_second", 0)))
            return self._json({"ok": True})
        if path == "/_standin/faults":
            faults = json.loads(body or b"{}")
            with self.hub.lock:
                self.hub.cut.update({k: int(v) for k, v in faults.get("cut", {}).items()})
                self.hub.corrupt.update(k for k, v in faults.get("corrupt", {}).items() if v)
                self.hub.slow.update({k: int(v) for k, v in faults.get("slow", {}).items()})
                for k, v in faults.get("hold", {}).items():
                    (self.hub.hold.add if v else self.hub.hold.discard)(k)
                self.hub.stall.update(
                    {k: (int(v[0]), float(v[1])) for k, v in faults.get("stall", {}).items()}
                )
                self.hub.status.update(
                    {k: [int(v[0]), int(v[1])] for k, v in faults.get("status", {}).items()}
                )
            return self._json({"ok": True})
        m = re.fullmatch(r"/api/models/([^/]+/[^/]+)/paths-info/([^/]+)", path)
        if m:
            form = parse_qs(body.decode())
            return self.paths_info(m.group(1), m.group(2), form.get("paths", []))
        self._error(404, "EntryNotFound", f"no route for {path}")

    # --- API -------------------------------------------------------------------------------
    def model_info(self, repo_id, revision, query):
        repo = self._repo(repo_id)
        if repo is None:
            return
        commit = self.hub.resolve(repo, revision)
        if commit is None:
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
        repo = self.hub.at(repo, commit)
        blobs = query.get("blobs", ["false"])[0].lower() in ("1", "true")
        siblings = [repo.sibling(p) if blobs else {"rfilename": p} for p in sorted(repo.files)]
        self._json(
            {
                "_id": repo_id,
                "id": repo_id,
                "modelId": repo_id,
                "author": repo_id.split("/")[0],
                "sha": commit,
                "private": False,
                "disabled": False,
                "gated": bool(repo.gated_token),
                "downloads": 0,
                "likes": 0,
                "tags": ["standin"],
                "siblings": siblings,
                "lastModified": "2026-01-01T00:00:00.000Z",
                "createdAt": "2026-01-01T00:00:00.000Z",
            }
        )

    def tree(self, repo_id, revision, prefix):
        repo = self._repo(repo_id)
        if repo is None:
            return
        if self.hub.resolve(repo, revision) is None:
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
        repo = self.hub.at(repo, self.hub.resolve(repo, revision))
        self._json(
            [repo.entry(p) for p in sorted(repo.files) if not prefix or p.startswith(prefix + "/")]
        )

    def paths_info(self, repo_id, revision, paths):
        repo = self._repo(repo_id)
        if repo is None:
            return
        if self.hub.resolve(repo, revision) is None:
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
        repo = self.hub.at(repo, self.hub.resolve(repo, revision))
        self._json([repo.entry(p) for p in paths if p in repo.files])

    def resolve_file(self, repo_id, revision, filename):
        repo = self._repo(repo_id)
        if repo is None:
            return
        commit = self.hub.resolve(repo, revision)
        if commit is None:
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
        repo = self.hub.at(repo, commit)
        if filename not in repo.files:
            return self._error(
                404,
                "EntryNotFound",
                f"{filename} does not exist at {commit}",
            )
        with self.hub.lock:
            forced = self.hub.status.get(filename)
            if forced and forced[1] > 0 and filename not in self.hub.cut:  # a pending cut first
                forced[1] -= 1
            else:
                forced = None
        if forced and self.command == "GET":
            # What a CDN in trouble sends: a short body, the connection kept.
            return self._error(forced[0], "ServiceUnavailable", "Service Unavailable (stand-in)")
        data, meta = repo.files[filename], repo.meta[filename]
        etag = meta["sha256"] or meta["oid"]
        start, end, status = 0, len(data) - 1, 200
        rng = self.headers.get("Range")
        if rng:
            m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng.strip())
            if not m or int(m.group(1)) >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            start = int(m.group(1))
            end = int(m.group(2)) if m.group(2) else end
            status = 206
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(end - start + 1))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", f'"{etag}"')
        self.send_header("X-Repo-Commit", commit)
        if meta["sha256"]:
            self.send_header("X-Linked-Etag", f'"{etag}"')
            self.send_header("X-Linked-Size", str(len(data)))
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
        self.end_headers()
        if self.command == "HEAD":
            return
        chunk = data[start : end + 1]
        key = f"{repo_id}/{filename}"
        with self.hub.lock:
            cut = self.hub.cut.pop(filename, None)
            rate = self.hub.slow.get(filename)
            stall = self.hub.stall.pop(filename, None)
            link = self.hub.link
            if filename in self.hub.corrupt:
                chunk = bytes(b ^ 0xFF for b in chunk[:64]) + chunk[64:]
        if cut is not None:
            chunk = chunk[: max(cut - start, 0)]
        if link.rate:
            # A small send buffer, so a connection whose client is gone stops taking link time
            # (with the default, megabytes queue up for a peer that rebooted: not a real link).
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 << 10)
        try:
            for i in range(0, len(chunk), 1 << 16):
                if stall is not None and i >= stall[0]:
                    self.wfile.flush()
                    time.sleep(stall[1])  # connection open, not a byte; then it gives up
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                piece = chunk[i : i + (1 << 16)]
                while piece and filename in self.hub.hold:
                    self.wfile.write(piece[:1024])
                    self.wfile.flush()
                    with self.hub.lock:
                        self.hub.served[key] = self.hub.served.get(key, 0) + len(piece[:1024])
                    piece = piece[1024:]
                    time.sleep(0.5)
                link.take(len(piece))
                self.wfile.write(piece)
                with self.hub.lock:
                    self.hub.served[key] = self.hub.served.get(key, 0) + len(piece)
                if rate:
                    time.sleep((1 << 16) / rate)
        except (BrokenPipeError, ConnectionResetError):
            return
        if cut is not None:
            self.close_connection = True
            self.wfile.flush()
            self.connection.shutdown(2)


class Link:
    """A shared link of `rate` bytes/s (0: unlimited): downloads in parallel share it, as they
    would share a real uplink."""

    def __init__(self, rate: int):
        self.rate, self.lock, self.next_free = rate, threading.Lock(), time.monotonic()

    def take(self, n: int) -> None:
        if not self.rate:
            return
        with self.lock:
            start = max(self.next_free, time.monotonic())
            self.next_free = start + n / self.rate
        delay = self.next_free - time.monotonic()
        if delay > 0:
            time.sleep(delay)


def default_repos(token: str | None = None, shard_bytes: int = 1 << 20) -> list[Repo]:
    return [
        Repo(TARGET_REPO, TARGET_COMMIT, make_target(shard_bytes=shard_bytes), token),
        Repo(DRAFTER_REPO, DRAFTER_COMMIT, make_drafter(), token),
    ]


def serve(host: str, port: int, repos: list[Repo]) -> tuple[ThreadingHTTPServer, Hub]:
    hub = Hub(repos)
    handler = type("BoundHandler", (Handler,), {"hub": hub})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="standin-hub", daemon=True).start()
    return server, hub
