"""A reboot the run waits for: the box marked, rebooted, and waited for until it is back *after*
a reboot (pyinfra's server.reboot confirms by /proc/uptime, which a container, and so the test
harness, does not reset; a marker in /run is gone after any reboot), the boot finished and the
deploy lock held again."""

from __future__ import annotations

import time

from pyinfra.api import FunctionCommand, OperationError
from pyinfra.facts.server import Command

from ..boxtools.layout import REBOOT_MARKER, RUN_DIR
from . import deploy_lock, interrupt


def commands(timeout: int):
    """What an operation yields to reboot the box and wait for it."""
    yield f"mkdir -p {RUN_DIR} && touch {REBOOT_MARKER}"
    yield "( sleep 1 && systemctl reboot ) </dev/null >/dev/null 2>&1 &"
    yield FunctionCommand(lambda state, host: wait_for_reboot(host, timeout), (), {})


def wait_for_reboot(host, timeout: int) -> None:
    """Reconnect until the marker is gone (a reboot happened), then let the boot finish."""
    time.sleep(3)
    host.disconnect()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        host.connect(show_errors=False)
        if host.connected:
            marker = host.get_fact(
                Command, command=f"test -e {REBOOT_MARKER} && echo waiting || echo rebooted"
            )
            if marker == "rebooted":
                # Up is not booted: let the boot finish (module loads, DKMS) before the next step.
                deploy_lock.hold(host, host.data.kit_dir, 600)  # the old connection's ended
                host.get_fact(
                    Command,
                    command=f"timeout {int(timeout)} systemctl is-system-running --wait; true",
                )
                return
            host.disconnect()
        interrupt.check()
        time.sleep(2)
    raise OperationError(f"{host.name} did not come back from reboot within {timeout}s")
