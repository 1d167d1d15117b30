"""laguna_kit/boxtools/fetch/progress.py: the progress record, fresh every 2 s whether or not bytes
arrive, its final state kept; read for people by laguna_kit/run/download_progress.py."""

import json
import threading
import time

from laguna_kit.boxtools.fetch.progress import Progress
from laguna_kit.run import download_progress

from .runs import SHARD, control, run


def test_the_progress_record_stays_fresh_while_a_transfer_is_silent(tmp_path, hub):
    """A silent transfer is said as one ("no byte for N s"), not as a fetch gone quiet: the record
    is written every 2 s whether or not bytes arrive, and its final state is not overwritten."""
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
    said = download_progress.line(rec, now=t)
    assert "no byte for" in said and "no news" not in said, said
    time.sleep(2.5)  # a heartbeat after the end would have written "running" again
    assert json.loads(path.read_text())["state"] == "verified"


def test_the_record_counts_files_retries_and_the_rate(tmp_path):
    path = tmp_path / "p.json"
    p = Progress(str(path), "r/x", total=100, done=40, files=2)
    p.note(error="f: HTTP 503 from the hub")
    p.add(10)
    p.note(file_done=True)
    p.maybe_write(force=True, state="verified")
    rec = json.loads(path.read_text())
    assert (rec["done_bytes"], rec["files_done"], rec["retries"], rec["state"]) == (
        50,
        1,
        1,
        "verified",
    )
    assert rec["last_error"] == "f: HTTP 503 from the hub" and rec["total_bytes"] == 100
    assert Progress(None, "r/x", 0, 0, 0).maybe_write(force=True) is None  # nowhere to write


def test_a_file_fetched_again_grows_the_total_so_the_record_never_passes_100_percent(tmp_path):
    """Issue 40: "16.0 MiB of 15.0 MiB (106 %)" while a file refused from a peer came again."""
    from laguna_kit.boxtools.fetch.progress import Progress

    p = Progress(str(tmp_path / "p.json"), "org/m", total=15 << 20, done=0, files=15)
    p.add(15 << 20)  # every byte once, one file's refused at its hash
    p.again(1 << 20)
    p.add(1 << 20)  # that file again
    rec = p.record()
    assert rec["done_bytes"] == rec["total_bytes"] == 16 << 20
