# Docker engine: the distribution's package, daemon.json merged (never replaced), running.
from pyinfra import host
from pyinfra.operations import server, systemd

from laguna_kit.operations import apt_present, json_merged

# Written before the package is installed, so the engine's very first start already uses it.
daemon_config = json_merged(
    name="Merge the kit's settings into /etc/docker/daemon.json",
    path="/etc/docker/daemon.json",
    wanted=host.data.docker_daemon_config,
)

apt_present(
    name=f"Install the Docker engine ({host.data.docker_package})",
    packages=[host.data.docker_package],
)

systemd.service(
    name="Restart Docker for the changed daemon.json",
    service="docker.service",
    restarted=True,
    _if=daemon_config.did_change,
)
systemd.service(
    name="Docker running and enabled at boot",
    service="docker.service",
    running=True,
    enabled=True,
)

for user in host.data.docker_group_users:
    server.user(name=f"Add {user} to the docker group", user=user, groups=["docker"], append=True)
