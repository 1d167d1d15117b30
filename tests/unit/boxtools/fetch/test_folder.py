"""laguna_kit/boxtools/fetch/folder.py: a file goes into place only after its hash matched, a bad
one and a stray shard into the quarantine, unchanged files of a kept revision hard-linked."""

import hashlib
import os

import pytest

from laguna_kit.boxtools.fetch import folder, records
from laguna_kit.boxtools.fetch.errors import HashMismatch


def test_a_file_moves_into_place_only_when_its_hash_matches(tmp_path):
    part = tmp_path / "x.part"
    part.write_bytes(b"good")
    good = {"path": "sub/x", "size": 4, "sha256": hashlib.sha256(b"good").hexdigest()}
    folder.place(str(tmp_path), str(part), good, {"hashed_bytes": 0})
    assert (tmp_path / "sub" / "x").read_bytes() == b"good" and not part.exists()
    part.write_bytes(b"evil")
    with pytest.raises(HashMismatch, match="sub/x: hash .* does not match the hub's"):
        folder.place(str(tmp_path), str(part), good, {"hashed_bytes": 0})
    assert not part.exists()
    quarantined = os.listdir(tmp_path / ".laguna-quarantine")
    assert len(quarantined) == 1 and quarantined[0].startswith("sub__x.download.")


def test_stray_shards_are_moved_aside_and_said(tmp_path):
    (tmp_path / "a.safetensors").write_bytes(b"1")
    (tmp_path / "old.safetensors").write_bytes(b"2")
    (tmp_path / "config.json").write_bytes(b"{}")
    said = folder.sweep_strays(str(tmp_path), {"a.safetensors", "config.json"})
    assert said == ["old.safetensors (not in this revision: quarantined)"]
    assert sorted(os.listdir(tmp_path)) == [".laguna-quarantine", "a.safetensors", "config.json"]


def test_an_unchanged_file_of_a_kept_revision_is_linked_not_fetched(tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir()
    new.mkdir()
    (old / "a").write_bytes(b"same")
    entry = {"path": "a", "size": 4, "sha256": hashlib.sha256(b"same").hexdigest()}
    records.save(
        str(old), {"revision": "r1", "files": {"a": records.entry_record(f"{old}/a", entry)}}
    )
    state: dict = {}
    assert folder.link_unchanged_files(str(new), [str(old)], [entry], state) == 1
    assert os.stat(new / "a").st_ino == os.stat(old / "a").st_ino and state["a"]["hash"]
    assert folder.link_unchanged_files(str(new), [str(old)], [entry], state) == 0


def test_a_full_disk_says_what_is_kept_and_how_much_to_free(tmp_path):
    part = tmp_path / ".laguna-partial" / "a.part"
    part.parent.mkdir()
    part.write_bytes(b"x" * 10)
    said = str(folder.disk_full(str(tmp_path), {"path": "a", "size": 3 << 20}))
    assert "a: disk full at" in said and "after 10 of 3145728 bytes" in said
    assert "free at least 3 MiB more and re-run to resume" in said
