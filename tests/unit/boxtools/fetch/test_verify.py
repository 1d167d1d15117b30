"""laguna_kit/boxtools/fetch/verify.py: the hub's kinds of hash, and the index checked against the
shards present."""

import hashlib
import json

import pytest

from laguna_kit.boxtools.fetch import verify
from laguna_kit.boxtools.fetch.errors import FetchError


def test_fetch_hashes_are_the_hubs_kinds(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"hello\n")
    counter = {"hashed_bytes": 0}
    # sha256 for LFS files; a git blob sha1 (`git hash-object`) for small files
    assert verify.content_ok(
        str(path), {"size": 6, "sha256": hashlib.sha256(b"hello\n").hexdigest()}, counter
    )[0]
    assert verify.content_ok(
        str(path),
        {"size": 6, "sha256": None, "blob_id": "ce013625030ba8dba906f756967f9e9ca394464a"},
        counter,
    )[0]
    assert verify.content_ok(str(path), {"size": 7, "sha256": "x"}, counter) == (False, "size 6")
    assert counter["hashed_bytes"] == 12


def test_index_must_name_exactly_the_shards(tmp_path):
    (tmp_path / "a.safetensors").write_bytes(b"1")
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"w": "b.safetensors"}})
    )
    manifest = [{"path": "a.safetensors"}, {"path": "model.safetensors.index.json"}]
    with pytest.raises(FetchError, match="names shards that are not present: b.safetensors"):
        verify.check_index(str(tmp_path), manifest)


def test_an_index_naming_a_file_outside_the_folder_is_refused(tmp_path):
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"w": "../x.safetensors"}})
    )
    with pytest.raises(FetchError, match="not a plain relative path"):
        verify.check_index(str(tmp_path), [{"path": "model.safetensors.index.json"}])


def test_files_on_disk_are_hashed_a_file_per_core(tmp_path):
    entries = []
    for i in range(5):
        data = bytes([i]) * (i + 1)
        (tmp_path / f"s{i}").write_bytes(data)
        entries.append({"path": f"s{i}", "size": len(data)})
        entries[-1]["sha256"] = hashlib.sha256(data).hexdigest() if i != 3 else "0" * 64
    counter = {"hashed_bytes": 0}
    got = verify.hashed_in_parallel(str(tmp_path), entries, counter)
    assert [ok for ok, _ in got] == [True, True, True, False, True]
    assert counter["hashed_bytes"] == 1 + 2 + 3 + 4 + 5
