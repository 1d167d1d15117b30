"""The gate on the current release, and what follows it: a pass records the release's figures
and undrains it; a failure marks it failed, keeps it out of the router's rotation and (with
--auto-rollback) restores and gates the previous good release, or stops a release with nothing
to go back to."""

from __future__ import annotations

import subprocess
import sys

from ..layout import gate_result
from . import activate, drain, snapshot, system
from .store import Store
from .system import ReleaseError


def gate(store: Store, force_slower: bool = False, attempts: int = 2) -> bool:
    """Run the gate (in the kit's venv) on whichever release is current; True when it passed on
    the unit's own run. A pass is taken only while the unit is still the run the gate tested:
    one that restarted meanwhile (its start failed, say on a container a killed start left,
    and systemd brought it back) passed nothing of its own, and is gated again."""
    for _ in range(attempts):
        if not run_gate(store, force_slower):
            return False
        if tested_the_running_unit(store):
            store.record_perf()
            return True
        system.say(
            f"{store.unit} started again while the gate ran (the pass was another run's): "
            "gating its new run"
        )
    return False


def tested_the_running_unit(store: Store) -> bool:
    """The unit is active and entered active before the last gate started (a gate result of an
    older kit without its start time: taken as it is)."""
    started = store.gate_result().get("started_unix")
    if started is None:
        return True
    unit = snapshot.unit_status(store.unit)
    return bool(unit["active"]) and unit["since"] is not None and unit["since"] <= started


def run_gate(store: Store, force_slower: bool) -> bool:
    """laguna_gate.py on the current release; True when it exited 0."""
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
    return subprocess.run(cmd, stdout=subprocess.DEVNULL).returncode == 0


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
