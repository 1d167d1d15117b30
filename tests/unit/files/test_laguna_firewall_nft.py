"""files/laguna-firewall.nft.j2: the kit's nftables table as the firewall task renders it (a router
in the fleet, Docker's bridges, the router host's output filter, the checkpoint file server)."""

from laguna_kit.operations.files import kit_file

from ..fixtures import case, uploads

RULES_BASE = dict(
    ssh_ports=[22],
    open_tcp=[9100],
    open_udp=[],
    agent_port=8091,
    api_port=8080,
    peers_glob="/etc/laguna-kit/firewall.d/*.nft",
    ssh_tailnet_only=False,
    docker_bridges=["br-0123456789ab", "docker0"],
    bridge_drops=["8080", "8091"],
    guards=[],
    monitor_ports=[],
    monitor_glob="/etc/laguna-kit/firewall.d/fleet-monitor*.nft",
    monitor_here={},
    operators_glob="/etc/laguna-kit/firewall.d/fleet-operators*.nft",
    router_here=[],
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
    from laguna_kit.domain.firewall_rules import Guard

    lines = rules(fleet_router=False, guards=[Guard(["8080", "8091"], ["haproxy"], "HAProxy")])
    assert (
        'oifname "tailscale0" tcp dport { 8080, 8091 } meta skuid != "haproxy" counter drop'
        in lines
    )
    # a container there (forwarded, masqueraded as the router) does not either
    assert 'oifname "tailscale0" tcp dport { 8080, 8091 } counter drop' in lines
    assert not any("chain output" in line for line in rules(fleet_router=True))


def test_a_fleets_gpu_boxes_alone_reach_the_checkpoint_file_server():
    doc = case("firewall.fleet_peers_allowed/peers-gpu-boxes-on-the-tailnet-are-let-in.json")
    text = uploads("firewall.fleet_peers_allowed", doc)[doc["args"]["peers_file"]].decode()
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
    from laguna_kit import KIT_ROOT
    from laguna_kit.boxtools.layout import KIT_LISTENERS
    from laguna_kit.knobs.declared import defaults

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
