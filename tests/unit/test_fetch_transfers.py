"""The fetch tool against the stand-in hub over real HTTP on 127.0.0.1: transient errors are
resumed in the same run, bytes are hashed once as they arrive, progress is written for people."""

import hashlib
import json
import os

import httpx
import pytest

from laguna_kit.boxtools import fetch

from . import fetch_runs
from .fetch_runs import control, serving_hub

SHARD = "model-00002-of-00003.safetensors"


@pytest.fixture(scope="module")
def hub():
    with serving_hub(shards=3) as served:
        yield served


def run(tmp_path, url, repo, **kw):
    return fetch_runs.run(tmp_path, url, repo, tmp_path / "dest", tmp_path / "progress.json", **kw)


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
    with pytest.raises(fetch.FetchError) as err:
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


def test_the_progress_record_stays_fresh_while_a_transfer_is_silent(tmp_path, hub):
    """A silent transfer is said as one ("no byte for N s"), not as a fetch gone quiet: the record
    is written every 2 s whether or not bytes arrive, and its final state is not overwritten."""
    import threading
    import time

    from laguna_kit import progress

    url, repo = hub
    control(url, "reset")
    control(url, "faults", {"stall": {SHARD: [1, 6]}})  # first byte, then 6 s of silence
    done = {}
    worker = threading.Thread(
        target=lambda: done.update(run(tmp_path, url, repo, workers=1, read_timeout_s=10.0))
    )
    worker.start()
    path = tmp_path / "progress.json"
    samples = []
    deadline = time.time() + 30
    while worker.is_alive() and time.time() < deadline:
        time.sleep(0.5)
        try:
            rec = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        samples.append((time.time(), rec))
    worker.join(30)
    assert done, "the fetch did not finish"
    silent = [(t, r) for t, r in samples if r["state"] == "running" and t - r["last_byte"] > 4]
    assert silent, f"no sample inside the silence: {[(t - r['last_byte']) for t, r in samples]}"
    for t, rec in silent:
        assert t - rec["updated"] < 3.5, "the record went stale while the fetch ran"
    t, rec = silent[-1]
    said = progress.line(rec, now=t)
    assert "no byte for" in said and "no news" not in said, said
    time.sleep(2.5)  # a heartbeat after the end would have written "running" again
    assert json.loads(path.read_text())["state"] == "verified"
