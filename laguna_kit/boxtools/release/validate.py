"""The gate on the current release, and what follows it: a pass records the release's figures
and undrains it; a failure marks it failed, keeps it out of the router's rotation and (with
--auto-rollback) restores and gates the previous good release, or stops a release with nothing
to go back to."""

from __future__ import annotations

import subprocess
import sys

from ..layout import gate_result
from . import activate, drain, system
from .store import Store
from .system import ReleaseError


def gate(store: Store, force_slower: bool = False) -> bool:
    """Run the gate (in the kit's venv) on whichever release is current; True when it passed."""
    cmd = [
        f"{store.kit_dir}/venv/bin/python",
        f"{store.kit_dir}/bin/laguna_gate.py",
        "--kit-dir",
        store.kit_dir,
        "--state-dir",
        store.state_dir,
        "--unit",
        store.unit,
        "--result",
        gate_result(store.state_dir),
    ] + (["--force-slower"] if force_slower else [])
    passed = subprocess.run(cmd, stdout=subprocess.DEVNULL).returncode == 0
    if passed:
        store.record_perf()
    return passed


def validate(store: Store, auto_rollback: bool, force_slower: bool = False) -> bool:
    """The current release passes the gate, or it is marked failed and (auto_rollback) the
    previous good release is restored and validated; either way a failed gate is a failed
    validation. With nothing to roll back to, the failing release is stopped."""
    current = store.current()
    if gate(store, force_slower):
        store.mark_passed(current)
        drain.undrain(store)
        return True
    store.mark_failed(current)
    if store.agent() is not None and (store.drained() or {}).get("by") != "operator":
        drain.mark_drained(store, f"release {current} failed its gate")  # out of the rotation
    if not auto_rollback:
        return False
    system.say("the gate failed: rolling back to the previous release")
    try:
        activate.rollback(store, None)
    except ReleaseError as exc:
        print(f"laguna-release: {exc}", file=sys.stderr)
        system.run("systemctl", "stop", store.unit, check=False)
        system.say(
            f"release {current} failed its gate and there is no release to roll back to: it is "
            f"stopped, not left serving (journalctl -u {store.unit}; TROUBLESHOOTING.md)"
        )
        return False
    if gate(store):
        drain.undrain(store)
        system.say("the previous release serves and passed the gate")
    else:
        store.mark_failed(store.current())
        system.say(
            "the previous release FAILED the gate too: stop and diagnose (TROUBLESHOOTING.md)"
        )
    return False
