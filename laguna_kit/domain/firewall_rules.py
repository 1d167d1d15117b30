"""What the kit's nftables table lets in and out on one host, from its roles and the fleet's
(files/laguna-firewall.nft.j2 renders it; tasks/firewall.py writes it).

Who reaches what (docs/reference.md says it per role):
- a GPU box behind a router: the router alone its API and agent; the monitor alone its node
  exporter and metrics relay (vLLM's /metrics, never the API); the fleet's other GPU boxes alone
  its checkpoint file server; other tailnet peers SSH, ping and firewall_open_ports;
- the router host: every tailnet peer its router and metrics ports (a key is asked there);
- the monitor host: the operators (monitor_operators) alone Prometheus and Alertmanager; node
  exporter no one but itself;
- the cache host: the fleet's GPU boxes alone its registry port;
- containers on any host: none of the kit's ports.
Out of a host, to the fleet's ports over the tailnet: only the process that needs them (HAProxy
to the boxes' API and agent, Prometheus to the exporters, root to the file server and the cache),
and no container; on the monitor host, its own ports only for Prometheus, root and
monitor_local_users.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..boxtools.layout import (
    FIREWALL_FILE_PEERS_GLOB,
    FIREWALL_MONITOR_GLOB,
    FIREWALL_OPERATORS_GLOB,
    FIREWALL_PEERS_GLOB,
    FIREWALL_PULLERS_GLOB,
    MONITOR_USER,
    ROUTER_USER,
)
from . import fleet, replicas
from .peer_fetch_plan import peer_files_on

TORCH_STORE_PORT = 29500  # torch's TCPStore, which vLLM's workers open on [::] (unauthenticated)


@dataclass(frozen=True)
class Guard:
    """Ports of the fleet's hosts that only `users` of this host may open connections to."""

    ports: list[str]
    users: list[str]
    why: str


def _ports(h, knob: str) -> int:
    return int(h.data.get(knob))


def api_ranges(hosts) -> list[int]:
    """Every API port the fleet's boxes may serve on (api_port .. + MAX_REPLICAS - 1), whatever
    this run counted of their cards: a box unreachable now still serves all of its replicas."""
    return [p for h in hosts for p in range(_ports(h, "api_port"), _ports(h, "api_port") + 8)]


def guards(host) -> list[Guard]:
    """The output filter of this host, by its roles."""
    inventory = host.state.inventory
    roles, boxes = fleet.roles(host), fleet.gpu_hosts(inventory)
    out = []
    if "router" in roles:
        ports = api_ranges(boxes) + [_ports(b, "router_agent_port") for b in boxes]
        out.append(Guard(replicas.port_values(ports), [ROUTER_USER], "HAProxy alone"))
    if "monitor" in roles:
        exporters = [_ports(h, "node_exporter_port") for h in inventory]
        relays = [_ports(b, "metrics_relay_port") for b in boxes]
        out.append(
            Guard(replicas.port_values(exporters + relays), [MONITOR_USER, "root"], "Prometheus")
        )
    if "gpu" in roles:
        mine = []
        if peer_files_on(host):
            mine.append(_ports(host, "peer_files_port"))
        cache = fleet.cache_of(inventory)
        if cache is not None:
            mine.append(_ports(cache, "registry_cache_port"))
        if mine:
            out.append(Guard(replicas.port_values(mine), ["root"], "the kit's root tools"))
    return out


def monitor_here(host) -> dict:
    """On the monitor host: the ports operators reach, and every port of the monitor's."""
    d = host.data
    if "monitor" not in fleet.roles(host):
        return {}
    operators = [int(d.prometheus_port), int(d.alertmanager_port)]
    own = [*operators, int(d.node_exporter_port)]
    if "gpu" in fleet.roles(host):
        own.append(int(d.metrics_relay_port))  # its own Prometheus scrapes it over loopback
    local = [MONITOR_USER, "root", *d.get("monitor_local_users", [])]
    return {
        "operators": replicas.port_values(operators),
        "closed": replicas.port_values(own),
        "local_users": sorted(set(local)),
    }


def monitor_ports(host) -> list[str]:
    """What the fleet's monitor, elsewhere, reaches here: node exporter, and on a GPU box the
    metrics relay (never the API)."""
    monitor = fleet.monitor_of(host.state.inventory)
    if monitor is None or "monitor" in fleet.roles(host):
        return []
    d = host.data
    ports = [int(d.node_exporter_port)]
    if "gpu" in fleet.roles(host):
        ports.append(int(d.metrics_relay_port))
    return replicas.port_values(ports)


def bridge_drops(host, api_ports: list[int]) -> list[str]:
    """The kit's listeners on this host, none of which a container reaches over a bridge."""
    d = host.data
    ports = [*api_ports, int(d.router_agent_port), TORCH_STORE_PORT]
    if fleet.monitor_of(host.state.inventory) is not None:
        ports += [int(d.node_exporter_port), int(d.metrics_relay_port)]
    if "monitor" in fleet.roles(host):
        ports += [int(d.prometheus_port), int(d.alertmanager_port)]
    if peer_files_on(host):
        ports.append(int(d.peer_files_port))
    if "cache" in fleet.roles(host):
        ports.append(int(d.registry_cache_port))
    return replicas.port_values(ports)


def router_here(host) -> list[str]:
    """The router's ports, for every tailnet peer (the key is asked there)."""
    if "router" not in fleet.roles(host):
        return []
    return replicas.port_values([int(host.data.router_port), int(host.data.router_metrics_port)])


def template_vars(
    host, ssh_ports: list[int], bridges: list[str], api_ports: list[int], open_ports: dict
) -> dict:
    """Everything files/laguna-firewall.nft.j2 needs for this host: `ssh_ports` where sshd
    listens, Docker's `bridges`, this box's replicas' `api_ports`, `open_ports` (parsed
    firewall_open_ports: {"tcp": [...], "udp": [...]})."""
    d, roles = host.data, fleet.roles(host)
    return dict(
        api_port=",".join(replicas.port_values(api_ports)),
        ssh_ports=ssh_ports,
        open_tcp=open_ports["tcp"],
        open_udp=open_ports["udp"],
        # with a router in the hosts file a GPU box's API answers only it (tasks/router_agent.py)
        fleet_router=fleet.router_of(host.state.inventory) is not None and "gpu" in roles,
        agent_port=int(d.router_agent_port),
        peers_glob=FIREWALL_PEERS_GLOB,
        docker_bridges=bridges,
        bridge_drops=bridge_drops(host, api_ports),
        guards=guards(host),
        monitor_ports=monitor_ports(host),
        monitor_glob=FIREWALL_MONITOR_GLOB,
        monitor_here=monitor_here(host),
        operators_glob=FIREWALL_OPERATORS_GLOB,
        router_here=router_here(host),
        # a fleet's GPU boxes serve each other their verified checkpoints (tasks/peer_files.py)
        peer_files_port=int(d.peer_files_port) if peer_files_on(host) else 0,
        peer_files_glob=FIREWALL_FILE_PEERS_GLOB,
        # the fleet's image cache on this host (tasks/registry_cache.py)
        registry_cache_port=int(d.registry_cache_port) if "cache" in roles else 0,
        pullers_glob=FIREWALL_PULLERS_GLOB,
    )
