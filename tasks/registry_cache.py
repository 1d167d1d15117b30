# The fleet's image cache (roles = ["cache"] in the hosts file; often the router/monitor host):
# the distribution's docker-registry as a pull-through cache of registry_cache_upstream (Docker
# Hub), so a fleet pulls the ~10 GB image from Docker Hub once; the GPU boxes' Docker lists it
# first among its registry mirrors (tasks/docker.py) and falls back to Docker Hub when it fails.
# A cache cannot swap the image: Docker checks every layer against the manifest's digests, and
# tasks/image.py checks the pulled image's digest against the one this machine read from
# image_registry itself. Under the kit's own unit and configuration; the package's stock
# docker-registry.service is masked before the install when the kit installs it (its postinst
# would start the stock configuration on :5000), one the owner had is left as it is. The kit's
# firewall lets the fleet's GPU boxes alone reach the port.
import json

from pyinfra import host
from pyinfra.facts.deb import DebPackages
from pyinfra.operations import files, server

from laguna_kit.boxtools.layout import (
    FIREWALL_PULLERS,
    FIREWALL_RULES,
    REGISTRY_CACHE_CONFIG,
    REGISTRY_CACHE_UNIT,
    UNIT_DIR,
)
from laguna_kit.domain import images
from laguna_kit.operations.files import kit_file
from laguna_kit.operations.firewall import fleet_peers_allowed
from laguna_kit.operations.imagecache import cache_warm_started
from laguna_kit.operations.packages import apt_present
from laguna_kit.operations.systemd import service_running, unit_installed
from laguna_kit.run import memo

d = host.data
UNIT = f"{UNIT_DIR}/{REGISTRY_CACHE_UNIT}"
USER = "docker-registry"  # made by the package's postinst

if "docker-registry" not in (memo.fact(host, DebPackages) or {}):
    server.shell(
        name="docker-registry comes for its binary alone: its stock service stays off (masked)",
        commands=["systemctl mask docker-registry.service"],
    )
apt_present(name="docker-registry (the distribution's)", packages=["docker-registry"])
config = {  # the registry's YAML configuration, as JSON (YAML's superset)
    "version": 0.1,
    "log": {"level": "info", "fields": {"service": "laguna-registry-cache"}},
    "storage": {
        "filesystem": {"rootdirectory": d.registry_cache_dir},
        "cache": {"blobdescriptor": "inmemory"},
        "delete": {"enabled": True},
    },
    "http": {
        "addr": f":{d.registry_cache_port}",
        "headers": {"X-Content-Type-Options": ["nosniff"]},
    },
    "proxy": {"remoteurl": d.registry_cache_upstream},
}
files.directory(
    name="The image cache's storage, its user's",
    path=d.registry_cache_dir,
    user=USER,
    group=USER,
    mode="750",
)
unit_installed(
    name="Image cache: its unit and configuration",
    unit=REGISTRY_CACHE_UNIT,
    files=[
        (
            kit_file(
                "files/laguna-registry-cache.service.j2",
                config=REGISTRY_CACHE_CONFIG,
                storage=d.registry_cache_dir,
                upstream=d.registry_cache_upstream,
            ),
            UNIT,
            "644",
        ),
        ((json.dumps(config, indent=1) + "\n").encode(), REGISTRY_CACHE_CONFIG, "644"),
    ],
)
service_running(name="Image cache running", service=REGISTRY_CACHE_UNIT)
fleet_peers_allowed(
    role="pullers",
    name="The image cache answers the fleet's GPU boxes alone",
    kit_dir=d.kit_dir,
    rules=FIREWALL_RULES,
    peers_file=FIREWALL_PULLERS,
)
info, _ = images.info_or_reason(d.image_registry, d.vllm_image)
cache_warm_started(
    name=f"The cache holds {d.vllm_image} (warmed once, box-side; the boxes' pulls wait for it)",
    kit_dir=d.kit_dir,
    image=d.vllm_image,
    digest=images.expected_digest(d.vllm_image, info),
    port=d.registry_cache_port,
    store=d.registry_cache_dir,
)
