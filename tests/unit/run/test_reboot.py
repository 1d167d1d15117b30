"""laguna_kit/run/reboot.py: the box marked, rebooted in the background, and waited for until the
marker is gone, the boot finished and the deploy lock held again over the new connection."""

from types import SimpleNamespace

import pytest
from pyinfra.api import FunctionCommand, OperationError

from laguna_kit.run import reboot


def test_the_reboot_is_marked_first_and_waited_for():
    cmds = list(reboot.commands(900))
    assert cmds[0] == "mkdir -p /run/laguna-kit && touch /run/laguna-kit/awaiting-reboot"
    assert "systemctl reboot" in cmds[1] and isinstance(cmds[2], FunctionCommand)


class Box(SimpleNamespace):
    """A box that answers "waiting" until it has rebooted once."""

    def __init__(self, reboots_after: int):
        super().__init__(name="b1", data=SimpleNamespace(kit_dir="/opt/k"), connected=False)
        self.left, self.asked = reboots_after, []

    def disconnect(self):
        self.connected = False

    def connect(self, show_errors=False):
        self.connected = True

    def get_fact(self, cls, command):
        self.asked.append(command)
        if "awaiting-reboot" in command:
            self.left -= 1
            return "rebooted" if self.left < 0 else "waiting"
        return ""


def test_the_wait_ends_once_the_marker_is_gone_and_holds_the_lock_again(monkeypatch):
    monkeypatch.setattr(reboot.time, "sleep", lambda s: None)
    held = []
    monkeypatch.setattr(reboot.deploy_lock, "hold", lambda h, k, w: held.append((h.name, k)))
    box = Box(reboots_after=2)
    reboot.wait_for_reboot(box, 60)
    assert held == [("b1", "/opt/k")] and "is-system-running --wait" in box.asked[-1]
    clock = iter(range(0, 1000, 30))
    monkeypatch.setattr(reboot.time, "monotonic", lambda: next(clock))
    with pytest.raises(OperationError, match="did not come back from reboot within 60s"):
        reboot.wait_for_reboot(Box(reboots_after=99), 60)
