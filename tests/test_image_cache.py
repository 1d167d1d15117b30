"""The fleet's image cache (issue 27) on harness boxes: a host with roles = ["cache"] runs Debian's
docker-registry 2.8 (bookworm's) as a pull-through cache of the stand-in Docker Hub (the harness's
docker-registry), two GPU boxes pull the image through it with no other way to the registry, and
real packets check who reaches it.

- the image is on both boxes with the digest the registry itself names (tasks/image.py checks);
- the stand-in Docker Hub served each layer to the cache, not to each box;
- the cache answers the fleet's GPU boxes alone (not another tailnet peer, not off the tailnet);
- a converged fleet changes nothing.
"""

import json
import re

import pytest

from tests.harness import box as boxmod
from tests.harness.deployrun import run_deploy
from tests.harness.paths import run_dir
from tests.harness.sandbox import HARNESS_DOCKER

DEPLOY = "tests/deploys/fleet_image.py"
DRIVER = {"version": "580.95.05", "cuda": "13.0"}  # a working driver: the image step checks it
PORT = 5000  # registry_cache_port's default


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


def curl(where: list[str], url: str) -> str:
    proc = boxmod.sh(
        *where, "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-m", "3", url, check=False
    )
    return proc.stdout.strip() or "000"


@pytest.fixture(scope="module")
def cached(sandbox):
    boxes = [sandbox.add_box(f"ic{i}", driver=DRIVER) for i in (1, 2)]
    cache = sandbox.add_box("iccache", roles=["cache"])
    data = {
        "docker_daemon_config": HARNESS_DOCKER,  # no mirror of the harness's: the cache or nothing
        "registry_cache_upstream": sandbox.servers.urls(cache)["registry_mirror"],
    }
    before = len(registry_log())
    res = run_deploy(sandbox, [*boxes, cache], DEPLOY, data=data)
    assert res.ok, res.explain()
    yield boxes, cache, data, registry_log()[before:]
    for b in [*boxes, cache]:
        sandbox.remove_box(b)


def test_the_boxes_pull_the_image_through_the_cache(sandbox, cached):
    boxes, cache, _, log = cached
    digests = set()
    for b in boxes:
        got = b.run(
            "docker image inspect --format '{{json .RepoDigests}}' vllm/vllm-openai:v0.25.1"
        )
        digests.add(json.loads(got.stdout)[0].split("@")[1])
        daemon = json.loads(b.run("cat /etc/docker/daemon.json").stdout)
        assert daemon["registry-mirrors"] == [f"http://{cache.tailnet_v4}:{PORT}"], daemon
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
        f"\nimage cache: 2 boxes pulled {image} bytes of blobs each; the stand-in Docker Hub sent "
        f"{upstream} ({upstream / image:.3f} x the image) for {len(sent)} blobs"
    )
    assert image > 0, "the cache stored nothing"
    # Each blob left the stand-in Docker Hub whole once: the warming's own request is closed at
    # its headers (what the socket buffers held, a few MiB at most, went with it).
    for blob, size in sizes.items():
        assert sent.get(blob, 0) <= size + (8 << 20), (blob, size, sent)
    warm = json.loads(cache.run("cat /opt/laguna-kit/state/cache-warm.json").stdout)
    assert warm["image"] == "vllm/vllm-openai:v0.25.1" and warm["digest"] in digests


def test_the_cache_answers_the_fleets_gpu_boxes_alone(cached):
    boxes, cache, _, _ = cached
    url = f"http://{cache.tailnet_v4}:{PORT}/v2/"
    assert curl(["ip", "netns", "exec", boxes[0].netns], url) == "200"
    assert curl(["ip", "netns", "exec", boxmod.TAILNET_NS], url) == "000"
    assert curl([], f"http://{cache.address}:{PORT}/v2/") == "000"
    # The package's own service never ran (masked before the install): nothing else on :5000.
    assert cache.run(
        "systemctl is-enabled docker-registry.service", check=False
    ).stdout.strip() == ("masked")


def test_a_converged_fleet_with_a_cache_changes_nothing(sandbox, cached):
    boxes, cache, data, _ = cached
    again = run_deploy(sandbox, [*boxes, cache], DEPLOY, data=data)
    assert again.ok, again.explain()
    assert again.changed() == [], again.changed()
