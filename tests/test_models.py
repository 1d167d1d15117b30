"""tasks/models.py through the stand-in hub: verified, resumable, repaired, never re-hashed
needlessly."""

import hashlib
import json
import time

import httpx
import pytest

from tests.harness import servers, standin_hub

TARGET = "/models/Laguna-S-2.1-INT4"
SHARD = "model-00005-of-00015.safetensors"
HUB = f"http://127.0.0.1:{servers.HUB_PORT}"
DEPLOY = "tests/deploys/models.py"


def hub_control(path, body=None):
    return httpx.post(f"{HUB}/_standin/{path}", json=body or {}).json()


def served(name):
    return (
        httpx.get(f"{HUB}/_standin/stats")
        .json()["served"]
        .get(f"{standin_hub.TARGET_REPO}/{name}", 0)
    )


def fetch_log(b):
    out = b.run("cat /opt/laguna-kit/state/fetch-log.jsonl 2>/dev/null || true").stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def hub_file(sandbox, name):
    return sandbox.servers.hub.repos[standin_hub.TARGET_REPO].files[name]


@pytest.fixture(scope="module")
def converged_box(sandbox):
    """One converged box shared by the tests that damage it and expect the kit to repair it."""
    from tests.harness.deployrun import run_deploy

    b = sandbox.add_box()
    res = run_deploy(sandbox, [b], DEPLOY)
    assert res.ok, res.explain()
    yield b
    sandbox.remove_box(b)


@pytest.fixture
def converged(converged_box, deploy):
    yield converged_box
    # Each test leaves the box converged again, for the next one.
    assert deploy(converged_box, DEPLOY).changed() == []


def test_fresh_download_is_verified_and_rerun_hashes_nothing(converged, deploy, sandbox):
    b = converged
    for name, data in sandbox.servers.hub.repos[standin_hub.TARGET_REPO].files.items():
        assert (
            b.run(f"sha256sum {TARGET}/{name}").stdout.split()[0]
            == hashlib.sha256(data).hexdigest()
        ), name
    assert b.run("cat /models/Laguna-S-2.1-DFlash-INT4/config.json").stdout
    logs = fetch_log(b)
    target = next(x for x in logs if x["repo"] == standin_hub.TARGET_REPO)
    assert target["fetched"] == 19 and target["hashed_bytes"] == target["downloaded_bytes"]
    assert b.run(f"ls -A {TARGET} | grep -c laguna-partial", check=False).stdout.strip() == "0"

    hub_control("reset")
    second = deploy(b, DEPLOY)
    assert second.ok, second.explain()
    assert second.changed() == [], second.changed()
    assert len(fetch_log(b)) == len(logs), "the downloader ran on a converged box"
    assert httpx.get(f"{HUB}/_standin/stats").json()["served"] == {}, "bytes were downloaded again"

    # A file whose stat changed is re-hashed, and only that one.
    b.run(f"touch {TARGET}/{SHARD}")
    third = deploy(b, DEPLOY)
    assert third.ok, third.explain()
    last = fetch_log(b)[-1]
    assert last["hashed_bytes"] == len(hub_file(sandbox, SHARD)) and last["downloaded_bytes"] == 0


def test_a_cut_or_stalled_transfer_is_resumed_within_the_same_run(make_box, deploy, sandbox):
    """Tried as a new user would: the hub cuts one shard, then hangs in the middle of another
    (connection open, no bytes). The deploy resumes both from the bytes received and succeeds."""
    b = make_box()
    hub_control("reset")
    other = "model-00009-of-00015.safetensors"
    hub_control("faults", {"cut": {SHARD: 400_000}, "stall": {other: [300_000, 30]}})
    res = deploy(b, DEPLOY, data={"download_read_timeout_s": 3, "download_backoff_max_s": 1})
    assert res.ok, res.explain()
    target = next(e for e in fetch_log(b) if e["repo"] == standin_hub.TARGET_REPO)
    assert target["retries"] >= 2, target
    for name in (SHARD, other):
        size = len(hub_file(sandbox, name))
        print(f"{name}: {served(name)} bytes served for {size} (resumed, not restarted)")
        assert served(name) <= size + (1 << 16)
        assert (
            b.run(f"sha256sum {TARGET}/{name}").stdout.split()[0]
            == hashlib.sha256(hub_file(sandbox, name)).hexdigest()
        )
    assert target["hashed_bytes"] == target["downloaded_bytes"], "a second read pass"


def test_exhausted_retries_name_the_file_and_the_next_run_resumes_from_the_bytes_on_disk(
    make_box, deploy, sandbox
):
    b = make_box()
    hub_control("reset")
    size = len(hub_file(sandbox, SHARD))
    hub_control("faults", {"cut": {SHARD: 400_000}, "status": {SHARD: [503, 1000]}})
    first = deploy(b, DEPLOY, data={"download_retries": 2, "download_backoff_max_s": 1})
    assert not first.ok
    assert (
        f"{SHARD}: 400000 of {size} bytes on disk after 3 attempts without progress; "
        "last error: Retryable: HTTP 503 from the hub" in first.output
    ), first.explain()
    assert "re-run to resume" in first.output
    partial = int(b.run(f"stat -c %s {TARGET}/.laguna-partial/{SHARD}.part").stdout)
    assert partial == 400_000
    assert b.run(f"test -e {TARGET}/{SHARD}", check=False).returncode == 1, (
        "a half file looks complete"
    )
    hub_control("reset")
    second = deploy(b, DEPLOY)
    assert second.ok, second.explain()
    refetched = served(SHARD)
    missing = size - partial
    print(
        f"resume: {partial} bytes kept, {missing} missing, {refetched} fetched "
        f"({refetched / missing:.3f}x)"
    )
    assert refetched <= 1.05 * missing
    assert (
        b.run(f"sha256sum {TARGET}/{SHARD}").stdout.split()[0]
        == hashlib.sha256(hub_file(sandbox, SHARD)).hexdigest()
    )
    last = [e for e in fetch_log(b) if e["repo"] == standin_hub.TARGET_REPO][-1]
    assert last["hashed_bytes"] == last["downloaded_bytes"] + partial, "resumed bytes hashed once"


@pytest.mark.parametrize(
    "damage",
    [
        f"printf 'XXXXXXXX' | dd of={TARGET}/{SHARD} bs=1 seek=4096 conv=notrunc status=none",
        f"truncate -s 1000 {TARGET}/{SHARD}",
    ],
    ids=["corrupted", "truncated"],
)
def test_damaged_shard_is_named_quarantined_and_repaired(converged, deploy, sandbox, damage):
    b = converged
    b.run(damage)
    res = deploy(b, DEPLOY)
    assert res.ok, res.explain()
    last = fetch_log(b)[-1]
    assert any(r.startswith(SHARD) for r in last["repaired"]), last
    assert b.run(f"ls {TARGET}/.laguna-quarantine/").stdout.startswith(SHARD)
    assert (
        b.run(f"sha256sum {TARGET}/{SHARD}").stdout.split()[0]
        == hashlib.sha256(hub_file(sandbox, SHARD)).hexdigest()
    )


def test_a_source_serving_wrong_bytes_twice_fails_with_both_hashes(make_box, deploy, sandbox):
    b = make_box()
    hub_control("reset")
    hub_control("faults", {"corrupt": {SHARD: True}})
    try:
        res = deploy(b, DEPLOY)
    finally:
        hub_control("reset")
    assert not res.ok
    want = hashlib.sha256(hub_file(sandbox, SHARD)).hexdigest()
    assert (
        f"{SHARD}: fetched twice, both wrong" in res.output
        and f"the hub's hash is {want}" in res.output
    )
    assert b.run(f"test -e {TARGET}/{SHARD}", check=False).returncode == 1


def test_index_naming_a_missing_shard_is_caught(make_box, deploy, sandbox):
    b = make_box()
    hub = sandbox.servers.hub
    name = "model.safetensors.index.json"
    index = json.loads(hub_file(sandbox, name))
    index["weight_map"]["model.layers.99.weight"] = "model-00016-of-00015.safetensors"
    old = hub.replace_file(standin_hub.TARGET_REPO, name, json.dumps(index).encode())
    try:
        res = deploy(b, DEPLOY)
    finally:
        hub.replace_file(standin_hub.TARGET_REPO, name, old)
    assert not res.ok
    assert "names shards that are not present: model-00016-of-00015.safetensors" in res.output


def test_stray_shard_from_another_revision_is_moved_aside(converged, deploy):
    b = converged
    b.run(f"cp {TARGET}/{SHARD} {TARGET}/model-00016-of-00016.safetensors")
    res = deploy(b, DEPLOY)
    assert res.ok, res.explain()
    assert b.run(f"test -e {TARGET}/model-00016-of-00016.safetensors", check=False).returncode == 1
    assert "model-00016-of-00016.safetensors" in b.run(f"ls {TARGET}/.laguna-quarantine/").stdout


def test_token_is_used_but_never_shown_or_left_on_the_box(make_box, deploy, sandbox):
    b = make_box()
    hub_control("reset")
    res = deploy(b, DEPLOY, args=["-v"])
    assert res.ok, res.explain()
    assert servers.HUB_TOKEN not in res.output
    assert f"Bearer {servers.HUB_TOKEN}" in sandbox.servers.hub.auth_seen, (
        "the box did not authenticate"
    )
    leaks = b.run(
        f"grep -rl {servers.HUB_TOKEN} /opt /models /etc /root /var/log /tmp 2>/dev/null; "
        f"journalctl --no-pager 2>/dev/null | grep -c {servers.HUB_TOKEN}",
        check=False,
    ).stdout.split()
    assert leaks == ["0"], leaks
    # The token reached the box on stdin into a 0700 folder on /run (tmpfs), never via /tmp, and
    # is gone once the fetch ended.
    assert b.run("ls -A /run/laguna-kit/secrets").stdout.strip() == ""
    assert b.run("stat -c %a /run/laguna-kit/secrets").stdout.strip() == "700"
    assert b.run("findmnt -n -o FSTYPE --target /run/laguna-kit/secrets").stdout.strip() == "tmpfs"


def test_disk_too_small_is_refused_before_the_first_byte(make_box, deploy):
    b = make_box()
    b.run("mkdir -p /models && mount -t tmpfs -o size=8m tmpfs /models")
    hub_control("reset")
    res = deploy(b, DEPLOY, data={"checkpoint_free_margin_gib": 0})
    assert not res.ok
    assert "MiB free at /models, need 15 MiB" in res.output, res.explain()
    assert httpx.get(f"{HUB}/_standin/stats").json()["served"] == {}


def test_disk_full_mid_transfer_fails_with_numbers_and_resumes(make_box, deploy, sandbox):
    from tests.harness.deployrun import start_deploy, wait_deploy

    b = make_box()
    b.run(
        "mkdir -p /models && mount -t tmpfs -o size=24m tmpfs /models"
    )  # room for the 15 MiB, no more
    hub_control("reset")
    hub_control(
        "faults", {"slow": {SHARD: 256 << 10}}
    )  # a shard still arriving when the disk fills
    data = {"checkpoint_free_margin_gib": 0}
    run = start_deploy(sandbox, [b], DEPLOY, data=data)
    part = f"{TARGET}/.laguna-partial/{SHARD}.part"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and b.run(f"test -s {part}", check=False).returncode != 0:
        time.sleep(0.2)
    b.run(
        "dd if=/dev/zero of=/models/filler bs=64k status=none; true"
    )  # something else takes the disk
    res = wait_deploy(run)
    # The hub's slowed stream of that shard goes on until it notices its client is gone: let it, so
    # that none of its bytes count as the re-run's.
    last, now = None, httpx.get(f"{HUB}/_standin/stats").json()["served"]
    for _ in range(30):  # a 1 MiB shard at 256 KiB/s: a few seconds at most
        if now == last:
            break
        time.sleep(1)
        last, now = now, httpx.get(f"{HUB}/_standin/stats").json()["served"]
    hub_control("reset")
    assert not res.ok
    assert (
        f"{SHARD}: disk full at {TARGET} (0 MiB free) after " in res.output
        and "re-run to resume" in res.output
    ), res.explain()
    assert b.run(f"test -e {TARGET}/{SHARD}", check=False).returncode == 1, (
        "a half file looks complete"
    )
    kept = int(b.run(f"stat -c %s {part}").stdout)
    assert 0 < kept < len(hub_file(sandbox, SHARD))
    b.run("rm /models/filler")
    again = deploy(b, DEPLOY, data=data)
    assert again.ok, again.explain()
    assert served(SHARD) <= 1.05 * (len(hub_file(sandbox, SHARD)) - kept)
    assert (
        b.run(f"sha256sum {TARGET}/{SHARD}").stdout.split()[0]
        == hashlib.sha256(hub_file(sandbox, SHARD)).hexdigest()
    )


def test_offline_mirror_is_pushed_from_the_control_machine_and_verified_the_same_way(
    make_box, deploy, tmp_path
):
    import os
    import subprocess
    import sys

    from laguna_kit import KIT_ROOT

    mirror = tmp_path / "mirror"
    made = subprocess.run(
        [sys.executable, "scripts/mirror_checkpoints.py", "--dest", str(mirror), "--endpoint", HUB],
        cwd=KIT_ROOT,
        capture_output=True,
        text=True,
        env=dict(os.environ, HF_TOKEN=servers.HUB_TOKEN),
    )
    assert made.returncode == 0, made.stderr[-2000:]
    b = make_box()
    hub_control("reset")
    # No hub at all: an address that answers nothing, and no token.
    offline = {"checkpoint_mirror": str(mirror), "hf_endpoint": "http://127.0.0.1:9"}
    res = deploy(b, DEPLOY, data=offline, env={"HF_TOKEN": ""})
    assert res.ok, res.explain()
    assert httpx.get(f"{HUB}/_standin/stats").json()["served"] == {}, "the box used the hub"
    shard = mirror / f"poolside__Laguna-S-2.1-INT4@{standin_hub.TARGET_COMMIT}" / SHARD
    assert (
        b.run(f"sha256sum {TARGET}/{SHARD}").stdout.split()[0]
        == hashlib.sha256(shard.read_bytes()).hexdigest()
    )
    assert b.run(f"ls -A {TARGET}.laguna-upload 2>/dev/null | wc -l").stdout.strip() == "0"
    again = deploy(b, DEPLOY, data=offline, env={"HF_TOKEN": ""})
    assert again.ok and again.changed() == [], again.changed()

    # A damaged copy on the box and a mirror gone bad: caught on the box by name and both hashes,
    # and nothing wrong is put in place.
    good = shard.read_bytes()
    shard.write_bytes(b"\0" * 16 + good[16:])
    b.run(f"truncate -s 100 {TARGET}/{SHARD}")
    bad = deploy(b, DEPLOY, data=offline, env={"HF_TOKEN": ""})
    assert not bad.ok
    want = hashlib.sha256(good).hexdigest()
    assert (
        f"{SHARD}: the mirror's copy has hash {hashlib.sha256(shard.read_bytes()).hexdigest()}, "
        f"the hub recorded {want}" in bad.output
    ), bad.explain()
    assert b.run(f"test -e {TARGET}/{SHARD}", check=False).returncode == 1, (
        "a bad file was put in place"
    )


def test_a_download_outlives_a_killed_run_and_the_next_run_waits_for_it(make_box, deploy, sandbox):
    """The control machine's run dies mid-download (Ctrl-C, a dropped SSH connection): the
    box-side fetch goes on in its own unit; the next run waits for it instead of starting a
    second one on the same files, and nothing is fetched twice."""
    import signal

    from tests.harness.deployrun import start_deploy

    b = make_box()
    hub_control("reset")
    hub_control("faults", {"slow": {SHARD: 128 << 10}})  # a shard that takes several seconds
    run = start_deploy(sandbox, [b], DEPLOY)
    part = f"{TARGET}/.laguna-partial/{SHARD}.part"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and b.run(f"test -s {part}", check=False).returncode != 0:
        time.sleep(0.2)
    run.send_signal(signal.SIGKILL)  # the operator's run is gone, mid-shard
    run.wait()
    runs = b.run("systemctl list-units --plain --no-legend --state=active 'laguna-fetch-*'")
    assert "laguna-fetch-Laguna-S-2.1-INT4:" in runs.stdout, "the download died with the run"
    again = deploy(b, DEPLOY)
    assert again.ok, again.explain()
    hub_control("reset")
    # One fetch did the download; a second one, if the next run found work left, fetched nothing.
    target = [e for e in fetch_log(b) if e["repo"] == standin_hub.TARGET_REPO]
    assert len(target) in (1, 2) and all(e["downloaded_bytes"] == 0 for e in target[1:]), target
    size = sum(
        len(data) for data in sandbox.servers.hub.repos[standin_hub.TARGET_REPO].files.values()
    )
    assert sum(e["downloaded_bytes"] for e in target) <= 1.05 * size, target
    assert (
        b.run(f"sha256sum {TARGET}/{SHARD}").stdout.split()[0]
        == hashlib.sha256(hub_file(sandbox, SHARD)).hexdigest()
    )


def test_ctrl_c_during_the_download_wait_ends_the_run_within_seconds(make_box, sandbox):
    """Ctrl-C (SIGINT) while the run waits for the box-side download: the process is gone within
    5 s, saying the download goes on as its unit and the next run resumes it; and it does."""
    import signal

    from tests.harness.deployrun import start_deploy, wait_deploy

    b = make_box()
    hub_control("reset")
    hub_control("faults", {"slow": {SHARD: 64 << 10}})  # the wait lasts well beyond the signal
    run = start_deploy(sandbox, [b], DEPLOY)
    part = f"{TARGET}/.laguna-partial/{SHARD}.part"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and b.run(f"test -s {part}", check=False).returncode != 0:
        time.sleep(0.2)
    time.sleep(1)  # inside the kit's wait loop (it polls every 5 s)
    run.send_signal(signal.SIGINT)
    sent = time.monotonic()
    try:
        res = wait_deploy(run, timeout=30)
    finally:
        run.kill()
    gone = time.monotonic() - sent
    assert gone < 5, f"still running {gone:.1f} s after Ctrl-C"
    assert "next run of the same command resumes or waits for it" in res.output, res.explain()
    runs = b.run("systemctl list-units --plain --no-legend --state=active 'laguna-fetch-*'")
    assert "laguna-fetch-Laguna-S-2.1-INT4:" in runs.stdout, "the download died with the run"
    hub_control("reset")
    from tests.harness.deployrun import run_deploy

    again = run_deploy(sandbox, [b], DEPLOY)
    assert again.ok, again.explain()
    print(f"\nCtrl-C to the process gone: {gone:.2f} s")
