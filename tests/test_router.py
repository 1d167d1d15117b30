"""The fleet router (issue 16) on harness boxes: three serving boxes and one router, deployed by
one `pyinfra inventory.py deploy.py`, with real HAProxy from Debian's archive and real packets.

- the router answers with a key only (401 without), streams through, and a box's API port answers
  the router alone (no answer to another tailnet peer, none off the tailnet);
- one session's requests land on one box; many sessions spread;
- a box killed hard is ejected within 10 s and back within 10 s of being healthy;
- a `--serial` rolling upgrade of all three boxes, with clients calling the router all along,
  fails no request (the kit drains each box at the router before restarting it), and a re-run
  changes nothing.
"""

import json
import re
import sys
import time

import pytest

from laguna_kit.settings import KIT_ROOT, defaults
from tests.harness import box as boxmod
from tests.harness.deployrun import run_deploy
from tests.harness.paths import run_dir
from tests.harness.poller import OnTheTailnet
from tests.harness.sandbox import ROUTER_KEYS

KNOBS = defaults()
ROLL = ["--serial", "--fail-percent", "0"]
FAULTS = "/models/standin-faults.json"
PACED = '{"token_delay_s": 0.02}'  # ~0.5 s a request: some are always running during a restart


def tailnet(*cmd, check=False, **kw):
    return boxmod.sh("ip", "netns", "exec", boxmod.TAILNET_NS, *cmd, check=check, **kw)


@pytest.fixture(scope="module")
def fleet(sandbox):
    boxes = [sandbox.add_box(f"rt{i}") for i in (1, 2, 3)]
    router = sandbox.add_box("rtr", roles=["router"])
    first = run_deploy(sandbox, [*boxes, router], timeout=1500)
    (run_dir() / "router-first-deploy.log").write_text(first.output)
    yield boxes, router, first
    for b in [*boxes, router]:
        sandbox.remove_box(b)


def url(router, path="/v1/chat/completions", port=None):
    return f"http://{router.tailnet_v4}:{port or KNOBS['router_port']}{path}"


def client(router, *args) -> list[dict]:
    proc = tailnet(
        sys.executable, "-m", "tests.harness.router_client", url(router), *args, cwd=KIT_ROOT
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def metrics(router) -> str:
    proc = tailnet("curl", "-sf", "-m", "5", url(router, "/metrics", KNOBS["router_metrics_port"]))
    assert proc.returncode == 0, "the router's Prometheus metrics do not answer on the tailnet"
    return proc.stdout


def served(router) -> dict[str, float]:
    """2xx responses per box, from the router's own Prometheus counters."""
    out = {}
    for m in re.finditer(
        r'^haproxy_server_http_responses_total\{proxy="laguna",server="([^"]+)",code="2xx"\} (\S+)',
        metrics(router),
        re.M,
    ):
        out[m.group(1)] = float(m.group(2))
    return out


def server_state(router, name) -> str:
    for m in re.finditer(
        r'^haproxy_server_status\{proxy="laguna",server="([^"]+)",state="([A-Z]+)"\} 1',
        metrics(router),
        re.M,
    ):
        if m.group(1) == name:
            return m.group(2)
    return "ABSENT"


def state_within(router, name, state, seconds) -> bool:
    deadline = time.monotonic() + seconds
    while server_state(router, name) != state and time.monotonic() < deadline:
        time.sleep(0.2)
    return server_state(router, name) == state


def tcp_answers(address, port, ns=boxmod.TAILNET_NS) -> bool:
    probe = f"import socket; socket.create_connection(({address!r}, {port}), timeout=3)"
    cmd = [*(["ip", "netns", "exec", ns] if ns else []), "python3", "-c", probe]
    return boxmod.sh(*cmd, check=False).returncode == 0


def test_fleet_deploys_in_one_run_and_needs_a_key(fleet):
    boxes, router, first = fleet
    assert first.ok, first.explain()
    for b in boxes:
        assert server_state(router, b.name) == "UP", metrics(router)
    (no_key,) = client(router, "--count", "1")
    assert no_key["status"] == 401 and "invalid_api_key" in no_key["error"], no_key
    (wrong,) = client(router, "--count", "1", "--key", "lgk-not-a-key-of-this-fleet-000000")
    assert wrong["status"] == 401, wrong
    for key in ROUTER_KEYS:
        (ok,) = client(router, "--count", "1", "--key", key)
        assert ok["status"] == 200 and ok["error"] is None, ok
    (streamed,) = client(router, "--count", "1", "--key", ROUTER_KEYS[0], "--stream")
    assert streamed["status"] == 200 and streamed["error"] is None, streamed
    # Only hashes of the keys are on the router; no key in the deploy's output.
    held = router.run("cat /etc/laguna-kit/router-api-keys.sha256").stdout
    assert len(held.split()) == 2 and not any(k in held for k in ROUTER_KEYS)
    assert not any(k in first.output for k in ROUTER_KEYS)


def test_a_box_answers_the_router_alone(fleet):
    boxes, router, _ = fleet
    for b in boxes:
        # another tailnet peer, and off the tailnet: no answer on the API or the agent port
        for port in (KNOBS["api_port"], KNOBS["router_agent_port"]):
            assert not tcp_answers(b.tailnet_v4, port), f"{b.name}:{port} answers a tailnet peer"
            assert not tcp_answers(b.address, port, ns=None), f"{b.name}:{port} answers off it"
        # the router itself reaches the box's API and its agent
        health = router.run(
            f"curl -s -o /dev/null -w '%{{http_code}}' http://{b.tailnet_v4}:8080/health"
        )
        assert health.stdout == "200"
        agent = router.run(
            'python3 -c "import socket; s = socket.create_connection(('
            f"'{b.tailnet_v4}', {KNOBS['router_agent_port']}), timeout=3); print(s.recv(64))\""
        )
        assert "ready" in agent.stdout
    # and the router's own ports are on the tailnet only
    assert not tcp_answers(router.address, KNOBS["router_port"], ns=None)
    assert not tcp_answers(router.address, KNOBS["router_metrics_port"], ns=None)


def test_one_session_lands_on_one_box(fleet):
    boxes, router, _ = fleet
    before = served(router)
    results = client(router, "--count", "60", "--key", ROUTER_KEYS[0], "--session", "s-affine")
    assert all(r["status"] == 200 for r in results)
    after = served(router)
    per_box = {n: after.get(n, 0) - before.get(n, 0) for n in after}
    share = max(per_box.values()) / 60
    print(f"one session over 60 requests: {per_box} (top box {share:.0%})")
    assert share >= 0.95, per_box
    # and different sessions are spread (so the share above is affinity, not one box for all)
    before = served(router)
    for i in range(12):
        client(router, "--count", "1", "--key", ROUTER_KEYS[0], "--session", f"s-{i}")
    after = served(router)
    used = [n for n in after if after[n] - before.get(n, 0) > 0]
    assert len(used) >= 2, (before, after)


def test_a_box_killed_hard_is_ejected_and_readmitted(fleet):
    boxes, router, _ = fleet
    b = boxes[0]
    t0 = time.monotonic()
    b.run("docker kill -s KILL vllm-laguna")
    while server_state(router, b.name) != "DOWN" and time.monotonic() - t0 < 30:
        time.sleep(0.2)
    ejected = time.monotonic() - t0
    assert server_state(router, b.name) == "DOWN"
    # systemd starts it again (RestartSec=15); healthy = its /health answers 200 on the box
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if b.run("curl -sf -m 2 http://127.0.0.1:8080/health", check=False).returncode == 0:
            break
        time.sleep(0.2)
    healthy = time.monotonic()
    while server_state(router, b.name) != "UP" and time.monotonic() - healthy < 30:
        time.sleep(0.2)
    readmitted = time.monotonic() - healthy
    print(
        f"killed hard: ejected after {ejected:.1f} s, readmitted {readmitted:.1f} s after healthy"
    )
    assert ejected <= 10 and readmitted <= 10


def test_a_box_drained_by_hand_gets_nothing_new_until_undrained(fleet, deploy):
    boxes, router, _ = fleet
    b = boxes[1]
    try:
        out = b.run("python3 /opt/laguna-kit/bin/laguna_release.py drain").stdout
        assert "drained" in out
        assert server_state(router, b.name) == "DRAIN"  # the command returns once the router saw it
        before = served(router)
        for i in range(12):
            client(router, "--count", "1", "--key", ROUTER_KEYS[0], "--session", f"d-{i}")
        after = served(router)
        assert after[b.name] == before[b.name], "a drained box got new requests"
        st = deploy(router, "tasks/status.py")
        assert st.ok and st.changed() == [], st.explain()
        assert f"box {b.name}: DRAIN" in st.output and f"box {boxes[0].name}: UP" in st.output
        box_status = deploy(b, "tasks/status.py")
        assert "drained at the fleet router" in box_status.output
        assert "laguna_release.py undrain" in box_status.output
        # a deploy does not end an operator's drain; undrain does (the box killed in the test before
        # is gated again: its restart since its last gate proves nothing about the new process)
        again = deploy([*boxes, router])
        assert again.ok and again.changed(b.name) == [] and again.changed(router.name) == [], (
            again.explain()
        )
        assert server_state(router, b.name) == "DRAIN"
        b.run("python3 /opt/laguna-kit/bin/laguna_release.py undrain")
        assert state_within(router, b.name, "UP", 10)
        # A run cut between its drain and its restart (Ctrl-C while requests end) leaves the
        # kit's marker on a box whose release passed: the next deploy ends it.
        cut = '{"by": "kit", "reason": "release 1 starting", "time": "T"}'
        b.run(f"echo '{cut}' > /opt/laguna-kit/router-drain")
        assert state_within(router, b.name, "DRAIN", 10)
        healed = deploy([*boxes, router], args=["--limit", b.name])
        assert healed.ok and "drained at the fleet router by an interrupted run" in healed.output
        assert state_within(router, b.name, "UP", 10)
    finally:  # the next test starts from a fleet that serves on every box
        b.run("python3 /opt/laguna-kit/bin/laguna_release.py undrain", check=False)
    logs = deploy(router, "tasks/logs.py")
    assert logs.ok and "Journal of laguna-router.service" in logs.output


def router_clients(router, workers=3):
    """Clients on the tailnet calling the router back to back until stopped."""
    args = [url(router), "--key", ROUTER_KEYS[1], "--workers", str(workers)]
    return OnTheTailnet(
        "tests.harness.router_client", *args, out="router-clients.json", stop_timeout=90
    )


def test_rolling_upgrade_through_the_router_fails_no_request(fleet, deploy):
    boxes, router, _ = fleet
    for b in boxes:
        b.run(f"echo '{PACED}' > {FAULTS}")
    before = {b.name: b.run("cat /opt/laguna-kit/releases/state.json").stdout for b in boxes}
    roll_data = {"container_extra_env": {"LAGUNA_ROLL": "2"}}
    clients = router_clients(router)
    try:
        time.sleep(2)
        roll = deploy([*boxes, router], data=roll_data, args=ROLL, timeout=1500)
        time.sleep(2)
    finally:
        results = clients.stop()
    assert roll.ok, roll.explain()
    failed = [r for r in results if r["status"] != 200 or r["error"]]
    print(f"rolling upgrade through the router: {len(results)} requests, {len(failed)} failed")
    for b in boxes:
        after = b.run("cat /opt/laguna-kit/releases/state.json").stdout
        assert after != before[b.name], f"{b.name} was not restarted: the test proves nothing"
        assert b.run("test -e /opt/laguna-kit/router-drain", check=False).returncode == 1
    assert len(results) > 50 and not failed, failed[:5]
    again = deploy([*boxes, router], data=roll_data)
    assert again.ok and again.changed() == [], again.changed()
    # one box alone (`--limit`): the router is read outside the run's hosts, nothing changes
    one = deploy([*boxes, router], data=roll_data, args=["--limit", boxes[0].name])
    assert one.ok and one.changed() == [], one.explain()
