# Tailscale from its official apt repository for this box's distribution and codename (os-release;
# the knobs only override), tailscaled enabled, the box joined with an auth key from the control
# machine's environment (never printed, never world-readable).
from pyinfra import host, logger
from pyinfra.facts.server import LinuxDistribution

from laguna_kit.domain.package_sources import distro_of, tailscale_source
from laguna_kit.facts.packages import AptSourceURLs, files_naming
from laguna_kit.operations.files import files_synced, kit_file
from laguna_kit.operations.network import tailscale_joined
from laguna_kit.operations.packages import apt_present
from laguna_kit.operations.systemd import service_running
from laguna_kit.run import memo

d = host.data
KEYRING = "/usr/share/keyrings/tailscale-archive-keyring.gpg"
source = tailscale_source(
    d.tailscale_pkgs_url, distro_of(memo.fact(host, LinuxDistribution)["release_meta"])
)

LIST = "/etc/apt/sources.list.d/tailscale.list"
repo = d.tailscale_repo or source["repo"]
# The same repository configured by the owner (a .list or a deb822 .sources file, its Signed-By
# a keyring file or the key inline) with another Signed-By would make every `apt-get update` fail
# ("Conflicting values set for option Signed-By"): theirs is used then.
theirs = files_naming(memo.fact(host, AptSourceURLs), repo, but=(LIST,))
if theirs:
    logger.info(f"{host.name}: Tailscale's repository is already configured ({theirs[0]})")
else:
    files_synced(
        name="Tailscale apt source and its signing key",
        fetched=[(d.tailscale_key_url or source["key"], KEYRING, "644")],
        files=[
            (
                kit_file(
                    "files/apt-source.list.j2",
                    task="tasks/tailscale.py",
                    what="Tailscale's repository",
                    url=repo,
                    suite=source["codename"],
                    components="main",
                    keyring=KEYRING,
                ),
                LIST,
                "644",
            )
        ],
    )
apt_present(name="Tailscale", packages=["tailscale"])
service_running(name="tailscaled running and enabled", service="tailscaled.service")
tailscale_joined(
    name="On the tailnet",
    auth_key_env=d.tailscale_auth_key_env,
    kit_dir=d.kit_dir,
    hostname=d.tailscale_hostname,
    tags=d.tailscale_tags,
)
