"""laguna_kit/boxtools/fetch/transfer.py: the fetch against the stand-in hub over real HTTP on
127.0.0.1: transient errors are resumed in the same run, bytes are hashed once as they arrive, a
resume answered with another range is discarded."""

import hashlib
import json
import os

import httpx
import pytest

from laguna_kit.boxtools.fetch import transfer
from laguna_kit.boxtools.fetch.errors import FetchError

from .runs import SHARD, control, run


def on_disk_ok(tmp_path, repo):
    for name, data in repo.files.items():
        got = (tmp_path / "dest" / name).read_bytes()
        assert hashlib.sha256(got).hexdigest() == hashlib.sha256(data).hexdigest(), name


@pytest.mark.parametrize(
    "fault",
    [
        {"stall": {SHARD: [300_000, 3]}},  # connection open, silent, longer than the read timeout
        {"cut": {SHARD: 400_000}},  # the connection dropped mid-shard
        {"status": {SHARD: [503, 2]}},  # an overloaded CDN node, twice
    ],
    ids=["stall", "cut", "503"],
)
def test_a_transient_error_is_resumed_in_the_same_run(tmp_path, hub, fault):
    url, repo = hub
    control(url, "reset")
    control(url, "faults", fault)
    summary = run(tmp_path, url, repo)
    on_disk_ok(tmp_path, repo)
    assert summary["retries"] >= 1, summary
    total = sum(len(d) for d in repo.files.values())
    # Resumed, not restarted: what was received before the error is not fetched again.
    served = httpx.get(f"{url}/_standin/stats").json()["served"]
    assert sum(served.values()) <= total + 64 * 1024, served
    # Hashed as received (a resume re-reads nothing it had already fed the hash).
    assert summary["hashed_bytes"] == summary["downloaded_bytes"] == total, summary
    progress = json.loads((tmp_path / "progress.json").read_text())
    assert progress["state"] == "verified" and progress["done_bytes"] == total, progress
    assert progress["retries"] == summary["retries"] and SHARD in progress["last_error"]


def test_retries_exhausted_name_the_file_the_bytes_on_disk_and_the_last_error(tmp_path, hub):
    url, repo = hub
    control(url, "reset")
    control(url, "faults", {"cut": {SHARD: 200_000}})
    control(url, "faults", {"status": {SHARD: [503, 100]}})  # then the hub keeps failing
    with pytest.raises(FetchError) as err:
        run(tmp_path, url, repo)
    text = str(err.value)
    assert f"{SHARD}: 200000 of {len(repo.files[SHARD])} bytes on disk after 4 attempts" in text
    assert "last error: Retryable: HTTP 503 from the hub" in text and "re-run to resume" in text
    progress = json.loads((tmp_path / "progress.json").read_text())
    assert progress["state"] == "failed"
    # The next run resumes from those bytes and hashes them once.
    control(url, "reset")
    summary = run(tmp_path, url, repo)
    on_disk_ok(tmp_path, repo)
    assert summary["downloaded_bytes"] == len(repo.files[SHARD]) - 200_000
    assert summary["hashed_bytes"] == len(repo.files[SHARD])


def test_a_complete_part_from_an_earlier_run_is_hashed_once_not_fetched(tmp_path, hub):
    url, repo = hub
    control(url, "reset")
    part = tmp_path / "dest" / ".laguna-partial" / f"{SHARD}.part"
    part.parent.mkdir(parents=True)
    part.write_bytes(repo.files[SHARD])
    summary = run(tmp_path, url, repo, workers=1)
    on_disk_ok(tmp_path, repo)
    served = httpx.get(f"{url}/_standin/stats").json()["served"]
    assert f"{repo.repo_id}/{SHARD}" not in served
    total = sum(len(d) for d in repo.files.values())
    assert summary["hashed_bytes"] == total and summary["downloaded_bytes"] == total - len(
        repo.files[SHARD]
    )
    assert not os.path.exists(part)


def test_the_shared_link_paces_downloads(hub):
    import time

    url, repo = hub
    control(url, "rate", {"bytes_per_second": 4 << 20})
    try:
        t = time.monotonic()
        httpx.get(f"{url}/{repo.repo_id}/resolve/{repo.commit}/{SHARD}")
        took = time.monotonic() - t
    finally:
        control(url, "rate", {"bytes_per_second": 0})
    size = len(repo.files[SHARD])
    assert took >= 0.8 * size / (4 << 20), took


def test_a_resume_answered_with_another_range_is_discarded(tmp_path):
    part = tmp_path / "f.part"
    part.write_bytes(b"x" * 100)
    entry = {"path": "f", "size": 1000}
    transfer.check_range(entry, 100, "bytes 100-999/1000", str(part))  # exactly where it ends
    transfer.check_range(entry, 100, "bytes 100-999/*", str(part))
    with pytest.raises(FetchError, match="Content-Range 'bytes 0-999/1000'"):
        transfer.check_range(entry, 100, "bytes 0-999/1000", str(part))
    assert not part.exists()
    part.write_bytes(b"x" * 100)
    with pytest.raises(FetchError, match="size 1000 expected"):
        transfer.check_range(entry, 100, "bytes 100-1999/2000", str(part))


def test_what_is_worth_resuming_and_what_is_not():
    assert transfer.is_transient(transfer.Retryable("HTTP 503"))
    assert transfer.is_transient(ConnectionResetError()) and transfer.is_transient(TimeoutError())
    assert transfer.is_transient(transfer.http().ReadTimeout("silent"))
    assert not transfer.is_transient(OSError(28, "No space left on device"))
    assert not transfer.is_transient(FetchError("HTTP 404 from the hub"))
    assert transfer.describe(TimeoutError("read")) == "TimeoutError: read"
