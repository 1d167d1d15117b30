"""laguna_kit/boxtools/fetch/revisions.py: a checkpoint's revisions swap by rename and come back."""

import json
import os

from laguna_kit.boxtools.fetch import revisions
from laguna_kit.boxtools.layout import VERIFIED_RECORD


def record(folder, revision):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, VERIFIED_RECORD), "w") as fh:
        json.dump({"revision": revision, "files": {}}, fh)


def test_revisions_swap_by_rename_and_come_back(tmp_path):
    dest = str(tmp_path / "Laguna")
    record(dest, "a" * 40)
    assert revisions.select_revision(dest, "a" * 40) == "current"
    assert revisions.select_revision(dest, "b" * 40) == "new"
    assert revisions.recorded_revision(revisions.stash_path(dest, "a" * 40)) == "a" * 40
    record(dest, "b" * 40)
    assert revisions.select_revision(dest, "a" * 40) == "restored"
    assert revisions.recorded_revision(dest) == "a" * 40
    assert revisions.available(dest, "b" * 40) and not revisions.available(dest, "c" * 40)
    assert [os.path.basename(p) for p in revisions.stashed(dest)] == [f"Laguna@{'b' * 40}"]
