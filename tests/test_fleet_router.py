"""The fleet router (issue 16) on harness boxes: three serving boxes and one router, which is the
fleet's monitor and image cache too (roles = ["router", "monitor", "cache"]), deployed by one
`pyinfra inventory.py deploy.py`, with real HAProxy, Prometheus and docker-registry from Debian's
archive and real packets. A mixed fleet (issue 39): rt1 and rt3 run Debian 12, rt2 and the router
Debian 13, so each version-dependent file the kit writes runs on both releases somewhere: HAProxy
3.0, Prometheus 2.53, Alertmanager 0.28, node exporter 1.9, docker-registry 2.8.3, nginx 1.26,
Docker 26 (its CLI a package of its own), nftables 1.1 and systemd 257 here; their bookworm
versions in the other drills.

- the router answers with a key only (401 without), streams through, and a box's API port answers
  the router alone (no answer to another tailnet peer, none off the tailnet);
- one session's requests land on one box; many sessions spread;
- a box killed hard is ejected within 10 s and back within 10 s of being healthy;
- a `--serial` rolling upgrade of all three boxes, with clients calling the router all along,
  fails no request (the kit drains each box at the router before restarting it), and a re-run
  changes nothing.
- the third box has 8 GPUs (a rented machine, issue 27): it serves two replicas, each TP4 on its
  own four cards (the stand-in vLLM refuses a card another server holds, as vLLM does), each a
  backend of its own at the router, each gated, rolled and rolled back one at a time.
"""

import json
import re
import sys
import time

import pytest

from laguna_kit import KIT_ROOT
from laguna_kit.knobs.declared import defaults
from tests.harness import box as boxmod
from tests.harness.deployrun import run_deploy
from tests.harness.paths import run_dir, tag
from tests.harness.poller import OnTheTailnet
from tests.harness.probes import none_answer
from tests.harness.sandbox import ROUTER_KEYS

KNOBS = defaults()
ROLL = ["--serial", "--fail-percent", "0"]
FAULTS = "/models/standin-faults.json"
PACED = '{"token_delay_s": 0.02}'  # ~0.5 s a request: some are always running during a restart


def tailnet(*cmd, check=False, **kw):
    return boxmod.sh("ip", "netns", "exec", boxmod.TAILNET_NS, *cmd, check=check, **kw)


@pytest.fixture(scope="module")
def fleet(sandbox):
    boxes = [sandbox.add_box("rt1"), sandbox.add_box("rt2", suite="trixie")]
    # the driver numbered the 8-card box's nodes in reverse (a minor number is the driver's, not
    # the card's index): each replica must be given its own cards' /dev/nvidiaN
    eight = [dict(g, minor=7 - i) for i, g in enumerate(boxmod.gpus(boxmod.RTX_3090, 8))]
    boxes.append(sandbox.add_box("rt3", gpus=eight))
    router = sandbox.add_box("rtr", roles=["router", "monitor", "cache"], suite="trixie")
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


def metrics(router, key=ROUTER_KEYS[0]) -> str:
    auth = ["-H", f"Authorization: Bearer {key}"] if key else []
    proc = tailnet(
        "curl", "-sf", "-m", "5", *auth, url(router, "/metrics", KNOBS["router_metrics_port"])
    )
    assert proc.returncode == 0, "the router's Prometheus metrics do not answer on the tailnet"
    return proc.stdout


def metrics_status(router, path) -> str:
    """The HTTP status of the router's metrics port for a tailnet peer without a key."""
    port = KNOBS["router_metrics_port"]
    proc = tailnet(
        "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-m", "5", url(router, path, port)
    )
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
    # one run deployed Debian 12 and 13 hosts (issue 39); the router's HAProxy is trixie's 3.0
    release = {b.name: b.run(". /etc/os-release; echo $VERSION_ID").stdout.strip() for b in boxes}
    assert list(release.values()) == ["12", "13", "12"], release
    assert router.run(". /etc/os-release; echo $VERSION_ID").stdout.strip() == "13"
    assert router.run("dpkg-query -W -f '${Version}' haproxy").stdout.startswith("3.0")
    for b in boxes:
        assert server_state(router, b.name) == "UP", metrics(router)
    eight = boxes[2]
    assert server_state(router, f"{eight.name}-r2") == "UP", metrics(router)
    assert server_state(router, f"{boxes[0].name}-r2") == "ABSENT"  # four cards: one replica
    # two containers on their own cards and ports, each release gated
    env = {
        name: eight.run(
            f"docker inspect -f '{{{{range .Config.Env}}}}{{{{println .}}}}{{{{end}}}}' {name}"
        ).stdout
        for name in ("vllm-laguna", "vllm-laguna-2")
    }
    assert "CUDA_VISIBLE_DEVICES=0,1,2,3\n" in env["vllm-laguna"], env
    assert "CUDA_VISIBLE_DEVICES=4,5,6,7\n" in env["vllm-laguna-2"], env
    for name, minors in (("vllm-laguna", range(4, 8)), ("vllm-laguna-2", range(0, 4))):
        devices = json.loads(
            eight.run(f"docker inspect {name} --format '{{{{json .HostConfig.Devices}}}}'").stdout
        )
        cards = {d["PathOnHost"] for d in devices if d["PathOnHost"][-1].isdigit()}
        assert cards == {f"/dev/nvidia{m}" for m in minors}, (name, cards)
    for port, state in ((8080, "/opt/laguna-kit"), (8081, "/opt/laguna-kit/replicas/2")):
        health = eight.run(f"curl -sf -m 5 http://127.0.0.1:{port}/health", check=False)
        assert health.returncode == 0, port
        gate = json.loads(eight.run(f"cat {state}/state/last-gate.json").stdout)
        assert gate["passed"] and gate["url"] == f"http://127.0.0.1:{port}/v1", gate
        assert gate["long_context"]["prompt_tokens"] >= 190000, gate
    assert "stay idle" not in first.output
    # The run's summary: each box's endpoint and the fleet's (issue 25).
    for b in boxes:
        assert f"endpoint    http://{b.tailnet_v4}:{KNOBS['api_port']}/v1" in first.output
    assert f"router      {url(router, '/v1')} for the whole fleet" in first.output
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
    # The image cache on the router's host serves its clients: every box's Docker lists it first
    # among its mirrors, and the image's layers are in its store (they came through it).
    cache = f"http://{router.tailnet_v4}:{KNOBS['registry_cache_port']}"
    for b in boxes:
        mirrors = json.loads(
            b.run("docker info --format '{{json .RegistryConfig.Mirrors}}'").stdout
        )
        assert mirrors and mirrors[0].rstrip("/") == cache, (b.name, mirrors)
    layers = router.run(f"find {KNOBS['registry_cache_dir']} -path '*/blobs/*' -name data").stdout
    assert len(layers.split()) >= 2, layers


def test_a_box_answers_the_router_alone(fleet):
    boxes, router, _ = fleet
    # another tailnet peer, and off the tailnet: no answer on the API or the agent port (nor on
    # the second replica's port of the 8-GPU box); no process of the router's host but HAProxy
    # reaches them (its key check cannot be bypassed)
    probes = {}
    for b in boxes:
        for port in (KNOBS["api_port"], KNOBS["api_port"] + 1, KNOBS["router_agent_port"]):
            probes[f"{b.name}:{port} from a tailnet peer"] = lambda b=b, port=port: tcp_answers(
                b.tailnet_v4, port
            )
            probes[f"{b.name}:{port} off the tailnet"] = lambda b=b, port=port: tcp_answers(
                b.address, port, ns=None
            )
        for user in ("root", "nobody"):
            for port in (KNOBS["api_port"], KNOBS["router_agent_port"]):
                probes[f"{b.name}:{port} from the router host's {user}"] = (
                    lambda b=b, user=user, port=port: router_host_reaches(
                        router, user, b.tailnet_v4, port
                    )
                )
    none_answer(probes)
    for b in boxes:
        # the router's HAProxy (its user) reaches the box's API and its agent
        health = router.run(
            f"runuser -u haproxy -- curl -s -o /dev/null -w '%{{http_code}}' "
            f"http://{b.tailnet_v4}:8080/health"
        )
        assert health.stdout == "200"
        agent = router.run(
            'runuser -u haproxy -- python3 -c "import socket; s = socket.create_connection(('
            f"'{b.tailnet_v4}', {KNOBS['router_agent_port']}), timeout=3); s.sendall(b'1\\n'); "
            'print(s.recv(64))"'
        )
        assert "ready" in agent.stdout
    # and the router's own ports are on the tailnet only: it has no socket off it at all
    assert not tcp_answers(router.address, KNOBS["router_port"], ns=None)
    assert not tcp_answers(router.address, KNOBS["router_metrics_port"], ns=None)
    listening = router.run("ss -Htln").stdout
    assert f":{KNOBS['router_port']} " in listening
    assert (
        f"*:{KNOBS['router_port']} " not in listening
        and "[::]:" + str(KNOBS["router_port"]) not in listening
    )
    # its metrics and stats list every box: a tailnet peer without a key gets neither
    assert metrics_status(router, "/metrics") == "401"
    assert metrics_status(router, "/stats") == "401"


def test_the_router_host_that_monitors_scrapes_each_replica_through_its_relay(fleet):
    """Issue 37 #1 on ["router", "monitor"]: Prometheus sees every replica up through the box's
    relay; on that host Prometheus reaches no box's API, HAProxy no exporter, and no other user
    either; no tailnet peer reaches Prometheus (no monitor_operators here)."""
    boxes, router, _ = fleet
    targets = f"http://{router.tailnet_v4}:{KNOBS['prometheus_port']}/api/v1/targets"

    def vllm_up():
        out = router.run(f"curl -sf -m 5 {targets}", check=False)
        active = json.loads(out.stdout or "{}").get("data", {}).get("activeTargets", [])
        vllm = [t for t in active if t["labels"]["job"] == "vllm"]
        return vllm if len(vllm) == 4 and all(t["health"] == "up" for t in vllm) else None

    deadline = time.monotonic() + 90
    while not (up := vllm_up()) and time.monotonic() < deadline:
        time.sleep(2)
    assert up, router.run(f"curl -s -m 5 {targets}", check=False).stdout[-2000:]
    relay = KNOBS["metrics_relay_port"]
    assert sorted(t["scrapeUrl"].split(":")[-1] for t in up) == [
        f"{relay}/metrics/1", f"{relay}/metrics/1", f"{relay}/metrics/1", f"{relay}/metrics/2"
    ]  # fmt: skip
    b = boxes[2]
    assert router_host_reaches(router, "prometheus", b.tailnet_v4, relay)
    for port in (KNOBS["api_port"], KNOBS["api_port"] + 1, KNOBS["router_agent_port"]):
        assert not router_host_reaches(router, "prometheus", b.tailnet_v4, port), port
    for port in (relay, KNOBS["node_exporter_port"]):
        assert not router_host_reaches(router, "haproxy", b.tailnet_v4, port), port
        assert not router_host_reaches(router, "nobody", b.tailnet_v4, port), port
    for port in (KNOBS["prometheus_port"], KNOBS["alertmanager_port"]):
        assert not tcp_answers(router.tailnet_v4, port), port
        assert not router_host_reaches(router, "nobody", router.tailnet_v4, port), port


def router_host_reaches(router, user, address, port) -> bool:
    probe = (
        f'runuser -u {user} -- python3 -c "import socket; '
        f"socket.create_connection(('{address}', {port}), timeout=3)\""
    )
    return router.run(probe, check=False).returncode == 0


def test_a_box_answers_a_tailnet_peer_only_on_ssh_and_the_listed_ports(fleet):
    """Behind a router, a listener vLLM's workers open (torch's TCPStore on [::]:29500,
    unauthenticated) answers no tailnet peer, the router's host included."""
    boxes, router, _ = fleet
    b = boxes[0]
    b.run("systemd-run --unit lgk-tcpstore python3 -m http.server --bind :: 29500")
    try:
        deadline = time.monotonic() + 20
        while b.run("curl -sf -m 2 http://127.0.0.1:29500/", check=False).returncode != 0:
            assert time.monotonic() < deadline, "the listener did not start"
            time.sleep(0.3)
        assert not tcp_answers(b.tailnet_v4, 29500), "a tailnet peer reaches 29500"
        assert not tcp_answers(b.tailnet_v6, 29500), "a tailnet peer reaches 29500 (IPv6)"
        assert not router_host_reaches(router, "haproxy", b.tailnet_v4, 29500)
        assert not tcp_answers(b.address, 29500, ns=None), "29500 answers off the tailnet"
        assert tcp_answers(b.tailnet_v4, 22), "SSH over the tailnet must keep working"
    finally:
        b.run("systemctl stop lgk-tcpstore", check=False)


def test_a_flushed_ruleset_is_loaded_again_within_seconds(fleet):
    """`nft flush ruleset` on a serving box (a hand-run script, a careless upgrade): the kit's
    watch loads its table again, and the API is closed off the tailnet again, within 10 s."""
    boxes, router, _ = fleet
    b = boxes[2]
    t0 = time.monotonic()
    b.run("nft flush ruleset")
    closed = None
    while time.monotonic() - t0 < 20:
        table = b.run("nft list table inet laguna_kit", check=False).returncode == 0
        if table and not tcp_answers(b.address, KNOBS["api_port"], ns=None):
            closed = time.monotonic() - t0
            break
        time.sleep(0.2)
    print(f"nft flush ruleset: table back, API closed off the tailnet after {closed} s")
    assert closed is not None and closed <= 10, closed
    journal = b.run("journalctl -u laguna-firewall-watch --no-pager").stdout
    assert "loaded again" in journal
    assert b.run("systemctl is-active laguna-vllm").stdout.strip() == "active"
    assert state_within(router, b.name, "UP", 10)


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
        drained = deploy([*boxes, router], "tasks/drain.py", args=["--limit", b.name])
        assert drained.ok and drained.changed(b.name), drained.explain()
        # the task returns once the router saw it
        assert server_state(router, b.name) == "DRAIN", drained.output[-3000:]
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
        assert "tasks/undrain.py" in box_status.output
        table = box_status.output.split("--> Fleet status:", 1)[1].splitlines()
        row = next(line for line in table if line.startswith(b.name))
        assert "DRAIN (box)" in row and " 200 " in row and "passed" in row, table
        # a deploy does not end an operator's drain; undrain does (the box killed in the test before
        # is gated again: its restart since its last gate proves nothing about the new process)
        again = deploy([*boxes, router])
        assert again.ok and again.changed(b.name) == [] and again.changed(router.name) == [], (
            again.explain()
        )
        assert server_state(router, b.name) == "DRAIN"
        undrained = deploy([*boxes, router], "tasks/undrain.py", args=["--limit", b.name])
        assert undrained.ok and undrained.changed(b.name), undrained.explain()
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


def under_clients(router, what, run):
    """`run()` while clients call the router: (its result, every request, the failed ones)."""
    clients = router_clients(router)
    try:
        time.sleep(2)
        result = run()
        time.sleep(2)
    finally:
        results = clients.stop()
    failed = [r for r in results if r["status"] != 200 or r["error"]]
    print(f"{what} through the router: {len(results)} requests, {len(failed)} failed")
    return result, results, failed


def test_rolling_upgrade_through_the_router_fails_no_request(fleet, deploy):
    boxes, router, _ = fleet
    for b in boxes:
        b.run(f"echo '{PACED}' > {FAULTS}")
    # every replica's releases: the 8-GPU box's second under replicas/2
    states = {b.name: ["/opt/laguna-kit"] for b in boxes}
    states[boxes[2].name].append("/opt/laguna-kit/replicas/2")

    def releases(b):
        return [b.run(f"cat {d}/releases/state.json").stdout for d in states[b.name]]

    before = {b.name: releases(b) for b in boxes}
    # (the pace keeps requests in flight through every restart; the gate's benchmark would
    # measure it and, rightly, refuse releases 25 times slower than the first: not this drill)
    roll_data = {"container_extra_env": {"LAGUNA_ROLL": "2"}, "gate_bench_tokens": 0}
    roll, results, failed = under_clients(
        router,
        "rolling upgrade",
        lambda: deploy([*boxes, router], data=roll_data, args=ROLL, timeout=1500),
    )
    assert roll.ok, roll.explain()
    for b in boxes:
        for d, was, now in zip(states[b.name], before[b.name], releases(b)):
            assert now != was, f"{b.name} {d} was not restarted: the test proves nothing"
            assert b.run(f"test -e {d}/router-drain", check=False).returncode == 1
    # the 8-GPU box's replicas restarted one after the other, never both drained at once
    assert roll.output.index("replica 1 before the next replica restarts") < roll.output.index(
        "Serving release (champion) is the running one on replica 2"
    ), roll.explain()
    assert len(results) > 50 and not failed, failed[:5]
    again = deploy([*boxes, router], data=roll_data)
    assert again.ok and again.changed() == [], again.changed()
    # one box alone (`--limit`): the router is read outside the run's hosts, nothing changes
    one = deploy([*boxes, router], data=roll_data, args=["--limit", boxes[0].name])
    assert one.ok and one.changed() == [], one.explain()


def test_a_fleet_rollback_goes_one_box_at_a_time_and_fails_no_request(fleet, deploy):
    """tasks/rollback.py behind a router: each box drained, rolled back and gated before the next
    is touched (never every box drained at once). Named by number, as an operator at 3 a.m. reads
    it off `status`: replica 1 runs that release, the 8-card box's replica 2 its own release of
    the same version (its numbers are its own)."""
    boxes, router, _ = fleet
    replica2 = f"{RELEASE} --unit laguna-vllm-2.service --state-dir /opt/laguna-kit/replicas/2"
    eight = boxes[2]
    before = {b.name: json.loads(b.run(f"{RELEASE} state --json").stdout) for b in boxes}
    before_r2 = json.loads(eight.run(f"{replica2} state --json").stdout)
    previous = {b["state"]["previous"] for b in before.values()}
    assert len(previous) == 1, f"the boxes' releases differ ({before}): no one number to name"
    back, results, failed = under_clients(
        router,
        "fleet rollback",
        lambda: deploy(
            [*boxes, router],
            "tasks/rollback.py",
            data={"rollback_to": previous.pop()},
            timeout=1500,
        ),
    )
    assert back.ok, back.explain()
    assert len(results) > 20 and not failed, failed[:5]
    for b in boxes:
        now = json.loads(b.run(f"{RELEASE} state --json").stdout)
        assert now["state"]["current"] == before[b.name]["state"]["previous"], b.name
        assert now["gate"]["passed"] and now["gate"]["release"] == now["state"]["current"]
    now = json.loads(eight.run(f"{replica2} state --json").stdout)
    assert now["state"]["current"] == before_r2["state"]["previous"]
    assert now["gate"]["passed"] and now["gate"]["release"] == now["state"]["current"]
    # (rolled back all at once, every box would be drained together: the router answers 503)


RELEASE = "python3 /opt/laguna-kit/bin/laguna_release.py"


class Unreachable(boxmod.Box):
    """A host the hosts file names that this run cannot reach (a closed port on this machine)."""

    @property
    def address(self) -> str:
        return "127.0.0.1"


def test_a_replaced_router_reaches_no_box(fleet, deploy):
    """The hosts file names another router (replaced; not on the tailnet yet): the boxes forget
    the old one's addresses (fail closed: no tailnet peer reaches their API), said as such."""
    boxes, router, _ = fleet
    ghost = Unreachable(tag("rtr-new"), boxes[0].number, ssh_port=9, roles=["router"])
    res = deploy([*boxes, ghost], args=["--limit", "gpu_boxes"], timeout=600)
    assert res.ok, res.explain()
    assert "no tailnet peer reaches this box's API" in res.output
    for b in boxes:
        assert not router_host_reaches(router, "haproxy", b.tailnet_v4, KNOBS["api_port"]), b.name
        assert not tcp_answers(b.tailnet_v4, KNOBS["api_port"]), b.name
    assert state_within(router, boxes[0].name, "DOWN", 10)
    # the hosts file names the router again: it is let back in
    back = deploy([*boxes, router])
    assert back.ok, back.explain()
    for b in boxes:
        assert state_within(router, b.name, "UP", 15), b.name


def test_a_box_is_removed_and_added_as_deployment_md_says(fleet, deploy):
    """docs/howto.md's procedure. Removed: stopped, out of the hosts file, `--limit routers`: the
    router forgets it and the fleet serves on. Added back with `--limit BOX` alone: the router is
    left as it is and the run says how to add it; with `--limit BOX --limit routers` it is a
    backend again, UP once its gate passed."""
    boxes, router, _ = fleet
    gone = boxes[2]
    stop = deploy([*boxes, router], "tasks/stop.py", args=["--limit", gone.name])
    assert stop.ok, stop.explain()
    removed = deploy([*boxes[:2], router], args=["--limit", "routers"])
    assert removed.ok, removed.explain()
    assert server_state(router, gone.name) == "ABSENT", metrics(router)
    assert server_state(router, f"{gone.name}-r2") == "ABSENT", metrics(router)
    assert gone.run("systemctl is-active laguna-vllm-2", check=False).stdout.strip() != "active"
    (ok,) = client(router, "--count", "1", "--key", ROUTER_KEYS[0])
    assert ok["status"] == 200, ok
    alone = deploy([*boxes, router], args=["--limit", gone.name])
    assert alone.ok, alone.explain()
    assert f"the fleet's router {router.name} is not in this run" in alone.output
    assert "does not send to it yet" in alone.output, alone.explain()
    assert f"--limit {gone.name} --limit routers" in alone.output
    assert server_state(router, gone.name) == "ABSENT"
    added = deploy([*boxes, router], args=["--limit", gone.name, "--limit", "routers"])
    assert added.ok, added.explain()
    assert state_within(router, gone.name, "UP", 15), metrics(router)
    assert state_within(router, f"{gone.name}-r2", "UP", 15), metrics(router)
    assert "was not in this run" not in added.output


def test_a_box_that_serves_fewer_replicas_retires_the_extra_one(fleet, deploy):
    """The 8-card box told to serve one replica (replicas_per_box = 1: the owner takes cards 4-7
    back): replica 2 is drained, stopped, its unit gone, the router forgets it; replica 1 serves on.
    Told nothing again, the box serves two again."""
    boxes, router, _ = fleet
    eight = boxes[2]
    limit = ["--limit", eight.name, "--limit", "routers"]
    one = deploy([*boxes, router], data={"replicas_per_box": 1}, args=limit)
    assert one.ok, one.explain()
    assert "retiring replica 2 (laguna-vllm-2.service)" in one.output
    assert "GPUs 4-7 stay idle (replicas_per_box = 1)" in one.output
    assert server_state(router, f"{eight.name}-r2") == "ABSENT", metrics(router)
    assert state_within(router, eight.name, "UP", 15), metrics(router)
    gone = eight.run("test -e /etc/systemd/system/laguna-vllm-2.service", check=False)
    assert gone.returncode == 1
    assert eight.run("docker container inspect vllm-laguna-2", check=False).returncode != 0
    assert not tcp_answers(eight.tailnet_v4, KNOBS["api_port"] + 1)
    again = deploy([*boxes, router], data={"replicas_per_box": 1}, args=limit)
    assert again.ok and again.changed() == [], again.changed()
    back = deploy([*boxes, router], args=limit)
    assert back.ok, back.explain()
    assert state_within(router, f"{eight.name}-r2", "UP", 30), metrics(router)
