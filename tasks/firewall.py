# The API reachable only over the tailnet, loaded before anything serves: the kit's own nftables
# table drops new connections that arrive off the tailnet (SSH, ICMP, DHCPv6, Tailscale's port and
# firewall_open_ports excepted; SSH too with ssh_tailnet_only). Other tables are kept. It is
# loaded at every boot by its own unit, again after nftables.service's start/reload/stop (a
# drop-in), and the serving unit requires it. The self-revert is armed only when the rules can
# cut SSH.
from pyinfra import host
from pyinfra.operations import server

from laguna_kit.boxtools.layout import (
    FIREWALL_RULES,
    FIREWALL_SAFE_RULES,
    FIREWALL_WATCH,
    KIT_ETC,
    KIT_LISTENERS,
    MONITOR_USER,
)
from laguna_kit.domain import firewall_rules, fleet, replicas
from laguna_kit.facts.network import Listeners
from laguna_kit.operations.files import kit_file
from laguna_kit.operations.firewall import (
    firewall_applied,
    listeners_checked,
    local_users_present,
    parse_ports,
)
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
serving = replicas.of(host) if "gpu" in fleet.roles(host) else []
# Docker's own bridges, as Docker names them now; docker0 always (Docker's default, whether or not
# Docker is installed yet, so a first deploy writes the rules it will keep).
seen = memo.fact(host, Listeners, container=d.container_name, rules=RULES)
# SSH stays open on the port(s) sshd listens on, read on the box: a rented box is often dialled
# on a provider's mapped port (ssh -p 40022) while its sshd listens on 22. The dialled port only
# when the box says nothing.
ssh_ports = seen["sshd"] or [ssh_port]
# Who reaches what, by the host's roles and the fleet's: laguna_kit/domain/firewall_rules.py.
rules = firewall_rules.template_vars(
    host,
    ssh_ports=ssh_ports,
    bridges=sorted({"docker0", *seen["bridges"]}),
    api_ports=[r.port for r in serving] or [int(d.api_port)],
    open_ports=parse_ports(d.firewall_open_ports),
)

# netbase: /etc/protocols, by which nft resolves the rules' protocol names (minimal installs
# lack it; Docker's packages brought it when the firewall came after them).
apt_present(name="nftables, ss and netbase", packages=["nftables", "iproute2", "netbase"])
# A user a rule names must exist before the table loads (nft resolves it when loading).
if "router" in fleet.roles(host):
    apt_present(name="HAProxy (held)", packages=["haproxy"], hold=True)
if "monitor" in fleet.roles(host):
    # Prometheus's user, made as its package's postinst makes it (which then finds it): the
    # package itself comes after the table is loaded, since it starts Prometheus on every address
    # at once (tasks/monitor.py binds it to the tailnet).
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
    local_users_present(
        name="monitor_local_users are users here (the rules name them)",
        users=d.monitor_local_users,
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
