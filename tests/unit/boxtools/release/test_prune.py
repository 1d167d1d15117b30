"""laguna_kit/boxtools/release/prune.py: older releases go with what only they used; never the
current one, the rollback target, or what another replica runs."""

import json
import os

from laguna_kit.boxtools.fetch import revisions
from laguna_kit.boxtools.release import prune, system
from laguna_kit.boxtools.release.store import Store

from .on_disk import write_releases


def revisions_stash(live, rev):
    return revisions.stash_path(str(live), rev)


def test_prune_keeps_the_newest_the_current_and_the_rollback_target_and_what_they_use(
    box, tmp_path, monkeypatch
):
    """keep_releases: older releases go with the checkpoint revisions and images only they used;
    what a kept release names stays, so a rollback still finds it."""
    models = tmp_path / "models"
    live = models / "Target"

    specs = [("a" * 40, "sha256:1"), ("b" * 40, "sha256:2"), ("c" * 40, "sha256:2")]
    specs.append(("d" * 40, "sha256:3"))
    for n, (rev, digest) in enumerate(specs, 1):  # four releases, as four deploys leave them
        os.makedirs(box.folder(n))
        spec = {
            "image": "vllm/vllm-openai:v0.25.1",
            "image_digest": digest,
            "checkpoints": [{"dest": str(live), "revision": rev}],
        }
        with open(os.path.join(box.folder(n), "release.json"), "w") as fh:
            json.dump({"number": n, "spec": spec}, fh)
    box.save({"current": 4, "history": [{"release": n} for n in (1, 2, 3, 4)], "failed": [1]})
    # revision d is live; a, b, c are kept in the stash; the box has images 1, 2, 3 and another
    os.makedirs(live, exist_ok=True)
    (live / ".laguna-verified.json").write_text(json.dumps({"revision": "d" * 40}))
    for rev in "abc":
        os.makedirs(revisions_stash(live, rev * 40))
    images = "\n".join(
        f"vllm/vllm-openai@{d}" for d in ("sha256:1", "sha256:2", "sha256:3", "sha256:owner")
    )
    monkeypatch.setattr(system, "capture", lambda *cmd: images if "image" in cmd else "")
    plan = prune.plan(box, 2)
    # releases 3 and 4 are the newest two; 4 is current and 3 the rollback target
    assert plan["releases"] == [1, 2]
    assert plan["revisions"] == [revisions_stash(live, "a" * 40), revisions_stash(live, "b" * 40)]
    # 2 is still run by release 3; the owner's image was never a release's
    assert plan["images"] == ["vllm/vllm-openai@sha256:1"]
    prune.prune(box, 2)
    assert box.numbers() == [3, 4]
    assert not os.path.exists(revisions_stash(live, "a" * 40))
    assert os.path.isdir(revisions_stash(live, "c" * 40))
    assert ("docker", "image", "rm", "vllm/vllm-openai@sha256:1") in box.calls
    assert prune.plan(box, 2) == {
        "releases": [],
        "revisions": [],
        "images": [],
        "compile_caches": [],
    }
    assert box.state()["failed"] == []  # release 1 is gone, and with it its mark


def test_pruning_one_replica_keeps_what_another_replica_runs(tmp_path, monkeypatch):
    """Replicas share the box's images: replica 2's prune must not remove the image replica 1
    still runs (it would, reading its own releases alone)."""
    kit = tmp_path / "kit"
    monkeypatch.setattr(system, "run", lambda *cmd, check=True: None)
    images = "".join(f"vllm/vllm-openai@sha256:{d}\n" for d in ("old", "mid", "new"))
    monkeypatch.setattr(system, "capture", lambda *cmd: images if "image" in cmd else "")
    first = Store(str(kit), "laguna-vllm.service")
    second = Store(str(kit), "laguna-vllm-2.service", str(kit / "replicas/2"))
    assert second.root == str(kit / "replicas/2/releases")

    def releases(store, digests):
        specs = [{"image": "vllm/vllm-openai:v0.25.1", "image_digest": d} for d in digests]
        write_releases(
            store, specs, {"current": len(digests), "history": [{"release": n} for n in (1, 2, 3)]}
        )

    releases(first, ["sha256:old", "sha256:old", "sha256:old"])  # not rolled yet
    releases(second, ["sha256:old", "sha256:mid", "sha256:new"])  # 2: its rollback target
    assert prune.plan(second, 1)["releases"] == [1]
    assert prune.plan(second, 1)["images"] == []  # replica 1 runs it
    (kit / "releases").rename(kit / "gone")
    assert prune.plan(second, 1)["images"] == ["vllm/vllm-openai@sha256:old"]


def test_a_compile_cache_goes_with_the_last_release_that_used_it(box, tmp_path, monkeypatch):
    """Issue 38 #4: vLLM's compile cache is kept per replica and image on the box; the folder of
    an image no kept release runs is pruned with it, the kept ones' stay."""
    caches = tmp_path / "vllm-compile" / "vllm-laguna"
    for n, image in enumerate(("1111", "2222", "2222", "3333"), 1):
        os.makedirs(box.folder(n))
        os.makedirs(caches / image, exist_ok=True)
        spec = {"image_digest": f"sha256:{image}", "compile_cache": str(caches / image)}
        with open(os.path.join(box.folder(n), "release.json"), "w") as fh:
            json.dump({"number": n, "spec": spec}, fh)
    box.save({"current": 4, "history": [{"release": n} for n in (1, 2, 3, 4)]})
    monkeypatch.setattr(system, "capture", lambda *cmd: "")
    assert prune.plan(box, 2)["compile_caches"] == [str(caches / "1111")]
    prune.prune(box, 2)
    assert sorted(os.listdir(caches)) == ["2222", "3333"]
