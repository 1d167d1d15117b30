"""laguna_kit/boxtools/release/snapshot.py: `state --json`, what the deploy reads of a box."""

import json
import os

from laguna_kit.boxtools.release import activate, snapshot

from .on_disk import incoming, passed_gate


def test_state_json_is_what_the_deploy_reads(box, capsys):
    assert snapshot.snapshot(box)["current"] == {} and snapshot.snapshot(box)["state"] == {}
    incoming(box)
    activate.install_incoming(box)
    os.makedirs(os.path.join(box.kit_dir, "state"))
    with open(os.path.join(box.kit_dir, "state", "last-gate.json"), "w") as fh:
        json.dump({"release": 1, "passed": True}, fh)
    snap = snapshot.snapshot(box)
    assert (
        snap["state"]["current"] == 1
        and snap["current"]["number"] == 1
        and snap["current"]["mode"] == "champion"
    )
    assert snap["gate"] == {"release": 1, "passed": True}
    assert snap["unit"] == {"active": True, "since": 1764000000}


def test_status_shows_the_running_releases_figure(box):
    incoming(box)
    activate.install_incoming(box)
    passed_gate(box, 1, 200.0)
    passed_gate(box, 1, 290.0)
    assert snapshot.snapshot(box)["perf"]["decode_tok_s"] == 200.0
