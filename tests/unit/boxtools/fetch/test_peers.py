"""The fetch tool with fleet peers as sources (laguna_kit/boxtools/fetch/peers.py), over real
HTTP on 127.0.0.1: the stand-in hub and stand-in peer file servers (tests/harness/standin_peer.py,
answering as nginx does; the harness tier drills the real nginx). A fleet fetches each file from
the hub once; a peer that dies mid-file or serves a wrong byte costs a resume or a re-fetch, never
a bad file or a failed fetch."""

import hashlib
import json
import threading
import time

import httpx
import pytest

from laguna_kit.domain import peer_fetch_plan
from tests.harness import standin_peer

from . import runs as fetch_runs
from .runs import control, manifest_of, serving_hub

SHARD = "model-00002-of-00004.safetensors"
FOLDER = "Laguna-S-2.1-INT4"
PROGRESS = f"laguna-fetch-{FOLDER}.progress.json"


@pytest.fixture(scope="module")
def hub():
    with serving_hub(shards=4) as served:
        yield served


def hub_served(url) -> int:
    return sum(httpx.get(f"{url}/_standin/stats").json()["served"].values())


class Box:
    """One box's model_dir and /run/laguna-kit, served by a stand-in peer file server."""

    def __init__(self, tmp_path, name):
        self.name = name
        self.model_dir = tmp_path / name / "models"
        self.run_dir = tmp_path / name / "run"
        self.model_dir.mkdir(parents=True)
        self.run_dir.mkdir(parents=True)
        self.server = standin_peer.Peer(str(self.model_dir), str(self.run_dir))

    def sync(self, url, repo, sources: dict | None = None, **kw):
        if sources is not None:
            path = self.run_dir.parent / "sources.json"
            path.write_text(json.dumps(dict({"folder": FOLDER, "progress": PROGRESS}, **sources)))
            kw.setdefault("sources", str(path))
        kw.setdefault("read_timeout_s", 2.0)
        dest, progress = self.model_dir / FOLDER, self.run_dir / PROGRESS
        return fetch_runs.fetch(self.run_dir.parent, url, repo, dest, progress, **kw)

    def ok(self, repo):
        for name, data in repo.files.items():
            got = (self.model_dir / FOLDER / name).read_bytes()
            assert hashlib.sha256(got).digest() == hashlib.sha256(data).digest(), name


@pytest.fixture
def boxes(tmp_path):
    made = [Box(tmp_path, n) for n in ("box1", "box2", "box3")]
    yield made
    for b in made:
        b.server.stop()


def peers_of(me, boxes):
    return [{"name": b.name, "url": b.server.url} for b in boxes if b is not me]


def test_a_box_takes_every_file_a_peer_has_verified_and_nothing_from_the_hub(hub, boxes):
    url, repo = hub
    control(url, "reset")
    first, second = boxes[:2]
    first.sync(url, repo)
    size = sum(len(d) for d in repo.files.values())
    assert hub_served(url) == size
    control(url, "reset")
    summary = second.sync(url, repo, {"peers": peers_of(second, [first]), "self": second.name})
    second.ok(repo)
    assert summary["hub_bytes"] == 0 and summary["peer_bytes"] == size, summary
    assert hub_served(url) == 0


def test_fresh_boxes_together_fetch_each_file_from_the_hub_once(hub, boxes):
    url, repo = hub
    control(url, "reset")
    control(url, "rate", {"bytes_per_second": 2 << 20})  # one shared, slow uplink
    size = sum(len(d) for d in repo.files.values())
    owners = peer_fetch_plan.owners(manifest_of(repo), [b.name for b in boxes])
    assert set(owners.values()) == {b.name for b in boxes}
    results, errors = {}, []

    def go(b):
        try:
            doc = {"peers": peers_of(b, boxes), "owners": owners, "self": b.name}
            results[b.name] = b.sync(url, repo, doc)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(f"{b.name}: {exc}")

    started = time.monotonic()
    threads = [threading.Thread(target=go, args=(b,)) for b in boxes]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    wall = time.monotonic() - started
    control(url, "rate", {"bytes_per_second": 0})
    assert not errors, errors
    for b in boxes:
        b.ok(repo)
    served = hub_served(url)
    print(f"3 boxes, {size} bytes: hub served {served} ({served / size:.2f}x) in {wall:.1f} s")
    assert served <= 1.05 * size, (served, size, results)
    assert sum(r["peer_bytes"] for r in results.values()) >= 2 * size - 0.05 * size


def test_a_peer_killed_mid_file_costs_a_resume_from_another_source(hub, boxes):
    url, repo = hub
    first, second = boxes[:2]
    first.sync(url, repo)
    control(url, "reset")
    first.server.faults["die_after"][SHARD] = 300_000
    summary = second.sync(url, repo, {"peers": peers_of(second, [first]), "self": second.name})
    second.ok(repo)
    shard = len(repo.files[SHARD])
    # The peer's bytes are kept: the hub sent the rest of that shard (and what the dead peer
    # had not sent yet), never the whole checkpoint again.
    assert summary["peer_bytes"] >= 300_000, summary
    assert summary["hub_bytes"] < sum(len(d) for d in repo.files.values()), summary
    served = httpx.get(f"{url}/_standin/stats").json()["served"]
    assert served.get(f"{repo.repo_id}/{SHARD}", 0) == shard - 300_000, served
    progress = json.loads((second.run_dir / PROGRESS).read_text())
    assert progress["state"] == "verified" and "fleet peer box1" in progress["last_error"]


def test_a_peer_serving_a_wrong_byte_is_refused_and_the_file_fetched_elsewhere(hub, boxes):
    url, repo = hub
    first, second, third = boxes
    first.sync(url, repo)
    control(url, "reset")
    first.server.faults["corrupt"].add(SHARD)
    summary = second.sync(url, repo, {"peers": peers_of(second, [first]), "self": second.name})
    second.ok(repo)
    assert summary["refused_from_peers"] == [f"{SHARD} (from box1)"], summary
    quarantined = list((second.model_dir / FOLDER / ".laguna-quarantine").iterdir())
    assert [q.name.split(".download")[0] for q in quarantined] == [SHARD]
    served = httpx.get(f"{url}/_standin/stats").json()["served"]
    assert served.get(f"{repo.repo_id}/{SHARD}") == len(repo.files[SHARD]), served
    # A peer that served a wrong file is asked for nothing more in that run: another good peer
    # (or the hub) serves it.
    third_summary = third.sync(
        url,
        repo,
        {"peers": peers_of(third, [first, second]), "self": third.name},
    )
    third.ok(repo)
    assert third_summary["hub_bytes"] == 0, third_summary


def test_a_peer_sending_more_bytes_or_another_range_is_left_not_fatal(hub, boxes):
    url, repo = hub
    first, second = boxes[:2]
    first.sync(url, repo)
    other = "model-00003-of-00004.safetensors"
    first.server.faults["pad"].add(SHARD)
    first.server.faults["bad_range"].add(other)
    # ff2 has half of the other shard already: its resume asks the peer for a range
    part = second.model_dir / FOLDER / ".laguna-partial" / f"{other}.part"
    part.parent.mkdir(parents=True)
    part.write_bytes(repo.files[other][:300_000])
    control(url, "reset")
    summary = second.sync(url, repo, {"peers": peers_of(second, [first]), "self": second.name})
    second.ok(repo)
    left = " ".join(summary.get("left_peers", []))
    assert f"{SHARD} (box1: " in left and "sent more than the file" in left, summary
    assert f"{other} (box1: " in left and "Content-Range" in left, summary
    # never more on disk than the file has; a padded file whose bytes were right is kept
    assert (second.model_dir / FOLDER / SHARD).stat().st_size == len(repo.files[SHARD])


def test_a_file_owned_by_a_box_that_is_not_fetching_comes_from_the_hub_at_once(hub, boxes):
    url, repo = hub
    control(url, "reset")
    first, second = boxes[:2]
    first.server.stop()  # the owner's server does not answer
    owners = {p: first.name for p in repo.files}
    started = time.monotonic()
    doc = {"peers": peers_of(second, [first]), "owners": owners, "self": second.name}
    summary = second.sync(url, repo, dict(doc, wait_s=60))
    second.ok(repo)
    assert time.monotonic() - started < 20, "waited for a box that does not answer"
    assert summary["peer_bytes"] == 0
    # An owner whose server answers but whose fetch never starts: waited for wait_s, no longer.
    third = boxes[2]
    control(url, "reset")
    owners = {p: third.name for p in repo.files}
    started = time.monotonic()
    box4 = Box(second.model_dir.parent.parent, "box4")
    try:
        doc = {"peers": peers_of(box4, [third]), "owners": owners, "self": box4.name}
        summary = box4.sync(url, repo, dict(doc, wait_s=2))
        box4.ok(repo)
    finally:
        box4.server.stop()
    waited = time.monotonic() - started
    assert 2 <= waited < 6, waited  # once per owner, not once per file


def test_a_peer_that_does_not_answer_costs_one_timeout_not_one_per_file(hub, boxes):
    """A peer whose server takes connections and never answers (hung, or its firewall half
    open): left for a while after one silence, not asked again for each file."""
    import socket

    url, repo = hub
    control(url, "reset")
    control(url, "rate", {"bytes_per_second": 2 << 20})  # each shard takes a while
    second = boxes[1]
    silent = socket.socket()  # the kernel completes connections into its backlog; no reply
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)
    peer = {"name": "box1", "url": f"http://127.0.0.1:{silent.getsockname()[1]}"}
    started = time.monotonic()
    try:
        summary = second.sync(
            url, repo, {"peers": [peer], "self": second.name, "stall_s": 2}, workers=1
        )
    finally:
        silent.close()
        control(url, "rate", {"bytes_per_second": 0})
    took = time.monotonic() - started
    second.ok(repo)
    assert summary["peer_bytes"] == 0
    # one silence of 2 s and ~2 s of download, not a silence per file (8 files: 20 s and more)
    assert took < 12, f"{took:.1f} s: the silent peer was asked again for each file"


def test_a_peer_that_says_running_but_sends_no_byte_is_not_waited_for(monkeypatch):
    """Issue 37 #10: a record kept fresh ("running", a new `updated` each time) with no byte
    more is a stalled fetch after stall_s; however its bytes grow, no owner is waited for past
    max_wait_s."""
    from laguna_kit.boxtools.fetch import peers as peers_mod

    clock = {"t": 100.0}
    monkeypatch.setattr(peers_mod.time, "monotonic", lambda: clock["t"])
    record = {"state": "running", "done_bytes": 10, "updated": 0}

    def get_json(self, url):
        record["updated"] += 1  # fresh every time it is read
        return 200, dict(record)

    monkeypatch.setattr(peers_mod.Sources, "_get_json", get_json)
    doc = {"folder": "M", "peers": [{"name": "a", "url": "http://a"}], "owners": {}}
    src = peers_mod.Sources(dict(doc, stall_s=15, max_wait_s=600), "r", None, 5)
    owner = src.peers[0]
    assert src.owner_fetching(owner)
    clock["t"] += 10
    assert src.owner_fetching(owner)  # within stall_s of its last byte
    clock["t"] += 10
    assert not src.owner_fetching(owner)  # fresh record, no byte for 20 s
    record["done_bytes"] = 11
    assert src.owner_fetching(owner)
    clock["t"] += 600
    record["done_bytes"] = 12
    assert not src.owner_fetching(owner)  # past max_wait_s, though a byte came
