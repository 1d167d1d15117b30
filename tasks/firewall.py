# The API reachable only over the tailnet, loaded before anything serves: the kit's own nftables
# table drops new connections that arrive off the tailnet (SSH, ICMP, DHCPv6, Tailscale's port and
# firewall_open_ports excepted; SSH too with ssh_tailnet_only). Other tables are kept. It is loaded
# at
# every boot by its own unit, again after nftables.service's start/reload/stop (a drop-in), and the
# serving unit requires it. The self-revert is armed only when the rules can cut SSH.
from pyinfra import host
from pyinfra.operations import files, server, systemd
from pyinfra.operations.util import any_changed

from laguna_kit.boxtools.layout import FIREWALL_RULES
from laguna_kit.operations.network import (
    firewall_applied,
    listeners_checked,
    parse_ports,
    ssh_over_tailnet_checked,
)
from laguna_kit.operations.packages import apt_present

d = host.data
RULES = FIREWALL_RULES
SAFE_RULES = "/etc/laguna-kit/firewall-ssh-open.nft"  # what a revert loads when nothing was loaded
ssh_port = int(d.get("ssh_port") or 22)  # the port this run's SSH uses is the box's sshd port
ports = parse_ports(d.firewall_open_ports)
rules = dict(api_port=d.api_port, ssh_port=ssh_port, open_tcp=ports["tcp"], open_udp=ports["udp"])

# netbase: /etc/protocols, by which nft resolves the rules' protocol names (minimal installs
# lack it; Docker's packages brought it when the firewall came after them).
apt_present(name="nftables, ss and netbase", packages=["nftables", "iproute2", "netbase"])
listeners_checked(
    name="No listener of the owner's is cut off the tailnet unless listed or acknowledged",
    container=d.container_name,
    rules=RULES,
    ssh_port=ssh_port,
    api_port=d.api_port,
    open_ports=d.firewall_open_ports,
    close_ok=d.firewall_close_listeners,
)
if d.ssh_tailnet_only:  # before the rules file is written: the boot unit would load it too
    ssh_over_tailnet_checked(
        name="SSH limited to the tailnet only from a run connected over it", ssh_port=ssh_port
    )
    files.template(
        name="Firewall rules with SSH open (what a revert falls back to)",
        src="files/laguna-firewall.nft.j2",
        dest=SAFE_RULES,
        ssh_tailnet_only=False,
        mode="644",
        **rules,
    )
files.directory(name="/etc/laguna-kit", path="/etc/laguna-kit", mode="755")
files.template(
    name="Firewall rules (new connections only over the tailnet)",
    src="files/laguna-firewall.nft.j2",
    dest=RULES,
    ssh_tailnet_only=d.ssh_tailnet_only,
    mode="644",
    **rules,
)
unit = files.put(
    name="Firewall unit (loads the table at boot, before the network)",
    src="files/laguna-firewall.service",
    dest="/etc/systemd/system/laguna-firewall.service",
)
for name in ("nftables-with-kit.nft", "nftables-stop.nft"):
    files.put(
        name=f"nftables.service with the kit's table: {name}",
        src=f"files/{name}",
        dest=f"/etc/laguna-kit/{name}",
        mode="644",
    )
dropin = files.put(
    name="nftables.service start, reload and stop keep the kit's table (same transaction)",
    src="files/nftables-laguna-kit.conf",
    dest="/etc/systemd/system/nftables.service.d/laguna-kit.conf",
)
server.shell(
    name="Reload systemd for the firewall units (and enable the unit where its [Install] says)",
    commands=["systemctl daemon-reload", "systemctl reenable laguna-firewall.service"],
    _if=any_changed(unit, dropin),
)
systemd.service(
    name="Firewall unit enabled at boot",
    service="laguna-firewall.service",
    enabled=True,
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
