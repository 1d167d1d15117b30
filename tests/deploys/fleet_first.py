# Test deploy: a fleet's first deploy as far as the bytes from outside go (issue 27): the image
# cache on its host, each GPU box's peer file server, the checkpoints' download and the image's
# pull through the cache; without the driver step, the service or the gate.
from pyinfra import host

from laguna_kit.domain import fleet
from laguna_kit.run import steps

gpu = "gpu" in fleet.roles(host)
if gpu:
    steps.include("tasks/preflight.py")
steps.include("tasks/box_tools.py")
steps.include("tasks/firewall.py")
steps.include("tasks/tailscale.py")
if "cache" in fleet.roles(host):
    steps.include("tasks/registry_cache.py")
if gpu:
    steps.include("tasks/peer_files.py")
    steps.include("tasks/download.py")
    steps.include("tasks/docker.py")
steps.include("tasks/image_pull.py")
if gpu:
    steps.include("tasks/models.py")
    steps.include("tasks/scrub.py")  # a file a peer refused from a box: re-verified, mended
    steps.include("tasks/image.py")
