# The API port reachable only over the tailnet: the kit's own nftables table (other rules kept; SSH
# untouched unless ssh_tailnet_only), loaded atomically with a self-revert unless a fresh SSH
# connection confirms, and loaded again at every boot by its own unit.
from pyinfra import host
from pyinfra.operations import files, systemd

from laguna_kit.operations.network import firewall_applied, ssh_over_tailnet_checked
from laguna_kit.operations.packages import apt_present

d = host.data
RULES = "/etc/laguna-kit/firewall.nft"
ssh_port = int(d.get("ssh_port") or 22)  # the port this run's SSH uses is the box's sshd port

apt_present(name="nftables", packages=["nftables"])
if d.ssh_tailnet_only:  # before the rules file is written: the boot unit would load it too
    ssh_over_tailnet_checked(
        name="SSH limited to the tailnet only from a run connected over it", ssh_port=ssh_port
    )
files.directory(name="/etc/laguna-kit", path="/etc/laguna-kit", mode="755")
files.template(
    name="Firewall rules (API port on the tailnet only)",
    src="files/laguna-firewall.nft.j2",
    dest=RULES,
    api_port=d.api_port,
    ssh_port=ssh_port,
    ssh_tailnet_only=d.ssh_tailnet_only,
    mode="644",
)
unit = files.put(
    name="Firewall unit (loads the table at boot)",
    src="files/laguna-firewall.service",
    dest="/etc/systemd/system/laguna-firewall.service",
)
systemd.daemon_reload(name="Reload systemd for the firewall unit", _if=unit.did_change)
systemd.service(
    name="Firewall unit enabled at boot",
    service="laguna-firewall.service",
    enabled=True,
    running=None,
)  # loaded below, with the self-revert; the unit is for the next boot
firewall_applied(
    name="Firewall table loaded (self-reverting unless SSH still works)",
    rules=RULES,
    confirm_timeout_s=d.firewall_confirm_timeout_s,
)
