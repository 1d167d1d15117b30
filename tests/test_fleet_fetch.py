"""A fleet's checkpoints from the hub once (issue 27), on three harness boxes deployed in one run
with the stand-in hub's link slowed: each box serves its verified folders with the distribution's
nginx (bookworm's 1.22), the fleet's boxes alone reach it (real packets from a fleet member, from
another tailnet peer and from off the tailnet), and every byte a box takes from a peer is hashed
against the hub's metadata as the control machine read it.

- bytes served by the hub ≤ 1.05 × the checkpoints' size (each box alone: 3 ×);
- a peer killed mid-transfer: the box goes on from another source in the same run;
- a peer serving a wrong byte: the file is refused and fetched again elsewhere.
"""

import hashlib
import json
import threading
import time

import httpx
import pytest

from laguna_kit.settings import defaults
from tests.harness import box as boxmod
from tests.harness import servers, standin_hub
from tests.harness.deployrun import run_deploy

KNOBS = defaults()
DEPLOY = "tests/deploys/fleet_models.py"
HUB = f"http://127.0.0.1:{servers.HUB_PORT}"
TARGET = "/models/Laguna-S-2.1-INT4"
PORT = KNOBS["peer_files_port"]
LINK = 2 << 20  # bytes/s: the hub's link, slow enough that the boxes' downloads overlap


def hub_control(path, body=None):
    return httpx.post(f"{HUB}/_standin/{path}", json=body or {}).json()


def hub_served() -> dict:
    return httpx.get(f"{HUB}/_standin/stats").json()["served"]


def checkpoint_bytes(sandbox) -> int:
    return sum(len(d) for repo in sandbox.servers.hub.repos.values() for d in repo.files.values())


def fetch_log(b) -> list[dict]:
    out = b.run("cat /opt/laguna-kit/state/fetch-log.jsonl 2>/dev/null || true").stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def target_ok(sandbox, b) -> None:
    files = sandbox.servers.hub.repos[standin_hub.TARGET_REPO].files
    sums = b.run(f"cd {TARGET} && sha256sum {' '.join(sorted(files))}").stdout.split("\n")
    got = dict(reversed(line.split()) for line in sums if line.strip())
    assert got == {n: hashlib.sha256(d).hexdigest() for n, d in files.items()}, b.name


def curl(where: list[str], url: str) -> str:
    """The HTTP status a client at `where` (a command prefix) gets, or "000" (no answer)."""
    proc = boxmod.sh(
        *where, "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-m", "3", url, check=False
    )
    return proc.stdout.strip() or "000"


@pytest.fixture(scope="module")
def fleet(sandbox):
    boxes = [sandbox.add_box(f"ff{i}") for i in (1, 2, 3)]
    hub_control("reset")
    hub_control("rate", {"bytes_per_second": LINK})
    try:
        started = time.monotonic()
        res = run_deploy(sandbox, boxes, DEPLOY)
        wall = time.monotonic() - started
    finally:
        hub_control("rate", {"bytes_per_second": 0})
    assert res.ok, res.explain()
    yield boxes, res, wall, hub_served()
    for b in boxes:
        sandbox.remove_box(b)


def test_three_fresh_boxes_take_the_checkpoints_from_the_hub_once(sandbox, fleet):
    boxes, res, wall, served = fleet
    size = checkpoint_bytes(sandbox)
    total = sum(served.values())
    logs = {b.name: fetch_log(b) for b in boxes}
    peer = sum(x.get("peer_bytes", 0) for log in logs.values() for x in log)
    print(
        f"\nfleet of 3, checkpoints {size} bytes, hub link {LINK} B/s: hub served {total} "
        f"({total / size:.2f} x), peers served {peer} ({peer / size:.2f} x), run wall {wall:.1f} s"
    )
    assert total <= 1.05 * size, (total, size, served)
    assert peer >= 1.9 * size, logs
    for b in boxes:
        target_ok(sandbox, b)
    # The file server: a fleet member gets a verified file; another tailnet peer and a client off
    # the tailnet get nothing; the partial and quarantine folders are never served.
    one, two = boxes[0], boxes[1]
    shard = "model-00001-of-00015.safetensors"
    url = f"http://{one.tailnet_v4}:{PORT}{TARGET.removeprefix('/models')}/{shard}"
    assert curl(["ip", "netns", "exec", two.netns], url) == "200"
    assert curl(["ip", "netns", "exec", boxmod.TAILNET_NS], url) == "000"
    off = f"http://{one.address}:{PORT}{TARGET.removeprefix('/models')}/{shard}"
    assert curl([], off) == "000"
    hidden = f"http://{one.tailnet_v4}:{PORT}{TARGET.removeprefix('/models')}/.laguna-partial/x"
    assert curl(["ip", "netns", "exec", two.netns], hidden) == "404"
    # Nothing the owner had: nginx's stock service never started (masked), port 80 is closed.
    assert one.run("systemctl is-active nginx.service", check=False).stdout.strip() != "active"
    assert ":80 " not in one.run("ss -ltnH").stdout


def test_a_converged_fleet_changes_nothing_and_fetches_nothing(sandbox, fleet):
    boxes = fleet[0]
    hub_control("reset")
    again = run_deploy(sandbox, boxes, DEPLOY)
    assert again.ok, again.explain()
    assert again.changed() == [], again.changed()
    assert hub_served() == {}


def test_a_peer_killed_or_lying_costs_a_resume_or_a_refetch_never_a_bad_file(sandbox, fleet):
    one, two, three = fleet[0]
    shards = [f"model-{i:05d}-of-00015.safetensors" for i in range(1, 16)]
    # ff3 lost its shards; ff1 serves one of them rotten (a byte flipped on its disk after it
    # verified it: its record still claims the hash).
    three.run(f"rm -f {' '.join(f'{TARGET}/{s}' for s in shards)}")
    rotten = shards[0]
    one.run(
        f"python3 -c \"f=open('{TARGET}/{rotten}','r+b'); f.seek(4096); b=f.read(1); f.seek(4096); "
        f'f.write(bytes([b[0]^1])); f.close()"'
    )
    # Peers' bytes reach ff3 slowly (its tailnet link shaped), so ff2 dies mid-transfer.
    boxmod.sh(
        "ip", "netns", "exec", boxmod.TAILNET_NS, "tc", "qdisc", "add", "dev",
        f"ts{three.number}", "root", "tbf", "rate", "8mbit", "burst", "32kbit", "latency", "400ms",
    )  # fmt: skip
    hub_control("reset")
    killed, done = [], threading.Event()
    progress = "/run/laguna-kit/laguna-fetch-Laguna-S-2.1-INT4.progress.json"

    def killer():
        # Once ff3 refused ff1's rotten file (ff1 is then asked for nothing more), its bytes come
        # from ff2: kill ff2's server while a shard is on its way.
        while not done.wait(0.3):
            rec = three.run(f"cat {progress} 2>/dev/null; true", check=False).stdout
            partial = three.run(
                f"du -sb {TARGET}/.laguna-partial 2>/dev/null | cut -f1; true", check=False
            ).stdout.strip()
            if "refused" in rec and partial and int(partial) > 4096:
                two.run("systemctl kill -s KILL laguna-peer-files.service")
                killed.append(time.monotonic())
                return

    watcher = threading.Thread(target=killer, daemon=True)
    watcher.start()
    try:
        res = run_deploy(sandbox, [one, two, three], DEPLOY, args=["--limit", three.name])
    finally:
        done.set()
        boxmod.sh(
            "ip", "netns", "exec", boxmod.TAILNET_NS, "tc", "qdisc", "del", "dev",
            f"ts{three.number}", "root", check=False,
        )  # fmt: skip
    assert res.ok, res.explain()
    target_ok(sandbox, three)
    last = [x for x in fetch_log(three) if x["repo"] == standin_hub.TARGET_REPO][-1]
    assert f"{rotten} (from {one.name})" in last["refused_from_peers"], last
    assert killed, "the drill never killed the peer mid-transfer"
    assert any(two.name in x for x in last["left_peers"]), last
    served = hub_served()
    print(f"\nafter a lying peer and a killed one: hub served {served}, box log {last}")
    # the rotten file again from elsewhere (another peer or the hub), never served by ff3
    assert three.run(f"ls {TARGET}/.laguna-quarantine").stdout.count(rotten) == 1
