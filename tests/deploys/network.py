# Test deploy: the network tasks alone (Docker, the box tools that load the firewall, the firewall,
# the tailnet), for drills that need neither the GPUs' driver, the checkpoints nor the hub.
from pyinfra import local

local.include("tasks/docker.py")
local.include("tasks/box_tools.py")
local.include("tasks/firewall.py")
local.include("tasks/tailscale.py")
