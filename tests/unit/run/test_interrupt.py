"""laguna_kit/run/interrupt.py: Ctrl-C ends the run within seconds even when something keeps going
after pyinfra's own handler ran (as the download wait did), and says what goes on box-side."""

import os
import signal
import subprocess
import sys
import time

from laguna_kit import KIT_ROOT

# pyinfra_cli's main(): gevent patches everything, its SIGINT handler prints and exits the main
# greenlet. The loop below then plays a wait that survives that exit (it swallows it and goes on).
STUCK = """
from gevent import monkey; monkey.patch_all()
import signal, sys, time
def pyinfra_handler(signum, frame):
    print("Exiting upon user request!", flush=True)
    sys.exit(0)
signal.signal(signal.SIGINT, pyinfra_handler)
from laguna_kit.run import interrupt
interrupt.install()
import atexit
def keep_going():
    while True:
        try:
            time.sleep(0.2)
            print("download ... still printing", flush=True)
        except BaseException:
            pass
atexit.register(keep_going)  # an exit that escapes the loop below comes back to it
print("waiting", flush=True)
keep_going()
"""


def start(code):
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=KIT_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(KIT_ROOT)),
    )
    assert proc.stdout.readline().strip() == "waiting"
    return proc


def test_a_run_that_would_go_on_is_ended_within_seconds_of_ctrl_c():
    proc = start(STUCK)
    proc.send_signal(signal.SIGINT)
    sent = time.monotonic()
    try:
        out, err = proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert time.monotonic() - sent < 5
    assert proc.returncode == 130
    assert "Exiting upon user request!" in out  # pyinfra's own handler still ran
    assert "a checkpoint download (laguna-fetch-*)" in err and "resumes or waits" in err
    assert "stopping now" in err


def test_a_second_ctrl_c_ends_it_at_once():
    proc = start(STUCK)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    sent = time.monotonic()
    try:
        proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert time.monotonic() - sent < 1.5 and proc.returncode == 130


def test_a_wait_loop_ends_at_its_next_poll():
    import pytest

    from laguna_kit.run import interrupt

    interrupt.check()  # not interrupted: nothing
    interrupt.INTERRUPTED = True
    try:
        with pytest.raises(SystemExit):
            interrupt.check()
    finally:
        interrupt.INTERRUPTED = False
