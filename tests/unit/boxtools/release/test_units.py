"""laguna_kit/boxtools/release/units.py: a restart removes a container a killed start left behind,
and the units of further replicas are found by name."""

import json
import os

from laguna_kit.boxtools.release import activate, system, units
from laguna_kit.boxtools.release.store import Store

from .on_disk import incoming


def test_a_container_a_killed_start_left_behind_is_removed_before_the_next_start(box, monkeypatch):
    """A start killed seconds after boot: its `docker run` never saw the container the daemon
    then created. The restart waits for it and removes it, so the new start's `docker run` owns
    the name and the gate tests the unit's own container (the power-cut drill in test_service)."""
    incoming(box)
    folder = os.path.join(box.root, "incoming")
    meta = json.load(open(os.path.join(folder, "release.json")))
    meta["spec"]["argv"] = ["docker", "run", "--rm", "--name", "vllm-laguna", "img"]
    json.dump(meta, open(os.path.join(folder, "release.json"), "w"))
    seen = iter([False, True, True, False])  # absent, then the orphan appears, then it is gone
    inspects = []

    def fake(cmd, **kw):
        inspects.append(cmd)
        return system.subprocess.CompletedProcess(cmd, 0 if next(seen, False) else 1)

    monkeypatch.setattr(system.subprocess, "run", fake)
    monkeypatch.setattr(units.time, "sleep", lambda s: None)
    clock = iter(range(0, 10_000))
    monkeypatch.setattr(units.time, "monotonic", lambda: next(clock) * 0.25)
    activate.install_incoming(box)
    calls = box.calls
    rm = calls.index(("docker", "rm", "-f", "vllm-laguna"))
    assert (
        calls.index(("systemctl", "stop", box.unit))
        < rm
        < calls.index(("systemctl", "start", box.unit))
    )
    assert calls.count(("docker", "rm", "-f", "vllm-laguna")) == 2


def test_the_release_manager_names_the_units_of_further_replicas(tmp_path, monkeypatch):
    """What replicas_retired reads from replica 1's state (no command more on a converged run)."""
    found = tmp_path / "units"
    found.mkdir()
    for name in ("laguna-vllm.service", "laguna-vllm-2.service", "laguna-vllm-10.service"):
        (found / name).write_text("")
    for name in ("laguna-vllm-02.service", "laguna-vllm-metrics.service", "other-2.service"):
        (found / name).write_text("")
    monkeypatch.setattr(units, "UNIT_DIR", str(found))
    store = Store(str(tmp_path / "kit"), "laguna-vllm.service")
    assert units.replica_units(store) == ["laguna-vllm-2.service", "laguna-vllm-10.service"]


def test_a_hand_edited_unit_is_drift_naming_the_lines(box):
    incoming(box, unit_body="ExecStart=/usr/bin/docker run x --max-num-seqs 4")
    activate.install_incoming(box)
    assert units.unit_drift(box) == []
    path = os.path.join(units.UNIT_DIR, box.unit)
    text = open(path).read().replace("--max-num-seqs 4", "--max-num-seqs 8")
    open(path, "w").write(text)
    drift = units.unit_drift(box)
    assert any(d.startswith("-") and "seqs 4" in d for d in drift), drift
    assert any(d.startswith("+") and "seqs 8" in d for d in drift), drift
