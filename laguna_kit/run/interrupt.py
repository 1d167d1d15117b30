"""Ctrl-C ends a run within seconds, at any step.

pyinfra's own SIGINT handler prints "Exiting upon user request!" and exits the main greenlet, but
a host's greenlet inside one of the kit's wait loops (the download, a reboot) went on printing
progress and kept the process alive for minutes. The kit's handler says what goes on box-side,
marks the run interrupted (the wait loops end at their next poll), hands over to pyinfra's, and
a real OS thread (not a gevent one: pyinfra patches threading) ends the process if it is still
there a few seconds later. A second Ctrl-C ends it at once."""

from __future__ import annotations

import os
import signal
import sys

GRACE_S = 3.0  # pyinfra's own shutdown (disconnecting from hosts) gets this long
INTERRUPTED = False
_installed = False
BOX_SIDE = (
    "--> Interrupted: this run ends now. What runs on a box as a unit of its own goes on: a "
    "checkpoint download (laguna-fetch-*), an image pull (laguna-pull:*), a validation "
    "(laguna-validate:*). The next run of the same command resumes or waits for it; "
    "`pyinfra inventory.py tasks/status.py` shows it meanwhile."
)


class Interrupted(SystemExit):
    """Raised by a wait loop that finds the run interrupted."""

    def __init__(self):
        super().__init__(130)


def check() -> None:
    """In a wait loop: end it when the operator pressed Ctrl-C."""
    if INTERRUPTED:
        raise Interrupted()


def _original(module: str, name: str):
    try:
        from gevent.monkey import get_original

        return get_original(module, name)
    except ImportError:  # no gevent: the stdlib's are the real ones
        return getattr(__import__(module), name)


def _watchdog() -> None:
    _original("time", "sleep")(GRACE_S)
    os.write(2, f"--> still running {GRACE_S:.0f} s after Ctrl-C: stopping now\n".encode())
    os._exit(130)


def install() -> None:
    """Once per process, in the main thread (deploy.py's first step)."""
    global _installed
    if _installed:
        return
    previous = signal.getsignal(signal.SIGINT)

    def on_sigint(signum, frame):
        global INTERRUPTED
        if INTERRUPTED:
            os._exit(130)
        INTERRUPTED = True
        try:
            sys.stderr.write(f"\n{BOX_SIDE}\n")
            sys.stderr.flush()
        except Exception:  # noqa: BLE001 - a closed stderr must not keep the run alive
            pass
        _original("_thread", "start_new_thread")(_watchdog, ())
        if callable(previous):
            previous(signum, frame)
        raise KeyboardInterrupt

    try:
        signal.signal(signal.SIGINT, on_sigint)
    except ValueError:  # not the main thread (a library use): pyinfra's handling stays
        return
    _installed = True
