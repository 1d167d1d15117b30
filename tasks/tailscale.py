# Tailscale from its official apt repository for this box's distribution and codename (os-release;
# the knobs only override), tailscaled enabled, the box joined with an auth key from the control
# machine's environment (never printed, never world-readable).
from pyinfra import host
from pyinfra.facts.server import LinuxDistribution
from pyinfra.operations import files, systemd

from laguna_kit.operations.network import tailscale_joined
from laguna_kit.operations.packages import apt_present
from laguna_kit.sources import distro_of, tailscale_source

d = host.data
KEYRING = "/usr/share/keyrings/tailscale-archive-keyring.gpg"
source = tailscale_source(
    d.tailscale_pkgs_url, distro_of(host.get_fact(LinuxDistribution)["release_meta"])
)

files.download(
    name="Tailscale repository signing key",
    src=d.tailscale_key_url or source["key"],
    dest=KEYRING,
    mode="644",
)
files.template(
    name="Tailscale apt source",
    src="files/apt-source.list.j2",
    dest="/etc/apt/sources.list.d/tailscale.list",
    task="tasks/tailscale.py",
    what="Tailscale's repository",
    url=d.tailscale_repo or source["repo"],
    suite=source["codename"],
    components="main",
    keyring=KEYRING,
)
apt_present(name="Tailscale", packages=["tailscale"])
systemd.service(
    name="tailscaled running and enabled",
    service="tailscaled.service",
    running=True,
    enabled=True,
)
tailscale_joined(
    name="On the tailnet",
    auth_key_env=d.tailscale_auth_key_env,
    kit_dir=d.kit_dir,
    hostname=d.tailscale_hostname,
    tags=d.tailscale_tags,
)
