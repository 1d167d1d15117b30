"""The proof suite (converge -> idempotence -> verify, then drills) on a fleet of three boxes.

Drills proved elsewhere, each asserting that nothing was lost:
- wrong hardware refused before any change: test_preflight.py (H200, 4080s, two cards; 0 changed
  ops);
- download killed mid-shard then resumed (<= 1.05x the missing bytes), corrupted and truncated
  shards named and repaired, an index naming a missing shard: test_models.py;
- gate failure -> automatic rollback, previous release serving: test_service.py;
- bad inventory or data (unknown knob, wrong type, bad mode name, unsafe values) rejected before any
  host is contacted: tests/unit/knobs/test_hostsfile.py.
Here: the fleet end to end over the tailnet, pyinfra's own counts on a second run, a rolling upgrade
measured by a client polling every endpoint, a roll stopped at the first failed gate, a box rebooted
mid-deploy, and secrets absent from every output, log and file.
"""

import json
import time
from datetime import datetime

import httpx
import pytest

from tests.harness import box as boxmod
from tests.harness import servers, standin_hub
from tests.harness.deployrun import (
    run_deploy,
    run_deploy_on_a_terminal,
    start_deploy,
    wait_deploy,
)
from tests.harness.poller import OnTheTailnet

HUB = f"http://127.0.0.1:{servers.HUB_PORT}"
ROLL = ["--serial", "--fail-percent", "0"]  # the operator's rolling upgrade (OPERATIONS.md)
FAULTS = "/models/standin-faults.json"


def tailnet(*cmd, check=True, **kw):
    return boxmod.sh("ip", "netns", "exec", boxmod.TAILNET_NS, *cmd, check=check, **kw)


def current_release(b) -> dict:
    n = json.loads(b.run("cat /opt/laguna-kit/releases/state.json").stdout)["current"]
    return json.loads(b.run(f"cat /opt/laguna-kit/releases/{n:04d}/release.json").stdout)


def last_gate(b) -> dict:
    return json.loads(b.run("cat /opt/laguna-kit/state/last-gate.json").stdout)


@pytest.fixture(scope="module")
def fleet(sandbox):
    boxes = [sandbox.add_box(f"fleet{i}") for i in (1, 2, 3)]
    first = run_deploy(sandbox, boxes)
    yield boxes, first
    for b in boxes:
        sandbox.remove_box(b)


def poller_on_tailnet(boxes):
    """A tailnet client polling every box's /v1/models while a roll runs."""
    urls = [f"http://{b.tailnet_v4}:8080/v1/models" for b in boxes]
    return OnTheTailnet("tests.harness.poller", *urls, out="poller.json")


def serving_counts(samples) -> list[int]:
    return [sum(s["up"]) for s in samples]


def test_fleet_converges_in_parallel_and_serves_over_the_tailnet(fleet):
    boxes, first = fleet
    assert first.ok, first.explain()
    assert first.totals["error"] == 0 and first.totals["success"] > 0, first.totals
    started, gated = [], []
    for b in boxes:
        gate = last_gate(b)
        assert (
            gate["passed"]
            and gate["release"] == 1
            and gate["long_context"]["prompt_tokens"] >= 190000
        )
        models = json.loads(
            tailnet("curl", "-sf", "-m", "5", f"http://{b.tailnet_v4}:8080/v1/models").stdout
        )
        assert models["data"][0]["id"] == "laguna"
        chat = json.loads(
            tailnet(
                "curl",
                "-sf",
                "-m",
                "30",
                f"http://[{b.tailnet_v6}]:8080/v1/chat/completions",
                "-H",
                "Content-Type: application/json",
                "-d",
                json.dumps(
                    {
                        "model": "laguna",
                        "max_tokens": 8,
                        "messages": [{"role": "user", "content": "Say hi"}],
                        # the recipe serves with thinking on: 8 tokens would end inside it
                        "chat_template_kwargs": {"enable_thinking": False},
                    }
                ),
            ).stdout
        )
        assert chat["choices"][0]["message"]["content"]
        off = boxmod.sh("curl", "-sf", "-m", "3", f"http://{b.address}:8080/v1/models", check=False)
        assert off.returncode != 0, f"{b.name}: API answered off the tailnet"
        # the first download this deploy started on the box (one a driver reboot cut short too)
        earliest = b.run("journalctl -o json --no-pager -u 'laguna-fetch-*' | head -n 1").stdout
        started.append(int(json.loads(earliest)["__REALTIME_TIMESTAMP"]) / 1e6)
        gated.append(datetime.strptime(gate["time"], "%Y-%m-%dT%H:%M:%S%z").timestamp())
    # In parallel: every box had begun its download before any box's deploy ended with its gate
    # (one after the other, the last box would start after the first was served; the boxes share
    # this machine's clock). Not the downloads' overlap: a box whose reboot took longer may start
    # its download again after a peer finished, and takes the files from that peer.
    assert max(started) < min(gated), (started, gated)


def test_second_full_run_reports_zero_changed(fleet, deploy):
    boxes, _ = fleet
    again = deploy(boxes)
    assert again.ok, again.explain()
    t = again.totals
    assert t["success"] == 0 and t["error"] == 0 and t["no_change"] == t["hosts"] > 0, t
    assert again.changed() == []


def test_rolling_upgrade_keeps_n_minus_1_serving(fleet, deploy):
    boxes, _ = fleet
    poller = poller_on_tailnet(boxes)
    try:
        time.sleep(1)
        roll = deploy(boxes, data={"serving_mode": "speed-128k"}, args=ROLL)
    finally:
        samples = poller.stop()
    assert roll.ok, roll.explain()
    counts = serving_counts(samples)
    print(f"rolling upgrade: {len(samples)} samples, serving min {min(counts)} of 3")
    assert min(counts) >= 2, "more than one box was down at once"
    for i, b in enumerate(boxes):
        assert current_release(b)["spec"]["mode"] == "speed-128k"
        assert not all(s["up"][i] for s in samples), (
            f"{b.name} never restarted: the poller proves nothing"
        )
    # One box at a time: each box's gate passed before the next box's release began.
    gates = [last_gate(b) for b in boxes]
    assert all(g["passed"] and g["release"] == 2 for g in gates)


def test_roll_stops_at_the_first_failed_gate_and_rolls_that_box_back(fleet, sandbox):
    """Typed as an operator does, without -y, at a terminal, pressing Enter at every prompt:
    pyinfra asks "One of more hosts failed, continue?" after the failed gate and Enter goes on,
    so the kit itself stops the roll (laguna_kit/run/gate_failures.py)."""
    boxes, _ = fleet
    # Every box's "GPUs" die like the Marlin-workspace OOM on prompts over 200K (context-first's
    # gate is 250K), so whichever box pyinfra's --serial takes first (its order is not the hosts
    # file's) fails.
    for b in boxes:
        b.run(f"echo '{{\"oom_prompt_over\": 200000}}' > {FAULTS}")
    poller = poller_on_tailnet(boxes)
    try:
        roll, prompts = run_deploy_on_a_terminal(
            sandbox, boxes, data={"serving_mode": "context-first"}, args=["--serial"]
        )
    finally:
        samples = poller.stop()
        for b in boxes:
            b.run(f"rm -f {FAULTS}")
    assert not roll.ok
    assert "GATE FAILED" in roll.output and "rolling back to the previous release" in roll.output, (
        roll.explain()
    )
    # the plan's prompt, then one "continue?" for the failed box and one for each box it stopped
    assert prompts >= 2 and "One of more hosts failed, continue?" in roll.output, roll.explain()
    assert "earlier in this run: the roll stops here" in roll.output, roll.explain()
    counts = serving_counts(samples)
    print(f"failed roll: {len(samples)} samples, serving min {min(counts)} of 3")
    assert min(counts) >= 2
    tried = [b for b in boxes if "0003" in b.run("ls /opt/laguna-kit/releases").stdout.split()]
    assert len(tried) == 1, (
        f"the roll went on after the first failed gate: {[b.name for b in tried]}"
    )
    failed = tried[0]
    rel = current_release(failed)
    assert rel["spec"]["mode"] == "speed-128k" and last_gate(failed)["release"] == rel["number"]
    assert last_gate(failed)["passed"], "the rolled-back box must be validated again"
    for b in boxes:  # the others were never touched; all three serve the previous release
        assert current_release(b)["spec"]["mode"] == "speed-128k", b.name
        assert (
            json.loads(
                tailnet("curl", "-sf", "-m", "5", f"http://{b.tailnet_v4}:8080/v1/models").stdout
            )["data"][0]["id"]
            == "laguna"
        )


def test_secrets_are_absent_from_output_logs_and_files(fleet, sandbox):
    boxes, first = fleet
    secrets = [servers.HUB_TOKEN, boxmod.Box.tailscale_auth_key]
    for secret in secrets:
        assert secret not in first.output
    for b in boxes:
        texts = {
            "journal": b.run("journalctl -b --no-pager -o cat").stdout,
            "container": b.run("docker inspect vllm-laguna").stdout,
            "processes": b.run("ps -eo args").stdout,
        }
        for where, text in texts.items():
            for secret in secrets:
                assert secret not in text, f"{b.name}: secret in {where}"
        # Every file the deploys wrote (the box's overlay upper layer), journals included.
        found = boxmod.sh(
            "grep",
            "-rlaF",
            *sum((["-e", s] for s in secrets), []),
            str(b.state_dir / "upper"),
            check=False,
        )
        assert found.returncode == 1, f"{b.name}: secret written to {found.stdout}"


def test_box_rebooted_mid_deploy_then_rerun_converges(make_box, deploy, sandbox):
    b = make_box()
    shard = "model-00007-of-00015.safetensors"
    size = len(sandbox.servers.hub.repos[standin_hub.TARGET_REPO].files[shard])
    total = sum(len(d) for r in sandbox.servers.hub.repos.values() for d in r.files.values())
    httpx.post(f"{HUB}/_standin/reset")
    # Slow enough that the download (which starts early, box-side) still runs when the deploy
    # reaches the models step, where this drill reboots the box.
    httpx.post(f"{HUB}/_standin/faults", json={"slow": {shard: size // 200}})
    run = start_deploy(sandbox, [b])
    partial = f"/models/Laguna-S-2.1-INT4/.laguna-partial/{shard}.part"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and run.poll() is None:
        # Past the package installs (Docker is the last before the models step): a reboot here
        # interrupts the download, not dpkg.
        got = b.run(
            "systemctl is-active -q docker && ! grep -qxsE 'dpkg|apt-get|apt' /proc/[0-9]*/comm "
            f"&& stat -c %s {partial} 2>/dev/null || echo 0",
            check=False,
        ).stdout.strip()
        if got.isdigit() and int(got) > 0:
            break
        time.sleep(0.5)
    assert run.poll() is None, "the deploy ended before the shard transfer began"
    b.run("systemctl reboot", check=False)
    interrupted = wait_deploy(run)
    assert not interrupted.ok
    httpx.post(f"{HUB}/_standin/faults", json={"slow": {shard: 0}})
    time.sleep(2)
    b.wait_ssh()
    kept = int(b.run(f"stat -c %s {partial}").stdout)
    again = deploy(b)
    assert again.ok, again.explain()
    assert last_gate(b)["passed"]
    served = httpx.get(f"{HUB}/_standin/stats").json()["served"]
    fetched = sum(served.values())
    print(
        f"reboot drill: {kept} bytes of {shard} kept across the reboot; {fetched} fetched for "
        f"{total}"
    )
    assert kept > 0 and fetched <= 1.05 * total, (
        "bytes on disk before the reboot were fetched again"
    )
    assert deploy(b).changed() == []
