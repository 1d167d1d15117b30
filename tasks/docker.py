# Docker engine: the distribution's package, daemon.json merged (never replaced), running with the
# daemon.json it has now (the container toolkit task may have added the nvidia runtime to it).
from pyinfra import host
from pyinfra.operations import server, systemd

from laguna_kit.operations.docker import docker_config_applied
from laguna_kit.operations.files import json_merged
from laguna_kit.operations.packages import apt_present

# Written before the package is installed, so the engine's very first start already uses it.
json_merged(
    name="Merge the kit's settings into /etc/docker/daemon.json",
    path="/etc/docker/daemon.json",
    wanted=host.data.docker_daemon_config,
)
apt_present(
    name=f"Install the Docker engine ({host.data.docker_package})",
    packages=[host.data.docker_package],
)
systemd.service(
    name="Docker running and enabled at boot",
    service="docker.service",
    running=True,
    enabled=True,
)
docker_config_applied(name="Docker restarted when daemon.json changed since it started")

for user in host.data.docker_group_users:
    server.user(name=f"Add {user} to the docker group", user=user, groups=["docker"], append=True)
