"""laguna_kit/boxtools/fetch/plan.py: what a run has to do, from the manifest and the disk."""

from laguna_kit.boxtools.fetch import plan

STAT = {"size": 4, "mtime_ns": 1, "inode": 1}


def entry(path, size=4):
    return {"path": path, "size": size, "sha256": f"h-{path}"}


def test_proven_files_are_left_present_ones_hashed_missing_ones_fetched():
    manifest = [entry("a"), entry("b"), entry("c")]
    record = {"revision": "r", "files": {"a": dict(STAT, hash="h-a"), "b": dict(STAT, hash="x")}}
    disk = {"a": STAT, "b": STAT, "c": None}
    got = plan.classify(manifest, record, "r", disk)
    assert [e["path"] for e in got.verified] == ["a"]
    assert [e["path"] for e in got.to_hash] == ["b"]
    assert [e["path"] for e in got.to_fetch] == ["c"]
    rehashed = plan.classify(manifest, record, "r", disk, rehash=True)
    assert [e["path"] for e in rehashed.to_hash] == ["a", "b"] and not rehashed.verified
    other = plan.classify(manifest, record, "another", disk)  # another revision's record
    assert not other.verified and len(other.to_hash) == 2


def test_bytes_needed_count_what_the_parts_hold_and_never_more_than_a_file():
    todo = [entry("a", 100), entry("b", 50)]
    assert plan.bytes_needed(todo, {}) == 150
    assert plan.bytes_needed(todo, {"a": 60, "b": 80}) == 40


def test_this_boxs_own_files_come_first():
    todo = [entry("x"), entry("mine"), entry("unowned")]
    ordered = plan.fetch_order(todo, {"x": "other", "mine": "me"}, "me")
    assert [e["path"] for e in ordered] == ["mine", "unowned", "x"]


def test_the_survey_stats_regular_files_only(tmp_path):
    (tmp_path / "a").write_bytes(b"1234")
    (tmp_path / "d").mkdir()
    got = plan.survey(str(tmp_path), [entry("a"), entry("d"), entry("gone")])
    assert got["a"]["size"] == 4 and got["d"] is None and got["gone"] is None
