# Test deploy: the network tasks alone (Docker, the tailnet, the firewall), for drills that need
# neither the GPUs' driver, the checkpoints nor a control machine that reaches the hub.
from pyinfra import local

local.include("tasks/docker.py")
local.include("tasks/tailscale.py")
local.include("tasks/firewall.py")
