"""laguna_kit/boxtools/release/activate.py: releases numbered and run, rolled back, and a release
that does not start putting the previous one back."""

import json
import os

import pytest

from laguna_kit.boxtools.release import activate, system, units, validate
from laguna_kit.boxtools.release.store import Store
from laguna_kit.boxtools.release.system import ReleaseError
from laguna_kit.domain import replicas
from laguna_kit.domain.profiles import render_release
from laguna_kit.knobs.declared import defaults

from .on_disk import incoming

DIGEST = "sha256:" + "ab" * 32


def test_releases_are_numbered_and_the_unit_is_reloaded_only_when_it_changed(box):
    incoming(box)
    assert activate.install_incoming(box) == 1
    unit = open(os.path.join(units.UNIT_DIR, box.unit)).read()
    assert unit.startswith("# release 1\n")
    assert ("systemctl", "daemon-reload") in box.calls and (
        "systemctl",
        "start",
        box.unit,
    ) in box.calls
    incoming(box, unit_body="ExecStart=/usr/bin/docker run y")
    assert activate.install_incoming(box) == 2
    assert box.state()["current"] == 2 and box.state()["previous"] == 1
    box.calls.clear()
    activate.activate(box, 2)  # same unit file: restart (stop, start), no reload
    assert ("systemctl", "daemon-reload") not in box.calls and box.calls[-2:] == [
        ("systemctl", "stop", box.unit),
        ("systemctl", "start", box.unit),
    ]


def test_rollback_goes_to_the_previous_release_and_refuses_what_makes_no_sense(box):
    with pytest.raises(ReleaseError, match="no previous release"):
        activate.rollback(box, None)
    incoming(box)
    activate.install_incoming(box)
    incoming(box, mode="speed-128k")
    activate.install_incoming(box)
    assert activate.rollback(box, None) == 1
    box.calls.clear()
    assert activate.rollback(box, 1) == 1  # re-activating the current release by number restarts
    assert ("systemctl", "start", box.unit) in box.calls
    with pytest.raises(ReleaseError, match="no release 7"):
        activate.rollback(box, 7)


def test_a_failed_release_is_skipped_by_rollbacks_unless_named(box, monkeypatch):
    for mode in ("champion", "speed-128k", "context-first"):
        incoming(box, mode=mode)
        activate.install_incoming(box)
    results = iter([False, True])  # release 3 fails its gate, release 2 passes
    monkeypatch.setattr(validate, "gate", lambda store, force=False: next(results))
    validate.validate(box, auto_rollback=True)
    assert box.state()["current"] == 2 and box.state()["failed"] == [3]
    # "previous" no longer toggles back to the release that just failed
    assert activate.rollback(box, None) == 1
    assert box.state()["previous"] == 2
    assert activate.rollback(box, 3) == 3  # by number it is still allowed


def test_a_release_that_does_not_start_puts_the_previous_one_back(box, monkeypatch):
    incoming(box, unit_body="ExecStart=/usr/bin/docker run good")
    activate.install_incoming(box)
    real_run = system.run

    def run(*cmd, check=True):
        box.calls.append(cmd)
        unit = open(os.path.join(units.UNIT_DIR, box.unit)).read()
        if cmd[:2] == ("systemctl", "start") and "bad" in unit:
            raise ReleaseError("systemctl start failed: Job failed")

    monkeypatch.setattr(system, "run", run)
    incoming(box, unit_body="ExecStart=/usr/bin/docker run bad")
    with pytest.raises(ReleaseError, match="release 2 did not start .* release 1 is back"):
        activate.install_incoming(box)
    assert "run good" in open(os.path.join(units.UNIT_DIR, box.unit)).read()
    assert box.state()["current"] == 1
    assert box.current_meta()["number"] == 1
    assert real_run is not run


def test_activation_refuses_a_release_whose_revision_is_gone(box, tmp_path):
    incoming(box)
    meta = os.path.join(box.root, "incoming", "release.json")
    doc = json.load(open(meta))
    doc["spec"]["checkpoints"] = [{"dest": str(tmp_path / "models" / "X"), "revision": "c" * 40}]
    json.dump(doc, open(meta, "w"))
    with pytest.raises(ReleaseError, match="which is not on this box"):
        activate.install_incoming(box)


def test_rollback_to_a_number_takes_replica_two_to_its_own_release_of_that_version(
    tmp_path, monkeypatch
):
    """Replica 2 came with the box's new cards at replica 1's release 2, so its numbers are not
    replica 1's: `rollback_to=2` must run replica 2's release 1 (the same image, checkpoints and
    flags on its own port and cards), not its release 2 nor nothing."""
    kit = tmp_path / "kit"
    monkeypatch.setattr(system, "run", lambda *cmd, check=True: None)
    first = Store(str(kit), "laguna-vllm.service")
    second = Store(str(kit), "laguna-vllm-2.service", str(kit / "replicas/2"))
    activated = []
    monkeypatch.setattr(activate, "activate", lambda store, n: activated.append(n))
    knobs = defaults()
    one, two = replicas.build(knobs, 2)

    def releases(store, r, versions):
        for n, (digest, seqs) in enumerate(versions, 1):
            os.makedirs(store.folder(n))
            extra = [] if seqs == 4 else ["--max-num-seqs", str(seqs)]
            spec, _ = render_release(
                replicas.knobs_for(dict(knobs, vllm_extra_args=extra), r), digest
            )
            with open(os.path.join(store.folder(n), "release.json"), "w") as fh:
                json.dump({"number": n, "spec": spec}, fh)
        store.save({"current": len(versions), "history": [{"release": len(versions)}]})

    old, new = "sha256:" + "01" * 32, "sha256:" + "02" * 32
    releases(first, one, [(old, 4), (DIGEST, 4), (new, 4), (new, 2)])
    releases(second, two, [(DIGEST, 4), (new, 4), (new, 2)])
    assert activate.like(second, 2) == 1 and activated == [1]
    assert activate.like(second, 3) == 2  # the same image with other flags is another version
    assert activate.like(second, 1) is None and activated == [1, 2]  # it never ran that: stays
    assert activate.like(second, 4) is None and activated == [1, 2]  # it runs that already
    with pytest.raises(ReleaseError, match="replica 1 has no release 9"):
        activate.like(second, 9)
