"""laguna_kit/boxtools/lock.py: one deploy at a time on a box; one run asking twice at once holds
it at once."""

import json
import os

ACQUIRE = """
import sys
from laguna_kit.boxtools import lock
lock.LOCK, lock.INFO = sys.argv[1], sys.argv[2]
lock.ancestor_sshd = lambda pid: None  # tied to the `sh` that runs this, not to a login
sys.exit(lock.acquire(sys.argv[3], 30))
"""


def test_one_run_asking_twice_at_once_holds_the_lock_at_once(tmp_path):
    """Two asks of one run in the same second (two connections): one takes the lock, the other
    joins it instead of waiting out its 30 s for its own run (seen once on the fleet's router)."""
    import fcntl
    import select
    import subprocess
    import sys
    import time

    from laguna_kit import KIT_ROOT
    from laguna_kit.boxtools.lock import alive

    path, info = str(tmp_path / "deploy.lock"), str(tmp_path / "deploy.lock.json")
    held = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(held, fcntl.LOCK_EX)  # the moment between one ask taking it and saying so
    # each `sh` plays a connection of the run: it lives on after its ask
    script = f"{sys.executable} -c '{ACQUIRE}' {path} {info} 'me@here pyinfra pid 1'; exec sleep 60"
    asks = [
        subprocess.Popen(["sh", "-c", script], cwd=KIT_ROOT, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    try:
        time.sleep(1.5)  # both wait on the lock
        t0 = time.monotonic()
        os.close(held)
        outs = []
        for a in asks:
            ready, _, _ = select.select([a.stdout], [], [], max(0.0, t0 + 10 - time.monotonic()))
            outs.append(a.stdout.readline().strip() if ready else "no answer in 10 s")
        took = time.monotonic() - t0
        assert outs == ["held", "held"] and took < 5, (outs, took)
        record = json.load(open(info))
        assert record["holder"] == "me@here pyinfra pid 1" and len(record["ties"]) == 2
    finally:
        for a in asks:
            a.kill()
            a.wait()
    deadline = time.monotonic() + 10  # both connections are gone: the lock frees itself
    while time.monotonic() < deadline and alive(record["pid"]):
        time.sleep(0.2)
    assert not alive(record["pid"])
