"""laguna_kit/run/download_progress.py: a box-side download's record as one line for people."""

from laguna_kit.run import download_progress

GIB = 2**30


def test_a_running_download_says_its_share_rate_eta_and_files():
    rec = {
        "repo": "r/x", "state": "running", "done_bytes": 12 * GIB, "total_bytes": 80 * GIB,
        "rate_bps": 112 * 2**20, "eta_s": 612, "files_done": 3, "files": 15, "updated": 100.0,
        "last_byte": 100.0,
    }  # fmt: skip
    line = download_progress.line(rec, now=101.0)
    assert line == "r/x: 12.00 GiB of 80.00 GiB (15 %), 112.0 MiB/s, ETA 10m12s, 3/15 files"


def test_silence_and_a_stale_record_are_said_apart():
    rec = {"repo": "r/x", "state": "running", "done_bytes": 1, "total_bytes": 2,
           "updated": 100.0, "last_byte": 90.0}  # fmt: skip
    assert "no byte for 11 s" in download_progress.line(rec, now=101.0)
    assert "no news for 30 s" in download_progress.line(dict(rec, last_byte=70.0), now=130.0)
    done = dict(rec, state="verified", retries=2, last_error="HTTP 503")
    assert download_progress.line(done, now=101.0).endswith("2 retried (last: HTTP 503)")
