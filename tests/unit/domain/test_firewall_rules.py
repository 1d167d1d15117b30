"""laguna_kit/domain/firewall_rules.py, rendered through files/laguna-firewall.nft.j2 for every
role combination the docs offer (issue 37): who reaches what, by roles alone. The harness sends
real packets through the same rules (tests/test_roles.py); here every combination is also
checked by nft itself (as root)."""

import os
import shutil
import subprocess

import pytest

from laguna_kit.domain import firewall_rules
from laguna_kit.operations.files import kit_file

from ..fixtures import fleet_hosts

# The fleets the docs offer (README, DEPLOYMENT.md, docs/, hosts.example.toml)
FLEETS = {
    "one box": {"gpu-1": ["gpu"]},
    "boxes behind a router": {"gpu-1": ["gpu"], "gpu-2": ["gpu"], "edge": ["router"]},
    "a box that is the router": {"gpu-1": ["gpu", "router"], "gpu-2": ["gpu"]},
    "router and monitor on one host": {
        "gpu-1": ["gpu"],
        "gpu-2": ["gpu"],
        "edge": ["router", "monitor"],
    },
    "a monitor alone and a cache alone": {
        "gpu-1": ["gpu"],
        "gpu-2": ["gpu"],
        "edge": ["router"],
        "watch": ["monitor"],
        "store": ["cache"],
    },
    "a monitor on a box": {"gpu-1": ["gpu", "monitor"], "gpu-2": ["gpu"]},
}
SPLIT = "a monitor alone and a cache alone"
CASES = [(f, h) for f, hosts in FLEETS.items() for h in hosts]


def rendered(fleet: str, name: str, **data) -> str:
    h = fleet_hosts(FLEETS[fleet], data)[name]
    rules = firewall_rules.template_vars(
        h,
        ssh_ports=[22],
        bridges=["docker0"],
        api_ports=[8080],
        open_ports={"tcp": [], "udp": []},
    )
    return kit_file("files/laguna-firewall.nft.j2", **rules, ssh_tailnet_only=False).decode()


def lines(fleet, name, **data):
    text = rendered(fleet, name, **data)
    return [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")]


def test_a_box_lets_the_monitor_reach_the_relay_and_node_exporter_never_the_api():
    """Issue 37 #1: the monitor's accept names the exporters alone; the API stays the router's."""
    got = lines("a monitor alone and a cache alone", "gpu-1")
    accept = 'iifname "tailscale0" tcp dport { 9100, 9180 } ip saddr @fleet_monitor_v4 accept'
    assert accept in got
    assert not any("8080" in ln and "fleet_monitor" in ln for ln in got)
    assert 'iifname "tailscale0" tcp dport { 8080, 8091 } ip saddr @fleet_router_v4 accept' in got


def test_the_monitor_host_lets_prometheus_out_and_no_one_else():
    got = lines("a monitor alone and a cache alone", "watch")
    out = 'oifname "tailscale0" tcp dport { 9100, 9180 } meta skuid != { "prometheus", "root" } '
    assert out + "counter drop" in got
    # and no process there reaches a box's API port at all (the box drops it: not its set)
    assert not any("8080" in ln for ln in got if "skuid" in ln)


def test_the_monitor_host_answers_the_operators_alone():
    """Issue 37 #3: Prometheus and Alertmanager for monitor_operators; node exporter local."""
    got = lines(SPLIT, "watch")
    accept = 'iifname "tailscale0" tcp dport { 9090, 9093 } ip saddr @fleet_operators_v4 accept'
    drop = 'iifname "tailscale0" tcp dport { 9090, 9093, 9100 } counter drop'
    assert (
        got.index(accept)
        < got.index(drop)
        < got.index('iifname "tailscale0" ip saddr 100.64.0.0/10 accept')
    )
    users = '{ "prometheus", "root" }'
    local = f'oifname "lo" tcp dport {{ 9090, 9093, 9100 }} meta skuid != {users} counter drop'
    assert local in got
    grafana = lines(SPLIT, "watch", monitor_local_users=["grafana"])
    assert any('"grafana"' in ln and 'oifname "lo"' in ln for ln in grafana)


def test_a_box_that_is_the_router_serves_its_clients():
    """Issue 37 #6: ["gpu", "router"] accepts 8090 and 8405 from the tailnet before its drop."""
    got = lines("a box that is the router", "gpu-1")
    accept = 'iifname "tailscale0" tcp dport { 8090, 8405 } accept'
    assert got.index(accept) < got.index('iifname "tailscale0" counter drop')


def test_the_router_host_guards_every_port_the_boxes_may_serve_on():
    """Issue 37 #8: not a plan-time card count: every replica port any box may use."""
    got = lines("boxes behind a router", "edge")
    assert (
        'oifname "tailscale0" tcp dport { 8080-8087, 8091 } meta skuid != "haproxy" counter drop'
        in got
    )
    assert 'oifname "tailscale0" tcp dport { 8080-8087, 8091 } counter drop' in got  # containers


def test_containers_reach_no_listener_of_the_kit():
    """Issue 37 #11: torch's TCPStore, the agent, node exporter and the relay are closed to a
    container as the API is."""
    got = lines("a monitor alone and a cache alone", "gpu-1")
    assert (
        'iifname { "docker0" } tcp dport { 8080, 8091-8092, 9100, 9180, 29500 } counter drop' in got
    )
    watch = lines("a monitor alone and a cache alone", "watch")
    assert any(
        "9090" in ln and "9093" in ln for ln in watch if ln.startswith('iifname { "docker0" }')
    )


@pytest.mark.parametrize("fleet, name", CASES, ids=[f"{f}/{h}" for f, h in CASES])
def test_every_role_combination_loads(fleet, name, tmp_path):
    """nft -c on each host's table (the users it names stood in by root: nft resolves them on
    the box, where the packages made them)."""
    if os.geteuid() != 0 or not shutil.which("nft"):
        pytest.skip("nft -c needs root")
    text = rendered(fleet, name)
    for user in ("haproxy", "prometheus"):
        text = text.replace(f'"{user}"', '"root"')
    path = tmp_path / "rules.nft"
    path.write_text(text.replace("include ", "# include "))
    check = subprocess.run(["nft", "-c", "-f", str(path)], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


def test_operators_by_address_and_tag_reach_the_monitors_set():
    from ..fixtures import case, uploads

    doc = case("firewall.fleet_peers_allowed/operators-by-address-and-by-tag.json")
    text = uploads("firewall.fleet_peers_allowed", doc)[doc["args"]["peers_file"]].decode()
    v4 = "add element inet laguna_kit fleet_operators_v4 { 100.100.0.2, 100.100.0.3 }"
    assert v4 in text
    assert "fleet_operators_v6 { fd7a:115c:a1e0::3 }" in text
    assert "100.100.0.4" not in text and "100.100.0.5" not in text
