# Test deploy: what the fleet's image cache needs (tasks/registry_cache.py on the cache host, the
# GPU boxes' Docker pulling through it), without the driver or the checkpoints.
from pyinfra import host

from laguna_kit import fleet, steps

gpu = "gpu" in fleet.roles(host)
if gpu:
    steps.include("tasks/preflight.py")
steps.include("tasks/box_tools.py")
steps.include("tasks/firewall.py")
steps.include("tasks/tailscale.py")
if "cache" in fleet.roles(host):
    steps.include("tasks/registry_cache.py")
if gpu:
    steps.include("tasks/docker.py")
steps.include("tasks/image_pull.py")
if gpu:
    steps.include("tasks/image.py")
