"""The fleet router's pieces without a host: what the router and the boxes are given, and that a
converged router is left alone (the harness tier runs them for real: tests/test_router.py)."""

import hashlib
import json

import pytest
from pyinfra.api import FileUploadCommand, OperationError, StringCommand

from laguna_kit import fleet
from laguna_kit.boxtools import firewall
from laguna_kit.operations.files import kit_file

from .fixtures import HERE, operation_output, run_operation

CASES = HERE / "operations"


def case(name):
    return json.loads((CASES / name).read_text())


def uploads(name, doc):
    """{dest: bytes} of the files an operation writes: uploads, and private files fed on stdin."""
    commands, _ = operation_output(name, doc)
    out = {}
    for c in commands:
        if isinstance(c, FileUploadCommand):
            out[c.dest.removesuffix(".laguna-new")] = c.src.getvalue()
        elif isinstance(c, StringCommand) and c.connector_arguments.get("_stdin") is not None:
            dest = str(c).rsplit("> ", 1)[1].removesuffix(".laguna-new")
            out[dest] = c.connector_arguments["_stdin"].encode()
    return out


def key_one():
    return case("router.router_configured/first-deploy-writes-checks-then-reloads.json")["env"][
        "LAGUNA_API_KEYS"
    ]


def test_router_config_names_the_boxes_on_the_tailnet_and_only_key_hashes(monkeypatch):
    doc = case("router.router_configured/first-deploy-writes-checks-then-reloads.json")
    monkeypatch.setenv("LAGUNA_API_KEYS", doc["env"]["LAGUNA_API_KEYS"])
    files = uploads("router.router_configured", doc)
    cfg = files["/etc/laguna-kit/haproxy.cfg"].decode()
    assert "server gpu-1 100.90.1.2:8080 maxconn 4" in cfg  # the champion's max_num_seqs
    assert "gpu-2" not in cfg  # not on the tailnet yet: left out, not guessed
    assert "balance hdr(X-Session-Id)" in cfg and "hash-type consistent" in cfg
    assert "agent-check agent-port 8091" in cfg and "prometheus-exporter" in cfg
    keys = files["/etc/laguna-kit/router-api-keys.sha256"].decode()
    key = doc["env"]["LAGUNA_API_KEYS"]
    assert key not in keys and key not in cfg
    assert keys == hashlib.sha256(f"Bearer {key}".encode()).hexdigest() + "\n"


def test_a_converged_router_is_left_alone(monkeypatch):
    doc = case("router.router_configured/first-deploy-writes-checks-then-reloads.json")
    monkeypatch.setenv("LAGUNA_API_KEYS", doc["env"]["LAGUNA_API_KEYS"])
    files = uploads("router.router_configured", doc)
    (fact_key,) = doc["facts"]["files.FileHashes"]
    modes = {"/etc/laguna-kit/haproxy.cfg": "644", "/etc/laguna-kit/router-api-keys.sha256": "600"}
    doc["facts"]["files.FileHashes"][fact_key] = {
        path: {"sha256": hashlib.sha256(data).hexdigest(), "mode": modes[path]}
        for path, data in files.items()
    }
    commands, noops = run_operation("router.router_configured", doc)
    assert commands == [] and noops[-1].endswith("are current"), (commands, noops)
    # a new key: only the key file changes (on stdin, never an upload), and the router reloads
    monkeypatch.setenv("LAGUNA_API_KEYS", f"{key_one()},key-two-0123456789abcdef")
    commands, _ = run_operation("router.router_configured", doc)
    written = "umask 077 && cat > /etc/laguna-kit/router-api-keys.sha256.laguna-new"
    assert {"command": written, "stdin": True} in commands
    assert not any(
        c.get("upload", "").startswith("/etc/laguna-kit/router-api")
        for c in commands
        if isinstance(c, dict)
    )
    assert {"upload": "/etc/laguna-kit/haproxy.cfg.laguna-new"} not in commands
    assert commands[-1].startswith("if systemctl is-active --quiet laguna-router.service")


def test_the_box_firewall_lets_in_the_router_addresses_read_now():
    doc = case("router.router_peers_allowed/router-on-the-tailnet-opens-the-api-to-it.json")
    text = uploads("router.router_peers_allowed", doc)[doc["args"]["peers_file"]].decode()
    assert "add element inet laguna_kit fleet_router_v4 { 100.90.9.2 }" in text
    assert "add element inet laguna_kit fleet_router_v6 { fd7a:115c:a1e0::90:9 }" in text


RULES_BASE = dict(
    ssh_ports=[22],
    open_tcp=[9100],
    open_udp=[],
    agent_port=8091,
    api_port=8080,
    peers_glob="/etc/laguna-kit/firewall.d/*.nft",
    ssh_tailnet_only=False,
    docker_bridges=["br-0123456789ab", "docker0"],
    router_ports=[],
    router_users=["haproxy"],
    monitor_ports=[],
    node_exporter_port=9100,
    monitor_glob="/etc/laguna-kit/firewall.d/fleet-monitor*.nft",
    peer_files_port=0,
    peer_files_glob="/etc/laguna-kit/firewall.d/fleet-peers*.nft",
    registry_cache_port=0,
    pullers_glob="/etc/laguna-kit/firewall.d/fleet-pullers*.nft",
)


def rules(**kw) -> list[str]:
    text = kit_file("files/laguna-firewall.nft.j2", **dict(RULES_BASE, **kw)).decode()
    return [line.strip() for line in text.splitlines() if not line.strip().startswith("#")]


def test_rules_with_a_router_close_the_api_to_other_tailnet_peers():
    alone = rules(fleet_router=False)
    routed = rules(fleet_router=True)
    assert not any("fleet_router" in line or line.startswith("include") for line in alone)
    drop = 'iifname "tailscale0" tcp dport { 8080, 8091 } counter drop'
    assert 'iifname "tailscale0" ip saddr 100.64.0.0/10 accept' in alone
    # behind a router no tailnet peer gets every port: the router the API and agent, the others
    # SSH, ping and the listed ports, then nothing (torch's TCPStore on 29500 included)
    assert not any("100.64.0.0/10 accept" in line or "a1e0::/48 accept" in line for line in routed)
    tail = routed[routed.index(drop) :]
    assert tail[1:5] == [
        'iifname "tailscale0" tcp dport { 22 } accept',
        'iifname "tailscale0" meta l4proto { icmp, ipv6-icmp } accept',
        'iifname "tailscale0" tcp dport { 9100 } accept',
        'iifname "tailscale0" counter drop',
    ]
    assert 'include "/etc/laguna-kit/firewall.d/*.nft"' in routed


def test_docker_bridges_by_name_and_never_the_api_or_agent():
    lines = rules(fleet_router=True)
    assert 'iifname { "br-0123456789ab", "docker0" } tcp dport { 8080, 8091 } counter drop' in lines
    # no wildcard: a host bridge named br-lan or an OVS br-ex is no container network
    assert not any("br-*" in line for line in lines)
    drop = lines.index(
        'iifname { "br-0123456789ab", "docker0" } tcp dport { 8080, 8091 } counter drop'
    )
    assert lines[drop + 1] == 'iifname { "br-0123456789ab", "docker0" } accept'


def test_on_the_router_host_only_haproxy_reaches_the_boxes():
    lines = rules(fleet_router=False, router_ports=[8080, 8091])
    assert (
        'oifname "tailscale0" tcp dport { 8080, 8091 } meta skuid != "haproxy" counter drop'
        in lines
    )
    # a container there (forwarded, masqueraded as the router) does not either
    assert 'oifname "tailscale0" tcp dport { 8080, 8091 } counter drop' in lines
    assert not any("chain output" in line for line in rules(fleet_router=True))


def test_a_changed_include_is_a_changed_table(tmp_path):
    peers = tmp_path / "firewall.d"
    peers.mkdir()
    rules = tmp_path / "firewall.nft"
    rules.write_text(f'table inet laguna_kit {{}}\ninclude "{peers}/*.nft"\n')
    empty = firewall.sources(str(rules))
    (peers / "fleet-router.nft").write_text(
        "add element inet laguna_kit fleet_router_v4 { 1.2.3.4 }\n"
    )
    (peers / "fleet-router.nft.laguna-new").write_text("not read: not *.nft\n")
    one = firewall.sources(str(rules))
    assert one != empty and "1.2.3.4" in one and "not read" not in one


def test_api_keys_from_the_environment_and_a_file(tmp_path):
    f = tmp_path / "keys"
    # a # starts a comment only at the start of a line: inside a key it is part of the key
    f.write_text("# the fleet's keys\n  # laptop\nkey-from-file#0123456789abc\n\n")
    env = {"K": "key-one-0123456789abcdef, key-two-0123456789abcdef key-one-0123456789abcdef"}
    assert fleet.api_keys("K", str(f), env) == [
        "key-from-file#0123456789abc",
        "key-one-0123456789abcdef",
        "key-two-0123456789abcdef",
    ]
    f.write_text("key-from-file-0123456789 # laptop\n")  # was cut at the # and accepted
    with pytest.raises(OperationError, match="holds spaces"):
        fleet.api_keys("", str(f), {})
    with pytest.raises(OperationError, match="set K=<key>"):
        fleet.api_keys("K", "", {})
    with pytest.raises(OperationError, match="router_api_keys_file"):
        fleet.api_keys("K", str(tmp_path / "missing"), env)


@pytest.mark.parametrize(
    "key, why",
    [
        ("passwordpassword", "fewer than 22"),
        ("passwordpasswordpasswordpassword", "repeats a word"),
        ("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab", "distinct characters"),
        ("0000000000000000000000000000000000000001", "distinct characters"),
        ("0123456789abcdef0123456789abcde", "fewer than 32"),  # 31 hex: 124 bits
        ("key\x01control-0123456789abcdef", "control characters"),
    ],
)
def test_weak_api_keys_are_refused(key, why):
    with pytest.raises(OperationError, match=why):
        fleet.api_keys("K", "", {"K": key})


def test_a_random_key_of_128_bits_or_more_passes():
    import secrets

    assert fleet.api_keys("K", "", {"K": secrets.token_hex(24)})  # openssl rand -hex 24
    assert fleet.api_keys("K", "", {"K": secrets.token_urlsafe(16)})  # 22 base64url characters
    # Every random key of 128 bits passes, not most: 1.7 % of `openssl rand -hex 16` keys have
    # fewer than 12 distinct characters (the floor this refused them by).
    refused = [k for k in (secrets.token_hex(16) for _ in range(5000)) if fleet.key_problem(k)]
    assert refused == []
    assert not [k for k in (secrets.token_urlsafe(16) for _ in range(5000)) if fleet.key_problem(k)]


def test_the_router_listens_on_its_tailnet_addresses_and_guards_its_metrics(monkeypatch):
    doc = case("router.router_configured/first-deploy-writes-checks-then-reloads.json")
    monkeypatch.setenv("LAGUNA_API_KEYS", doc["env"]["LAGUNA_API_KEYS"])
    cfg = uploads("router.router_configured", doc)["/etc/laguna-kit/haproxy.cfg"].decode()
    binds = [line.strip() for line in cfg.splitlines() if line.strip().startswith("bind ")]
    assert binds == [
        "bind ipv4@100.90.9.2:8090 transparent",
        "bind ipv6@fd7a:115c:a1e0::90:9:8090 transparent",
        "bind ipv4@100.90.9.2:8405 transparent",
        "bind ipv6@fd7a:115c:a1e0::90:9:8405 transparent",
    ]
    metrics = cfg[cfg.index("frontend metrics") :]
    guard = metrics.index("http-request return status 401")
    assert guard < metrics.index("prometheus-exporter") and guard < metrics.index("stats enable")


def test_a_router_off_the_tailnet_gets_no_configuration(monkeypatch):
    doc = case("router.router_configured/first-deploy-writes-checks-then-reloads.json")
    monkeypatch.setenv("LAGUNA_API_KEYS", doc["env"]["LAGUNA_API_KEYS"])
    doc["facts"]["network.TailscaleStatus"] = {"BackendState": "NeedsLogin"}
    with pytest.raises(OperationError, match="not on the tailnet"):
        operation_output("router.router_configured", doc)


def test_a_fleets_gpu_boxes_alone_reach_the_checkpoint_file_server():
    doc = json.loads(
        (
            HERE / "operations/network.file_peers_allowed/gpu-boxes-on-the-tailnet-are-let-in.json"
        ).read_text()
    )
    text = uploads("network.file_peers_allowed", doc)[doc["args"]["peers_file"]].decode()
    assert "add element inet laguna_kit fleet_peers_v4 { 100.90.1.2 }" in text
    assert "add element inet laguna_kit fleet_peers_v6 { fd7a:115c:a1e0::90:1 }" in text
    assert "gpu-2" in text and "edge" not in text  # gpu-2 not on the tailnet: no element, named
    for router in (True, False):
        lines = rules(fleet_router=router, peer_files_port=8092)
        accept = lines.index('iifname "tailscale0" tcp dport 8092 ip saddr @fleet_peers_v4 accept')
        drop = lines.index("tcp dport 8092 counter drop")
        assert accept < drop, lines
        # before anything that lets the tailnet (or anyone) in
        tail = " ".join(lines[drop:])
        assert lines.index("ct state established,related accept") < accept
        assert "100.64.0.0/10 accept" in tail or 'iifname "tailscale0" counter drop' in tail
    assert not any("8092" in line for line in rules(fleet_router=True))


def test_the_firewall_watch_stops_every_kit_listener_that_needs_the_table():
    """A unit that serves only behind the kit's table (Requires=laguna-firewall.service) stops
    when the watch cannot load the table again: none answers off the tailnet meanwhile."""
    from laguna_kit.boxtools.layout import KIT_LISTENERS
    from laguna_kit.settings import KIT_ROOT, defaults

    needing = set()
    for path in (KIT_ROOT / "files").glob("laguna-*.service.j2"):
        text = path.read_text()
        if "Requires=" in text and "laguna-firewall.service" in text.split("[Service]")[0]:
            needing.add(path.name.removesuffix(".j2"))
    needing.discard("laguna-firewall-watch.service")
    needing.discard("laguna-vllm.service")  # the serving unit: named by unit_name
    assert needing <= set(KIT_LISTENERS), needing - set(KIT_LISTENERS)
    assert defaults()["unit_name"] == "laguna-vllm.service"
    task = (KIT_ROOT / "tasks/firewall.py").read_text()
    # every replica's serving unit (replica 1 is unit_name), then the kit's other listeners
    assert "stop=[*(r.unit for r in serving or replicas.build(d, 1)), *KIT_LISTENERS]" in task
