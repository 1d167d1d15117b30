# Test deploy: what a fleet's checkpoint distribution needs (tasks/peer_files.py serves each box's
# verified folders to the others over the tailnet), without the driver or Docker.
from laguna_kit import steps

steps.include("tasks/preflight.py")
steps.include("tasks/box_tools.py")
steps.include("tasks/firewall.py")
steps.include("tasks/tailscale.py")
steps.include("tasks/peer_files.py")
steps.include("tasks/download.py")
steps.include("tasks/models.py")
