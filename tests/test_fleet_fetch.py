"""A fleet's first deploy takes the checkpoints and the image from outside once (issue 27): three
harness boxes and an image cache host (roles = ["cache"]) deployed in one run with the stand-in
hub's link slowed, and no way to the stand-in Docker Hub but the cache.

Checkpoints: each box serves its verified folders with the distribution's nginx (bookworm's 1.22),
the fleet's boxes alone reach it (real packets from a fleet member, from another tailnet peer and
from off the tailnet), every byte a box takes from a peer is hashed against the hub's metadata:
- bytes served by the hub ≤ 1.05 × the checkpoints' size (each box alone: 3 ×);
- a peer killed mid-transfer: the box goes on from another source in the same run;
- a peer serving a wrong byte: the file is refused and fetched again elsewhere.
Image: Debian's docker-registry 2.8 as a pull-through cache of the stand-in Docker Hub, warmed once:
- each blob left the stand-in Docker Hub whole once; the boxes' images have the digest the
  registry itself names; the cache answers the fleet's GPU boxes alone.
A converged fleet changes nothing and fetches nothing.
"""

import hashlib
import json
import re
import threading
import time
from pathlib import Path

import httpx
import pytest

from laguna_kit.knobs.declared import defaults
from tests.harness import box as boxmod
from tests.harness import servers, standin_hub
from tests.harness.deployrun import run_deploy
from tests.harness.paths import run_dir
from tests.harness.sandbox import HARNESS_DOCKER

KNOBS = defaults()
DEPLOY = "tests/deploys/fleet_first.py"
DRIVER = {"version": "580.95.05", "cuda": "13.0"}  # a working driver: the image step checks it
CACHE_PORT = KNOBS["registry_cache_port"]
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


def sending_peer_files(b) -> bool:
    """Whether `b`'s peer file server has bytes queued on a connection (Send-Q > 0): a kill
    between two files would cost the fetching box nothing to leave, and prove nothing."""
    lines = b.run(f"ss -Htn state established '( sport = :{PORT} )'", check=False).stdout
    queues = [line.split()[1] for line in lines.splitlines() if len(line.split()) >= 2]
    return any(q.isdigit() and int(q) > 0 for q in queues)


def registry_log() -> str:
    return (run_dir() / "registry.log").read_text(errors="replace")


def blob_gets(text: str) -> dict[str, int]:
    """{blob digest: bytes} the stand-in Docker Hub sent for GETs of blobs, from its log."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        if "response completed" not in line or "http.request.method=GET" not in line:
            continue
        m = re.search(r'http.request.uri="/v2/[^"]*/blobs/(sha256:[0-9a-f]{64})"', line)
        n = re.search(r"http.response.written=(\d+)", line)
        if m and n:
            out[m.group(1)] = out.get(m.group(1), 0) + int(n.group(1))
    return out


@pytest.fixture(scope="module")
def fleet(sandbox):
    boxes = [sandbox.add_box(f"ff{i}", driver=DRIVER) for i in (1, 2, 3)]
    cache = sandbox.add_box("ffcache", roles=["cache"])
    data = {
        "docker_daemon_config": HARNESS_DOCKER,  # no mirror of the harness's: the cache or nothing
        "registry_cache_upstream": sandbox.servers.urls(cache)["registry_mirror"],
    }
    hub_control("reset")
    hub_control("rate", {"bytes_per_second": LINK})
    before = len(registry_log())
    try:
        started = time.monotonic()
        res = run_deploy(sandbox, [*boxes, cache], DEPLOY, data=data)
        wall = time.monotonic() - started
    finally:
        hub_control("rate", {"bytes_per_second": 0})
    assert res.ok, res.explain()
    yield boxes, cache, data, wall, hub_served(), registry_log()[before:]
    for b in [*boxes, cache]:
        sandbox.remove_box(b)


def test_three_fresh_boxes_take_the_checkpoints_from_the_hub_once(sandbox, fleet):
    boxes, _, _, wall, served, _ = fleet
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
    boxes, cache, data = fleet[:3]
    hub_control("reset")
    before = len(registry_log())
    again = run_deploy(sandbox, [*boxes, cache], DEPLOY, data=data)
    assert again.ok, again.explain()
    assert again.changed() == [], again.changed()
    assert hub_served() == {}
    # No layer left the stand-in Docker Hub (the control machine reads the image's small config
    # blob there each run, for its CUDA requirement: not a pull).
    layers = {b for b, n in blob_gets(registry_log()[before:]).items() if n > 64 << 10}
    assert layers == set(), layers


def test_a_peer_killed_or_lying_costs_a_resume_or_a_refetch_never_a_bad_file(sandbox, fleet):
    one, two, three = fleet[0]
    cache, data = fleet[1], fleet[2]
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
            # (the refusal as the fetch says it: its record also holds an empty
            # "refused_from_peers" list from the start); ff2 mid-transfer: asked last, once the
            # rest holds, so the poll stays quick
            refused = "fetched again without them" in rec and partial and int(partial) > 4096
            if refused and sending_peer_files(two):
                two.run("systemctl kill -s KILL laguna-peer-files.service")
                killed.append(time.monotonic())
                return

    watcher = threading.Thread(target=killer, daemon=True)
    watcher.start()
    try:
        res = run_deploy(
            sandbox, [one, two, three, cache], DEPLOY, data=data, args=["--limit", three.name]
        )
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
    assert any(two.name in x for x in last.get("left_peers", [])), last
    served = hub_served()
    print(f"\nafter a lying peer and a killed one: hub served {served}, box log {last}")
    # the rotten file again from elsewhere (another peer or the hub), never served by ff3
    assert three.run(f"ls {TARGET}/.laguna-quarantine").stdout.count(rotten) == 1
    # ff1 was outside the run: the run named it and the file (issue 37 #12)
    assert f"{rotten} from the fleet box {one.name} failed its hash here" in res.output
    # its own deploy re-verifies what ff3 refused, quarantines the rotten shard and fetches it
    # again in the same run
    mend = run_deploy(
        sandbox, [one, two, three, cache], DEPLOY, data=data, args=["--limit", one.name]
    )
    assert mend.ok, mend.explain()
    target_ok(sandbox, one)
    assert one.run(f"ls {TARGET}/.laguna-quarantine").stdout.count(rotten) == 1
    assert any("Files a fleet box refused from this one" in n for n in mend.changed(one.name))
    # judged once (the ledger on the box; a converged re-run: the operation's fixtures)
    assert rotten in one.run("cat /opt/laguna-kit/state/peer-refusals.json").stdout


def test_the_boxes_pull_the_image_through_the_cache(fleet):
    boxes, cache, log = fleet[0], fleet[1], fleet[5]
    digests = set()
    for b in boxes:
        got = b.run(
            "docker image inspect --format '{{json .RepoDigests}}' vllm/vllm-openai:v0.25.1"
        )
        digests.add(json.loads(got.stdout)[0].split("@")[1])
        daemon = json.loads(b.run("cat /etc/docker/daemon.json").stdout)
        assert daemon["registry-mirrors"] == [f"http://{cache.tailnet_v4}:{CACHE_PORT}"], daemon
    assert len(digests) == 1
    sent = blob_gets(log)
    sizes = {}
    for line in cache.run(
        "find /var/lib/laguna-kit/registry-cache -path '*/blobs/sha256/*/data' -printf '%h %s\\n'"
    ).stdout.splitlines():
        folder, size = line.rsplit(" ", 1)
        sizes["sha256:" + folder.rsplit("/", 1)[1]] = int(size)
    image, upstream = sum(sizes.values()), sum(sent.values())
    print(
        f"\nimage cache: 3 boxes pulled {image} bytes of blobs each; the stand-in Docker Hub sent "
        f"{upstream} ({upstream / image:.3f} x the image) for {len(sent)} blobs"
    )
    assert image > 0, "the cache stored nothing"
    # Each blob left the stand-in Docker Hub whole once: the warming's own request is closed at
    # its headers, and what the path's socket buffers held by then went with it: at most the
    # cache's receive buffer plus the stand-in's send buffer (the kernels' tcp_rmem / tcp_wmem
    # maxima; a CI run under load measured 10.35 MB over a 45 MB blob, within their 10 MiB).
    buffers = int(cache.run("cut -f3 /proc/sys/net/ipv4/tcp_rmem").stdout) + int(
        Path("/proc/sys/net/ipv4/tcp_wmem").read_text().split()[2]
    )
    for blob, size in sizes.items():
        assert sent.get(blob, 0) <= size + buffers + (1 << 20), (blob, size, buffers, sent)
    warm = json.loads(cache.run("cat /opt/laguna-kit/state/cache-warm.json").stdout)
    assert warm["image"] == "vllm/vllm-openai:v0.25.1" and warm["digest"] in digests


def test_the_cache_answers_the_fleets_gpu_boxes_alone(fleet):
    boxes, cache = fleet[0], fleet[1]
    url = f"http://{cache.tailnet_v4}:{CACHE_PORT}/v2/"
    assert curl(["ip", "netns", "exec", boxes[0].netns], url) == "200"
    assert curl(["ip", "netns", "exec", boxmod.TAILNET_NS], url) == "000"
    assert curl([], f"http://{cache.address}:{CACHE_PORT}/v2/") == "000"
    # The package's own service never ran (masked before the install): nothing else on :5000.
    assert cache.run(
        "systemctl is-enabled docker-registry.service", check=False
    ).stdout.strip() == ("masked")


def test_a_box_reaches_the_cache_and_its_peers_only_as_its_root_tools_do(fleet):
    """Issue 37, the cache alone and the file servers: on a GPU box only root (Docker's daemon,
    the kit's fetch) opens the cache's and the peers' ports, no other local user; the cache host
    answers no tailnet peer on any other port it listens on."""
    boxes, cache = fleet[0], fleet[1]
    b, peer = boxes[0], boxes[1]

    def as_user(user, url) -> str:
        out = b.run(
            f"runuser -u {user} -- curl -s -o /dev/null -w '%{{http_code}}' -m 3 {url}",
            check=False,
        )
        return out.stdout.strip()

    cache_url = f"http://{cache.tailnet_v4}:{CACHE_PORT}/v2/"
    files_url = f"http://{peer.tailnet_v4}:{PORT}/"
    assert as_user("root", cache_url) == "200" and as_user("root", files_url) != "000"
    assert as_user("nobody", cache_url) == "000" and as_user("nobody", files_url) == "000"
    # a peer's file server serves verified files alone: no link followed, no record half
    # written, no stashed revision (issue 37 #10)
    folder = f"{TARGET}/"
    peer.run(f"ln -sf /etc/shadow {folder}leak && echo '{{}}' > {folder}.laguna-verified.json.tmp")
    try:
        name = TARGET.rsplit("/", 1)[1]
        for path in (f"{name}/leak", f"{name}/.laguna-verified.json.tmp"):
            assert as_user("root", f"{files_url}{path}") in ("403", "404"), path
        assert as_user("root", f"{files_url}{name}/.laguna-verified.json") == "200"
    finally:
        peer.run(f"rm -f {folder}leak {folder}.laguna-verified.json.tmp")
    ports = set()
    for line in cache.run("ss -Hltn").stdout.splitlines():
        local = line.split()[3]
        if not local.startswith(("127.", "[::1]")):
            ports.add(int(local.rsplit(":", 1)[1]))
    for port in sorted(ports - {22}):
        url = f"http://{cache.tailnet_v4}:{port}/"
        assert curl(["ip", "netns", "exec", boxmod.TAILNET_NS], url) == "000", port


def test_the_file_servers_exact_invocation_runs_the_oldest_nginx_the_kit_meets():
    """Issue 38 #5: Ubuntu 22.04 ships nginx 1.18.0, which has no -e (added in 1.19.5, nginx
    CHANGES); the unit ran `nginx -e stderr` and a jammy fleet's file server never started.
    bullseye's nginx 1.18.0 is the same upstream version: the kit's exact ExecStart and
    configuration, run here against that binary as the unit's unprivileged user would, serve a
    verified file and nothing else; the invocation before the change is refused by it."""
    import shlex
    import shutil
    import socket
    import subprocess
    import tempfile
    from pathlib import Path

    from laguna_kit.operations.files import kit_file
    from tests.harness import older_debian

    root = older_debian.unpacked(["nginx-light", "libssl1.1", "libpcre3"])
    nginx = str(root / "usr/sbin/nginx")
    env = {"LD_LIBRARY_PATH": older_debian.library_path(root), "PATH": "/usr/sbin:/usr/bin:/bin"}
    assert (
        "nginx/1.18.0"
        in subprocess.run([nginx, "-v"], capture_output=True, text=True, env=env).stderr
    )
    tmp_path = Path(tempfile.mkdtemp(prefix="laguna-old-nginx-"))  # (pytest's is root's alone)
    models, run = tmp_path / "models", tmp_path / "run"
    (models / "Laguna-S-2.1-INT4" / ".laguna-partial").mkdir(parents=True)
    (models / "Laguna-S-2.1-INT4" / "config.json").write_text("{}")
    (models / "Laguna-S-2.1-INT4" / ".laguna-partial" / "x").write_text("unproven")
    run.mkdir()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    conf = tmp_path / "peer-files-nginx.conf"
    text = kit_file(
        "files/peer-files-nginx.conf.j2",
        port=port,
        model_dir=str(models),
        folders=["Laguna-S-2.1-INT4"],
        run_dir=str(run),
    ).decode()
    conf.write_text(text.replace("/run/laguna-peer-files/", f"{run}/"))
    subprocess.run(["chmod", "-R", "a+rX", str(tmp_path)], check=True)
    shutil.chown(run, "nobody")  # the unit's RuntimeDirectory, its user's
    unit = kit_file("files/laguna-peer-files.service.j2", config=str(conf)).decode()
    exec_start = next(x for x in unit.splitlines() if x.startswith("ExecStart="))
    words = shlex.split(exec_start.split("=", 1)[1].replace("$$", "$"))  # systemd's $$ is $
    assert words[:2] == ["/bin/sh", "-c"]
    script = words[2].replace("/usr/sbin/nginx", nginx)
    old = subprocess.run(
        ["runuser", "-u", "nobody", "--", nginx, "-e", "stderr", "-c", str(conf), "-t"],
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert old.returncode != 0 and 'invalid option: "e"' in old.stderr, old.stderr
    proc = subprocess.Popen(
        ["runuser", "-u", "nobody", "--", "/bin/sh", "-c", script],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and proc.poll() is None:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.2)
        assert proc.poll() is None, proc.communicate()[1]
        got = {
            path: httpx.get(f"http://127.0.0.1:{port}{path}").status_code
            for path in (
                "/Laguna-S-2.1-INT4/config.json",
                "/Laguna-S-2.1-INT4/.laguna-partial/x",
                "/etc/passwd",
            )
        }
        assert got == {
            "/Laguna-S-2.1-INT4/config.json": 200,
            "/Laguna-S-2.1-INT4/.laguna-partial/x": 404,
            "/etc/passwd": 404,
        }, got
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(tmp_path, ignore_errors=True)
