#!/usr/bin/env python3
"""Mirror both pinned checkpoints into a folder, for boxes that cannot reach the hub.

Run on a machine that reaches the hub (HF_TOKEN in the environment if the repos need one):

    .venv/bin/python scripts/mirror_checkpoints.py --dest /srv/laguna-mirror

Then deploy with `checkpoint_mirror = "/srv/laguna-mirror"` (hosts file [hosts.data] or
--data): the control machine pushes what a box lacks over SSH and the box verifies every file
against the hub's sha256 exactly as it does for downloads. Each repo lands in
<dest>/<owner>__<name>@<commit>/ with laguna-manifest.json (the hub's own file metadata, recorded
now); the manifest is written last, after every file matched it, so a half-made mirror is refused.
Re-running re-hashes the mirror and downloads only what is missing or wrong.
"""

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

# the box's verifier: the same hash rules here
from laguna_kit.boxtools.fetch import verify  # noqa: E402
from laguna_kit.domain import hub  # noqa: E402
from laguna_kit.knobs.declared import defaults  # noqa: E402


def mirror_one(dest: str, endpoint: str, token_var: str, repo: str, revision: str) -> dict:
    from huggingface_hub import snapshot_download

    ckpt = hub.checkpoint(endpoint, repo, revision, token_var)
    folder = hub.mirror_folder(dest, repo, ckpt.commit)
    manifest = hub.manifest(ckpt)
    manifest_path = os.path.join(folder, hub.MIRROR_MANIFEST)
    if os.path.exists(manifest_path):
        os.remove(manifest_path)  # until every file matches again
    snapshot_download(
        repo,
        revision=ckpt.commit,
        local_dir=folder,
        endpoint=endpoint,
        token=hub.token_from_env(token_var) or False,
        allow_patterns=[f.path for f in ckpt.files],
    )
    counter = {"hashed_bytes": 0}
    for entry in manifest["files"]:
        path = os.path.join(folder, entry["path"])
        ok, found = (
            verify.content_ok(path, entry, counter) if os.path.isfile(path) else (False, "missing")
        )
        if not ok:
            raise SystemExit(
                f"mirror: {repo}/{entry['path']}: {found}, the hub's hash is "
                f"{entry.get('sha256') or entry['blob_id']}; run again to re-fetch it"
            )
    with open(manifest_path + ".tmp", "w") as fh:
        json.dump(manifest, fh, indent=1)
    os.replace(manifest_path + ".tmp", manifest_path)
    return {
        "repo": repo,
        "commit": ckpt.commit,
        "files": len(ckpt.files),
        "bytes": ckpt.size,
        "hashed_bytes": counter["hashed_bytes"],
        "folder": folder,
    }


def main(argv=None) -> int:
    d = defaults()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dest", required=True)
    p.add_argument("--endpoint", default=os.environ.get("HF_ENDPOINT") or d["hf_endpoint"])
    p.add_argument("--target-revision", default=d["target_revision"])
    p.add_argument("--drafter-revision", default=d["drafter_revision"])
    a = p.parse_args(argv)
    os.makedirs(a.dest, exist_ok=True)
    try:
        for repo, rev in (
            (d["target_repo"], a.target_revision),
            (d["drafter_repo"], a.drafter_revision),
        ):
            print(json.dumps(mirror_one(a.dest, a.endpoint, d["hf_token_env"], repo, rev)))
    except hub.HubError as exc:
        print(f"mirror: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
