"""What the hub says a pinned checkpoint is: its files, sizes and sha256, through huggingface_hub.

Runs on the control machine (pre-flight sizing, the verification plan). The token comes from the
environment and is only handed to the client, never formatted into a message.
"""

from __future__ import annotations

import functools
import os
import re
import time
from dataclasses import dataclass

from ..boxtools.names import UnsafeName, safe_name  # the box tools' own rule, one place

COMMIT_RE = re.compile(r"[0-9a-f]{40}")
INDEX = "model.safetensors.index.json"


@dataclass(frozen=True)
class HubFile:
    path: str
    size: int
    sha256: str | None  # LFS files: the content hash the hub stores; small git files: None
    blob_id: str


@dataclass(frozen=True)
class Checkpoint:
    repo: str
    commit: str
    files: tuple[HubFile, ...]

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def folder(self) -> str:
        return self.repo.split("/")[-1]


class HubError(RuntimeError):
    pass


def token_from_env(var: str) -> str | None:
    return os.environ.get(var) or None


@functools.lru_cache(maxsize=16)
def checkpoint(endpoint: str, repo: str, revision: str, token_var: str) -> Checkpoint:
    from huggingface_hub import HfApi
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    api = HfApi(endpoint=endpoint, token=token_from_env(token_var) or False)
    try:
        info = with_retries(lambda: api.model_info(repo, revision=revision, files_metadata=True))
    except GatedRepoError:
        raise HubError(f"{repo} at {endpoint} needs a token with access: set {token_var}") from None
    except RepositoryNotFoundError:
        raise HubError(f"{repo} not found at {endpoint} (or {token_var} lacks access)") from None
    except RevisionNotFoundError:
        raise HubError(f"{repo} has no revision {revision!r} at {endpoint}") from None
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else None
        if status == 401:
            raise HubError(
                f"the hub at {endpoint} refused the token in {token_var} (HTTP 401) for {repo}: "
                "check it (https://huggingface.co/settings/tokens; a read token is enough) and "
                f"accept the model's terms on its page (https://huggingface.co/{repo})"
            ) from None
        raise HubError(
            f"hub {endpoint} refused the metadata request for {repo}: HTTP {status or '?'}"
            + (
                f" ({len(RETRY_WAITS_S) + 1} attempts over {sum(RETRY_WAITS_S)} s)"
                if retryable(exc)
                else ""
            )
        ) from None
    except network_errors() as exc:
        raise HubError(
            f"cannot reach the hub at {endpoint}: {type(exc).__name__} ({exc}) "
            f"({len(RETRY_WAITS_S) + 1} attempts over {sum(RETRY_WAITS_S)} s)"
        ) from None
    if not isinstance(info.sha, str) or not is_pinned(info.sha):
        # The commit names folders and goes into the box-side commands: a commit or nothing.
        raise HubError(
            f"{repo}: the hub at {endpoint} answered revision {revision!r} with {info.sha!r}, "
            "not a 40-hex commit: refusing it; nothing was changed"
        )
    if is_pinned(revision) and info.sha != revision:
        raise HubError(
            f"{repo}: the hub at {endpoint} answered the pinned revision {revision} "
            f"with commit {info.sha}: refusing a checkpoint other than the pinned one"
        )
    checked_names(repo, endpoint, [s.rfilename for s in info.siblings or []])
    files = tuple(
        HubFile(
            s.rfilename,
            _size(repo, s),
            s.lfs.sha256 if s.lfs else None,
            s.blob_id or "",
        )
        for s in info.siblings or []
    )
    return Checkpoint(repo, info.sha, files)


# Waits between attempts of a metadata call that failed in a way that passes (a 5xx, 408, 429, a
# dropped connection): huggingface_hub's own http_backoff (utils/_http.py, 2.4.0: 5 retries,
# 1 s doubling to at most 8 s, on 408/429/500/502/503/504 and connection errors).
RETRY_WAITS_S = (1, 2, 4, 8, 8)


def retryable(exc: BaseException) -> bool:
    response = getattr(exc, "response", None)
    if response is not None:
        return getattr(response, "status_code", None) in (408, 429, 500, 502, 503, 504)
    return isinstance(exc, network_errors())


def with_retries(call):
    """`call()`, again after each wait of RETRY_WAITS_S while it fails in a way that passes."""
    for wait in (*RETRY_WAITS_S, None):
        try:
            return call()
        except Exception as exc:
            if wait is None or not retryable(exc):
                raise
            time.sleep(wait)


def checked_names(repo: str, source: str, paths: list) -> None:
    """Every file name is a plain relative path before anything is planned with it."""
    for path in paths:
        try:
            safe_name(path)
        except UnsafeName as exc:
            raise HubError(f"{repo} at {source}: {exc}; nothing was changed") from None


def network_errors() -> tuple[type[BaseException], ...]:
    """What a failed request raises: huggingface_hub 2.x uses httpx2, whose errors are not
    OSError (huggingface_hub 2.4.0's source); older clients use httpx or requests (OSError)."""
    found: list[type[BaseException]] = [OSError]
    for module in ("httpx2", "httpx"):
        try:
            found.append(__import__(module).HTTPError)
        except (ImportError, AttributeError):
            pass
    return tuple(found)


def is_pinned(revision: str) -> bool:
    return bool(COMMIT_RE.fullmatch(revision))


# --- offline: a mirror folder on the control machine (scripts/mirror_checkpoints.py) --------------

MIRROR_MANIFEST = (
    "laguna-manifest.json"  # the hub's metadata for the commit, recorded when mirrored
)


def mirror_folder(mirror: str, repo: str, commit: str) -> str:
    return os.path.join(os.path.expanduser(mirror), f"{repo.replace('/', '__')}@{commit}")


def checkpoint_from_mirror(mirror: str, repo: str, revision: str) -> Checkpoint:
    """The checkpoint as the hub described it when it was mirrored: the same hashes are checked."""
    import json

    if not is_pinned(revision):
        raise HubError(
            f"{repo}: offline mode needs a pinned commit, not {revision!r} (nothing can resolve "
            "a branch without the hub)"
        )
    folder = mirror_folder(mirror, repo, revision)
    try:
        with open(os.path.join(folder, MIRROR_MANIFEST)) as fh:
            doc = json.load(fh)
    except FileNotFoundError:
        raise HubError(
            f"{repo}@{revision[:12]} is not in the mirror {mirror} (no "
            f"{folder}/{MIRROR_MANIFEST}): "
            "make it with scripts/mirror_checkpoints.py on a machine that reaches the hub"
        ) from None
    except ValueError as exc:
        raise HubError(f"{folder}/{MIRROR_MANIFEST} is not valid JSON: {exc}") from None
    if doc.get("repo") != repo or doc.get("revision") != revision:
        raise HubError(
            f"{folder}/{MIRROR_MANIFEST} describes {doc.get('repo')}@{doc.get('revision')}, "
            f"not {repo}@{revision}"
        )
    checked_names(repo, f"{folder}/{MIRROR_MANIFEST}", [f.get("path") for f in doc["files"]])
    return Checkpoint(
        repo,
        revision,
        tuple(
            HubFile(f["path"], f["size"], f.get("sha256"), f.get("blob_id") or "")
            for f in doc["files"]
        ),
    )


def source_checkpoint(d, repo: str, revision: str) -> Checkpoint:
    """What the pinned checkpoint is, from the mirror when `checkpoint_mirror` is set, else the
    hub."""
    if d.checkpoint_mirror:
        return checkpoint_from_mirror(d.checkpoint_mirror, repo, revision)
    return checkpoint(d.hf_endpoint, repo, revision, d.hf_token_env)


# --- what is on the box, judged without hashing ------------------------------------------------


def manifest(ckpt: Checkpoint) -> dict:
    """What the box's fetch tool gets: the pinned commit and each file's size and hub hash."""
    return {
        "repo": ckpt.repo,
        "revision": ckpt.commit,
        "files": [
            {"path": f.path, "size": f.size, "sha256": f.sha256, "blob_id": f.blob_id}
            for f in ckpt.files
        ],
    }


def _size(repo: str, sibling) -> int:
    """A file's size as the hub gives it (the LFS pointer's for an LFS file it lists bare)."""
    if sibling.size is not None:
        return sibling.size
    if sibling.lfs is not None:
        return sibling.lfs.size
    raise HubError(f"{repo}: the hub gave no size for {sibling.rfilename}")


def judge(ckpt: Checkpoint, stats: dict, state: dict) -> list[tuple[str, str]]:
    """(path, why) for each of the checkpoint's files that its verification record does not prove.

    `stats` maps path -> {size, mtime_ns, inode} as the box sees them now; `state` is the record. A
    matching record proves the file was hashed against this commit and has not changed since.
    """
    records = state.get("files", {}) if state.get("revision") == ckpt.commit else {}
    out = []
    for f in ckpt.files:
        rec, st = records.get(f.path), stats.get(f.path)
        if st is None:
            out.append((f.path, f"{f.path} missing"))
        elif not rec or rec.get("hash") != (f.sha256 or f.blob_id):
            out.append((f.path, f"{f.path} not verified"))
        elif any(rec.get(k) != st[k] for k in ("size", "mtime_ns", "inode")):
            out.append((f.path, f"{f.path} changed since it was verified"))
    return out


def unverified_paths(ckpt: Checkpoint, stats: dict, state: dict) -> list[str]:
    """The checkpoint's files whose record does not prove them (all of them for another
    revision)."""
    return [path for path, _ in judge(ckpt, stats, state)]


def not_verified(ckpt: Checkpoint, stats: dict, state: dict) -> list[str]:
    """Why the folder is not the verified checkpoint (empty: nothing to do): the record's revision,
    each unproven file, and shards that are not part of the commit."""
    if state.get("revision") != ckpt.commit:
        return [
            f"record is for revision {state.get('revision')}" if state else "no verification record"
        ]
    if any(f.path == INDEX for f in ckpt.files) and not state.get("index_checked"):
        return [f"{INDEX} not checked against the shards"]
    wanted = {f.path for f in ckpt.files}
    return [why for _, why in judge(ckpt, stats, state)] + [
        f"{p} is not part of {ckpt.commit[:12]}"
        for p in stats
        if p.endswith(".safetensors") and "/" not in p and p not in wanted
    ]
