"""laguna_kit/boxtools/release/validate.py: a failed gate rolls back on the box and still fails;
with nothing to roll back to, the failing release is stopped."""

from laguna_kit.boxtools.release import activate, validate

from .on_disk import incoming


def test_validate_rolls_back_on_the_box_and_still_fails(box, monkeypatch, capsys):
    incoming(box)
    activate.install_incoming(box)
    incoming(box, mode="speed-128k")
    activate.install_incoming(box)
    results = iter([False, True])  # the new release fails its gate, the restored one passes
    monkeypatch.setattr(validate, "gate", lambda store, force=False: next(results))
    assert validate.validate(box, auto_rollback=True) is False
    assert box.state()["current"] == 1
    err = capsys.readouterr().err
    assert (
        "rolling back to the previous release" in err
        and "the previous release serves and passed" in err
    )


def test_validate_with_nothing_to_roll_back_to_stops_the_release(box, monkeypatch, capsys):
    incoming(box)
    activate.install_incoming(box)
    monkeypatch.setattr(validate, "gate", lambda store, force=False: False)
    assert validate.validate(box, auto_rollback=True) is False
    err = capsys.readouterr().err
    assert "no previous release to roll back to" in err and "it is stopped, not left serving" in err
    assert ("systemctl", "stop", box.unit) in box.calls


def test_the_gate_runs_the_box_tool_in_the_venv_with_this_replicas_state(box, monkeypatch):
    ran = []

    class Done:
        returncode = 0

    monkeypatch.setattr(validate.subprocess, "run", lambda cmd, **kw: ran.append(cmd) or Done())
    assert validate.gate(box, force_slower=True)
    cmd = ran[0]
    assert cmd[:2] == [f"{box.kit_dir}/venv/bin/python", f"{box.kit_dir}/bin/laguna_gate.py"]
    assert cmd[cmd.index("--state-dir") + 1] == box.state_dir and cmd[-1] == "--force-slower"


def test_a_pass_counts_only_for_the_run_it_tested(box, monkeypatch, capsys):
    """A start that failed on a container a killed start left behind comes back 15 s later
    (Restart=): the gate had passed against that orphan, not the unit's own run. Such a pass is
    not taken; the unit's new run is gated (seen in the power-cut drill under load)."""
    import json
    import os

    from laguna_kit.boxtools.release import snapshot

    gates = []

    def run_gate(store, force_slower):
        gates.append(len(gates))
        os.makedirs(os.path.join(store.kit_dir, "state"), exist_ok=True)
        with open(os.path.join(store.kit_dir, "state", "last-gate.json"), "w") as fh:
            json.dump({"passed": True, "started_unix": 100.0 + 10 * len(gates)}, fh)
        return True

    starts = iter([115.0, 105.0])  # entered active after the first gate began, then before
    monkeypatch.setattr(validate, "run_gate", run_gate)
    monkeypatch.setattr(snapshot, "unit_status", lambda u: {"active": True, "since": next(starts)})
    assert validate.gate(box) and gates == [0, 1]
    assert "started again while the gate ran" in capsys.readouterr().err
    monkeypatch.setattr(snapshot, "unit_status", lambda u: {"active": False, "since": None})
    gates.clear()
    assert not validate.gate(box) and gates == [0, 1]  # never its own run: no pass
