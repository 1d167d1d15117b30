"""laguna-cache-warm: fill the fleet's image cache with the pinned image before the boxes pull.

Run on the cache host (tasks/registry_cache.py, in a transient unit) against its own
docker-registry in proxy mode. The distribution registry 2.x fetches a blob it does not hold from
upstream *twice* on its first request (one copy streamed to the client, one stored: registry/proxy/
proxyblobstore.go, ServeBlob and storeLocal) and once more for every request that comes while that
is in flight, so boxes pulling a cold cache together cost their number plus one. Here each blob is
asked for once, its response closed once the headers came (the client's copy stops after what
the socket buffers held), and the store's own copy is waited for on disk; the boxes' pulls wait
for this to end (operations/docker.py) and find every layer stored. Where a registry does not go
on storing after its client left, the blob is read whole through it instead (2x for that blob,
never a cold cache).

Writes a record (`--record`, JSON: image, digest, blobs) when every blob is stored; prints a JSON
summary; errors on stderr with exit code 2.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import sys
import time
from urllib.parse import urlsplit

ACCEPT = ", ".join(
    [
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    ]
)
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


class WarmError(Exception):
    pass


class Registry:
    def __init__(self, url: str, timeout: float):
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise WarmError(f"the cache's URL must be http://host:port, not {url!r}")
        self.host, self.port, self.timeout = parts.hostname, parts.port or 80, timeout

    def request(self, path: str, read: bool = True):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        conn.request("GET", path, headers={"Accept": ACCEPT})
        resp = conn.getresponse()
        if resp.status != 200:
            conn.close()
            raise WarmError(f"the cache answered HTTP {resp.status} for {path}")
        body = resp.read() if read else b""
        conn.close()  # (unread: the connection goes, and with it the client's copy)
        return resp, body


def blob_path(store: str, digest: str) -> str:
    """Where the registry's filesystem driver keeps a blob (docker/registry/v2/blobs/...)."""
    hexa = digest.split(":", 1)[1]
    return os.path.join(store, "docker/registry/v2/blobs/sha256", hexa[:2], hexa, "data")


def manifest_blobs(reg: Registry, repo: str, tag: str) -> tuple[str, list[tuple[str, int]]]:
    """(the tag's digest, [(blob digest, size)] of its linux/amd64 image: config and layers)."""
    resp, body = reg.request(f"/v2/{repo}/manifests/{tag}")
    digest = resp.getheader("Docker-Content-Digest") or ""
    doc = json.loads(body)
    if "manifests" in doc:
        chosen = next(
            (
                m
                for m in doc["manifests"]
                if (m.get("platform") or {}).get("os") == "linux"
                and (m.get("platform") or {}).get("architecture") == "amd64"
            ),
            None,
        )
        if chosen is None or not DIGEST.fullmatch(str(chosen.get("digest"))):
            raise WarmError(f"{repo}:{tag} has no linux/amd64 image")
        doc = json.loads(reg.request(f"/v2/{repo}/manifests/{chosen['digest']}")[1])
    blobs = [doc["config"], *doc.get("layers", [])]
    out = []
    for b in blobs:
        if not DIGEST.fullmatch(str(b.get("digest"))):
            raise WarmError(f"{repo}:{tag}: a manifest entry without a sha256 digest: {b!r}")
        out.append((b["digest"], int(b.get("size") or 0)))
    return digest, out


def stored(store: str, digest: str, size: int) -> bool:
    try:
        return os.path.getsize(blob_path(store, digest)) == size
    except OSError:
        return False


def uploads_size(store: str, repo: str) -> int:
    """Bytes in the registry's uploads in progress for `repo` (its store's copies)."""
    root = os.path.join(store, "docker/registry/v2/repositories", repo, "_uploads")
    total = 0
    for folder, _, files in os.walk(root):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(folder, name))
            except OSError:
                pass
    return total


def warm(args) -> dict:
    name, _, pinned = args.image.partition("@")
    repo, _, tag = name.rpartition(":") if ":" in name.split("/")[-1] else (name, "", "")
    tag = pinned or tag  # a pinned reference's manifest is asked by its digest
    if not repo or not tag or "/" in tag:
        raise WarmError(f"{args.image!r} is not repository:tag or repository@sha256:...")
    if "/" not in repo:
        repo = f"library/{repo}"  # Docker Hub's official images
    reg = Registry(args.cache, args.timeout_s)
    digest, blobs = manifest_blobs(reg, repo, tag)
    if args.digest and digest and digest != args.digest:
        raise WarmError(
            f"the cache names {digest} for {args.image}, the registry itself {args.digest}: "
            "not warming it with another image"
        )
    done, read_whole, started = 0, [], time.time()
    for blob, size in blobs:
        if stored(args.store, blob, size):
            done += 1
            continue
        reg.request(f"/v2/{repo}/blobs/{blob}", read=False)
        last, seen = time.monotonic(), -1
        while not stored(args.store, blob, size):
            now = uploads_size(args.store, repo)
            if now != seen:
                seen, last = now, time.monotonic()
            elif time.monotonic() - last > args.stall_s:
                # No store copy under way: read it whole through the cache (it stores it then).
                reg.request(f"/v2/{repo}/blobs/{blob}")
                read_whole.append(blob)
                break
            time.sleep(0.2)
        deadline = time.monotonic() + args.stall_s
        while not stored(args.store, blob, size):
            if time.monotonic() > deadline:
                raise WarmError(f"{blob} ({size} bytes) is not in the cache's store after a read")
            time.sleep(0.2)
    record = {"image": args.image, "digest": digest, "blobs": [b for b, _ in blobs]}
    if args.record:
        tmp = args.record + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(record, fh)
        os.replace(tmp, args.record)
    return dict(
        record,
        already=done,
        bytes=sum(s for _, s in blobs),
        read_whole=read_whole,
        seconds=round(time.time() - started, 1),
    )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cache", required=True, help="the cache's own URL (http://127.0.0.1:PORT)")
    p.add_argument("--store", required=True, help="the cache's storage root")
    p.add_argument("--image", required=True, help="repository:tag")
    p.add_argument("--digest", default="", help="the tag's digest at the registry itself")
    p.add_argument("--record", default="", help="write what is warm here, as JSON")
    p.add_argument("--stall-s", type=float, default=60)
    p.add_argument("--timeout-s", type=float, default=120)
    args = p.parse_args(argv)
    try:
        summary = warm(args)
    except (WarmError, OSError, ValueError, KeyError, http.client.HTTPException) as exc:
        print(f"laguna-cache-warm: {args.image}: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
