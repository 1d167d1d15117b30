"""laguna_kit/boxtools/fetch/run.py: a run refuses names from outside before anything is written,
and fetches a new revision beside the live one, swapped in only when its release is activated."""

import hashlib
import json
import os

import pytest

from laguna_kit.boxtools import names
from laguna_kit.boxtools.fetch import revisions
from laguna_kit.boxtools.fetch.errors import FetchError
from laguna_kit.boxtools.fetch.run import sync


@pytest.mark.parametrize(
    "name", ["/etc/passwd", "../x", "a/../../x", "a//b", "./a", "a\\b", "a\nb", "", "a/\x7f"]
)
def test_names_from_outside_are_refused_before_anything_is_written(name, tmp_path):
    with pytest.raises(names.UnsafeName):
        names.safe_name(name)
    manifest = tmp_path / "manifest.json"
    manifest.write_text(
        json.dumps(
            {
                "revision": "a" * 40,
                "files": [
                    {"path": "config.json", "size": 2, "sha256": None, "blob_id": "b" * 40},
                    {"path": name, "size": 1, "sha256": "c" * 64, "blob_id": ""},
                ],
            }
        )
    )
    dest = tmp_path / "dest"
    args = type(
        "A",
        (),
        {
            "manifest": str(manifest),
            "dest": str(dest),
            "repo": "r/x",
            "token_file": None,
            "rehash": False,
            "margin_mib": 0,
            "workers": 1,
            "endpoint": "http://127.0.0.1:9",
        },
    )
    with pytest.raises(FetchError, match="not a plain relative path; nothing was written"):
        sync(args)
    assert not dest.exists()


def _revision(tmp_path, commit, files):
    """A manifest for `files` ({name: bytes}) at `commit`."""
    manifest = tmp_path / f"manifest-{commit[:4]}.json"
    manifest.write_text(
        json.dumps(
            {
                "revision": commit,
                "files": [
                    {
                        "path": n,
                        "size": len(b),
                        "sha256": hashlib.sha256(b).hexdigest(),
                        "blob_id": "",
                    }
                    for n, b in files.items()
                ],
            }
        )
    )
    return str(manifest)


def _push(tmp_path, dest, files):
    """An upload folder holding `files`, as the control machine pushes it from its mirror."""
    up = tmp_path / "models" / f"{os.path.basename(dest)}.laguna-upload"
    up.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (up / name).write_bytes(data)
    return str(up)


def test_a_new_revision_is_fetched_beside_the_live_one_and_swapped_in_only_at_activation(tmp_path):
    old = {"a.safetensors": b"A" * 64, "b.safetensors": b"B" * 64}
    new = {"a.safetensors": b"A" * 64, "b.safetensors": b"C" * 64}  # b changed
    dest = str(tmp_path / "models" / "Laguna")

    def args(manifest, uploaded):
        return type(
            "A",
            (),
            {
                "manifest": manifest,
                "dest": dest,
                "repo": "r/x",
                "token_file": None,
                "rehash": False,
                "margin_mib": 0,
                "workers": 1,
                "uploaded": uploaded,
            },
        )

    sync(args(_revision(tmp_path, "a" * 40, old), _push(tmp_path, dest, old)))
    assert revisions.recorded_revision(dest) == "a" * 40
    # The new revision's upload is cut short: the live folder must not change at all.
    partial = _push(tmp_path, dest, {})
    with pytest.raises(FetchError):
        sync(args(_revision(tmp_path, "b" * 40, new), partial))
    assert revisions.recorded_revision(dest) == "a" * 40
    assert open(os.path.join(dest, "b.safetensors"), "rb").read() == b"B" * 64
    # Completed, it lands in the folder kept beside the live one (unchanged files linked) ...
    summary = sync(args(_revision(tmp_path, "b" * 40, new), _push(tmp_path, dest, new)))
    beside = revisions.stash_path(dest, "b" * 40)
    assert summary["folder"] == beside
    same = os.stat(os.path.join(dest, "a.safetensors")).st_ino
    assert os.stat(os.path.join(beside, "a.safetensors")).st_ino == same  # linked, not re-fetched
    assert revisions.recorded_revision(dest) == "a" * 40  # the running release's, still
    # ... and becomes the mounted folder only when its release is activated.
    assert revisions.select_revision(dest, "b" * 40) == "restored"
    assert open(os.path.join(dest, "b.safetensors"), "rb").read() == b"C" * 64
    assert revisions.recorded_revision(revisions.stash_path(dest, "a" * 40)) == "a" * 40
