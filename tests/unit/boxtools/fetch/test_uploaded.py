"""laguna_kit/boxtools/fetch/uploaded.py: offline, the mirror's pushed files are verified like
downloads; a wrong one is refused naming the fix."""

import hashlib

import pytest

from laguna_kit.boxtools.fetch.errors import FetchError
from laguna_kit.boxtools.fetch.uploaded import Uploaded


def test_the_mirrors_files_are_placed_only_when_they_match(tmp_path):
    up, dest = tmp_path / "up", tmp_path / "dest"
    up.mkdir()
    dest.mkdir()
    (up / "a").write_bytes(b"good")
    (up / "b").write_bytes(b"evil")
    source = Uploaded(str(up), str(dest), {"hashed_bytes": 0})
    source.fetch({"path": "a", "size": 4, "sha256": hashlib.sha256(b"good").hexdigest()})
    assert (dest / "a").read_bytes() == b"good"
    with pytest.raises(FetchError, match="the mirror's copy has hash .* quarantined; fix the"):
        source.fetch({"path": "b", "size": 4, "sha256": hashlib.sha256(b"good").hexdigest()})
    with pytest.raises(FetchError, match="the mirror's copy is 4 bytes, the hub recorded 5"):
        (up / "c").write_bytes(b"shrt")
        source.fetch({"path": "c", "size": 5, "sha256": "x"})
    with pytest.raises(FetchError, match="not among the files pushed from the mirror"):
        source.fetch({"path": "d", "size": 1, "sha256": "x"})
