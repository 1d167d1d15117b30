# The API port reachable only over the tailnet: the kit's own nftables table (other rules and SSH
# untouched), loaded atomically with a self-revert unless a fresh SSH connection confirms, and
# loaded again at every boot by its own unit.
from pyinfra import host
from pyinfra.operations import files, systemd

from laguna_kit.operations import apt_present, firewall_applied

d = host.data
RULES = "/etc/laguna-kit/firewall.nft"

apt_present(name="nftables", packages=["nftables"])
files.directory(name="/etc/laguna-kit", path="/etc/laguna-kit", mode="755")
files.template(name="Firewall rules (API port on the tailnet only)", src="files/laguna-firewall.nft.j2",
               dest=RULES, api_port=d.api_port, mode="644")
unit = files.put(name="Firewall unit (loads the table at boot)", src="files/laguna-firewall.service",
                 dest="/etc/systemd/system/laguna-firewall.service")
systemd.daemon_reload(name="Reload systemd for the firewall unit", _if=unit.did_change)
systemd.service(name="Firewall unit enabled at boot", service="laguna-firewall.service", enabled=True,
                running=None)  # loaded below, with the self-revert; the unit is for the next boot
firewall_applied(name="Firewall table loaded (self-reverting unless SSH still works)", rules=RULES,
                 confirm_timeout_s=d.firewall_confirm_timeout_s)
