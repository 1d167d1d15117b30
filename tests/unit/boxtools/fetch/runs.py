"""What the fetch tool's fast tests share: a stand-in hub on 127.0.0.1 serving a generated target
checkpoint, its control calls, and one run of fetch.run.sync as the box-side unit would call it."""

from __future__ import annotations

import json
from contextlib import contextmanager

import httpx

from laguna_kit.boxtools.fetch.run import sync
from tests.harness import standin_hub


@contextmanager
def serving_hub(shards: int):
    """(the hub's URL, its target repo) while a stand-in hub serves `shards` 1 MiB shards."""
    repo = standin_hub.Repo(
        standin_hub.TARGET_REPO,
        standin_hub.TARGET_COMMIT,
        standin_hub.make_target(shards=shards, shard_bytes=1 << 20),
    )
    server, _ = standin_hub.serve("127.0.0.1", 0, [repo])
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", repo
    finally:
        server.shutdown()


def control(url, path, body=None):
    return httpx.post(f"{url}/_standin/{path}", json=body or {}).json()


def manifest_of(repo) -> list[dict]:
    """The manifest's files as the control machine sends them (laguna_kit/domain/hub.py)."""
    return [
        {"path": p, "size": m["size"], "sha256": m["sha256"], "blob_id": m["oid"]}
        for p, m in repo.meta.items()
    ]


def fetch(folder, url, repo, dest, progress, **kw) -> dict:
    """sync into `dest`, its manifest written in `folder`; `kw` overrides the arguments."""
    manifest = folder / "manifest.json"
    manifest.write_text(
        json.dumps({"repo": repo.repo_id, "revision": repo.commit, "files": manifest_of(repo)})
    )
    args = dict(
        manifest=str(manifest),
        dest=str(dest),
        repo=repo.repo_id,
        token_file=None,
        rehash=False,
        margin_mib=0,
        workers=2,
        endpoint=url,
        progress=str(progress),
        retries=3,
        backoff_max_s=0.2,
        read_timeout_s=1.0,
    )
    args.update(kw)
    return sync(type("A", (), args))


SHARD = "model-00002-of-00003.safetensors"  # of the three-shard checkpoint conftest.py serves


def run(tmp_path, url, repo, **kw) -> dict:
    """One fetch into tmp_path/dest, its progress in tmp_path/progress.json."""
    return fetch(tmp_path, url, repo, tmp_path / "dest", tmp_path / "progress.json", **kw)
