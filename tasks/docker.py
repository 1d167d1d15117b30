# Docker engine: the one already on the box (Docker CE, docker.io, ...) used as it is, else the
# distribution's package; daemon.json merged (never replaced); running with the daemon.json it has
# now (the container toolkit task may have added the nvidia runtime to it).
from pyinfra import host, logger
from pyinfra.facts.deb import DebPackages
from pyinfra.operations import server

from laguna_kit.facts.docker import DockerEngine
from laguna_kit.operations.docker import (
    daemon_config_merged,
    docker_config_applied,
    docker_engine_checked,
    owner_engine,
)
from laguna_kit.operations.packages import apt_present, command_package_present, packages_held
from laguna_kit.operations.systemd import service_running
from laguna_kit.run import memo

d = host.data
existing = owner_engine(memo.fact(host, DebPackages))
ENGINE_RUNTIME = ("containerd", "runc")  # what Debian's and Ubuntu's docker.io depend on
# Debian 13's docker.io (26.1.5+dfsg1-9) is the daemon alone and only Recommends docker-cli, the
# `docker` command (its control file in trixie's index); Debian 12's (20.10.24) carries the
# command. Ubuntu's could not be read here: the CLI package is installed wherever the release has
# one and the box has no `docker`, so either packaging works.
CLI = dict(command="docker", package="docker-cli", present=memo.fact(host, DockerEngine)["cli"])

# Written before the package is installed, so the engine's very first start already uses it;
# with a fleet image cache (roles = ["cache"]) it is the first registry mirror.
daemon_config_merged(
    name="Merge the kit's settings into /etc/docker/daemon.json",
    wanted=d.docker_daemon_config,
    cache_port=d.registry_cache_port,
)
installed = memo.fact(host, DebPackages)
if existing and existing != d.docker_package:
    logger.info(f"{host.name}: using the Docker engine already installed ({existing}) as it is")
elif existing:  # the owner's (or held when the kit installed it): used as it is
    apt_present(name=f"The Docker engine ({d.docker_package})", packages=[d.docker_package])
    command_package_present(name="The docker command (docker-cli where packaged apart)", **CLI)
else:
    # The kit's own engine, held with the runtime it brings: an unattended upgrade of either would
    # restart the serving container with no drain and no gate (the unit Requires=docker.service).
    brought = [p for p in ENGINE_RUNTIME if p not in installed]
    apt_present(
        name=f"Install the Docker engine ({d.docker_package}), held", packages=[d.docker_package]
    )
    packages_held(
        name="The engine the kit installed, held (upgraded only by a deploy: drain, restart, gate)",
        packages=[d.docker_package, *brought],
    )
    command_package_present(
        name="The docker command (docker-cli where packaged apart), held", hold=True, **CLI
    )
docker_engine_checked(
    name="Docker engine the toolkit supports (19.03+)", package=existing or d.docker_package
)
service_running(name="Docker running and enabled at boot", service="docker.service")
docker_config_applied(name="Docker restarted when daemon.json changed since it started")
for user in d.docker_group_users:
    server.user(name=f"Add {user} to the docker group", user=user, groups=["docker"], append=True)
