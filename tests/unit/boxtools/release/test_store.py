"""laguna_kit/boxtools/release/store.py: a release's figures kept from its first passing gate, and
what a new release's decode is held to."""

import json
import os

from laguna_kit.boxtools.release import activate
from laguna_kit.boxtools.release.store import Store, previous_of

from .on_disk import incoming, passed_gate


def test_a_release_is_held_to_the_previous_passing_release_of_its_mode(box):
    incoming(box)
    activate.install_incoming(box)
    assert box.perf_baseline(1) is None  # nothing before it
    passed_gate(box, 1, 280.0)
    assert box.perf(1)["decode_tok_s"] == 280.0 and box.perf(1)["release"] == 1
    assert box.perf_baseline(1) is None  # measured: a re-gate after a restart holds nothing
    incoming(box, mode="speed-128k")
    activate.install_incoming(box)
    assert box.perf_baseline(2) is None  # another mode: not comparable
    passed_gate(box, 2, 250.0, mode="speed-128k")
    incoming(box, unit_body="ExecStart=/usr/bin/docker run z")  # champion again
    activate.install_incoming(box)
    assert box.perf_baseline(3) == {"release": 1, "decode_tok_s": 280.0, "mode": "champion"}
    passed_gate(box, 3, 200.0)  # a pass recorded once: the first pass is the release's figure
    passed_gate(box, 3, 290.0)
    assert box.perf(3)["decode_tok_s"] == 200.0
    incoming(box, unit_body="ExecStart=/usr/bin/docker run w")
    activate.install_incoming(box)
    box.mark_failed(3)  # a failed release is never the figure to hold
    assert box.perf_baseline(4)["release"] == 1


def test_previous_is_the_last_one_that_ran_and_did_not_fail():
    state = {"current": 4, "history": [{"release": n} for n in (1, 2, 3, 4)], "failed": [3]}
    assert previous_of(state) == 2
    assert previous_of({"current": 1, "history": [{"release": 1}]}) is None


def test_a_replica_reads_its_siblings_releases_and_not_its_own(tmp_path):
    kit = tmp_path / "kit"
    first = Store(str(kit), "laguna-vllm.service")
    second = Store(str(kit), "laguna-vllm-2.service", str(kit / "replicas/2"))
    assert second.root == str(kit / "replicas/2/releases")
    for store, digest in ((first, "sha256:1"), (second, "sha256:2")):
        os.makedirs(store.folder(1))
        with open(os.path.join(store.folder(1), "release.json"), "w") as fh:
            json.dump({"number": 1, "spec": {"image_digest": digest}}, fh)
    assert [s["image_digest"] for s in second.sibling_specs()] == ["sha256:1"]
    assert [s["image_digest"] for s in first.sibling_specs()] == ["sha256:2"]
