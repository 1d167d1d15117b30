"""The release manager's tests share a box on tmp_path: a kit_dir and a unit folder, systemctl
calls recorded (never run), and helpers that leave what a deploy's upload and a gate leave."""

import json
import os

import pytest

from laguna_kit.boxtools.release import drain, system, units
from laguna_kit.boxtools.release.store import Store


@pytest.fixture
def box(tmp_path, monkeypatch):
    """A kit_dir and unit folder under tmp_path; systemctl calls recorded in box.calls."""
    calls = []
    monkeypatch.setattr(units, "UNIT_DIR", str(tmp_path / "units"))
    monkeypatch.setattr(system, "run", lambda *cmd, check=True: calls.append(cmd))
    monkeypatch.setattr(
        system,
        "capture",
        lambda *cmd: "ActiveState=active\nActiveEnterTimestamp=Mon 2025-11-24 16:00:00 UTC\n",
    )
    (tmp_path / "units").mkdir()
    store = Store(str(tmp_path / "kit"), "laguna-vllm.service")
    store.calls = calls
    return store


@pytest.fixture
def fleet_box(box, monkeypatch):
    """`box` behind a fleet router: the agent config present, the router's checks and vLLM's
    running requests played by counters (what systemd's NAccepted and vLLM's gauges report)."""
    os.makedirs(box.kit_dir, exist_ok=True)
    with open(os.path.join(box.kit_dir, "router-agent.json"), "w") as fh:
        json.dump({"api_port": 8080, "socket": "a.socket", "drain_timeout_s": 5}, fh)
    checks, running, seen = {"n": 0}, {"n": 2}, []

    def accepted(unit):  # the router asks once per call: a check every poll
        checks["n"] += 1
        return checks["n"]

    def in_flight(port):
        seen.append((box.drained() or {}).get("reason"))
        running["n"] = max(running["n"] - 1, 0)
        return running["n"]

    monkeypatch.setattr(drain, "accepted", accepted)
    monkeypatch.setattr(drain, "in_flight", in_flight)
    monkeypatch.setattr(drain.time, "sleep", lambda s: None)
    box.seen = seen
    return box
