# The API reachable only over the tailnet, loaded before anything serves: the kit's own nftables
# table drops new connections that arrive off the tailnet (SSH, ICMP, DHCPv6, Tailscale's port and
# firewall_open_ports excepted; SSH too with ssh_tailnet_only). Other tables are kept. It is
# loaded at every boot by its own unit, again after nftables.service's start/reload/stop (a
# drop-in), and the serving unit requires it. The self-revert is armed only when the rules can
# cut SSH.
from pyinfra import host
from pyinfra.operations import server

from laguna_kit.boxtools.layout import (
    FIREWALL_FILE_PEERS_GLOB,
    FIREWALL_MONITOR_GLOB,
    FIREWALL_PEERS_GLOB,
    FIREWALL_PULLERS_GLOB,
    FIREWALL_RULES,
    FIREWALL_SAFE_RULES,
    FIREWALL_WATCH,
    KIT_ETC,
    KIT_LISTENERS,
    MONITOR_USER,
    ROUTER_USER,
)
from laguna_kit.domain import fleet, peer_fetch_plan, replicas
from laguna_kit.facts.network import Listeners
from laguna_kit.operations.files import kit_file
from laguna_kit.operations.firewall import firewall_applied, listeners_checked, parse_ports
from laguna_kit.operations.network import ssh_over_tailnet_checked
from laguna_kit.operations.packages import apt_present
from laguna_kit.operations.systemd import service_running, unit_installed
from laguna_kit.run import memo

d = host.data
RULES = FIREWALL_RULES
SAFE_RULES = FIREWALL_SAFE_RULES  # what a revert loads when nothing was loaded
SYSTEMD = "/etc/systemd/system"
NFTABLES_WITH_KIT = ("nftables-with-kit.nft", "nftables-stop.nft")  # its start/reload and stop
NFTABLES_DROPIN = "nftables.service.d/laguna-kit.conf"
ssh_port = int(d.get("ssh_port") or 22)  # the port this run dials (a provider may map it)
ports = parse_ports(d.firewall_open_ports)
# With a router in the hosts file a GPU box's API answers only it (fleet.py; tasks/router_agent.py).
fleet_router = fleet.router_of(host.state.inventory) is not None and "gpu" in fleet.roles(host)
# On the router's host only HAProxy's user may open connections to the boxes' API and agent.
router_ports = (
    replicas.port_values(
        [r.port for b in fleet.gpu_hosts(host.state.inventory) for r in replicas.of(b)]
        + [d.router_agent_port]
    )
    if "router" in fleet.roles(host)
    else []
)
# With a monitor in the hosts file, only it (of the tailnet peers) reaches node exporter here, and a
# GPU box's /metrics on the API port; the monitor host itself scrapes its own over loopback.
monitor = fleet.monitor_of(host.state.inventory)
serving = replicas.of(host) if "gpu" in fleet.roles(host) else []
api_ports = replicas.ports(serving) if serving else str(d.api_port)  # one port per replica
monitor_ports = (
    ([api_ports] if serving else []) + [d.node_exporter_port]
    if monitor is not None and "monitor" not in fleet.roles(host)
    else []
)
# Docker's own bridges, as Docker names them now; docker0 always (Docker's default, whether or not
# Docker is installed yet, so a first deploy writes the rules it will keep).
seen = memo.fact(host, Listeners, container=d.container_name, rules=RULES)
# SSH stays open on the port(s) sshd listens on, read on the box: a rented box is often dialled
# on a provider's mapped port (ssh -p 40022) while its sshd listens on 22. The dialled port only
# when the box says nothing.
ssh_ports = seen["sshd"] or [ssh_port]
rules = dict(
    api_port=api_ports,
    ssh_ports=ssh_ports,
    open_tcp=ports["tcp"],
    open_udp=ports["udp"],
    fleet_router=fleet_router,
    agent_port=d.router_agent_port,
    peers_glob=FIREWALL_PEERS_GLOB,
    docker_bridges=sorted({"docker0", *seen["bridges"]}),
    router_ports=router_ports,
    router_users=[ROUTER_USER] + ([MONITOR_USER] if "monitor" in fleet.roles(host) else []),
    monitor_ports=monitor_ports,
    node_exporter_port=d.node_exporter_port,
    monitor_glob=FIREWALL_MONITOR_GLOB,
    # a fleet's GPU boxes serve each other their verified checkpoints (tasks/peer_files.py)
    peer_files_port=d.peer_files_port if peer_fetch_plan.peer_files_on(host) else 0,
    peer_files_glob=FIREWALL_FILE_PEERS_GLOB,
    # the fleet's image cache on this host (tasks/registry_cache.py)
    registry_cache_port=d.registry_cache_port if "cache" in fleet.roles(host) else 0,
    pullers_glob=FIREWALL_PULLERS_GLOB,
)

# netbase: /etc/protocols, by which nft resolves the rules' protocol names (minimal installs
# lack it; Docker's packages brought it when the firewall came after them).
apt_present(name="nftables, ss and netbase", packages=["nftables", "iproute2", "netbase"])
if router_ports:  # its user must exist before a rule names it (nft resolves it when loading)
    apt_present(name="HAProxy (held)", packages=["haproxy"], hold=True)
    if "monitor" in fleet.roles(host):
        # Prometheus's user, named by the same rule, made as its package's postinst makes it
        # (which then finds it): the package itself comes after the table is loaded, since it
        # starts Prometheus on every address at once (tasks/monitor.py binds it to the tailnet).
        server.group(name="Prometheus's group", group=MONITOR_USER, system=True)
        server.user(
            name="Prometheus's user (as its package makes it)",
            user=MONITOR_USER,
            group=MONITOR_USER,
            home="/var/lib/prometheus",
            create_home=False,
            shell="/usr/sbin/nologin",
            system=True,
        )
listeners_checked(
    name="No listener of the owner's is cut off the tailnet unless listed or acknowledged",
    container=d.container_name,
    rules=RULES,
    ssh_ports=ssh_ports,
    api_port=d.api_port,
    open_ports=d.firewall_open_ports,
    close_ok=d.firewall_close_listeners,
)
if d.ssh_tailnet_only:  # before the rules file is written: the boot unit would load it too
    ssh_over_tailnet_checked(
        name="SSH limited to the tailnet only from a run connected over it", ssh_port=ssh_port
    )
TEMPLATE = "files/laguna-firewall.nft.j2"
unit_installed(
    name="Firewall rules, their boot unit, nftables.service's drop-in (one transaction with ours), "
    "the watch (restarted when any of them changed)",
    unit=FIREWALL_WATCH,
    # the boot unit enabled as its [Install] says; loaded by firewall_applied below, with the
    # self-revert when the rules can cut SSH (never by a restart here)
    enable=["laguna-firewall.service"],
    files=[
        *(  # what a revert falls back to: the same rules with SSH open
            [(kit_file(TEMPLATE, **rules, ssh_tailnet_only=False), SAFE_RULES, "644")]
            if d.ssh_tailnet_only
            else []
        ),
        (kit_file(TEMPLATE, **rules, ssh_tailnet_only=d.ssh_tailnet_only), RULES, "644"),
        (kit_file("files/laguna-firewall.service"), f"{SYSTEMD}/laguna-firewall.service", "644"),
        *((kit_file(f"files/{n}"), f"{KIT_ETC}/{n}", "644") for n in NFTABLES_WITH_KIT),
        (kit_file("files/nftables-laguna-kit.conf"), f"{SYSTEMD}/{NFTABLES_DROPIN}", "644"),
        (
            kit_file(
                "files/laguna-firewall-watch.service.j2",
                kit_dir=d.kit_dir,
                rules=RULES,
                every_s=2,
                stop=[*(r.unit for r in serving or replicas.build(d, 1)), *KIT_LISTENERS],
            ),
            f"{SYSTEMD}/{FIREWALL_WATCH}",
            "644",
        ),
    ],
)
service_running(
    name="Firewall unit enabled at boot",
    service="laguna-firewall.service",
    running=None,  # loaded below (with the self-revert when it can cut SSH)
)
firewall_applied(
    name="Firewall table loaded"
    + (" (self-reverting unless SSH still works)" if d.ssh_tailnet_only else ""),
    kit_dir=d.kit_dir,
    rules=RULES,
    revert_after_s=d.firewall_confirm_timeout_s if d.ssh_tailnet_only else 0,
    fallback=SAFE_RULES if d.ssh_tailnet_only else "",
)
service_running(
    name="Firewall watch: the table loaded again within seconds of a flush",
    service=FIREWALL_WATCH,
)
