"""laguna_kit/boxtools/fetch/records.py: the one rule of what a verification record proves, which
the box's fetch and the control side's plan (laguna_kit/domain/hub.py) both ask."""

import os

from laguna_kit.boxtools.fetch import records

STAT = {"size": 6, "mtime_ns": 1, "inode": 7}


def test_a_record_proves_a_file_only_with_its_hash_and_its_stat_unchanged():
    rec = dict(STAT, hash="h")
    assert records.why_unproven(rec, STAT, "h") is None
    assert records.why_unproven(rec, None, "h") == "missing"
    assert records.why_unproven(None, STAT, "h") == "not verified"
    assert records.why_unproven(rec, STAT, "other") == "not verified"
    touched = dict(STAT, mtime_ns=2)
    assert records.why_unproven(rec, touched, "h") == "changed since it was verified"
    assert records.why_unproven(rec, dict(STAT, inode=8), "h") == "changed since it was verified"


def test_a_saved_record_proves_the_file_of_its_revision_until_it_changes(tmp_path):
    dest = str(tmp_path)
    (tmp_path / "a").write_bytes(b"hello\n")
    entry = {"path": "a", "size": 6, "sha256": "h"}
    records.save(dest, {"revision": "r1", "files": {"a": records.entry_record(f"{dest}/a", entry)}})
    state = records.load(dest)
    assert records.recorded_ok(state, "r1", dest, entry)
    assert not records.recorded_ok(state, "r2", dest, entry)  # another revision proves nothing
    os.utime(f"{dest}/a", ns=(1, 1))
    assert not records.recorded_ok(state, "r1", dest, entry)
    assert records.wanted_hash({"sha256": None, "blob_id": "b"}) == "b"


def test_an_unreadable_record_is_no_record(tmp_path):
    (tmp_path / ".laguna-verified.json").write_text("{half")
    assert records.load(str(tmp_path)) == {}
    (tmp_path / ".laguna-verified.json").write_text("[1, 2]")
    assert records.load(str(tmp_path)) == {}
